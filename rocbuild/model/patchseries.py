"""Reading ``patches/`` as patch series: ``patches/<component>/*.patch``, applied in name order.

Anything there that rocbuild cannot read as a series is an error naming it, never skipped:
``patches/<component>`` as a file (ignored, the build would give a different result with
exit 0), a folder named after no recipe (a typo that drops every patch in it), an
entry of a series that is not a ``.patch`` file (a subfolder, ``0001-fix.diff``, a FIFO), an
empty patch. Names that begin with ``.`` (``.gitkeep``, an editor's swap file) are not part of
a series and are left alone. A FIFO or device is never opened (files.read_regular), so loading
never blocks on one.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from rocbuild.errors import ConfigError
from rocbuild.files import read_regular
from rocbuild.model.recipes import suggest

SUFFIX = ".patch"


@dataclass(frozen=True)
class Patch:
    path: Path
    sha256: str


def _kind(path: Path) -> str:
    """What is at ``path`` (links followed), in words."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "a broken link" if path.is_symlink() else "missing"
    return next((word for test, word in ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"),
                                         (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                                         (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
                 if test(mode)), "not a file")


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        raise ConfigError(f"{folder}: cannot list it: {exc.strerror}",
                          tip=f"fix the permissions of {folder}") from None


def check_folder(patches_dir: Path, components: Collection[str]) -> None:
    """Every entry of ``patches/`` is a folder named after a recipe."""
    if not (patches_dir.exists() or patches_dir.is_symlink()):
        return
    if _kind(patches_dir) != "a folder":
        raise ConfigError(f"{patches_dir} is {_kind(patches_dir)}, not a folder of patch series "
                          "(patches/<component>/NNNN-name.patch)",
                          tip=f"move {patches_dir} away or make it a folder")
    for entry in _entries(patches_dir):
        kind = _kind(entry)
        if entry.name in components:
            read_series(patches_dir, entry.name)  # a file named after the component: say so
        elif kind != "a folder":
            raise ConfigError(
                f"{entry} is {kind}; patches/ holds one folder per component "
                "(patches/<component>/NNNN-name.patch), so it would not be applied",
                tip=f"move it into the folder of the component it patches, e.g. "
                    f"{patches_dir}/<component>/{entry.name}")
        else:
            raise ConfigError(f"{entry} is named after no recipe, so its patches would apply "
                              "to nothing." + suggest(entry.name, list(components)),
                              tip="rename it after the component it patches, or remove it")


def read_series(patches_dir: Path, name: str) -> tuple[Patch, ...]:
    """The series of ``name`` in name order (empty when it has no folder)."""
    folder = patches_dir / name
    if not (folder.exists() or folder.is_symlink()):
        return ()
    if _kind(folder) != "a folder":
        raise ConfigError(f"{folder} is {_kind(folder)}, not a folder: a series is "
                          f"{folder}/NNNN-name.patch, so nothing in it would be applied",
                          tip=f"make {folder} a folder and put the patch in it, e.g. "
                              f"{folder}/0001-{name}.patch")
    series = []
    for entry in _entries(folder):
        kind = _kind(entry)
        if kind != "a file" or not entry.name.endswith(SUFFIX):
            what = kind if kind != "a file" else f"a file without the {SUFFIX} suffix"
            raise ConfigError(f"{entry} is {what}; a series holds only NNNN-name{SUFFIX} files, "
                              "so it would not be applied",
                              tip=f"rename it NNNN-name{SUFFIX} if it is a patch, or move it "
                                  f"out of {folder}")
        try:
            data = read_regular(entry)
        except OSError as exc:
            raise ConfigError(f"{entry}: cannot read the patch: {exc.strerror}",
                              tip=f"fix the permissions of {entry}") from None
        if not data.strip():
            raise ConfigError(f"{entry} is empty: git has no change to apply from it",
                              tip=f"write the patch into {entry} or remove it")
        series.append(Patch(entry, hashlib.sha256(data).hexdigest()))
    return tuple(series)
