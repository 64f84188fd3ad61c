"""The binary cache: artifacts, where they are stored, and whether one may be installed.

The key and what is stored (cache), whether an artifact may be installed (choice), putting
it into the prefix (unpack), plan's lines (planlines), the archives and their manifests
(artifacts), the kinds of store by URL scheme (stores: a folder or an HTTP(S) URL in
cache_store, an OCI registry in cache_oci with the oci client), signatures (signing) and
pruning (cache_prune). It may read the state and sources rooms, never the engine: the
`cache:<component>` step that runs an install is the engine's (engine/cache_install.py).
"""
