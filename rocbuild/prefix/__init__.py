"""The installed prefix: environment files and modulefiles, build-info, activate, what each
component installed. Uses the model only.

Installing into the prefix: an install begins under ``ownership.INSTALLING`` with
``ownership.begin_install`` (``prefixguard.claim`` first); its files are placed by the build
system (run/engine/actions.py) or from an artifact (run/cache/unpack.py); the recipe's extras
are written and what it wrote is checked for conflicts and recorded (``ownership``: whose a
path is; ``records``: what each component installed); a cache install commits or rolls back
its ``transaction``. ``realpaths`` says where a path really lands; ``uninstall`` takes a
component out through the same records. ``keepedits`` writes rocbuild's own files (env.sh,
modulefiles) without losing a user's edits.
"""
