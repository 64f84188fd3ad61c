"""The installed prefix: environment files and modulefiles, build-info, activate, what each
component installed. Uses the model only.

Installing into the prefix is ``install.install`` (its docstring has the sequence), for the
build (run/engine/actions.py) and the cache (run/engine/cache_install.py) alike; ``records``
says what each component installed, ``transaction`` undoes a cache install, ``realpaths`` says
where a path really lands, and ``uninstall`` takes a component out through the same records.
``keepedits`` writes rocbuild's own files (env.sh, modulefiles) without losing a user's edits.
"""
