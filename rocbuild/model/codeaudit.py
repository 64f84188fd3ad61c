"""What a base library carries for the GPU, read cheaply and remembered: the base audit.

On a ``--base`` the base road reads every GPU library a recipe names (``[gpu] libraries``)
for the targets, so a base whose rocBLAS or rocSOLVER lacks gfx906 (AMD's 6.4 packages, per
users' reports) is not taken as if it had it. A base's librocblas.so is 35 MB to 1 GB, so
only the bundle headers are read (``Decoders.headers_only``: no kernel names, a compressed
bundle decompressed only as far as its header), and each file's result is remembered in the
workdir (``Workdir.code_memo``), keyed by its identity (path, device, inode, size, mtime): a
package upgrade replaces the file and so the key. The model reads the record; the run and the
CLI write it back (``run/state/basememo.py``), so loading a stack writes nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocbuild.model.bundles import Decoders, iter_bundles, zstandard_decoder
from rocbuild.model.codeobjects import embedded_code_objects
from rocbuild.model.elf import (
    FormatError,
    NotElf,
    UnsupportedElf,
    open_source,
    parse_sections,
    section_list,
    section_window,
)
from rocbuild.model.targets import TargetError, TargetId, parse_target, uncovered

MEMO_SCHEMA = 1


@dataclass(frozen=True)
class LibraryCode:
    """The GPU code one library file carries, as read from its headers."""

    # the amdgcn target IDs of each bundle, as written ("gfx906", "gfx90a:xnack-"); one
    # group for a library whose code objects are embedded (ROCr's blit kernels)
    bundles: tuple[tuple[str, ...], ...] = ()
    embedded: bool = False
    unreadable: int = 0  # bundles whose entries could not be read (zstd, no zstandard)
    error: str = ""  # why the file could not be read at all ("" when it was)

    @property
    def has_code(self) -> bool:
        return bool(self.bundles) or self.unreadable > 0

    def lacking(self, targets: Sequence[TargetId]) -> list[TargetId]:
        """The requested targets some bundle has no code object for (for embedded code
        objects: none of them runs on the target)."""
        missing = []
        for request in targets:
            for group in self.bundles:
                found = [t for t in map(_parsed, group) if t is not None]
                if uncovered(found, request):
                    missing.append(request)
                    break
        return missing

    def describe(self, targets: Sequence[TargetId]) -> str:
        """"66 bundles, all with gfx906" or "47 bundles, 47 without gfx906 (they have
        gfx908, gfx90a)" for a plan line."""
        if self.error:
            return f"unreadable ({self.error})"
        count = len(self.bundles)
        what = ("embedded code objects" if self.embedded else
                f"{count} bundle{'' if count == 1 else 's'}")
        wanted = ", ".join(map(str, targets))
        missing = self.lacking(targets)
        if not missing:
            return f"{what}, all with {wanted}"
        names = ", ".join(map(str, missing))
        without = [g for g in self.bundles
                   if any(uncovered([t for t in map(_parsed, g) if t], m) for m in missing)]
        have = ", ".join(sorted({t for g in without for t in g})) or "no amdgcn code"
        if self.embedded:
            return f"{what} without {names} (they are for {have})"
        return f"{what}, {len(without)} without {names} (they have {have})"

    def to_json(self) -> dict[str, Any]:
        return {"bundles": [list(g) for g in self.bundles], "embedded": self.embedded,
                "unreadable": self.unreadable, "error": self.error}

    @classmethod
    def from_json(cls, doc: Any) -> LibraryCode | None:
        try:
            return cls(tuple(tuple(str(t) for t in g) for g in doc["bundles"]),
                       bool(doc["embedded"]), int(doc["unreadable"]), str(doc["error"]))
        except (KeyError, TypeError, ValueError):
            return None


def _parsed(text: str) -> TargetId | None:
    try:
        return parse_target(text)
    except TargetError:
        return None


def read_library(path: Path, decoders: Decoders | None = None) -> LibraryCode:
    """The bundle headers of ``path``'s ``.hip_fatbin``, or its embedded code objects; a file
    without either carries nothing (``has_code`` false). Never raises for a bad file."""
    decoders = decoders or Decoders(zstd=zstandard_decoder(), headers_only=True)
    try:
        with open_source(path) as src:
            sections = parse_sections(src)
            fatbin = sections.get(".hip_fatbin")
            if fatbin is None:
                embedded = embedded_code_objects(src, section_list(src)) if sections else []
                return LibraryCode((tuple(c.target for c in embedded),) if embedded else (),
                                   embedded=bool(embedded))
            groups: list[tuple[str, ...]] = []
            unreadable = 0
            for bundle in iter_bundles(section_window(src, fatbin), decoders):
                if bundle.unreadable or bundle.corrupt:
                    unreadable += 1
                elif bundle.amdgcn:
                    groups.append(tuple(e.target_text for e in bundle.amdgcn))
            return LibraryCode(tuple(groups), unreadable=unreadable)
    except (NotElf, UnsupportedElf):
        return LibraryCode()
    except FormatError as exc:
        return LibraryCode(error=f"corrupt: {exc}")
    except OSError as exc:
        return LibraryCode(error=exc.strerror or str(exc))


def identity(path: Path) -> str | None:
    """The memo key of the real file behind ``path``: its path, device, inode, size and
    modification time; None when it cannot be read."""
    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except OSError:
        return None
    return f"{real}|{info.st_dev}|{info.st_ino}|{info.st_size}|{info.st_mtime_ns}"


@dataclass
class CodeMemo:
    """Results by file identity: read from the workdir's record, with what this process read
    since (``fresh``), which the run or the CLI writes back."""

    known: dict[str, LibraryCode] = field(default_factory=dict)
    fresh: dict[str, LibraryCode] = field(default_factory=dict)

    @classmethod
    def read(cls, file: Path | None) -> CodeMemo:
        """The record at ``file``; an empty memo for a missing or damaged one (it is only a
        cache: the libraries are read again)."""
        if file is None:
            return cls()
        try:
            doc = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        if not isinstance(doc, dict) or doc.get("schema") != MEMO_SCHEMA or \
                not isinstance(doc.get("files"), dict):
            return cls()
        known = {k: c for k, v in doc["files"].items() if (c := LibraryCode.from_json(v))}
        return cls(known)

    def code_of(self, path: Path) -> LibraryCode:
        key = identity(path)
        if key is None:
            return read_library(path)
        found = self.fresh.get(key) or self.known.get(key)
        if found is None:
            found = self.fresh[key] = read_library(path)
        return found

    def to_json(self) -> dict[str, Any]:
        """The record to write: this process's results, and those of the old record whose
        file is still the same (a replaced or removed file drops out)."""
        files = {k: v for k, v in {**self.known, **self.fresh}.items()
                 if identity(Path(k.split("|")[0])) == k}
        return {"schema": MEMO_SCHEMA, "files": {k: v.to_json() for k, v in files.items()}}
