"""Sources: a component's pinned ref fetched and its patch series applied.

The bare cache per repository and the checkout assembled beside it (sources; every
git process through rocbuild.proc), the patch series checked and applied from the
pristine commit, and the user's edits found (patches). It imports no other room.
"""
