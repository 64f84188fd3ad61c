"""Running a build, in four rooms (docs/architecture.md, "run/'s four rooms"):

- engine/: the run's phases, doit tasks, the one step runner and each step's action;
- state/: stamps, the run lock, doit's DB and the one up-to-date rule;
- sources/: fetching pinned refs and applying patch series;
- cache/: the binary cache (artifacts, stores, signatures).

Each room's __init__ says what it owns and which rooms it may import
(tests/unit/test_layers.py holds the rule).
"""
