"""doit entry: the same tasks `rocbuild build` runs, for `doit build:rocblas` from the repo root.

Settings come from the same ROCBUILD_* variables and config file as the CLI; `doit build:X
target=gfx90a` sets the GPU targets (like --target). `doit list --all` shows every step.
"""

from rocbuild.cli.doit_entry import namespace_from_environment

globals().update(namespace_from_environment())
