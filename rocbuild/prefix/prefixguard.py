"""Which prefixes rocbuild may install into, decided before anything runs.

A build writes env files, libraries and links into its prefix and removes what an earlier
install of a component left, so a wrong ``--prefix`` could overwrite a user's files
(``--prefix ~`` would replace a user's own ``~/env.sh``). rocbuild marks a prefix as its own with
``<prefix>/.rocbuild/`` (where build-info.json lives) when it first installs into it, and
refuses: the file system root, every folder under the system's trees (FHS, see
``SYSTEM_TREES``), a folder that holds the home folder, and a prefix that holds the workdir,
always; and any existing non-empty folder without that mark unless the user says
``--allow-existing-prefix``.
"""

from __future__ import annotations

import os
from pathlib import Path

from rocbuild.errors import ConfigError
from rocbuild.model.layout import INFO_DIR
from rocbuild.prefix import registry

ALLOW_FLAG = "--allow-existing-prefix"

# The Filesystem Hierarchy Standard 3.0 (refspecs.linuxfoundation.org/FHS_3.0) decides what the
# system owns. Trees of the system, refused with everything below them whatever the flags say:
# the essential binaries and libraries, the boot files, the kernel's and udev's pseudo file
# systems, /etc (host configuration), /usr (the shareable, read-only system hierarchy) and /var
# (the system's variable data: package databases, spools, logs).
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                "/proc", "/run", "/sbin", "/sys", "/usr", "/var")
# Folders meant to hold folders of the local admin or the users: the folder itself is refused,
# a new folder inside may be a prefix. /opt/<package> is FHS's place for add-on software (the
# default /opt/rocm-6.4-gfx906 is one, like AMD's own /opt/rocm-6.4.3); /usr/local is for
# software installed locally, so /usr/local/<name> is allowed below /usr, unless <name> is one
# of the hierarchy's own folders (FHS 4.9.2: bin, etc, games, include, lib, man, sbin, share,
# src, with lib<qual> and libexec); the same for /opt's folders reserved to the admin (3.13.2).
HOLDERS = ("/", "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/usr/local")
HIERARCHY = {"/usr/local": ("bin", "etc", "games", "include", "lib", "lib32", "lib64",
                            "libx32", "libexec", "man", "sbin", "share", "src"),
             "/opt": ("bin", "doc", "include", "info", "lib", "man")}


def system_owner(path: Path) -> str | None:
    """Why the system owns ``path`` (resolved), or None: a system tree it is in, a folder
    meant to hold folders, or one of the local hierarchy's own folders."""
    if str(path) in HOLDERS:
        return (f"{path} holds the folders of the system, its admin or its users (a new folder "
                "inside it may be a prefix)")
    for holder, own in HIERARCHY.items():
        if path.parent == Path(holder) or Path(holder) in path.parents:
            first = path.relative_to(holder).parts[0]
            if first in own:
                return f"{Path(holder) / first} is part of the {holder} hierarchy (FHS)"
            if holder == "/usr/local":
                return None  # /usr/local/<a name of its own>: locally installed software
    return next((f"it is inside {tree}, a tree the system owns (FHS)" for tree in SYSTEM_TREES
                 if path == Path(tree) or Path(tree) in path.parents), None)


def marker(prefix: Path) -> Path:
    return prefix / INFO_DIR


def is_ours(prefix: Path) -> bool:
    return marker(prefix).is_dir()


def _home() -> Path | None:
    home = os.path.expanduser("~")
    return Path(home).resolve() if home and home != "~" else None


def check(prefix: Path, *, allow_existing: bool = False, workdir: Path | None = None) -> None:
    """Raise ConfigError (exit 2) when ``prefix`` is not safe to install into."""
    resolved = prefix.resolve()
    home = _home()
    tip = "choose a new folder, e.g. --prefix /opt/rocm-6.4-gfx906 or ~/rocm-6.4-gfx906"
    why = system_owner(resolved)
    if resolved == home or (home is not None and resolved in home.parents):
        why = "it is your home folder" if resolved == home else f"it holds your home {home}"
    if why is not None:
        raise ConfigError(
            f"--prefix {prefix}: {why}; rocbuild installs only into a folder of its own (it "
            "writes env.sh, bin/, lib/ there and removes what an older install left)", tip=tip)
    if workdir is not None:
        work = workdir.resolve()
        if work == resolved or resolved in work.parents:
            where = "the prefix" if work == resolved else "inside the prefix"
            raise ConfigError(
                f"--workdir {workdir} is {where} {prefix}: the prefix would carry the sources, "
                "build trees and logs, and an install could overwrite them",
                tip="put the workdir and the prefix side by side, e.g. --workdir "
                    "~/.cache/rocbuild --prefix /opt/rocm-6.4-gfx906")
    if not resolved.exists() or is_ours(resolved) or allow_existing:
        return
    if not resolved.is_dir():
        raise ConfigError(f"--prefix {prefix} is a file, not a folder",
                          tip="choose another --prefix")
    try:
        entries = sorted(p.name for p in resolved.iterdir())
    except OSError as exc:
        raise ConfigError(f"--prefix {prefix}: cannot list it: {exc.strerror}",
                          tip="choose another --prefix") from None
    if entries:
        shown = ", ".join(entries[:5]) + (", …" if len(entries) > 5 else "")
        raise ConfigError(
            f"--prefix {prefix} already holds files rocbuild did not install ({shown}); "
            "installing there could overwrite them",
            tip=f"choose a new or empty folder, or pass {ALLOW_FLAG} if installing into it "
                "is what you want")


def claim(prefix: Path) -> None:
    """Mark the prefix as rocbuild's before its first install writes into it, and put it on
    the user's list of prefixes from then on (`list` and `prefixes` show it while its first
    build runs, or after that build stopped, not only once build-info is written)."""
    first = not is_ours(prefix)
    marker(prefix).mkdir(parents=True, exist_ok=True)
    if first:  # a list that cannot be written costs only the listing (registry.py)
        registry.note_started(prefix)
