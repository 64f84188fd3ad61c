"""Inside the prefix: the one answer to "is this path in that folder?", on text or on the file
system as it is.

``within`` compares text after normalising '..' and '.' (a recipe's link target, a manifest
line, an already resolved path): no file is read. ``resolves_within`` follows every link on
the way first (a path that does not exist yet resolves through the folders that do), so a
folder of the prefix replaced by a link out of it is found before anything is written
through it. Both accept the root itself; callers that must not name the root say so.

It lives in the model because every layer asks (recipe checks at load, the binary cache,
the prefix's ownership checks, verify's linkage check) and the model is the layer all of
them may import (docs/architecture.md, Layers).
"""

from __future__ import annotations

import os
from pathlib import Path

StrPath = str | Path


def within(path: StrPath, root: StrPath) -> bool:
    """``path`` is ``root`` or below it, compared as text after normalising '..' and '.'
    (``/p/a/../../etc`` is not inside ``/p``, though pathlib's is_relative_to says it is)."""
    path, root = os.path.normpath(path), os.path.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def resolves_within(path: StrPath, root: StrPath) -> bool:
    """``path`` is ``root`` or below it after following every link of both; reads the file
    system as it is when asked and creates nothing."""
    return within(os.path.realpath(path), os.path.realpath(root))
