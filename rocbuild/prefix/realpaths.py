"""Where a prefix path really lands: the folders on the way resolved, the last part not.

Ownership compares files, not spellings. ``share/l/libmid.so`` is ``lib/libmid.so`` when
``share/l`` is a link to ``../lib`` (a recipe's [install.links], or one a CMake install made),
so a component writing the first overwrites whoever installed the second. The last part stays
as written because a link is an entry of its own: the link ``llvm -> lib/llvm`` is the file
``llvm``, not the folder it leads to. Folders are resolved once per instance (a stack installs
tens of thousands of files into a few hundred folders).
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from rocbuild.model.paths import within


class RealPaths:
    """``of(rel)``: the prefix-relative path ``prefix/rel`` resolves to, None when it leads
    outside the prefix. Reads the file system as it is when asked."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self.root = os.path.realpath(prefix)
        self._folders: dict[str, str] = {}

    def _folder(self, rel_dir: str) -> str:
        if rel_dir not in self._folders:
            self._folders[rel_dir] = os.path.realpath(os.path.join(self.prefix, rel_dir))
        return self._folders[rel_dir]

    def of(self, rel: str) -> str | None:
        folder, name = posixpath.split(posixpath.normpath(rel))
        real = os.path.join(self._folder(folder), name)
        if not within(real, self.root) or real == self.root:
            return None
        return os.path.relpath(real, self.root)

    def shown(self, rel: str) -> str:
        """``rel`` for a message, with where it really lands when that differs."""
        real = self.of(rel)
        return rel if real == rel else f"{rel} (= {real or 'outside the prefix'} through a link)"
