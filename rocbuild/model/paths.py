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
from collections.abc import Callable
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


def link_on_the_way(root: StrPath, path: StrPath) -> Path | None:
    """The first folder strictly between ``root`` and ``path`` that is a symbolic link (None:
    none is, or ``path`` is not below ``root`` as text). A deletion goes through no link it
    did not make: ``<workdir>/build -> /elsewhere`` turned `clean a` into the removal of
    ``/elsewhere/a``. ``path`` itself may be a link (it is removed, never followed) and so
    may ``root`` and the folders above it (the user's choice of workdir or prefix)."""
    root, path = Path(os.path.normpath(root)), Path(os.path.normpath(path))
    if not within(path, root) or path == root:
        return None
    here = root
    for part in path.relative_to(root).parts[:-1]:
        here = here / part
        if here.is_symlink():
            return here
    return None


MAX_LINK_HOPS = 40  # as the kernel's own limit on following links (ELOOP)


def resolve_links(rel: str, links: Callable[[str], str | None], roots: tuple[str, ...] = (),
                  follow_last: bool = False) -> str | None:
    """The prefix-relative path ``rel`` really names, after following every link on the way
    (and the last part too when ``follow_last``), or None when it leads outside the prefix
    (a ``..`` above it, an absolute target outside every one of ``roots``, a loop).

    ``links(path)`` answers for a prefix-relative path: its link target, or None when it is
    not a link. It may answer from the file system, from links not written yet (an artifact's,
    a recipe's [install.links]) or both, so a chain (``share/up -> ..`` then ``share/esc ->
    up/../..``) is followed the way the kernel will follow it once every link is in place,
    not one link at a time. ``roots`` are the absolute spellings of the prefix an absolute
    target may start with. The result is '' for the prefix itself."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                return None
            done.pop()
            continue
        here = "/".join([*done, part])
        target = links(here) if (parts or follow_last) else None
        if target is None:
            done.append(part)
            continue
        hops += 1
        if hops > MAX_LINK_HOPS:
            return None
        if target.startswith("/"):
            root = next((r for r in roots if within(target, r)), None)
            if root is None:
                return None
            target = os.path.relpath(os.path.normpath(target), os.path.normpath(root))
            done = []
        parts = [p for p in target.split("/") if p not in ("", ".")] + parts
    return "/".join(done)
