"""ccache by default and distcc for distributable recipes, with real ccache, real distccd
daemons on loopback ports and real builds of a small generated C project.

The project's compiler is a wrapper script named ``gcc`` that appends each real compile to a
file; ccache in front of it calls it only on a miss, so the file counts what the cache did
not serve.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocbuild.checks import launchtools
from tests.cli import run_cli, unstamped
from tests.conftest import require_tool
from tests.support.chain import one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SOURCES = ("one", "two", "three")


def project() -> dict[str, str]:
    files = {f"{name}.c": f"int {name}(void) {{ return {i}; }}\n"
             for i, name in enumerate(SOURCES, 1)}
    files["CMakeLists.txt"] = (
        "cmake_minimum_required(VERSION 3.20)\nproject(counted C)\n"
        f"add_library(counted STATIC {' '.join(f'{n}.c' for n in SOURCES)})\n"
        "install(TARGETS counted ARCHIVE DESTINATION lib)\n")
    return files


def counting_compiler(folder: Path, log: Path) -> Path:
    """A ``gcc`` that notes every compile of a project source, then runs the real one."""
    folder.mkdir(parents=True)
    script = folder / "gcc"
    real = shutil.which("gcc") or shutil.which("cc")
    script.write_text(f"#!/bin/sh\ncase \" $* \" in *' -E '*) ;; *' -c '*) "
                      f"echo \"$*\" >> {log} ;; esac\nexec {real} \"$@\"\n")
    script.chmod(0o755)
    return script


def user_ccache() -> Path:
    """The default compiler cache: one per user (conftest points XDG_CACHE_HOME at tmp)."""
    return Path(os.environ["XDG_CACHE_HOME"]) / "rocbuild" / "ccache"


def delete_build_tree(workdir: Path, name: str) -> None:
    shutil.rmtree(workdir / "build" / name)


def real_compiles(log: Path) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines()
               if any(f"{name}.c" in line for name in SOURCES))


@pytest.fixture
def counted(tmp_path: Path) -> tuple[list[str], Path]:
    for tool in ("git", "cmake", "ninja", "ccache", "gcc"):
        require_tool(tool)
    log = tmp_path / "compiles.log"
    wrapper = counting_compiler(tmp_path / "wrap", log)
    flags = one_component_stack(tmp_path, "counted", project(),
                                f'[cmake]\nargs = ["-DCMAKE_C_COMPILER={wrapper}"]\n')
    return flags, log


def test_a_build_from_a_deleted_build_tree_is_served_from_the_cache(
        counted: tuple[list[str], Path], tmp_path: Path) -> None:
    flags, log = counted
    plan = run_cli("plan", *flags, expect=0)
    assert "ccache" in plan.stdout and "auto: on (ccache" in plan.stdout, plan.explain()
    first = run_cli("build", *flags, "--no-verify", expect=0)
    assert real_compiles(log) == len(SOURCES), first.explain()
    cache = user_ccache()
    assert cache.is_dir(), "the cache is the user's, not the workdir's, by default"
    assert not (tmp_path / "work" / "cache" / "ccache").exists()
    launcher = (tmp_path / "work" / "build" / "counted" / "CMakeCache.txt").read_text()
    assert "CMAKE_C_COMPILER_LAUNCHER:" in launcher and "ccache" in launcher

    delete_build_tree(tmp_path / "work", "counted")
    second = run_cli("build", *flags, "--no-verify", expect=0)
    assert real_compiles(log) == len(SOURCES), "the rebuild ran the compiler again"
    assert "counted: ccache 100% hits (3/3)" in second.stdout, second.explain()
    status = run_cli("status", *flags, expect=0)
    assert "last compile of counted: ccache 100% hits (3/3)" in status.stdout, status.explain()

    # a compiler outside the prefix keeps ccache's own check (mtime and size): an upgrade
    # of the system's gcc gives it another mtime, and its objects are compiled again
    wrapper = tmp_path / "wrap" / "gcc"
    os.utime(wrapper, (time.time() + 100, time.time() + 100))
    delete_build_tree(tmp_path / "work", "counted")
    run_cli("build", *flags, "--no-verify", expect=0)
    assert real_compiles(log) == 2 * len(SOURCES), "a touched system compiler must not hit"

    wrapper.write_text(wrapper.read_text() + "# a compiler that changed\n")
    delete_build_tree(tmp_path / "work", "counted")
    run_cli("build", *flags, "--no-verify", expect=0)
    assert real_compiles(log) == 3 * len(SOURCES), "a changed compiler must not hit"


def test_a_second_workdir_compiles_from_the_first_ones_cache(
        counted: tuple[list[str], Path], tmp_path: Path) -> None:
    """Issue 32: the compiler cache is shared between workdirs (per user by default, or the
    folder --ccache-dir names), so a second workdir of the same recipes does not compile
    again; the per-step cache stats still count each workdir's own compiles."""
    flags, log = counted
    run_cli("build", *flags, "--no-verify", expect=0)
    assert real_compiles(log) == len(SOURCES)
    other = [*flags[:flags.index("--workdir")], "--workdir", str(tmp_path / "work2"),
             *flags[flags.index("--workdir") + 2:flags.index("--prefix")],
             "--prefix", str(tmp_path / "prefix2"), *flags[flags.index("--prefix") + 2:]]
    second = run_cli("build", *other, "--no-verify", expect=0)
    assert real_compiles(log) == len(SOURCES), second.explain()
    assert "counted: ccache 100% hits (3/3)" in second.stdout, second.explain()
    status = run_cli("status", *other, expect=0)
    assert "last compile of counted: ccache 100% hits (3/3)" in status.stdout, status.explain()

    # --ccache-dir: a cache of its own (here an empty one: everything compiles again there)
    mine = tmp_path / "team-cache"
    delete_build_tree(tmp_path / "work2", "counted")
    plan = run_cli("plan", *other, "--ccache-dir", str(mine), expect=0)
    assert f"cache {mine}" in " ".join(plan.stdout.split()), plan.explain()
    third = run_cli("build", *other, "--ccache-dir", str(mine), "--no-verify", expect=0)
    assert real_compiles(log) == 2 * len(SOURCES), third.explain()
    assert (mine / "ccache.conf").exists() or any(mine.iterdir()), "the cache went elsewhere"


def test_a_compiler_the_stack_rebuilds_hits_by_content(tmp_path: Path) -> None:
    """Issue 25: a compiler in the prefix (the stack's clang) is rebuilt with a new mtime
    and the same bytes: hashed by content (CCACHE_COMPILERCHECK=content), it still hits;
    changed bytes do not."""
    for tool in ("git", "cmake", "ninja", "ccache", "gcc"):
        require_tool(tool)
    log = tmp_path / "compiles.log"
    wrapper = counting_compiler(tmp_path / "prefix" / "lib" / "llvm" / "bin", log)
    flags = one_component_stack(tmp_path, "counted", project(),
                                '[cmake]\nargs = ["-DCMAKE_C_COMPILER='
                                '{{ prefix }}/lib/llvm/bin/gcc"]\n')
    build = ["build", *flags, "--no-verify", "--allow-existing-prefix"]
    run_cli(*build, expect=0)
    assert real_compiles(log) == len(SOURCES)
    os.utime(wrapper, (time.time() + 100, time.time() + 100))  # rebuilt, same content
    delete_build_tree(tmp_path / "work", "counted")
    again = run_cli(*build, expect=0)
    assert real_compiles(log) == len(SOURCES), again.explain()
    assert "counted: ccache 100% hits (3/3)" in again.stdout, again.explain()
    wrapper.write_text(wrapper.read_text() + "# a compiler that changed\n")
    delete_build_tree(tmp_path / "work", "counted")
    run_cli(*build, expect=0)
    assert real_compiles(log) == 2 * len(SOURCES), "a changed compiler must not hit"


def test_the_launchers_are_not_part_of_any_fingerprint(counted: tuple[list[str], Path]
                                                       ) -> None:
    flags, _ = counted
    run_cli("build", *flags, "--no-verify", expect=0)
    for toggle in (["--ccache", "off"], ["--distcc", "127.0.0.1:1/2"]):
        again = run_cli("build", *flags, *toggle, "--no-verify", expect=0)
        assert "steps are current; nothing to do" in again.stdout, again.explain()


def test_ccache_off_passes_every_compile_through(counted: tuple[list[str], Path],
                                                 tmp_path: Path) -> None:
    flags, log = counted
    plan = run_cli("plan", *flags, "--ccache", "off", expect=0)
    assert "off (flag --ccache)" in plan.stdout, plan.explain()
    assert "passes each compile straight through" in " ".join(plan.stdout.split())
    for _ in range(2):
        run_cli("build", *flags, "--ccache", "off", "--no-verify", expect=0)
        delete_build_tree(tmp_path / "work", "counted")
    assert real_compiles(log) == 2 * len(SOURCES)
    assert not (tmp_path / "work" / "cache" / "ccache").exists()
    assert not user_ccache().exists()


def edit_sources(tmp_path: Path, value: int) -> None:
    """The user's edit of every source in the checkout: the next build compiles them."""
    for i, name in enumerate(SOURCES):
        (tmp_path / "work" / "src" / "counted" / f"{name}.c").write_text(
            f"int {name}(void) {{ return {value + i}; }}\n")


def test_one_ccache_off_run_leaves_the_cache_on_for_the_next_build(
        counted: tuple[list[str], Path], tmp_path: Path) -> None:
    """The launcher is baked into CMakeCache.txt at configure, and a configure with
    --ccache off left none: every later build of that tree compiled without the cache."""
    flags, log = counted
    run_cli("build", *flags, "--ccache", "off", "--no-verify", expect=0)
    cache = (tmp_path / "work" / "build" / "counted" / "CMakeCache.txt").read_text()
    assert "CMAKE_C_COMPILER_LAUNCHER:UNINITIALIZED=/" in cache and "ccache" in cache, cache
    edit_sources(tmp_path, 10)
    first = run_cli("build", *flags, "--no-verify", expect=0)  # the cache is on again
    assert "counted: ccache 0% hits (0/3)" in first.stdout, first.explain()
    edit_sources(tmp_path, 20)
    run_cli("build", *flags, "--no-verify", expect=0)
    edit_sources(tmp_path, 10)  # back to what the cache holds
    again = run_cli("build", *flags, "--no-verify", expect=0)
    assert "counted: ccache 100% hits (3/3)" in again.stdout, again.explain()
    assert real_compiles(log) == 3 * len(SOURCES)


def path_without(tool: str, folder: Path) -> str:
    """A PATH of one folder holding a link to every program of this PATH but ``tool``."""
    folder.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        for program in sorted(Path(entry).glob("*")) if Path(entry).is_dir() else []:
            if program.name != tool and not (folder / program.name).exists():
                (folder / program.name).symlink_to(program)
    return str(folder)


def test_plan_and_status_name_a_tree_configured_without_the_cache(
        counted: tuple[list[str], Path], tmp_path: Path) -> None:
    """ccache installed after the build: the tree has no launcher until it is configured
    again, and plan and status say so (plan said "launchers: ccache for every component")."""
    flags, _ = counted
    run_cli("build", *flags, "--no-verify", env={"PATH": path_without("ccache", tmp_path / "p")},
            expect=0)
    for command in ("status", "plan"):
        shown = run_cli(command, *flags, env={"COLUMNS": "200"}, expect=0).stdout
        flat = " ".join(shown.split())
        assert ("compiler launcher: the build tree of counted was configured without the "
                "compiler cache: its compiles bypass ccache until it is configured again") \
            in flat, shown
        assert "`rocbuild clean counted` rebuilds it through the cache now" in flat
    doc = json.loads(run_cli("status", *flags, "--json", expect=0).stdout)
    assert doc["launcher_notes"] == {"counted": "configured without the compiler cache"}
    # with the cache off there is nothing to say
    off = run_cli("status", *flags, "--ccache", "off", expect=0).stdout
    assert "compiler launcher" not in off, off


def test_status_names_a_tree_whose_launcher_is_gone(counted: tuple[list[str], Path],
                                                    tmp_path: Path) -> None:
    flags, _ = counted
    own = tmp_path / "own-bin"
    own.mkdir()
    (own / "ccache").symlink_to(shutil.which("ccache") or "/usr/bin/ccache")
    run_cli("build", *flags, "--no-verify",
            env={"PATH": f"{own}{os.pathsep}{os.environ['PATH']}"}, expect=0)
    (own / "ccache").unlink()
    shown = run_cli("status", *flags, env={"COLUMNS": "200"}, expect=0).stdout
    assert (f"the build tree of counted was configured with the C compiler launcher "
            f"{own / 'ccache'}, which is gone: the compile fails until it is configured again "
            "(`rocbuild clean counted`, then build)") in " ".join(shown.split()), shown


def test_ccache_on_with_a_too_old_ccache_stops_before_building(
        counted: tuple[list[str], Path], tmp_path: Path) -> None:
    flags, log = counted
    old = tmp_path / "old-ccache"
    old.mkdir()
    (old / "ccache").write_text("#!/bin/sh\necho 'ccache version 3.7.12'\n")
    (old / "ccache").chmod(0o755)
    path = f"{old}{os.pathsep}{os.environ['PATH']}"
    result = run_cli("build", *flags, "--ccache", "on", env={"PATH": path}, expect=2)
    assert "--ccache on, but ccache 3.7.12 is older than 4.4" in result.output, result.explain()
    assert launchtools.ccache_install() in result.output
    assert real_compiles(log) == 0, "nothing may be built after a preflight refusal"
    result = run_cli("build", *flags, "--ccache", "sometimes", expect=2)
    assert "flag --ccache: 'sometimes' is not one of auto, on, off" in result.output
    doctor = run_cli("doctor", env={"PATH": path})
    assert "ccache 3.7.12 is older than 4.4" in doctor.output, doctor.explain()


# --- distcc -------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Daemon:
    port: int
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}/2"

    def jobs(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if "COMPILE_OK" in line]


def start_distccd(folder: Path) -> Daemon:
    port = free_port()
    log = folder / f"distccd-{port}.log"
    log.touch()
    log.chmod(0o666)  # distccd started by root drops to the distcc user before it logs
    argv = ["distccd", "--daemon", "--no-detach", "--port", str(port), "--listen", "127.0.0.1",
            "--allow", "127.0.0.1", "--log-file", str(log), "--log-level", "info", "-j", "2"]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    for _ in range(100):  # bounded: 10 s at most for the daemon to listen
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return Daemon(port, log, process)
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.1)
    process.kill()
    pytest.fail(f"distccd did not start on port {port}: {log.read_text()}")


@pytest.fixture
def distccd() -> Iterator[list[Daemon]]:
    """Two real distccd daemons on 127.0.0.1, each on its own port, allowing only 127.0.0.1."""
    for tool in ("distccd", "distcc", "git", "cmake", "ninja", "gcc"):
        require_tool(tool)
    folder = Path(tempfile.mkdtemp(prefix="rb-distccd-"))
    folder.chmod(0o755)  # readable by the distcc user the daemon runs as
    daemons: list[Daemon] = []
    try:
        daemons = [start_distccd(folder), start_distccd(folder)]
        yield daemons
    finally:
        for daemon in daemons:
            daemon.process.terminate()
            try:
                daemon.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.process.kill()
                daemon.process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def distributable_stack(tmp_path: Path) -> list[str]:
    # the system's gcc: distccd only runs compilers it knows (Debian's /usr/lib/distcc list)
    return one_component_stack(tmp_path, "counted", project(), "[cmake]\ndistribute = true\n")


def test_compiles_go_through_the_distcc_hosts(distccd: list[Daemon], tmp_path: Path) -> None:
    flags = distributable_stack(tmp_path)
    hosts = " ".join(d.host for d in distccd)
    plan = run_cli("plan", *flags, "--distcc", hosts, "--why", expect=0)  # the job arithmetic
    assert "4 remote slots for counted" in " ".join(plan.stdout.split()), plan.explain()
    assert "remote of 4 distcc slots" in plan.stdout
    result = run_cli("build", *flags, "--distcc", hosts, "--no-verify", expect=0)
    jobs = [line for d in distccd for line in d.jobs()]
    served = {name for name in SOURCES if any(f"{name}.c" in line for line in jobs)}
    assert served == set(SOURCES), result.explain() + "\n".join(jobs)
    assert "distcc 3 remote, 0 fell back to local" in result.stdout, result.explain()
    assert "fell back to local (a host" not in result.stdout


def test_hosts_that_are_down_fall_back_to_local(tmp_path: Path) -> None:
    for tool in ("distcc", "git", "cmake", "ninja", "gcc"):
        require_tool(tool)
    flags = distributable_stack(tmp_path)
    down = f"127.0.0.1:{free_port()}/2"  # nothing listens there
    result = run_cli("build", *flags, "--distcc", down, "--no-verify", expect=0)
    assert "distcc 0 remote, 3 fell back to local" in result.stdout, result.explain()
    assert f"3 compile(s) fell back to local (a host in '{down}' was down" in \
        " ".join(result.stdout.split())  # a warning wraps at the width


def test_a_host_that_refuses_the_compiler_falls_back_to_local(distccd: list[Daemon],
                                                              tmp_path: Path) -> None:
    log = tmp_path / "compiles.log"
    wrapper = counting_compiler(tmp_path / "wrap", log)  # not in distccd's compiler list
    flags = one_component_stack(tmp_path, "counted", project(),
                                f'[cmake]\ndistribute = true\nargs = ["-DCMAKE_C_COMPILER='
                                f'{wrapper}"]\n')
    result = run_cli("build", *flags, "--distcc", distccd[0].host, "--ccache", "off",
                     "--no-verify", expect=0)
    assert "distcc 0 remote, 3 fell back to local" in result.stdout, result.explain()
    assert real_compiles(log) == len(SOURCES)
    assert "cannot be an absolute path" in distccd[0].log.read_text()


def timing_launcher(folder: Path, log: Path) -> Path:
    """A launcher of the user's own (a timing wrapper, say): notes each compile, runs it."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "time-it"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> {log}\nexec \"$@\"\n")
    script.chmod(0o755)
    return script


def launched(log: Path) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if " -c " in f" {line} ")


def test_a_recipes_own_launcher_wins_over_ccache(tmp_path: Path) -> None:
    """Issue 21: a recipe that names its own CMAKE_C_COMPILER_LAUNCHER keeps it (rocbuild's
    ccache argument used to come after it and replace it); plan says which launcher it gets."""
    for tool in ("git", "cmake", "ninja", "ccache", "gcc"):
        require_tool(tool)
    log = tmp_path / "timed.log"
    wrapper = timing_launcher(tmp_path / "wrap", log)
    flags = one_component_stack(tmp_path, "counted", project(),
                                f'[cmake]\nargs = ["-DCMAKE_C_COMPILER_LAUNCHER={wrapper}"]\n')
    plan = json.loads(run_cli("plan", "--json", "--ccache", "on", *flags, expect=0).stdout)
    chosen = plan["components"][0]["launchers"]
    recipe = tmp_path / "recipes" / "counted.toml"
    assert chosen["C"] == {"launcher": str(wrapper), "source": f"recipe {recipe}"}
    assert chosen["CXX"]["source"] == "rocbuild" and "ccache" in chosen["CXX"]["launcher"]
    text = run_cli("plan", "--ccache", "on", *flags, expect=0).stdout
    assert f"C: {wrapper} (recipe {recipe})" in " ".join(text.split()), text
    run_cli("build", "--ccache", "on", *flags, "--no-verify", expect=0)
    assert launched(log) == len(SOURCES)
    cache = (tmp_path / "work" / "build" / "counted" / "CMakeCache.txt").read_text()
    assert f"CMAKE_C_COMPILER_LAUNCHER:UNINITIALIZED={wrapper}" in cache or \
        f"CMAKE_C_COMPILER_LAUNCHER:STRING={wrapper}" in cache, cache


def test_the_users_launcher_in_rocbuild_toml_replaces_ccache(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja", "ccache", "gcc"):
        require_tool(tool)
    log = tmp_path / "timed.log"
    wrapper = timing_launcher(tmp_path / "wrap", log)
    flags = one_component_stack(tmp_path, "counted", project())
    config = tmp_path / "rocbuild.toml"
    config.write_text(f'[rocbuild]\nlauncher = "{wrapper}"\n')
    plan = json.loads(run_cli("plan", "--json", *flags, cwd=tmp_path, expect=0).stdout)
    assert plan["components"][0]["launchers"]["C"] == {"launcher": str(wrapper),
                                                       "source": f"config {config}"}
    assert plan["settings"]["launcher"] == {"value": str(wrapper), "source": f"config {config}"}
    run_cli("build", *flags, "--no-verify", cwd=tmp_path, expect=0)
    assert launched(log) == len(SOURCES)


def test_a_launcher_the_recipe_names_in_its_env_wins_over_ccache(tmp_path: Path) -> None:
    """A recipe can name its launcher the other way CMake reads one: the environment variable
    CMAKE_<LANG>_COMPILER_LAUNCHER in its [env] (CMake's default for the cache entry). A -D
    of rocbuild's own on the command line would replace it, so rocbuild passes none for that
    language and plan names the recipe's."""
    for tool in ("git", "cmake", "ninja", "ccache", "gcc"):
        require_tool(tool)
    log = tmp_path / "timed.log"
    wrapper = timing_launcher(tmp_path / "wrap", log)
    flags = one_component_stack(tmp_path, "counted", project(),
                                f'[cmake]\n[env]\nCMAKE_C_COMPILER_LAUNCHER = "{wrapper}"\n')
    plan = json.loads(run_cli("plan", "--json", "--ccache", "on", *flags, expect=0).stdout)
    recipe = tmp_path / "recipes" / "counted.toml"
    chosen = plan["components"][0]["launchers"]
    assert chosen["C"] == {"launcher": str(wrapper), "source": f"recipe {recipe}"}, chosen
    assert chosen["CXX"]["source"] == "rocbuild"
    commands = run_cli("plan", "--commands", "--ccache", "on", *flags, expect=0).stdout
    assert "-DCMAKE_C_COMPILER_LAUNCHER=" not in commands, commands
    run_cli("build", "--ccache", "on", *flags, "--no-verify", expect=0)
    # every project source through the recipe's launcher (CMake's own compiler checks read
    # the variable too, so the log holds more than these)
    assert real_compiles(log) == len(SOURCES), log.read_text() if log.exists() else "no log"


def test_a_define_every_object_gets_recompiles_only_the_files_that_read_it(
        tmp_path: Path) -> None:
    """Issue 25: ccache hashes the preprocessed source, so a recipe's -D that reaches every
    object (GGML_SCHED_MAX_COPIES in ggml) recompiles only the files it changes; the rest hit
    (its depend mode would hash the command line and miss everywhere)."""
    for tool in ("git", "cmake", "ninja", "ccache", "gcc"):
        require_tool(tool)
    log = tmp_path / "compiles.log"
    wrapper = counting_compiler(tmp_path / "wrap", log)
    files = project()
    files["one.c"] = "int one(void) { return LEVEL; }\n"
    files["CMakeLists.txt"] = files["CMakeLists.txt"].replace(
        "add_library(", 'set(LEVEL 1 CACHE STRING "")\nadd_compile_definitions(LEVEL=${LEVEL})\n'
        "add_library(", 1)

    def recipe(level: int) -> str:
        return (f'[cmake]\nargs = ["-DCMAKE_C_COMPILER={wrapper}", "-DLEVEL={level}"]\n')

    flags = one_component_stack(tmp_path, "counted", files, recipe(1))
    run_cli("build", *flags, "--no-verify", expect=0)
    assert real_compiles(log) == len(SOURCES)
    (tmp_path / "recipes" / "counted.toml").write_text(
        (tmp_path / "recipes" / "counted.toml").read_text().replace('"-DLEVEL=1"', '"-DLEVEL=2"'))
    again = run_cli("build", *flags, "--no-verify", expect=0)
    assert real_compiles(log) == len(SOURCES) + 1, again.explain()  # one.c only
    assert "counted: ccache 67% hits (2/3)" in again.stdout, again.explain()


def test_a_compile_served_from_the_cache_keeps_the_cold_time_for_estimates(
        counted: tuple[list[str], Path], tmp_path: Path) -> None:
    """A compile ccache served in a moment left its moment as the estimate, so the next
    real compile read "ETA ?" (overran): estimates come from the last cold compile."""
    flags, _ = counted
    run_cli("build", *flags, "--no-verify", expect=0)
    stamp = tmp_path / "work" / "state" / "stamps" / "counted" / "compile.json"
    cold = json.loads(stamp.read_text())
    assert cold["cold_seconds"] == cold["attempts_seconds"] == cold["seconds"], cold
    delete_build_tree(tmp_path / "work", "counted")
    warm = run_cli("build", *flags, "--no-verify", expect=0)
    assert "counted: ccache 100% hits (3/3)" in warm.stdout, warm.explain()
    served = json.loads(stamp.read_text())
    assert served["cold_seconds"] == cold["cold_seconds"], (cold, served)
    assert served["attempts_seconds"] == served["seconds"]  # what this compile took


def test_a_compile_without_the_cache_shows_no_earlier_compiles_hits(
        counted: tuple[list[str], Path], tmp_path: Path) -> None:
    """After `build --ccache off` the summary and `status` showed the hit rate of the compile
    before it ("counted: ccache 100% hits (3/3)" for a run that never asked the cache)."""
    flags, _ = counted
    run_cli("build", *flags, "--no-verify", expect=0)
    edit_sources(tmp_path, 10)
    run_cli("build", *flags, "--no-verify", expect=0)
    edit_sources(tmp_path, 0)  # back to what the cache holds: the next compile would hit
    off = run_cli("build", *flags, "--ccache", "off", "--no-verify", expect=0)
    assert "compiled counted:" not in unstamped(off.stdout), off.explain()
    assert "hits" not in off.stdout, off.explain()
    status = run_cli("status", *flags, expect=0)
    assert "last compile of counted" not in status.stdout, status.explain()
    edit_sources(tmp_path, 10)  # the cache on again: its counts are shown again
    again = run_cli("build", *flags, "--no-verify", expect=0)
    assert "counted: ccache 100% hits (3/3)" in again.stdout, again.explain()
