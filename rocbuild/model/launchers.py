"""Compiler launchers: ccache in front of every CMake compile, distcc behind it for the
components a recipe marks distributable.

This module owns the settings' parsers (--ccache, --distcc, --launcher), the launchers of a
run decided from the settings and what the host has (``resolve``, given the tools that
checks/launchtools.py found when the run started), each language's launcher (``choices``;
the build system spells them and reads a recipe's own), the variables every build step gets
(CCACHE_*, DISTCC_*, Tensile's launchers) and the split of compile jobs into local and remote
slots. It runs nothing: the host probe, the doctor and preflight checks are launchtools.py's,
what a step saved (ccache's stats log, distcc's log, kept in state) is launchstats.py's
(run/state/). Launchers change only the speed of a build, never its output, so nothing here
is part of any fingerprint.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocbuild.model import buildsystems
from rocbuild.model.resources import (
    GIB,
    HostSnapshot,
    JobCount,
    format_gib,
    memory_budget,
)

if TYPE_CHECKING:  # graph imports this module; only the type is needed here
    from rocbuild.model.graph import Component, Stack
    from rocbuild.model.settings import Settings

# stats_log (CCACHE_STATSLOG), which gives one step's counters without touching other builds'
# statistics, came with ccache 4.4 (ccache NEWS, "Ccache 4.4"); Debian 12 ships 4.7.5 and
# Ubuntu 22.04 4.5.1.
MIN_CCACHE = (4, 4)
MIN_CACHE_SIZE = 5 * GIB  # ccache's own default max_size
# what preprocessing one remote compile costs here (cpp of a large C++ unit, plus ccache);
# a rocbuild estimate: remote slots are only used while this much memory is left
PREPROCESS_MEM = GIB // 2
DISTCC_DEFAULT_SLOTS = 4  # distcc(1): "The limit defaults to four per host (two for localhost)"
CCACHE_MODES = ("auto", "on", "off")
LANGUAGES = ("C", "CXX", "HIP")


def parse_ccache_mode(text: str) -> str:
    mode = text.strip().lower()
    if mode not in CCACHE_MODES:
        raise ValueError(f"'{text}' is not one of {', '.join(CCACHE_MODES)}")
    return mode


# One DISTCC_HOSTS entry (distcc(1), "Host Specifications"): localhost[/LIMIT],
# [USER]@HOST[/LIMIT][:COMMAND][OPTIONS] (ssh), HOST[:PORT][/LIMIT][OPTIONS] or the old
# HOST[/LIMIT][:PORT][OPTIONS] (tcp), OPTIONS being ,lzo ,cpp ,auth[=SERVICE]; plus the
# global options --randomize, --localslots=N, --localslots_cpp=N and +zeroconf.
_HOSTNAME = r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
_DISTCC_HOST = re.compile(
    rf"^(?:(?P<ssh>[A-Za-z0-9._-]*@){_HOSTNAME}(?:/\d+)?(?::/\S+)?"
    rf"|{_HOSTNAME}(?::\d+)?(?:/\d+)?(?::\d+)?)(?:,(?:lzo|cpp|auth(?:=[A-Za-z0-9._-]+)?))*$")
_DISTCC_GLOBAL = re.compile(r"^(?:--randomize|--localslots(?:_cpp)?=\d+|\+zeroconf)$")


def parse_distcc_hosts(text: str) -> str:
    """A DISTCC_HOSTS list, kept as written (distcc parses it) once every entry has distcc's
    shape: a typo such as ``box1/x`` would otherwise count as remote slots and every
    compile would quietly fall back to local. Whitespace is normalised."""
    hosts = " ".join(text.split())
    for token in hosts.split():
        if _DISTCC_GLOBAL.match(token):
            continue
        if token.startswith("-") or not _DISTCC_HOST.match(token):
            raise ValueError(f"'{token}' is not a distcc host: write HOST, HOST/LIMIT (jobs, a "
                             "number), HOST:PORT/LIMIT, USER@HOST for ssh, or localhost/N, "
                             "e.g. 'box1/8 box2:3632/4' (see `man distcc`, Host "
                             "Specifications)")
    return hosts


def parse_launcher(text: str) -> str:
    """A compiler launcher as CMake takes it: a program, or a ;-list of words (env;X=1;tool)."""
    launcher = text.strip()
    if "\0" in launcher or "\n" in launcher:
        raise ValueError("a launcher is one line: a program or a ;-separated list")
    return launcher


def remote_slots(hosts: str) -> int:
    """Jobs distcc may send away: each non-local host's /LIMIT, or distcc's default of 4."""
    slots = 0
    for token in hosts.split():
        if token.startswith("--") or token.startswith("+"):
            continue
        host = token.split(",", 1)[0]
        name = host.lstrip("@").split("@")[-1].split("/")[0].split(":")[0]
        if name == "localhost":
            continue  # distcc runs "localhost" without the network: that is local work
        limit = re.search(r"/(\d+)", host)
        slots += int(limit.group(1)) if limit else DISTCC_DEFAULT_SLOTS
    return slots


def parse_ccache_version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"ccache version (\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(x) for x in match.groups() if x is not None) if match else None


def version_text(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


@dataclass(frozen=True)
class Launch:
    """The launchers of one run, resolved from --ccache and --distcc."""

    ccache: str | None  # the ccache program, None when the cache is off
    ccache_state: str  # why: "on (ccache 4.7.5)", "off (--ccache off)", "off (not installed)"
    mode: str  # auto, on or off as the user said (`on` without a usable ccache is an error)
    distcc: str | None  # the distcc program, None when no hosts are given
    hosts: str  # DISTCC_HOSTS, "" when off
    cache_dir: Path
    user_cache_dir: bool  # CCACHE_DIR came from the user's environment
    max_size: int  # bytes; only set when the cache dir is rocbuild's own
    workdir: Path
    user_launcher: str = ""  # the `launcher` setting: the user's own, for every component
    user_launcher_source: str = ""  # where it came from ("config /x/rocbuild.toml", ...)
    env_tool: str = "/usr/bin/env"  # HostTools.env_tool
    distcc_install: str = "apt-get install -y distcc"  # HostTools.distcc_install
    user_max_size: bool = False  # CCACHE_MAXSIZE was in the user's environment
    # the ccache a build tree is configured with: this host's, whatever --ccache says (off,
    # or too old to cache, it passes every compile through: CCACHE_DISABLE), so the launcher
    # baked into CMakeCache.txt never depends on one run's setting and the next run with the
    # cache on is cached again; None when the host has no ccache
    tree_ccache: str | None = None

    @property
    def remote_slots(self) -> int:
        return remote_slots(self.hosts) if self.distcc else 0


def cache_dir_of(workdir: Path) -> Path:
    """Where rocbuild kept the compiler cache before --ccache-dir (one per workdir): `clean`
    still removes one left there."""
    return workdir / "cache" / "ccache"


@dataclass(frozen=True)
class HostTools:
    """The launcher programs this host has, as checks/launchtools.py found them when the run
    started (the version is only asked for when --ccache is not off)."""

    ccache: str | None = None  # the ccache program's path
    ccache_version: tuple[int, ...] | None = None
    distcc: str | None = None  # only looked for when --distcc names hosts
    env_tool: str = "/usr/bin/env"  # the env program (clears CCACHE_PREFIX for HIP compiles)
    distcc_install: str = "apt-get install -y distcc"  # the command, written for this host
    # why the cache folder is not used ("" while it is): another user could write its
    # ccache.conf, whose prefix_command and compiler_check run with every compile
    ccache_refused: str = ""


def chosen_cache_dir(settings: Settings, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The compiler cache's folder and whether it is the user's own CCACHE_DIR: --ccache-dir
    (flag, variable or config) first; else the user's CCACHE_DIR, which rocbuild leaves as
    it is (no size limit set); else the per-user default."""
    user_dir = env.get("CCACHE_DIR") if settings.source("ccache_dir") == "default" else None
    return (Path(user_dir), True) if user_dir else (settings.ccache_dir, False)


def resolve(settings: Settings, workdir: Path, build_disk: int, tools: HostTools,
            env: Mapping[str, str]) -> Launch:
    """The launchers for a run. ``build_disk`` is the recipes' build-tree estimate for the
    whole stack: the cache is sized to half of it (ccache compresses objects, and a build
    tree also holds the linked libraries the cache never stores), at least ccache's 5 GB.
    ``env`` is the user's environment (CCACHE_DIR, CCACHE_MAXSIZE)."""
    mode = settings.ccache
    hosts = settings.distcc
    found, version = tools.ccache, tools.ccache_version
    ccache: str | None = None
    if mode == "off":
        state = f"off ({settings.source('ccache')})"
    elif found is None:
        state = "off (ccache is not installed)"
    elif version is not None and version < MIN_CCACHE:
        state = (f"off (ccache {version_text(version)} is older than "
                 f"{version_text(MIN_CCACHE)})")
    elif tools.ccache_refused:
        state = f"off ({tools.ccache_refused})"
    else:
        ccache = found
        state = f"on (ccache {version_text(version) if version else '?'})"
    cache_dir, user_dir = chosen_cache_dir(settings, env)
    return Launch(
        ccache=ccache, ccache_state=state, mode=mode,
        distcc=tools.distcc if hosts else None, hosts=hosts,
        cache_dir=cache_dir, user_cache_dir=user_dir,
        max_size=max(MIN_CACHE_SIZE, build_disk // 2),
        workdir=workdir, user_launcher=settings.launcher,
        user_launcher_source=settings.source("launcher") if settings.launcher else "",
        env_tool=tools.env_tool, distcc_install=tools.distcc_install,
        user_max_size="CCACHE_MAXSIZE" in env, tree_ccache=found)


def build_disk(stack: Stack) -> int:
    """The recipes' build-tree estimate for every recipe that builds (sizes the cache)."""
    return sum(int(r.resources.get("disk", 0)) for r in stack.recipes.recipes.values()
               if r.builds)


def attach(stack: Stack, settings: Settings, tools: HostTools,
           env: Mapping[str, str] | None = None) -> Stack:
    """``stack`` with the launchers of a run on this host (Stack.launch); load_stack leaves
    them out, so loading a stack probes nothing."""
    return dataclasses.replace(stack, launch=resolve(settings, stack.workdir,
                                                     build_disk(stack), tools, env or {}))


def distributes(launch: Launch, comp: Component) -> bool:
    return bool(launch.distcc) and comp.recipe.distribute


# --- configure: who decides each language's launcher --------------------------------------
@dataclass(frozen=True)
class LauncherChoice:
    """Who decides a language's compiler launcher for one component, and what it is."""

    launcher: str  # "" for none
    source: str  # "recipe <file>", the `launcher` setting's source, "rocbuild" or "none"

    def text(self) -> str:
        return f"{self.launcher} ({self.source})" if self.launcher else "none"


def choices(launch: Launch | None, comp: Component) -> dict[str, LauncherChoice]:
    """Per language, the launcher the component is configured with: the recipe's own
    (``BuildSystem.recipe_launchers``: the recipe's word wins, as for RUNPATH), else the user's
    `launcher` setting, else rocbuild's ccache (with distcc behind it where distributed)."""
    own = buildsystems.of(comp).recipe_launchers(comp) if comp.builds else {}
    ours = dict(_rocbuild_launchers(launch, comp))
    out: dict[str, LauncherChoice] = {}
    for lang in LANGUAGES:
        if lang in own:
            out[lang] = LauncherChoice(own[lang], f"recipe {comp.recipe.file}")
        elif launch is not None and launch.user_launcher:
            out[lang] = LauncherChoice(launch.user_launcher, launch.user_launcher_source)
        elif lang in ours:
            out[lang] = LauncherChoice(ours[lang], "rocbuild")
        else:
            out[lang] = LauncherChoice("", "none")
    return out


def _rocbuild_launchers(launch: Launch | None, comp: Component) -> list[tuple[str, str]]:
    """rocbuild's own launchers by language. With distcc, ccache stays first and runs distcc
    itself (CCACHE_PREFIX, set by ``launcher_env``), as ccache's manual recommends ("Using ccache
    with other compiler wrappers"), so the real compiler is what ccache hashes. HIP device
    compiles never go to distcc: their launcher clears CCACHE_PREFIX."""
    if launch is None:
        return []
    ccache = launch.tree_ccache  # also when off: it passes compiles through (launcher_env)
    if ccache is None:
        if not distributes(launch, comp):
            return []
        assert launch.distcc is not None
        return [(lang, launch.distcc) for lang in ("C", "CXX")]
    # CCACHE_PREFIX=distcc may be in a distributed component's environment
    hip = f"{launch.env_tool};CCACHE_PREFIX=;{ccache}" if comp.recipe.distribute else ccache
    return [(lang, ccache) for lang in ("C", "CXX")] + [("HIP", hip)]


def summary(launch: Launch | None, comp: Component) -> str:
    """One line for `plan`: ``/usr/bin/ccache (rocbuild)`` when every language has the same
    launcher, else each language's (``CXX: sccache (recipe ...); C: ...``)."""
    picked = choices(launch, comp)
    texts = {c.text() for c in picked.values()}
    if len(texts) == 1:
        return texts.pop()
    return "; ".join(f"{lang}: {c.text()}" for lang, c in picked.items())


def _program(launcher: str) -> str:
    """The program of a launcher as CMake takes it (``env;X=1;ccache``: the last word)."""
    words = [w for w in launcher.split(";") if w and "=" not in w]
    return words[-1] if words else launcher


NO_CACHE = "configured without the compiler cache"


def tree_note(launch: Launch | None, comp: Component, configured: Mapping[str, str] | None
              ) -> str | None:
    """How the launchers baked into ``comp``'s build tree at its last configure
    (``configured``, by language: BuildSystem.tree_launchers) differ from the ones this run
    configures with, in a few words (``NO_CACHE``, or a launcher program that is gone);
    None when they do not matter (or there is no tree). A launcher is no fingerprint input,
    so a tree keeps its own until it is configured again: changing one would make ninja
    recompile every object (its command line changed), a whole rebuild."""
    if launch is None or configured is None or not comp.builds:
        return None
    for lang, value in sorted(configured.items()):
        program = _program(value)
        if program.startswith("/") and not Path(program).exists():
            return f"configured with the {lang} compiler launcher {program}, which is gone"
    if launch.ccache is None or launch.tree_ccache is None:
        return None  # this run caches nothing: a tree with or without ccache compiles alike
    missing = [lang for lang, choice in choices(launch, comp).items()
               if choice.source == "rocbuild" and launch.tree_ccache in choice.launcher.split(";")
               and "ccache" not in Path(_program(configured.get(lang, ""))).name]
    return NO_CACHE if missing else None


# --- every step: the environment ------------------------------------------------------------
def stats_log(workdir: Path, component: str) -> Path:
    return workdir / "logs" / component / "ccache-stats.log"


def distcc_log(workdir: Path, component: str) -> Path:
    return workdir / "logs" / component / "distcc.log"


# Where clang finds the device bitcode libraries: AMD's packages put them in clang's resource
# folder (lib/llvm/lib/clang/<N>/lib/amdgcn/bitcode) and keep the legacy amdgcn/bitcode, which
# is also where device-libs installs with its defaults (rocbuild's own stack); Debian's
# rocm-device-libs-<N> in clang-<N>'s resource folder without the lib/ step
# (/usr/lib/llvm-21/lib/clang/21/amdgcn/bitcode).
BITCODE_DIRS = ("amdgcn/bitcode", "lib/llvm/lib/clang/*/lib/amdgcn/bitcode",
                "lib/llvm-*/lib/clang/*/amdgcn/bitcode")


def toolchain_files(roots: Iterable[Path]) -> list[Path]:
    """Files the ROCm compilers read that ccache cannot see on the command line: their config
    files (<bindir>/clang++.cfg -> rocm.cfg) and the device libraries linked into every HIP
    device compile, in each ROCm the build compiles against (the prefix, then a --base), in
    either bitcode layout. Hashing them keeps a rebuilt device-libs or an upgraded base from
    being served stale code. A file reached twice (a link between the layouts) counts once."""
    files: list[Path] = []
    seen: set[Path] = set()
    for root in roots:
        found = sorted(root.glob("lib/llvm/bin/*.cfg")) + sorted(root.glob("lib/llvm-*/bin/*.cfg"))
        for folder in BITCODE_DIRS:
            found += sorted(root.glob(f"{folder}/*.bc"))
        for path in found:
            real = path.resolve()
            if path.is_file() and real not in seen:
                seen.add(real)
                files.append(path)
    return files


# the variables build systems read their compilers from (CMake, make, autotools)
COMPILER_VARIABLES = ("CC", "CXX", "HIPCXX", "FC")


def compiler_in_prefix(stack: Stack, comp: Component) -> bool:
    """Whether a compiler ``comp`` names (in its build system's arguments, or CC, CXX,
    HIPCXX, FC) lives in the prefix, which the stack rebuilds (LLVM's clang, hipcc, the
    amdclang++ links); a --base's or the system's compilers change only with an upgrade."""
    named = buildsystems.of(comp).recipe_compilers(comp) if comp.builds else []
    named += [value for key, value in comp.env if key in COMPILER_VARIABLES]
    return any(Path(path).is_relative_to(stack.prefix) for path in named if path)


def launcher_env(launch: Launch | None, stack: Stack, comp: Component) -> dict[str, str]:
    """The variables rocbuild sets for ``comp``'s steps (the caller merges them)."""
    if launch is None:
        return {}
    env: dict[str, str] = {}
    if launch.ccache is None:
        # a build tree configured with the launcher on keeps it: make ccache a pass-through
        env["CCACHE_DISABLE"] = "1"
    else:
        if not launch.user_cache_dir:
            env["CCACHE_DIR"] = str(launch.cache_dir)
            if not launch.user_max_size:
                env["CCACHE_MAXSIZE"] = f"{max(launch.max_size // GIB, 1)}Gi"
        # relative paths under the workdir: a recreated or moved build tree still hits
        env["CCACHE_BASEDIR"] = str(launch.workdir)
        # not depend mode (CCACHE_DEPEND): it would spare a miss the preprocessor run, which
        # costs a real build nothing measurable (ggml: CPU time with ccache on 1.00-1.02x
        # off), but it hashes the command line instead of the preprocessed source, so a -D
        # that every object gets and few files read misses everywhere (ggml: 0/25 hits
        # instead of 24/25 after GGML_SCHED_MAX_COPIES changed; perf/ccache.py)
        if compiler_in_prefix(stack, comp):
            # a compiler the stack builds is rebuilt with a new mtime and the same content:
            # hash it by content, so a rebuilt LLVM still hits (a system compiler keeps
            # ccache's default, mtime and size)
            env["CCACHE_COMPILERCHECK"] = "content"
        env["CCACHE_STATSLOG"] = str(stats_log(launch.workdir, comp.name))
        extra = toolchain_files(stack.search_prefixes)
        if extra:
            env["CCACHE_EXTRAFILES"] = ":".join(map(str, extra))
        # variables through which the project's build hands a launcher to compiler processes
        # of its own (the recipe's `launcher_env`: rocBLAS's TensileCreateLibrary); only
        # where the component's C++ compiles go through rocbuild's ccache, not a launcher of
        # the recipe's or the user's own
        if comp.recipe.launcher_env and choices(launch, comp)["CXX"].source == "rocbuild":
            env.update(dict.fromkeys(comp.recipe.launcher_env, launch.ccache))
    if distributes(launch, comp):
        assert launch.distcc is not None
        if launch.tree_ccache is not None:  # a ccache that passes through runs it too
            env["CCACHE_PREFIX"] = launch.distcc
        env["DISTCC_HOSTS"] = launch.hosts
        env["DISTCC_DIR"] = str(launch.workdir / "distcc")  # its lock and backoff state
        env["DISTCC_LOG"] = str(distcc_log(launch.workdir, comp.name))
        env["DISTCC_FALLBACK"] = "1"  # a host that is down or refuses: compile here instead
    return env


# --- jobs: local slots and remote slots -----------------------------------------------------
def split_jobs(launch: Launch | None, comp: Component, counts: Mapping[str, JobCount],
               host: HostSnapshot, *, swap_weight: float, cap: int | None
               ) -> dict[str, JobCount]:
    """With distcc, the compile pool is the local jobs plus the remote slots, as far as local
    memory allows the preprocessing of the remote ones (PREPROCESS_MEM each, after the local
    compiles and the link pool). Links and everything else stay sized by local memory."""
    out = dict(counts)
    slots = launch.remote_slots if launch is not None and distributes(launch, comp) else 0
    if not slots or "compile" not in counts:
        return out
    local = counts["compile"].jobs
    mem = comp.recipe.resources
    held = local * int(mem.get("compile_mem", GIB))
    if "link" in counts and "link_mem" in mem:
        held += counts["link"].jobs * int(mem["link_mem"])
    budget = memory_budget(host.mem_available, host.swap_free, swap_weight) - held
    by_memory = max(int(budget // PREPROCESS_MEM), 0)
    remote = min(slots, by_memory)
    total = local + remote
    limits = [f"{local} local ({counts['compile'].reason})",
              f"{remote} remote of {slots} distcc slots"]
    if remote < slots:
        limits.append(f"local memory for preprocessing at {format_gib(PREPROCESS_MEM)}/job "
                      f"allows {by_memory} remote")
    if cap is not None and total > cap:
        total = cap
        limits.append(f"--jobs {cap}")
    out["compile"] = JobCount(max(total, 1), f"{max(total, 1)} jobs: " + "; ".join(limits))
    return out


def effective_settings(launch: Launch | None, selected: list[Component]) -> dict[str, str]:
    """What --ccache and --distcc come to on this machine, for `rocbuild plan`."""
    if launch is None:
        return {}
    out = {"ccache": launch.ccache_state}
    if launch.ccache is not None:
        where = ("yours: CCACHE_DIR" if launch.user_cache_dir
                 else f"max {launch.max_size // GIB} GiB")
        out["ccache"] += f", cache {launch.cache_dir} ({where})"
    elif launch.tree_ccache is not None:
        out["ccache"] += (f"; {launch.tree_ccache} stays the build trees' launcher and passes "
                          "each compile straight through, so a later run with the cache on "
                          "is cached again")
    if launch.hosts:
        names = [c.name for c in selected if c.builds and c.recipe.distribute]
        if launch.distcc is None:
            out["distcc"] = f"off (distcc is not installed: {launch.distcc_install})"
        else:
            out["distcc"] = (f"{launch.remote_slots} remote slots for "
                             f"{', '.join(names) or 'no selected component'} (recipes with "
                             "[cmake] distribute = true); links and HIP stay local")
    return out
