"""A build system added in one module (tests/e2e/make_system.py, registered by the test):
a generated configure + Makefile project is built, installed, found current, rebuilt when
its options change, and an option its build files never read stops the run before
configure, all through the same steps, stamps and checks as a CMake component; and, beside
another build, its make takes its jobs from the run's job pool (a jobserver client)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocbuild.cli.main import main
from tests.cli import CliResult, assert_no_traceback, child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, make_repo
from tests.support.make_system import Make, registered

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROJECT = {
    "configure": textwrap.dedent("""\
        #!/bin/sh
        # writes config.mk into the current (build) folder: the prefix, the sources, VAR=value
        prefix=/usr/local
        : > config.mk.new
        for arg in "$@"; do
          case "$arg" in
            --prefix=*) prefix="${arg#--prefix=}" ;;
            *=*) echo "$arg" >> config.mk.new ;;
          esac
        done
        src=$(cd "$(dirname "$0")" && pwd)
        { echo "PREFIX=$prefix"; echo "SRC=$src"; cat config.mk.new; } > config.mk
        rm -f config.mk.new
        """),
    "Makefile": textwrap.dedent("""\
        include config.mk
        GREETING ?= hello
        hello: hello.o
        \t$(CC) -Wl,-rpath,'$(RUNPATH)' -o $@ hello.o
        hello.o: $(SRC)/hello.c config.mk
        \t$(LAUNCHER) $(CC) -DGREETING='"$(GREETING)"' -c -o $@ $(SRC)/hello.c
        install: hello
        \tmkdir -p $(DESTDIR)$(PREFIX)/bin
        \tcp hello $(DESTDIR)$(PREFIX)/bin/hello
        """),
    "hello.c": '#include <stdio.h>\nint main(void) { puts(GREETING); return 0; }\n',
}

# the child registers the test's build system, then runs rocbuild's CLI as `python -m
# rocbuild` would (a failure still reaches the user as the CLI prints it)
CHILD = ("import sys; from rocbuild.model import buildsystems; from tests.support.make_system "
         "import Make; buildsystems.register(Make()); from rocbuild.cli.main import main; "
         "sys.exit(main(sys.argv[1:]))")


@pytest.fixture
def make_registered() -> Iterator[None]:
    with registered(Make()):
        yield


def rocbuild_with_make(*args: str) -> CliResult:
    argv = [sys.executable, "-c", CHILD, *args]
    done = subprocess.run(argv, env=child_env(), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    result = CliResult(argv, done.returncode, done.stdout, done.stderr)
    assert_no_traceback(result)
    return result


def write_stack(tmp_path: Path, args: list[str]) -> list[str]:
    recipes = tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "stack.toml").write_text(textwrap.dedent("""\
        [stack]
        version = "1.0"
        targets = ["gfx906"]
        prefix = "/opt/unused"
        components = ["hello"]
        """))
    (recipes / "hello.toml").write_text(textwrap.dedent(f"""\
        summary = "a configure + make project"
        kind = "make"
        [source]
        git = "{FAKE_HOST}hello.git"
        ref = "v1"
        [make]
        args = {args!r}
        """).replace("'", '"'))
    return ["--recipes", str(recipes), "--workdir", str(tmp_path / "work"), "--prefix",
            str(tmp_path / "prefix"), "--mirror", f"{FAKE_HOST}={(tmp_path / 'repos').as_uri()}/"]


def test_a_make_project_builds_through_the_seam(tmp_path: Path, make_registered: None) -> None:
    for tool in ("git", "make", "cc", "ccache", "readelf"):
        require_tool(tool)
    make_repo(tmp_path / "repos", "hello", PROJECT)
    flags = write_stack(tmp_path, ["GREETING=hi {{ name }}"])
    hello = tmp_path / "prefix" / "bin" / "hello"

    result = rocbuild_with_make("build", *flags, "--no-verify")
    assert result.returncode == 0, result.explain()
    assert subprocess.run([str(hello)], capture_output=True, text=True).stdout == "hi hello\n"
    installed = (tmp_path / "work/build/hello/installed.txt").read_text().split()
    assert installed == [str(hello)]  # the seam's record of what the install put there
    work = tmp_path / "work"
    assert (work / "logs/hello/options.log").read_text().count("GREETING: read by hello")
    # the seam's contracts: RUNPATH relative to $ORIGIN, compiles through ccache
    dynamic = subprocess.run(["readelf", "-d", str(hello)], capture_output=True,
                             text=True).stdout
    assert "(RUNPATH)" in dynamic and "[$ORIGIN/../lib" in dynamic, dynamic
    assert "LAUNCHER=" in (work / "build/hello/config.mk").read_text()

    # current next time: the same stamps and output checks as for CMake
    result = rocbuild_with_make("build", *flags, "--no-verify")
    assert result.returncode == 0 and "▶" not in result.stdout, result.explain()
    status = rocbuild_with_make("status", *flags)
    assert status.returncode == 0 and "pending" not in status.stdout, status.explain()

    # a deleted build tree is compiled again, and ccache serves the object
    subprocess.run(["rm", "-rf", str(work / "build/hello")], check=True)
    result = rocbuild_with_make("build", *flags, "--no-verify")
    assert result.returncode == 0, result.explain()
    assert "hello: ccache 100% hits (1/1)" in result.stdout, result.explain()

    # a changed option reconfigures, rebuilds and reinstalls
    write_stack(tmp_path, ["GREETING=bye"])
    result = rocbuild_with_make("build", *flags, "--no-verify")
    assert result.returncode == 0, result.explain()
    assert [line.split("▶ ")[1] for line in result.stdout.splitlines() if "▶ " in line] == [
        "hello: configure", "hello: compile", "hello: install"]
    assert subprocess.run([str(hello)], capture_output=True, text=True).stdout == "bye\n"


def test_an_option_the_makefile_never_reads_stops_before_configure(
        tmp_path: Path, make_registered: None) -> None:
    for tool in ("git", "make", "cc"):
        require_tool(tool)
    make_repo(tmp_path / "repos", "hello", PROJECT)
    flags = write_stack(tmp_path, ["GREETNG=typo"])
    result = rocbuild_with_make("build", *flags, "--no-verify")
    assert result.returncode == 1, result.explain()
    assert "key 'make.args': GREETNG is never read by hello's build files" in result.stdout, \
        result.explain()
    assert not (tmp_path / "work/build/hello/config.mk").exists()  # nothing was configured


def test_without_its_module_the_kind_and_its_table_are_bad_input(tmp_path: Path) -> None:
    flags = write_stack(tmp_path, [])
    result = rocbuild_with_make("plan", *flags)
    assert result.returncode == 0, result.explain()  # registered in the child: known
    result = run_cli("plan", *flags)  # plain rocbuild has no "make" build system
    assert result.returncode == 2, result.explain()
    assert "hello.toml: key 'make' is not allowed in a recipe's top level" in result.stderr
    (tmp_path / "recipes/hello.toml").write_text(
        (tmp_path / "recipes/hello.toml").read_text().replace("[make]\nargs = []\n", ""))
    result = run_cli("plan", *flags)
    assert result.returncode == 2, result.explain()
    assert "key 'kind' must be one of cmake, source-only, got 'make'" in result.stderr


# 8 independent jobs, each writing "+ NAME" when it starts and "- NAME" when it ends (one
# O_APPEND write each: whole lines, in order). make starts job1 first: it marks that this
# build runs, then waits (at most 30 s) until the other component's build runs too, so the
# two compile at once whatever the order their steps run in, and the second to start must
# share the pool. Only job1 waits: the others keep the tokens flowing to the other build.
POOLED = {
    "configure": PROJECT["configure"],
    "Makefile": textwrap.dedent("""\
        include config.mk
        JOBS := $(addprefix job,1 2 3 4 5 6 7 8)
        .PHONY: all install $(JOBS)
        all: $(JOBS)
        $(JOBS):
        \t@if [ $@ = job1 ]; then touch $(LOG).$(NAME); i=0; while [ ! -e $(LOG).$(OTHER) ] \\
        \t  && [ $$i -lt 300 ]; do sleep 0.1; i=$$((i+1)); done; fi
        \t@echo "+ $(NAME)" >> $(LOG); sleep 0.3; echo "- $(NAME)" >> $(LOG)
        install:
        \tmkdir -p $(DESTDIR)$(PREFIX)/share && echo $(NAME) > $(DESTDIR)$(PREFIX)/share/$(NAME)
        """),
}
POOL = 3  # --jobs: the pool's size while both compile


def most_at_once(log: Path) -> tuple[int, dict[str, int]]:
    """The most jobs running at once, of both builds and of each."""
    running: dict[str, int] = {}
    peak_of: dict[str, int] = {}
    peak = 0
    for line in log.read_text().splitlines():
        sign, name = line.split()
        running[name] = running.get(name, 0) + (1 if sign == "+" else -1)
        peak_of[name] = max(peak_of.get(name, 0), running[name])
        peak = max(peak, sum(running.values()))
    return peak, peak_of


def test_a_make_build_beside_another_draws_its_jobs_from_the_pool(
        tmp_path: Path, make_registered: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two make components with --parallel 2 and a pool of 3: the first to compile runs with
    its own count (2, the CPUs), the second cannot also have its own and becomes the pool's
    client: make (4.3 here: through the bridge to the pipe form) runs its jobs in parallel as
    tokens come free, and the two builds never run more jobs than the pool holds."""
    for tool in ("git", "make"):
        require_tool(tool)
    # 2 CPUs for job sizing, whatever this host has: each build alone gets 2 jobs
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr("rocbuild.checks.hostload.cgroup_cpu_quota", lambda root: None)
    log, repos, recipes = tmp_path / "jobs.log", tmp_path / "repos", tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n'
        'components = ["left", "right"]\n')
    for name, other in (("left", "right"), ("right", "left")):
        make_repo(repos, name, POOLED)
        (recipes / f"{name}.toml").write_text(
            f'summary = "8 jobs"\nkind = "make"\n[source]\ngit = "{FAKE_HOST}{name}.git"\n'
            f'ref = "v1"\n[make]\nargs = ["NAME={name}", "OTHER={other}", "LOG={log}"]\n'
            '[resources]\ncompile_mem = "64MiB"\n')  # memory never limits the jobs here
    code = main(["build", "--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
                 "--prefix", str(tmp_path / "prefix"), "--parallel", "2", "--jobs", str(POOL),
                 "--mirror", f"{FAKE_HOST}={repos.as_uri()}/", "--no-verify"])
    out = capsys.readouterr().out
    assert code == 0, out
    clients = [name for name in ("left", "right") for line in out.splitlines()
               if f"  {name}: " in line and line.endswith("(jobserver)")]
    assert clients, out  # the second to compile at least
    peak, peak_of = most_at_once(log)
    assert peak <= POOL, (peak_of, log.read_text(), out)  # the client's jobs within the pool
    assert max(peak_of[name] for name in clients) > 1, (clients, log.read_text(), out)
