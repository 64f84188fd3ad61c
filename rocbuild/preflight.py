"""Checks made before any long step: each refusal here costs seconds, not the night.

Free disk for the workdir and the prefix against the recipes' estimates, a prefix this user
can write (rocbuild never runs sudo or chown itself: it prints the command to run once), the
tools the recipes need, every source available when --offline, and every patch series that
can already be checked. All problems are reported together, each with its fix.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rocbuild import cache_install, sources
from rocbuild.build import BuildContext
from rocbuild.errors import BuildFailed, RocbuildError
from rocbuild.resources import format_gib
from rocbuild.steps import step_env, steps_of

MIN_CMAKE = (3, 22)  # rocprofiler-register's cmake_minimum_required (the highest seen, 6.4 line)
PREFIX_SHARE = 0.25  # rocbuild rule of thumb: an install takes about a quarter of its build tree
# Debian package -> the program preflight looks for (packages without one are doctor's job)
PACKAGE_TOOLS = {"cmake": "cmake", "ninja-build": "ninja", "git": "git", "perl": "perl",
                 "pkg-config": "pkg-config", "python3": "python3", "g++": "g++"}


class PreflightError(RocbuildError):
    """The build cannot start; nothing has run. Exit 2, like other input the user must fix."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    what: str
    fix: str


def nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def check_prefix_writable(prefix: Path) -> list[Problem]:
    base = nearest_existing(prefix)
    user = os.environ.get("USER") or "$USER"
    if not base.is_dir():
        return [Problem(f"the prefix {prefix} cannot be created: {base} is not a folder",
                        f"choose another --prefix, or move {base} away")]
    if not os.access(base, os.W_OK | os.X_OK):
        return [Problem(f"the prefix {prefix} is not writable by {user} ({base} belongs to "
                        "someone else)",
                        f"run once: sudo mkdir -p {prefix} && sudo chown {user}: {prefix}  "
                        "(rocbuild never runs sudo itself), or pick a --prefix you own")]
    return []


def _disk_need(ctx: BuildContext) -> int:
    """Build-tree bytes of the components whose install is not current yet."""
    need = 0
    for comp in ctx.stack.selected():
        if comp.builds and not ctx.is_current(comp, "install"):
            need += int(comp.recipe.resources.get("disk", 0))
    return need


def check_disk(ctx: BuildContext) -> list[Problem]:
    need = _disk_need(ctx)
    problems = []
    for where, bytes_needed in ((ctx.stack.workdir, need),
                                (ctx.stack.prefix, int(need * PREFIX_SHARE))):
        base = nearest_existing(where)
        free = shutil.disk_usage(base).free
        if bytes_needed > free:
            problems.append(Problem(
                f"{where}: {format_gib(free)} free, the pending components need about "
                f"{format_gib(bytes_needed)} (recipes' [resources] disk estimates)",
                f"free space on {base}'s filesystem, or use --workdir/--prefix on a larger "
                "one"))
    return problems


def _cmake_version(env: Mapping[str, str]) -> tuple[int, ...] | None:
    try:
        out = subprocess.run(["cmake", "--version"], capture_output=True, text=True, env=dict(env),
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"cmake version (\d+)\.(\d+)", out)
    return tuple(int(x) for x in match.groups()) if match else None


def check_tools(ctx: BuildContext) -> list[Problem]:
    wanted = {"cmake", "ninja", "git"}
    for comp in ctx.stack.selected():
        wanted |= {PACKAGE_TOOLS[p] for p in comp.recipe.system_packages if p in PACKAGE_TOOLS}
    selected = ctx.stack.selected()
    env = step_env(ctx.stack, selected[0]) if selected else dict(os.environ)
    problems = []
    for tool in sorted(wanted):
        if shutil.which(tool, path=env.get("PATH")) is None:
            package = next((p for p, t in PACKAGE_TOOLS.items() if t == tool), tool)
            problems.append(Problem(f"{tool} is not installed (or not on PATH)",
                                    f"sudo apt-get install {package}"))
    if "cmake" in wanted and shutil.which("cmake", path=env.get("PATH")):
        version = _cmake_version(env)
        if version is not None and version < MIN_CMAKE:
            need = ".".join(map(str, MIN_CMAKE))
            problems.append(Problem(
                f"cmake {'.'.join(map(str, version))} is older than {need}, which the ROCm "
                "6.4 components require", f"python3 -m pip install --user 'cmake>={need}' "
                "(or Kitware's apt repository), then make sure it comes first on PATH"))
    return problems


def check_offline_sources(ctx: BuildContext) -> list[Problem]:
    problems = []
    for comp in ctx.stack.selected():
        if (not comp.owns_checkout or ctx.is_current(comp, "fetch")
                or cache_install.is_served(ctx, comp.name)):  # --cache installs it
            continue
        assert comp.fetch_url is not None and comp.ref is not None
        cache = sources.cache_dir(ctx.stack.workdir / "cache" / "git", comp.fetch_url)
        if not (cache / "HEAD").is_file() or sources.cached_commit(cache, comp.ref) is None:
            problems.append(Problem(f"{comp.name}: {comp.ref} of {comp.fetch_url} is not in the "
                                    "source cache and --offline forbids downloading it",
                                    "run once without --offline, or give a --mirror that has it"))
    return problems


def check_patches(ctx: BuildContext) -> list[Problem]:
    problems = []
    for comp in ctx.stack.selected():
        if comp.owns_checkout and "patch" in steps_of(comp) and ctx.is_current(comp, "fetch"):
            try:
                ctx.check_patches(comp)
            except BuildFailed as exc:
                problems.append(Problem(str(exc), exc.tip or "refresh the patch"))
    return problems


def run(ctx: BuildContext) -> None:
    """Raise PreflightError listing every problem found; print one line when all is well."""
    problems = [*check_prefix_writable(ctx.stack.prefix), *check_disk(ctx),
                *check_tools(ctx), *check_patches(ctx)]
    if ctx.offline:
        problems += check_offline_sources(ctx)
    if problems:
        lines = [f"  - {p.what}\n    fix: {p.fix}" for p in problems]
        raise PreflightError(
            f"preflight found {len(problems)} problem{'s' if len(problems) > 1 else ''}; "
            "nothing was built:\n" + "\n".join(lines),
            tip="fix these, then run the same command again")
    need = _disk_need(ctx)
    ctx.output.say(f"preflight: ok (prefix writable, tools found, about {format_gib(need)} of "
                   "build space needed)")
