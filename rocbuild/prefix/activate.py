"""Point a stable link (default ``/opt/rocm``) at a built prefix, atomically, and roll back.

A switch makes a temporary symlink beside the link and renames it over the link
(``os.replace`` = rename(2), atomic on POSIX): every reader sees the old target or the new
one, never a missing link. A crash between the two steps leaves only the stray temporary
link, which the next activation removes. The previous target is remembered in a small JSON
file beside the link, so ``--previous`` works for whoever manages that link (root or a user).

Only prefixes whose build finished (build-info ``complete``) and passed verify
(``verified``) can be activated; a complete prefix verify never proved (``build
--no-verify``, or a verify that failed) only with ``unproven=True`` (``activate
--unproven``), which the state file records so `rocbuild prefixes` and `status` show it. A
real directory at the link path (a packaged ROCm) is never replaced.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rocbuild.errors import ActivationError, ConfigError, RocbuildError
from rocbuild.files import (
    open_lock,
    parse_json,
    read_regular,
    remove_stale_temps,
    write_text_atomic,
)
from rocbuild.model.layout import info_path
from rocbuild.prefix import buildinfo, registry
from rocbuild.prefix.buildinfo import PREFIX_FILE_MODE, BuildInfo, now, read_build_info

DEFAULT_LINK = Path("/opt/rocm")
LINK_ENV = "ROCBUILD_LINK"  # the link path when --link is not given


def temp_link_path(link: Path) -> Path:
    return link.parent / f".{link.name}.rocbuild-new"


def state_path(link: Path) -> Path:
    return link.parent / f".{link.name}.rocbuild-state.json"


def lock_path(link: Path) -> Path:
    return link.parent / f".{link.name}.rocbuild-lock"


@dataclass(frozen=True)
class LinkState:
    current: Path | None
    previous: Path | None
    unproven: bool = False  # the current target was activated with --unproven


@dataclass(frozen=True)
class Switch:
    link: Path
    target: Path
    previous: Path | None  # what the link pointed at before (None: it did not exist)
    removed_stray: bool  # a temporary link left by an interrupted switch was cleaned up
    info: BuildInfo
    unproven: bool = False  # activated although verify never passed (--unproven)
    warning: str | None = None  # the user's prefix registry could not be written


def current_target(link: Path) -> Path | None:
    """Where the link points now (as written in the link), or None when there is no link."""
    return Path(os.readlink(link)) if link.is_symlink() else None


def target_of(link: Path) -> Path | None:
    """The absolute path the link points at now (a relative link read from its folder)."""
    target = current_target(link)
    return Path(os.path.abspath(link.parent / target)) if target is not None else None


def links_to(prefix: Path, also: Iterable[Path] = ()) -> list[Path]:
    """The links that point at ``prefix`` now: each link `activate` switched (the user's
    registry) and those in ``also`` (the default link, the one a command names)."""
    prefix = Path(os.path.abspath(prefix))
    links = {*registry.known_links(), *(Path(os.path.abspath(a)) for a in also)}
    return [link for link in sorted(links) if target_of(link) == prefix]


def activate_command(link: Path, prefix: str = "OTHER_PREFIX") -> str:
    """The command that points ``link`` at another prefix (``--link`` unless the default)."""
    given = "" if Path(os.path.abspath(link)) == DEFAULT_LINK else f" --link {link}"
    return f"rocbuild activate {prefix}{given}"


def read_state(link: Path) -> LinkState | None:
    try:
        doc = parse_json(read_regular(state_path(link)).decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None

    def path_of(key: str) -> Path | None:
        value = doc.get(key)
        return Path(value) if isinstance(value, str) and value else None

    return LinkState(current=path_of("current"), previous=path_of("previous"),
                     unproven=doc.get("unproven") is True)


def _write_state(link: Path, current: Path, previous: Path | None, unproven: bool) -> None:
    doc = {"link": str(link), "current": str(current),
           "previous": str(previous) if previous else None, "changed": now(),
           "unproven": unproven}
    write_text_atomic(state_path(link), json.dumps(doc, indent=2) + "\n", mode=PREFIX_FILE_MODE)


def check_prefix(prefix: Path, *, unproven: bool = False) -> BuildInfo:
    """The prefix's build-info when it may be activated; a ConfigError saying why not.
    ``unproven``: the user accepts a complete prefix that verify did not prove."""
    if not prefix.is_dir():
        raise ConfigError(f"{prefix} is not a directory", tip="run `rocbuild prefixes` to see "
                          "the prefixes rocbuild built")
    info = read_build_info(prefix)
    if info is None:
        raise ConfigError(f"{prefix} has no {info_path(prefix).relative_to(prefix)}, so it was "
                          "not built by rocbuild (or the build never reached install)",
                          tip="run `rocbuild prefixes` to see the prefixes rocbuild built")
    if not info.complete:
        raise ConfigError(f"the build into {prefix} did not complete (started {info.started}); "
                          f"activating it would expose a half-installed "
                          f"{buildinfo.title_of(info)}",
                          tip="run `rocbuild status` to see what is left, then `rocbuild "
                              "build` again to finish it")
    base = info.extra.get("base")
    if isinstance(base, dict):
        # /opt/rocm is where other software looks for a whole ROCm (compilers, HIP, ROCr):
        # a prefix built on a base holds only what the base lacked
        raise ConfigError(f"{prefix} is only the top of a stack built on the base "
                          f"{base.get('path')} (ROCm {base.get('version')}); pointing /opt/rocm "
                          "at it would hide the compilers, HIP runtime and ROCr",
                          tip=f"use it with `. {prefix}/env.sh` (or `module load`), which puts "
                              "it before the base, or build a whole stack without --base")
    if not info.verified and not unproven:
        raise ConfigError(f"the build into {prefix} is complete but unproven: "
                          f"{buildinfo.unproven_why(info)}, so nothing shows "
                          f"{buildinfo.what_verify_proves(info)}",
                          tip=f"run `rocbuild verify {prefix}` (a pass is recorded in the "
                              "prefix; it lists what is wrong otherwise), or, to use it "
                              f"anyway: rocbuild activate --unproven {prefix}")
    return info


def _check_link_path(link: Path) -> None:
    if link.is_symlink() or not link.exists():
        return
    kind = "directory" if link.is_dir() else "file"
    raise ConfigError(f"{link} is a real {kind}, not a link rocbuild manages (a packaged ROCm?); "
                      "rocbuild will not replace it",
                      tip=f"move it aside (sudo mv {link} {link}-packaged) or pick another link "
                          "with --link PATH")


def _remove_stray(link: Path) -> bool:
    """Remove the temporary link and state temp files an interrupted switch left behind (a
    link or a file is removed, never followed)."""
    remove_stale_temps(state_path(link))  # a kill between its write and its rename
    tmp = temp_link_path(link)
    if tmp.is_symlink():
        tmp.unlink()
        return True
    if tmp.exists():
        raise ConfigError(f"{tmp} exists and is not a symlink; rocbuild uses that name for its "
                          "temporary link", tip=f"remove {tmp}")
    return False


@contextmanager
def _locked(link: Path) -> Iterator[None]:
    """One switch of a given link at a time (two sudo rocbuild activate racing)."""
    fd = open_lock(lock_path(link))  # never through a link (root runs activate)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _replace_link(link: Path, target: Path) -> None:
    tmp = temp_link_path(link)
    os.symlink(target, tmp)
    try:
        os.replace(tmp, link)
    except BaseException:
        # the old link is untouched; don't leave the temporary one for the next run
        tmp.unlink(missing_ok=True)
        raise


def _switch(link: Path, target: Path, info: BuildInfo) -> Switch:
    unproven = not info.verified
    _check_link_path(link)
    try:
        link.parent.mkdir(parents=True, exist_ok=True)
        with _locked(link):
            removed = _remove_stray(link)
            old = current_target(link)
            state = read_state(link)
            if old != target:
                _replace_link(link, target)
                _write_state(link, current=target, previous=old, unproven=unproven)
            elif state is None or state.unproven != unproven:  # proven since, or not yet
                _write_state(link, current=target,
                             previous=state.previous if state else None, unproven=unproven)
            warning = registry.note_activated(target, link, unproven=unproven)
            return Switch(link=link, target=target, previous=old, removed_stray=removed,
                          info=info, unproven=unproven, warning=warning)
    except OSError as exc:
        message = f"cannot change {link}: {exc.strerror} ({exc.filename})"
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):  # not this user's to change
            raise ActivationError(message, tip="run it with sudo, or use --link with a path "
                                               "you own (e.g. --link ~/.local/rocm)") from None
        raise RocbuildError(message, tip="the link is unchanged; fix the cause and run the "
                                         "same command again") from None


def activate(prefix: Path, link: Path = DEFAULT_LINK, *, unproven: bool = False) -> Switch:
    """Point ``link`` at ``prefix`` (a complete rocbuild prefix that verify proved, or, with
    ``unproven``, one it did not)."""
    prefix, link = Path(os.path.abspath(prefix)), Path(os.path.abspath(link))
    if prefix == link:
        raise ConfigError(f"{prefix} is the link itself; name a built prefix such as "
                          "/opt/rocm-6.4-gfx906", tip="run `rocbuild prefixes` to see them")
    return _switch(link, prefix, check_prefix(prefix, unproven=unproven))


def previous_target(link: Path) -> Path:
    """What ``--previous`` goes back to. If a crash hit after the rename but before the
    state file was written, the state's "current" is really the previous target."""
    state = read_state(link)
    if state is None or state.current is None:
        raise ConfigError(f"no earlier activation of {link} is recorded",
                          tip="activate a prefix by name: rocbuild activate PREFIX")
    if state.current != current_target(link):
        return state.current
    if state.previous is None:
        raise ConfigError(f"{link} had no target before {state.current}, so there is nothing "
                          "to go back to",
                          tip="activate a prefix by name: rocbuild activate PREFIX")
    return state.previous


def activate_previous(link: Path = DEFAULT_LINK, *, unproven: bool = False) -> Switch:
    """Point ``link`` back at the prefix it pointed at before the last switch."""
    link = Path(os.path.abspath(link))
    target = previous_target(link)
    return _switch(link, target, check_prefix(target, unproven=unproven))
