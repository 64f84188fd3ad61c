"""Which prefixes rocbuild may install into, decided before anything runs.

A build writes env files, libraries and links into its prefix and removes what an earlier
install of a component left, so a wrong ``--prefix`` could overwrite a user's files
(``--prefix ~`` replaced a user's own ``~/env.sh``). rocbuild marks a prefix as its own with
``<prefix>/.rocbuild/`` (where build-info.json lives) when it first installs into it, and
refuses: the file system root, system folders and the home folder, always; and any existing
non-empty folder without that mark unless the user says ``--allow-existing-prefix``.
"""

from __future__ import annotations

import os
from pathlib import Path

from rocbuild.errors import ConfigError
from rocbuild.prefix.buildinfo import INFO_DIR

ALLOW_FLAG = "--allow-existing-prefix"
# the root and folders the system owns: never a prefix, whatever the flags say
SYSTEM_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64",
               "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
               "/usr/bin", "/usr/lib", "/usr/local", "/usr/share", "/var")


def marker(prefix: Path) -> Path:
    return prefix / INFO_DIR


def is_ours(prefix: Path) -> bool:
    return marker(prefix).is_dir()


def _home() -> Path | None:
    home = os.path.expanduser("~")
    return Path(home).resolve() if home and home != "~" else None


def check(prefix: Path, *, allow_existing: bool = False) -> None:
    """Raise ConfigError (exit 2) when ``prefix`` is not safe to install into."""
    resolved = prefix.resolve()
    home = _home()
    if str(resolved) in SYSTEM_DIRS or resolved == home:
        what = "your home folder" if resolved == home else "a system folder"
        raise ConfigError(
            f"--prefix {prefix} is {what}; rocbuild installs only into a folder of its own "
            "(it writes env.sh, bin/, lib/ there and removes what an older install left)",
            tip="choose a new folder, e.g. --prefix /opt/rocm-6.4-gfx906 or ~/rocm-6.4-gfx906")
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
    """Mark the prefix as rocbuild's before its first install writes into it."""
    marker(prefix).mkdir(parents=True, exist_ok=True)
