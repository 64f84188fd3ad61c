"""Whose files rocbuild runs as code: git's ``safe.directory`` rule (CVE-2022-24765) for
rocbuild's configuration, recipes and patches, the binary cache's ``allowed_signers`` and
the compiler cache's folder (its ``ccache.conf`` names commands every compile runs).

A config file names the compiler launcher every compile runs through, a recipe and a patch
are code (docs/robustness.md), so a file is used only when nobody but the user running
rocbuild (or root) could have written it: the file is owned by one of them and writable by
no one else, and so is every folder on its way from ``/`` (a folder another user owns or may
write lets them replace the file, unless it is sticky as ``/tmp`` is and the entry is
ours). Group-writable counts as writable by others, except for a group whose only members
are trusted users: a user private group, which Debian's and Ubuntu's umask 002 puts on every
file (OpenSSH's ``secure_permissions`` in Debian's packaging allows the same). A folder the
user names in ``safe_directories`` (or ``*``) is trusted with everything below it.

The host's facts (the user, the names of users and groups, who is in a group) are read by
checks/trust.py and passed in, as the model reads no host state itself.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

EVERYTHING = "*"  # a safe_directories entry that trusts every folder (git's safe.directory=*)


def _uid_words(uid: int) -> str:
    return f"uid {uid}"


def _nobody_only(gid: int) -> bool:
    return False


@dataclass(frozen=True)
class Trust:
    """Who may have written a file rocbuild uses as code, and the folders the user trusts
    whoever owns them. ``why_not(path)`` says why a file is not used (None: it is)."""

    uid: int  # the user running rocbuild
    owners: frozenset[int]  # that user and root (and, under sudo, the user who called it)
    safe: tuple[Path, ...] = ()  # resolved safe_directories
    everything: bool = False  # safe_directories holds "*"
    user_name: Callable[[int], str] = field(default=_uid_words, compare=False)
    group_name: Callable[[int], str] = field(default=lambda gid: f"gid {gid}", compare=False)
    # a group whose members are all trusted owners (group-writable is harmless then)
    trusted_group: Callable[[int], bool] = field(default=_nobody_only, compare=False)

    def with_safe(self, folders: tuple[str, ...]) -> Trust:
        """This trust with the folders of a ``safe_directories`` setting added."""
        everything = self.everything or EVERYTHING in folders
        safe = tuple(Path(os.path.realpath(f)) for f in folders if f != EVERYTHING)
        return replace(self, safe=self.safe + safe, everything=everything)

    def is_safe(self, path: Path) -> bool:
        """``path`` (resolved) is in a folder the user trusts whoever owns it."""
        if self.everything:
            return True
        real = Path(os.path.realpath(path))
        return any(real == folder or folder in real.parents for folder in self.safe)

    def _who(self, uid: int) -> str:
        name = self.user_name(uid)
        return f"uid {uid}" if name == f"uid {uid}" else f"uid {uid} ({name})"

    def _writers(self, st: os.stat_result) -> str | None:
        """Who else may write an entry of mode ``st``, in words; None: nobody else."""
        mode = stat.S_IMODE(st.st_mode)
        if mode & stat.S_IWOTH:
            return f"writable by every user (mode {mode:04o})"
        if mode & stat.S_IWGRP and not self.trusted_group(st.st_gid):
            return (f"writable by the group {self.group_name(st.st_gid)}, whose members are not "
                    f"only you (mode {mode:04o})")
        return None

    def _folder_problem(self, folder: Path) -> str | None:
        try:
            st = os.stat(folder)
        except OSError as exc:
            return f"its folder {folder} cannot be read ({exc.strerror})"
        if st.st_uid not in self.owners:
            return (f"its folder {folder} is owned by {self._who(st.st_uid)}, who can replace "
                    "what is in it")
        writers = self._writers(st)
        if writers is not None and not st.st_mode & stat.S_ISVTX:
            return f"its folder {folder} is {writers}, so others can replace what is in it"
        return None

    def _chain(self, folder: Path) -> str | None:
        """The first folder from ``/`` down to ``folder`` (resolved) that others control."""
        real = Path(os.path.realpath(folder))
        return next((problem for each in (*reversed(real.parents), real)
                     if (problem := self._folder_problem(each)) is not None), None)

    def why_not(self, path: Path) -> str | None:
        """Why the file or folder at ``path`` is not used, in words ("it is owned by uid 1000
        (alice), not by you or root"); None when nobody but trusted users could have written
        it or the user trusts its folder (``safe_directories``)."""
        path = Path(os.path.abspath(path))
        if self.is_safe(path) or self.is_safe(path.parent):
            return None
        try:
            entry = os.lstat(path)
        except OSError:
            return None  # nothing there: nothing is read
        if stat.S_ISLNK(entry.st_mode) and entry.st_uid not in self.owners:
            return (f"it is a link owned by {self._who(entry.st_uid)}, not by you "
                    f"({self._who(self.uid)}) or root")
        if (problem := self._chain(path.parent)) is not None:
            return problem
        try:
            st = os.stat(path)
        except OSError:
            return None  # a dangling link or a loop: the reader names it
        real = Path(os.path.realpath(path))
        if real != path and (problem := self._chain(real.parent)) is not None:
            return problem
        if st.st_uid not in self.owners:
            return (f"it is owned by {self._who(st.st_uid)}, not by you "
                    f"({self._who(self.uid)}) or root")
        writers = self._writers(st)
        if writers is not None and not (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
            return f"it is {writers}"
        return None

    def first_untrusted(self, paths: list[Path]) -> tuple[Path, str] | None:
        """The first of ``paths`` that is not used, with why; None when every one is."""
        return next(((path, why) for path in paths if (why := self.why_not(path)) is not None),
                    None)


def recipe_files(folder: Path) -> list[Path]:
    """What rocbuild reads from a recipes folder (or an overlay) as code: the folder, its
    ``*.toml`` files, and the patch series beside it (``../patches``, its folders and every
    file in them)."""
    found: list[Path] = []
    if folder.is_dir():
        found.append(folder)
        found += sorted(folder.glob("*.toml"))
    patches = folder.parent / "patches"
    if patches.is_dir():
        found.append(patches)
        for series in sorted(patches.iterdir()):
            found.append(series)
            if series.is_dir():
                found += sorted(p for p in series.iterdir() if not p.name.startswith("."))
    return found
