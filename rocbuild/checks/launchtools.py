"""The compiler launchers this host has, and the checks doctor and preflight make of them.

``find`` is the host probe (which ccache and distcc, ``ccache --version``) that runs when a
run starts (run/engine/build.py's BuildContext, ``rocbuild plan``): loading a Stack probes nothing,
and a Stack gets its launchers from ``launching``. The decisions themselves (which launcher
for which language, the step environment, the job split) are model/launchers.py's.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from rocbuild import proc
from rocbuild.checks import privilege
from rocbuild.checks.trust import host_trust
from rocbuild.model.graph import Stack
from rocbuild.model.launchers import (
    MIN_CCACHE,
    HostTools,
    Launch,
    attach,
    chosen_cache_dir,
    parse_ccache_version,
    version_text,
)
from rocbuild.model.settings import Settings
from rocbuild.model.workdir import Workdir


def ccache_install() -> str:
    """The command that installs ccache, written for this host (``privilege.apt_install``)."""
    return privilege.apt_install("ccache")


def distcc_install() -> str:
    return privilege.apt_install("distcc")


@functools.lru_cache(maxsize=8)
def ccache_version(path: str, memo: Path | None = None) -> tuple[int, ...] | None:
    """``ccache --version`` read once per process and program; with ``memo`` (the workdir's
    probe answers) an unchanged ccache is not asked again in a later run either."""
    done = proc.run_probe([path, "--version"], memo=memo)
    return parse_ccache_version(done.stdout) if done is not None else None


def find(settings: Settings, which: Callable[[str], str | None] | None = None) -> HostTools:
    """The launcher programs of this host that the settings can use: ccache's version only
    when --ccache is not off (no probe then), distcc only when --distcc names hosts."""
    which = which or shutil.which
    ccache = which("ccache")
    return HostTools(
        ccache=ccache,
        ccache_version=(ccache_version(ccache, Workdir.shared(settings.workdir).probes)
                        if ccache and settings.ccache != "off" else None),
        distcc=which("distcc") if settings.distcc else None,
        env_tool=which("env") or "/usr/bin/env", distcc_install=distcc_install(),
        ccache_refused=(cache_dir_refusal(settings, os.environ)
                        if ccache and settings.ccache != "off" else ""))


def cache_dir_refusal(settings: Settings, env: Mapping[str, str]) -> str:
    """Why the compiler cache's folder is not used ("" while it is): its ``ccache.conf``
    sets commands every compile runs (``prefix_command``, ``compiler_check``), so the folder
    (the nearest one there, when it is not made yet) and that file must be ones no other
    user could have written (model/trust.py; ``safe_directories`` trusts a team's shared
    cache)."""
    folder, _ = chosen_cache_dir(settings, env)
    there = folder
    while not (there.exists() or there.is_symlink()) and there != there.parent:
        there = there.parent
    bad = host_trust(env).with_safe(settings.safe_directories).first_untrusted(
        [there, folder / "ccache.conf"])
    if bad is None:
        return ""
    path, why = bad
    return (f"the compiler cache {folder} is not used: {path} {why.removeprefix('it ')}; "
            f"its ccache.conf runs commands with every compile")


def launching(stack: Stack, settings: Settings) -> Stack:
    """``stack`` with this host's launchers resolved (what a run configures and compiles with)."""
    return attach(stack, settings, find(settings), os.environ)


def ccache_check(path: str | None, version: tuple[int, ...] | None) -> tuple[str, str, str | None]:
    """(level "ok"/"warn", summary, fix) for doctor."""
    need = version_text(MIN_CCACHE)
    if path is None:
        return ("warn", "ccache is not installed: every rebuild compiles everything again",
                ccache_install())
    if version is None:
        return ("warn", f"cannot read the version of {path}", f"run `{path} --version`")
    if version < MIN_CCACHE:
        return ("warn", f"ccache {version_text(version)} is older than {need} (no stats log): "
                        "rocbuild builds without it", f"{ccache_install()} (from a newer release) "
                        f"or install ccache >= {need} from ccache.dev")
    return ("ok", f"ccache {version_text(version)}: rebuilds are served from the cache", None)


def preflight_problems(launch: Launch | None, say: Callable[[str], None]
                       ) -> list[tuple[str, str]]:
    """(problem, fix) pairs that stop a build: --ccache on without a usable ccache, --distcc
    without distcc. An automatic ccache that is missing is only said."""
    if launch is None:
        return []
    problems = []
    if launch.ccache is None and launch.mode == "on" and "is not used" in launch.ccache_state:
        problems.append((f"--ccache on, but {launch.ccache_state[5:-1]}",
                         "make that folder yours alone (chown, chmod go-w), add it to "
                         "safe_directories if you trust who shares it, or give --ccache-dir"))
    elif launch.ccache is None and launch.mode == "on":
        problems.append((f"--ccache on, but {launch.ccache_state[5:-1]}", ccache_install()))
    elif launch.ccache is None and launch.mode == "auto":
        say(f"preflight: compiler cache {launch.ccache_state}; rebuilds will compile "
            f"everything again ({ccache_install()})")
    if launch.hosts and launch.distcc is None:
        problems.append((f"--distcc '{launch.hosts}', but distcc is not installed",
                         distcc_install()))
    return problems
