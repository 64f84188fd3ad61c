"""The command line: argparse, one module per command, and all rich rendering.
"""
