"""The installed prefix: environment files and modulefiles, build-info, activate, what each
component installed. Uses the model only.

Installing into the prefix: under ``ownership.INSTALLING``, ``ownership.begin_install``
(``prefixguard.claim`` first), ``ownership.remove_previous_install``, the files placed by
the build system (run/engine/actions.py) or from an artifact (run/cache/unpack.py),
``ownership.install_extras`` and ``ownership.finish_install`` (what it wrote checked for
conflicts, then recorded in ``records``: what each component installed); a cache install
commits or rolls back its ``transaction``. ``realpaths`` says where a path really lands;
``uninstall`` takes a component out through the same records. ``keepedits`` writes
rocbuild's own files (env.sh, modulefiles) without losing a user's edits.
"""
