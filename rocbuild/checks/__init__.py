"""Checks of the host and of results: GPU detection, doctor, verify (ELF, bundles, targets,
linkage), smoke tests, recipe lint, failure diagnosis. Use the model only.
"""
