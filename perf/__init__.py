"""Timings of rocbuild itself, each compared with a baseline measured in the same run.

Run them from the repository root as modules: `python -m perf.noop` (docs/development.md).
"""
