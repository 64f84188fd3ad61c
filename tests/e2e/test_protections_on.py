"""Protections that were silently switched off: another spelling of the install
prefix, CMake's own file writers, DESTDIR in the user's environment, and the run lock
followed through a link. Each case runs rocbuild as a child and checks what the user reads.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli import run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _stack(tmp_path: Path, args: list[str]) -> list[str]:
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "stack.toml").write_text(
        '[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\nprefix = "/opt/x"\n')
    quoted = ", ".join(f'"{a}"' for a in args)
    (folder / "a.toml").write_text('[source]\ngit = "https://example.invalid/a.git"\n'
                                   f'ref = "v1"\n[cmake]\nargs = [{quoted}]\n')
    return ["--recipes", str(folder), "--workdir", str(tmp_path / "work"),
            "--prefix", str(tmp_path / "prefix")]


# every spelling CMake 3.25 takes for the install prefix (and the staging prefix, which
# moves every install destination) must be refused as the plain one always was
PREFIX_SPELLINGS = [
    (["--install-prefix=/tmp/elsewhere"], "--install-prefix=/tmp/elsewhere"),
    (["--install-prefix", "/tmp/elsewhere"], "--install-prefix"),
    (["-D", "CMAKE_INSTALL_PREFIX=/tmp/elsewhere"], "CMAKE_INSTALL_PREFIX=/tmp/elsewhere"),
    (["-DCMAKE_INSTALL_PREFIX:PATH=/tmp/elsewhere"], "-DCMAKE_INSTALL_PREFIX:PATH="),
    (["-DCMAKE_INSTALL_PREFIX:STRING=/tmp/elsewhere"], "-DCMAKE_INSTALL_PREFIX:STRING="),
    (["-DCMAKE_STAGING_PREFIX=/tmp/elsewhere"], "-DCMAKE_STAGING_PREFIX="),
    (["-DCMAKE_STAGING_PREFIX:PATH=/tmp/elsewhere"], "-DCMAKE_STAGING_PREFIX:PATH="),
    (["-D", "CMAKE_STAGING_PREFIX=/tmp/elsewhere"], "CMAKE_STAGING_PREFIX="),
    (["-DCMAKE_INSTALL_PREFIX=/tmp/elsewhere"], "-DCMAKE_INSTALL_PREFIX="),  # held before
]


@pytest.mark.parametrize("args, shown", PREFIX_SPELLINGS, ids=[a[0] for a, _ in PREFIX_SPELLINGS])
def test_every_spelling_of_the_install_prefix_is_refused(tmp_path: Path, args: list[str],
                                                         shown: str) -> None:
    result = run_cli("plan", *_stack(tmp_path, args), expect=2, timeout=60)
    assert "cmake.args[0]" in result.stderr and shown in result.stderr, result.explain()
    assert "is set by rocbuild itself" in result.stderr, result.explain()
    assert "TIP: remove it from" in result.stderr, result.explain()


# CMake options that write a file of CMake's own wherever the argument says
WRITERS = [
    (["--trace", "--trace-redirect=/tmp/elsewhere/trace.txt"], "--trace-redirect", 1),
    (["--profiling-format=google-trace", "--profiling-output=/tmp/elsewhere/p.json"],
     "--profiling-output", 1),
    (["--help-full", "/tmp/elsewhere/help.txt"], "--help-full", 0),
    (["--help-variable", "CMAKE_CXX_FLAGS", "/tmp/x.txt"], "--help-variable", 0),
    (["--help-manual-list"], "--help-manual-list", 0),
]


@pytest.mark.parametrize("args, flag, index", WRITERS, ids=[w[1] for w in WRITERS])
def test_cmake_file_writers_are_refused(tmp_path: Path, args: list[str], flag: str,
                                        index: int) -> None:
    result = run_cli("plan", *_stack(tmp_path, args), expect=2, timeout=60)
    assert f"cmake.args[{index}]" in result.stderr and flag in result.stderr, result.explain()
    assert "TIP: remove it from" in result.stderr, result.explain()


@pytest.mark.parametrize("job_arg", ["-DCMAKE_INSTALL_PREFIX:PATH=/tmp/x{{ jobs.compile }}",
                                     "--trace-redirect=/tmp/t{{ jobs.link }}"])
def test_job_args_are_judged_as_the_args_are(tmp_path: Path, job_arg: str) -> None:
    """job_args go on the same configure command line; they were never checked."""
    flags = _stack(tmp_path, [])
    recipe = tmp_path / "recipes" / "a.toml"
    recipe.write_text(recipe.read_text() + f'job_args = ["{job_arg}"]\n')
    result = run_cli("plan", *flags, expect=2, timeout=60)
    assert "cmake.job_args[0]" in result.stderr, result.explain()


def test_plain_trace_and_options_still_load(tmp_path: Path) -> None:
    """The refusals are of the spellings above, not of every option that looks like them."""
    run_cli("plan", *_stack(tmp_path, ["--trace-expand", "-DCMAKE_INSTALL_LIBDIR=lib",
                                       "-DMY_INSTALL_PREFIX_X=1", "-D", "A=1"]),
            expect=0, timeout=60)




def test_destdir_of_the_users_shell_is_cleared_for_the_steps(small: list[str],
                                                            tmp_path: Path) -> None:
    """A packager's exported DESTDIR made CMake install everything under $DESTDIR/<prefix>
    while the prefix stayed empty and the build said success."""
    stage = tmp_path / "stage"
    result = run_cli("build", *small, "--no-verify", env={"DESTDIR": str(stage)}, expect=0,
                     timeout=300)
    assert (tmp_path / "prefix" / "share" / "a.txt").is_file(), result.explain()
    assert not stage.exists(), result.explain()
    log = (tmp_path / "work" / "logs" / "a" / "install.log").read_text()
    assert "DESTDIR" in log and "cleared" in log, log


def test_destdir_in_a_recipes_env_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "stack.toml").write_text(
        '[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\nprefix = "/opt/x"\n')
    (folder / "a.toml").write_text('[source]\ngit = "https://example.invalid/a.git"\n'
                                   'ref = "v1"\n[cmake]\n[env]\nDESTDIR = "/tmp/stage"\n')
    result = run_cli("plan", "--recipes", str(folder), "--workdir", str(tmp_path / "w"),
                     "--prefix", str(tmp_path / "p"), expect=2, timeout=60)
    assert 'env."DESTDIR"' in result.stderr and "a.toml" in result.stderr, result.explain()


def test_a_link_at_the_run_lock_is_never_written_through(small: list[str],
                                                         tmp_path: Path) -> None:
    """root wrote its pid into whatever file a link at <workdir>/state/lock pointed at."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    state = tmp_path / "work" / "state"
    state.mkdir(parents=True)
    (state / "lock").symlink_to(victim)
    result = run_cli("build", *small, "--no-verify", expect=2, timeout=300)
    assert victim.read_text() == "precious\n", result.explain()
    assert f"{state / 'lock'} is not a regular file" in result.stderr, result.explain()
    assert f"TIP: remove {state / 'lock'}" in result.stderr, result.explain()


def test_a_fifo_at_the_run_lock_is_one_message(small: list[str],
                                                           tmp_path: Path) -> None:
    state = tmp_path / "work" / "state"
    state.mkdir(parents=True)
    os.mkfifo(state / "lock")
    result = run_cli("build", *small, "--no-verify", expect=2, timeout=300)
    assert f"{state / 'lock'} is not a regular file" in result.stderr, result.explain()
    (state / "lock").unlink()  # what the message says to do
    run_cli("build", *small, "--no-verify", expect=0, timeout=300)


def test_links_and_fifos_at_step_logs_are_replaced_not_written_through(small: list[str],
                                                                        tmp_path: Path) -> None:
    """The run lock's neighbours: step logs were appended to through a link (root wrote the
    build's output into whatever file it pointed at) and a FIFO there blocked the step."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    logs = tmp_path / "work" / "logs" / "a"
    logs.mkdir(parents=True)
    (logs / "configure.log").symlink_to(victim)
    (logs / "fetch.log").symlink_to(tmp_path / "nowhere" / "new.txt")  # a dangling link
    os.mkfifo(logs / "install.log")
    run_cli("build", *small, "--no-verify", expect=0, timeout=300)
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "nowhere").exists()
    for name in ("configure.log", "fetch.log", "install.log"):
        log = logs / name
        assert log.is_file() and not log.is_symlink(), name
    assert "cmake" in (logs / "configure.log").read_text()


def test_a_link_at_the_shared_cache_lock_is_never_written_through(small: list[str],
                                                                  tmp_path: Path) -> None:
    run_cli("build", *small, "--no-verify", expect=0, timeout=300)
    store = tmp_path / "store"
    store.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (store / ".lock").symlink_to(victim)
    result = run_cli("cache", "push", *small, "--to", str(store), timeout=120)
    assert victim.read_text() == "precious\n", result.explain()
    assert result.returncode != 0 and str(store / ".lock") in result.output, result.explain()


def test_cmake_install_mode_of_the_users_shell_is_cleared(small: list[str],
                                                          tmp_path: Path) -> None:
    """CMAKE_INSTALL_MODE=ABS_SYMLINK made the install link into the workdir instead of
    copying: a prefix that breaks when the workdir is cleaned."""
    run_cli("build", *small, "--no-verify", env={"CMAKE_INSTALL_MODE": "ABS_SYMLINK"},
            expect=0, timeout=300)
    installed = tmp_path / "prefix" / "share" / "a.txt"
    assert installed.is_file() and not installed.is_symlink()
    log = (tmp_path / "work" / "logs" / "a" / "install.log").read_text()
    assert "CMAKE_INSTALL_MODE=ABS_SYMLINK of your environment is cleared" in log, log
