"""The binary cache: artifacts, where they are stored, and whether one may be installed.

The rules (cache: an artifact's key, what is stored, install or relocate), the
archives and their manifests (artifacts: pack, check, unpack into a prefix), the
stores (cache_store: a folder or an HTTP(S) URL; cache_oci with the oci client: a
registry), signatures (signing) and pruning (cache_prune). It may read the state and
sources rooms, never the engine: the `cache:<component>` step that runs an install
is the engine's (engine/cache_install.py).
"""
