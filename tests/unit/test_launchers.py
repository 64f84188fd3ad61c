"""launchers.py (the launcher arguments, the environment, the job split), launchtools.py (the
host's programs, doctor and preflight) and launchstats.py (the statistics), for injected
ccache/distcc programs (the e2e tests run the real ones)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from rocbuild.checks import launchtools
from rocbuild.errors import ConfigError
from rocbuild.model import launchers
from rocbuild.model.buildsystems.cmake import CMake
from rocbuild.model.graph import Component, load_stack
from rocbuild.model.resources import GIB, HostSnapshot, jobs_by_kind
from rocbuild.model.settings import resolve
from rocbuild.run.state import launchstats

RECIPE = '[source]\ngit = "https://example.com/x.git"\nref = "v1"\n[cmake]\n'
TOOLS = {"ccache": "/usr/bin/ccache", "distcc": "/usr/bin/distcc"}


def stack_for(write_recipes, tmp_path: Path, env: dict[str, str] | None = None,
              tools: dict[str, str] | None = None, **flags: str):
    folder = write_recipes(host=RECIPE + 'distribute = true\n[resources]\ndisk = "40GiB"\n'
                           'compile_mem = "1GiB"\nlink_mem = "4GiB"\n',
                           device='launcher_env = ["Tensile_CXX_COMPILER_LAUNCHER", '
                           '"Tensile_ASM_COMPILER_LAUNCHER"]\n' + RECIPE
                           + '[resources]\ndisk = "8GiB"\n')
    settings = resolve({"recipes": str(folder), "workdir": str(tmp_path / "w"), **flags},
                       env={}, cwd=tmp_path)
    stack = load_stack(settings)
    found = TOOLS if tools is None else tools
    launch = launchers.resolve(settings, stack.workdir, 48 * GIB,
                               launchtools.find(settings, which=found.get), env=env or {})
    return stack, launch


def compiler_launcher_args(launch: launchers.Launch, comp: Component) -> list[str]:
    """CMake's launcher arguments for ``comp`` with the launchers ``launch``."""
    return CMake().launcher_args(SimpleNamespace(launch=launch), comp)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def known_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launchtools, "ccache_version", lambda path, memo=None: (4, 7, 5))


def test_ccache_goes_in_front_of_c_cxx_and_hip(write_recipes, tmp_path: Path) -> None:
    stack, launch = stack_for(write_recipes, tmp_path)
    assert launch.ccache_state == "on (ccache 4.7.5)"
    assert launchers.effective_settings(launch, stack.selected())["ccache"] == \
        f"on (ccache 4.7.5), cache {Path.home()}/.cache/rocbuild/ccache (max 24 GiB)"
    args = compiler_launcher_args(launch, stack.components["device"])
    assert args == [f"-DCMAKE_{lang}_COMPILER_LAUNCHER=/usr/bin/ccache"
                    for lang in ("C", "CXX", "HIP")]


def test_cache_env_is_keyed_for_a_rebuilt_compiler_and_a_recreated_tree(
        write_recipes, tmp_path: Path) -> None:
    stack, launch = stack_for(write_recipes, tmp_path)
    env = launchers.launcher_env(launch, stack, stack.components["device"])
    work = str(tmp_path / "w")
    assert env["CCACHE_DIR"] == f"{Path.home()}/.cache/rocbuild/ccache"  # per user
    assert env["CCACHE_BASEDIR"] == work and "CCACHE_DEPEND" not in env
    assert env["CCACHE_MAXSIZE"] == "24Gi"  # half of the stack's 48 GiB build-tree estimate
    assert env["CCACHE_STATSLOG"] == f"{work}/logs/device/ccache-stats.log"
    # the recipe's launcher_env (rocBLAS's Tensile variables) gets the launcher too
    assert env["Tensile_CXX_COMPILER_LAUNCHER"] == env["Tensile_ASM_COMPILER_LAUNCHER"] \
        == "/usr/bin/ccache"
    assert "CCACHE_PREFIX" not in env and "DISTCC_HOSTS" not in env
    # ...and only that recipe's steps: a project that names no such variable gets none
    host = launchers.launcher_env(launch, stack, stack.components["host"])
    assert not [name for name in host if name.startswith("Tensile")], host


def test_compilers_are_hashed_by_content_only_where_the_stack_rebuilds_them(
        write_recipes, tmp_path: Path) -> None:
    """Issue 25: a compiler in the prefix (LLVM's clang, rebuilt with a new mtime) is hashed
    by content so a rebuild still hits; a system or --base compiler keeps ccache's mtime
    check (hashing a compiler per compile is what it costs)."""
    folder = write_recipes(
        system=RECIPE,
        rebuilt=RECIPE + 'args = ["-DCMAKE_CXX_COMPILER={{ rocm }}/bin/amdclang++"]\n',
        by_env=RECIPE + '[env]\nHIPCXX = "{{ prefix }}/lib/llvm/bin/clang"\n',
        base_clang=RECIPE + 'args = ["-DCMAKE_HIP_COMPILER=/opt/rocm-6.4.3/lib/llvm/bin/clang"]\n')
    settings = resolve({"recipes": str(folder), "workdir": str(tmp_path / "w"),
                        "prefix": str(tmp_path / "p")}, env={}, cwd=tmp_path)
    stack = load_stack(settings)
    launch = launchers.resolve(settings, stack.workdir, 48 * GIB,
                               launchtools.find(settings, which=TOOLS.get), env={})
    checks = {name: launchers.launcher_env(launch, stack, stack.components[name])
              .get("CCACHE_COMPILERCHECK") for name in ("system", "rebuilt", "by_env",
                                                         "base_clang")}
    assert checks == {"system": None, "rebuilt": "content", "by_env": "content",
                      "base_clang": None}


def test_the_users_ccache_dir_and_size_are_kept(write_recipes, tmp_path: Path) -> None:
    stack, launch = stack_for(write_recipes, tmp_path, env={"CCACHE_DIR": "/srv/cc"})
    env = launchers.launcher_env(launch, stack, stack.components["device"])
    assert "CCACHE_DIR" not in env and "CCACHE_MAXSIZE" not in env
    assert launch.cache_dir == Path("/srv/cc")
    stack, launch = stack_for(write_recipes, tmp_path, env={"CCACHE_MAXSIZE": "9G"})
    env = launchers.launcher_env(launch, stack, stack.components["device"])
    assert "CCACHE_MAXSIZE" not in env


def test_the_prefix_toolchain_files_are_hashed(write_recipes, tmp_path: Path) -> None:
    stack, launch = stack_for(write_recipes, tmp_path, prefix=str(tmp_path / "p"))
    bitcode = tmp_path / "p" / "amdgcn" / "bitcode"
    bitcode.mkdir(parents=True)
    (bitcode / "ocml.bc").write_bytes(b"BC")
    (tmp_path / "p" / "lib" / "llvm" / "bin").mkdir(parents=True)
    (tmp_path / "p" / "lib" / "llvm" / "bin" / "clang++.cfg").write_text("@rocm.cfg\n")
    env = launchers.launcher_env(launch, stack, stack.components["device"])
    assert env["CCACHE_EXTRAFILES"] == (f"{tmp_path}/p/lib/llvm/bin/clang++.cfg:"
                                        f"{bitcode}/ocml.bc")


def test_a_bases_toolchain_files_are_hashed_in_both_bitcode_layouts(
        write_recipes, tmp_path: Path) -> None:
    """On --base the compilers are the base's: its config files and its bitcode, in clang's
    resource folder (AMD's packages) and in the legacy amdgcn/ (a link to the same file
    counts once), go into the hash."""
    base = tmp_path / "rocm-6.4.3"
    (base / ".info").mkdir(parents=True)
    (base / ".info" / "version").write_text("6.4.3-128\n")
    resource = base / "lib/llvm/lib/clang/19/lib/amdgcn/bitcode"
    legacy = base / "amdgcn/bitcode"
    for folder in (resource, legacy):
        folder.mkdir(parents=True)
    (resource / "ocml.bc").write_bytes(b"BC new")
    (legacy / "ocml.bc").write_bytes(b"BC old")
    (legacy / "ockl.bc").symlink_to(resource / "ockl.bc")
    (resource / "ockl.bc").write_bytes(b"BC")
    (base / "lib/llvm/bin").mkdir(parents=True)
    (base / "lib/llvm/bin/clang++.cfg").write_text("@rocm.cfg\n")
    stack, launch = stack_for(write_recipes, tmp_path, prefix=str(tmp_path / "p"),
                              base=str(base))
    env = launchers.launcher_env(launch, stack, stack.components["device"])
    assert env["CCACHE_EXTRAFILES"].split(":") == [
        f"{base}/lib/llvm/bin/clang++.cfg", f"{legacy}/ockl.bc", f"{legacy}/ocml.bc",
        f"{resource}/ocml.bc"]


def test_off_keeps_the_launcher_in_the_tree_and_disables_the_cache(write_recipes,
                                                                   tmp_path: Path) -> None:
    """The tree's launcher never depends on one run's --ccache: off passes through."""
    stack, launch = stack_for(write_recipes, tmp_path, ccache="off")
    assert launch.ccache is None and launch.ccache_state == "off (flag --ccache)"
    assert compiler_launcher_args(launch, stack.components["device"]) == [
        f"-DCMAKE_{lang}_COMPILER_LAUNCHER=/usr/bin/ccache" for lang in ("C", "CXX", "HIP")]
    assert launchers.launcher_env(launch, stack, stack.components["device"]) == \
        {"CCACHE_DISABLE": "1"}
    no_ccache, launch = stack_for(write_recipes, tmp_path, ccache="off", tools={})
    assert compiler_launcher_args(launch, no_ccache.components["device"]) == []
    stack, launch = stack_for(write_recipes, tmp_path, tools={})
    assert launch.ccache_state == "off (ccache is not installed)"
    said: list[str] = []
    assert launchtools.preflight_problems(launch, said.append) == []
    assert launchtools.ccache_install() in said[0]
    stack, launch = stack_for(write_recipes, tmp_path, tools={}, ccache="on")
    assert launchtools.preflight_problems(launch, said.append) == [
        ("--ccache on, but ccache is not installed", launchtools.ccache_install())]


def test_distcc_sits_behind_ccache_for_distributable_recipes_only(
        write_recipes, tmp_path: Path) -> None:
    stack, launch = stack_for(write_recipes, tmp_path, distcc="box1/8  box2:4000")
    host, device = stack.components["host"], stack.components["device"]
    env = launchers.launcher_env(launch, stack, host)
    assert env["CCACHE_PREFIX"] == "/usr/bin/distcc" and env["DISTCC_HOSTS"] == "box1/8 box2:4000"
    assert env["DISTCC_FALLBACK"] == "1" and env["DISTCC_LOG"].endswith("logs/host/distcc.log")
    assert "CCACHE_PREFIX" not in launchers.launcher_env(launch, stack, device)
    # HIP device compiles stay local: their launcher clears the prefix
    hip = [a for a in compiler_launcher_args(launch, host) if "HIP" in a]
    assert hip[0].endswith(";CCACHE_PREFIX=;/usr/bin/ccache")
    # ccache off: it passes each compile through, to distcc behind it (CCACHE_PREFIX)
    stack, launch = stack_for(write_recipes, tmp_path, distcc="box1/8", ccache="off")
    env = launchers.launcher_env(launch, stack, stack.components["host"])
    assert env["CCACHE_DISABLE"] == "1" and env["CCACHE_PREFIX"] == "/usr/bin/distcc"
    # without a ccache on the host, distcc is the launcher itself
    stack, launch = stack_for(write_recipes, tmp_path, distcc="box1/8", ccache="off",
                              tools={"distcc": "/usr/bin/distcc"})
    assert compiler_launcher_args(launch, stack.components["host"]) == [
        "-DCMAKE_C_COMPILER_LAUNCHER=/usr/bin/distcc",
        "-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/distcc"]
    assert compiler_launcher_args(launch, stack.components["device"]) == []


@pytest.mark.parametrize("hosts, slots", [
    ("box1/8 box2:4000/2", 10), ("box1 box2", 8), ("localhost/2 box1/3", 3),
    ("--randomize @ssh-box/6,lzo box2/1,cpp,lzo", 7), ("127.0.0.1:3632/2", 2),
    ("localhost 127.0.0.1", 4),
])
def test_remote_slots(hosts: str, slots: int) -> None:
    assert launchers.remote_slots(hosts) == slots


def test_a_bad_host_list_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="flag --distcc: '--jobs' is not a distcc host"):
        resolve({"distcc": "box1 --jobs"}, env={}, cwd=tmp_path)
    s = resolve({}, env={"ROCBUILD_DISTCC": "box1/4", "ROCBUILD_CCACHE": "OFF"}, cwd=tmp_path)
    assert (s.distcc, s.source("distcc"), s.ccache) == ("box1/4", "env ROCBUILD_DISTCC", "off")


def test_remote_slots_add_to_local_jobs_while_local_memory_allows(
        write_recipes, tmp_path: Path) -> None:
    stack, launch = stack_for(write_recipes, tmp_path, distcc="box1/8 box2/8")
    host = stack.components["host"]
    roomy = HostSnapshot(cpus=4, cpu_reason="4 CPUs", mem_available=32 * GIB, swap_free=0,
                         mem_reason="memory")
    counts = jobs_by_kind(host.recipe.resources, roomy, swap_weight=0.5, cap=None)
    split = launchers.split_jobs(launch, host, counts, roomy, swap_weight=0.5, cap=None)
    assert split["link"] == counts["link"]  # the link pool stays sized by local memory
    assert split["compile"].jobs == counts["compile"].jobs + 16
    assert "16 remote of 16 distcc slots" in split["compile"].reason
    tight = HostSnapshot(cpus=4, cpu_reason="4 CPUs", mem_available=12 * GIB, swap_free=0,
                         mem_reason="memory")
    counts = jobs_by_kind(host.recipe.resources, tight, swap_weight=0.5, cap=None)
    split = launchers.split_jobs(launch, host, counts, tight, swap_weight=0.5, cap=None)
    local = counts["compile"].jobs
    left = 12 * GIB - GIB - local * GIB - counts["link"].jobs * 4 * GIB
    assert split["compile"].jobs == local + left // (GIB // 2)
    assert "local memory for preprocessing" in split["compile"].reason
    capped = launchers.split_jobs(launch, host, counts, roomy, swap_weight=0.5, cap=6)
    assert capped["compile"].jobs == 6
    device = stack.components["device"]
    assert launchers.split_jobs(launch, device, counts, roomy, swap_weight=0.5, cap=None) == \
        counts


def test_stats_of_one_step_from_the_logs() -> None:
    stats_log = "# a.c\ncache_miss\ndirect_cache_miss\n# b.c\ndirect_cache_hit\n" \
                "# c.c\npreprocessed_cache_hit\n# x.o\ncalled_for_link\n"
    distcc_log = ("distcc[1] compile a.c on 10.0.0.2:3632/8 completed ok\n"
                  "distcc[2] Warning: failed to distribute b.c to box/2, running locally\n"
                  "distcc[2] compile b.c on localhost completed ok\n")
    stats = launchstats.parse_stats(stats_log, distcc_log)
    assert (stats.hits, stats.misses, stats.remote, stats.fallbacks) == (2, 1, 1, 1)
    assert stats.text() == "ccache 67% hits (2/3), distcc 1 remote, 1 fell back to local"


def test_observe_counts_only_this_steps_part_of_the_logs(write_recipes, tmp_path: Path) -> None:
    stack, launch = stack_for(write_recipes, tmp_path, distcc="box/2")
    comp = stack.components["host"]
    log = launchers.stats_log(launch.workdir, "host")
    log.parent.mkdir(parents=True)
    log.write_text("cache_miss\n" * 5)  # an earlier step's misses
    warnings: list[str] = []
    with launchstats.observe(launch, comp, warnings):
        with log.open("a") as f:
            f.write("direct_cache_hit\n" * 3 + "cache_miss\n")
        launchers.distcc_log(launch.workdir, "host").write_text(
            "distcc[9] Warning: failed to distribute x.c to box/2, running locally instead\n")
    assert launchstats.status_text(launch.workdir, "host") == \
        "ccache 75% hits (3/4), distcc 0 remote, 1 fell back to local"
    assert warnings and "1 compile(s) fell back to local" in warnings[0]
    assert launchstats.summary_lines(launch.workdir, ["host", "device"]) == [
        "host: ccache 75% hits (3/4), distcc 0 remote, 1 fell back to local"]


@pytest.mark.parametrize("path, version, level, fragment", [
    (None, None, "warn", "ccache is not installed"),
    ("/usr/bin/ccache", (3, 7, 12), "warn", "ccache 3.7.12 is older than 4.4"),
    ("/usr/bin/ccache", (4, 7, 5), "ok", "ccache 4.7.5"),
])
def test_doctor_says_when_ccache_is_missing_or_too_old(path, version, level, fragment) -> None:
    got_level, summary, fix = launchtools.ccache_check(path, version)
    assert got_level == level and fragment in summary
    assert (fix is not None and "apt-get install -y ccache" in fix) == (level != "ok")


def test_loading_a_stack_probes_nothing_and_the_run_resolves_launchers(
        write_recipes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """model/ runs nothing: load_stack leaves the launchers out, and the run's
    context resolves them from this host's programs when it starts."""
    from rocbuild.run.engine.build import BuildContext

    asked: list[str] = []
    monkeypatch.setattr(launchtools, "ccache_version",
                        lambda path, memo=None: asked.append(path) or (4, 7, 5))
    monkeypatch.setattr(launchtools.shutil, "which", TOOLS.get)
    folder = write_recipes(host=RECIPE)
    settings = resolve({"recipes": str(folder), "workdir": str(tmp_path / "w")}, env={},
                       cwd=tmp_path)
    stack = load_stack(settings)
    assert stack.launch is None and asked == []
    quiet = BuildContext(stack=stack, settings=settings, output=None)  # type: ignore[arg-type]
    assert quiet.stack.launch is None and asked == []  # a constructor probes nothing
    ctx = BuildContext.start(stack=stack, settings=settings, output=None)  # type: ignore[arg-type]
    assert ctx.stack.launch is not None and asked == ["/usr/bin/ccache"]
    assert ctx.stack.launch.ccache_state == "on (ccache 4.7.5)"
    launched = ctx.stack
    ctx.retarget(launched)
    assert ctx.stack is launched  # a stack with launchers keeps them
    ctx.retarget(stack)
    assert ctx.stack.launch == launched.launch


def test_a_debian_bases_bitcode_is_hashed(write_recipes, tmp_path: Path) -> None:
    """Debian's device-libs live in clang-21's resource folder without the lib/ step
    (/usr/lib/llvm-21/lib/clang/21/amdgcn/bitcode): an upgraded rocm-device-libs-21 must not
    be served stale objects (before: nothing of the base was hashed)."""
    root = tmp_path / "sid"
    base = root / "usr"
    bitcode = base / "lib/llvm-21/lib/clang/21/amdgcn/bitcode"
    bitcode.mkdir(parents=True)
    (bitcode / "ocml.bc").write_bytes(b"BC")
    (base / "include/hip").mkdir(parents=True)
    (base / "include/hip/hip_version.h").write_text(
        "#define HIP_VERSION_MAJOR 6\n#define HIP_VERSION_MINOR 4\n")
    stack, launch = stack_for(write_recipes, tmp_path, prefix=str(tmp_path / "p"),
                              base=str(base))
    env = launchers.launcher_env(launch, stack, stack.components["device"])
    assert env["CCACHE_EXTRAFILES"].split(":") == [f"{bitcode}/ocml.bc"]
