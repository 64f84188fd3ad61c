"""Bad input, bad state and machine faults: one message naming the file and key (exit 2), or
an automatic recovery, never a traceback. Every case runs rocbuild as a child.

The load-time table needs no git, cmake or network: ``plan`` loads and renders the recipes,
which is where every refusal of the table happens. The build-time cases (dangerous prefixes,
damaged state, a full disk) build a one-component project for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli import CliResult, assert_no_traceback, child_env, run_cli, unstamped
from tests.conftest import require_tool
from tests.support.chain import one_component_stack
from tests.support.mountns import mount_problem

pytestmark = pytest.mark.e2e

GOOD_RECIPE = """\
[source]
git = "https://example.invalid/a.git"
ref = "v1"
[cmake]
args = ["-DX=1"]
"""


@dataclass(frozen=True)
class Case:
    id: str
    recipe: str = GOOD_RECIPE  # recipes/a.toml
    flags: tuple[str, ...] = ()
    config: str | bytes | None = None  # ./rocbuild.toml
    setup: Callable[[Path], None] | None = None  # more damage inside the recipes folder
    names: tuple[str, ...] = ()  # what the message must name (besides exit 2)


def recipe(source: str = 'git = "https://example.invalid/a.git"\nref = "v1"\n',
           tail: str = "[cmake]\n") -> str:
    return "[source]\n" + source + tail


def _non_utf8(name: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        (folder / name).write_bytes(b'summary = "caf\xe9"\n' if name != "stack.toml" else
                                    b'[stack]\nversion = "6.4.3"\nname = "\xff"\n')
    return damage


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _fifo(folder: Path) -> None:
    os.mkfifo(folder / "pipe.toml")


def _patches(make: Callable[[Path], None]) -> Callable[[Path], None]:
    """Damage in ``patches/`` beside the recipes folder (``make`` gets that folder)."""
    def damage(folder: Path) -> None:
        patches = folder.parent / "patches"
        patches.mkdir(exist_ok=True)
        make(patches)
    return damage


def _series(name: str, body: str | None = "--- a/x\n+++ b/x\n") -> Callable[[Path], None]:
    def make(patches: Path) -> None:
        (patches / "a").mkdir()
        if body is None:
            os.mkfifo(patches / "a" / name)
        else:
            (patches / "a" / name).write_text(body)
    return _patches(make)


ARGS_200K = "[cmake]\nargs = [" + ", ".join(['"-DX=1"'] * 200_000) + "]\n"
CASES = [
    # git option and command injection (refused at load, before any git runs)
    Case("ref-option", recipe('git = "https://example.invalid/a.git"\n'
                              'ref = "--upload-pack=touch CANARY"\n'), names=("source.ref",)),
    Case("ref-metachar", recipe('git = "https://example.invalid/a.git"\nref = "v1;touch x"\n'),
         names=("source.ref",)),
    Case("ref-newline", recipe('git = "https://example.invalid/a.git"\nref = "v1\\nv2"\n'),
         names=("source.ref",)),
    Case("ref-dotdot", recipe('git = "https://example.invalid/a.git"\nref = "v1..v2"\n'),
         names=("source.ref",)),
    Case("ref-rendered-option", recipe('git = "https://example.invalid/a.git"\n'
                                       'ref = "{{ \'-\' }}-upload-pack=x"\n'),
         names=("source.ref",)),
    Case("url-option", recipe('git = "--upload-pack=touch CANARY"\nref = "v1"\n'),
         names=("source.git",)),
    Case("url-newline", recipe('git = "https://example.invalid/a.git\\n-x"\nref = "v1"\n'),
         names=("source.git",)),
    Case("url-ext", recipe('git = "ext::sh -c touch% CANARY"\nref = "v1"\n'),
         names=("source.git",)),
    Case("url-ext-rendered", recipe('git = "{{ \'ext\' }}::sh"\nref = "v1"\n'),
         names=("source.git",)),
    Case("url-metachar", recipe('git = "https://example.invalid/$(touch CANARY).git"\n'
                                'ref = "v1"\n'), names=("source.git",)),
    Case("mirror-option", flags=("--mirror", "https://example.invalid/=--upload-pack=evil"),
         names=("--mirror", "starts with '-'")),
    Case("mirror-ext", flags=("--mirror", "https://example.invalid/=ext::sh"),
         names=("--mirror", "ext::")),
    Case("mirror-in-config", config='[rocbuild]\nmirror = ["https://example.invalid/=ext::x"]\n',
         names=("rocbuild.toml",)),
    # NUL bytes and environment names
    Case("nul-install-file-key", recipe(tail='[cmake]\n[install.files]\n"a\\u0000b" = "x"\n'),
         names=("install.files",)),
    Case("nul-link-target", recipe(tail='[cmake]\n[install.links]\n"lib/x" = "a\\u0000b"\n'),
         names=("install.links",)),
    Case("nul-env-value", recipe(tail='[cmake]\n[env]\nCC = "gcc\\u0000x"\n'), names=("env.CC",)),
    Case("nul-arg", recipe(tail='[cmake]\nargs = ["-DA=\\u0000"]\n'), names=("cmake.args[0]",)),
    Case("env-key-equals", recipe(tail='[cmake]\n[env]\n"A=B" = "1"\n'), names=('env."A=B"',)),
    Case("env-key-empty", recipe(tail='[cmake]\n[env]\n"" = "1"\n'), names=("env.",)),
    Case("env-key-nul", recipe(tail='[cmake]\n[env]\n"A\\u0000" = "1"\n'), names=("env.",)),
    Case("pip-option", recipe(tail='[cmake]\n[python]\npackages = ["--index-url=http://x"]\n'),
         names=("python.packages[0]",)),
    Case("nul-wheel", recipe(tail='[cmake]\n[python]\nwheels = ["a\\u0000"]\n'),
         names=("python.wheels[0]",)),
    # paths that leave the prefix or the checkout
    Case("subdir-rendered-dotdot", recipe('git = "https://example.invalid/a.git"\nref = "v1"\n'
                                          'subdir = "{{ \'..\' }}/x"\n'),
         names=("source.subdir",)),
    Case("install-file-dot", recipe(tail='[cmake]\n[install.files]\n"." = "x"\n'),
         names=("install.files",)),
    Case("install-file-dotdot", recipe(tail='[cmake]\n[install.files]\n"../env.sh" = "x"\n'),
         names=("install.files",)),
    Case("link-target-outside", recipe(tail='[cmake]\n[install.links]\n"lib/x" = "../../etc"\n'),
         names=("install.links",)),
    Case("link-target-absolute", recipe(tail='[cmake]\n[install.links]\n"out" = "/tmp"\n'),
         names=("install.links",)),
    # each link inside when read alone; followed together, the second leaves
    Case("link-chain-outside", recipe(tail='[cmake]\n[install.links]\n"share/up" = ".."\n'
                                           '"share/esc" = "up/../.."\n'),
         names=('install.links."share/esc"', "through the recipe's other [install.links]")),
    Case("file-through-link-chain", recipe(tail='[cmake]\n[install.links]\n"share/up" = ".."\n'
                                                '"share/esc" = "up/.."\n[install.files]\n'
                                                '"share/esc/x.txt" = "x"\n'),
         names=("install.links",)),
    Case("install-prefix-outside", recipe(tail='[cmake]\ninstall_prefix = "/usr/local"\n'),
         names=("cmake.install_prefix",)),
    Case("install-prefix-dotdot", recipe(tail='[cmake]\ninstall_prefix = "{{ prefix }}/../x"\n'),
         names=("cmake.install_prefix",)),
    # templates that would run for hours or fill the memory
    Case("range-huge", recipe(tail='[cmake]\nargs = ["{{ range(10**9) | length }}"]\n'),
         names=("cmake.args[0]",)),
    Case("power-huge", recipe(tail='[cmake]\nargs = ["{{ 10**5000 }}"]\n'),
         names=("cmake.args[0]",)),
    Case("power-tower", recipe(tail='[cmake]\nargs = ["{{ 10**10**10 }}"]\n'),
         names=("cmake.args[0]",)),
    Case("repeat-huge", recipe(tail='[cmake]\nargs = ["{{ \'x\' * 10**12 }}"]\n'),
         names=("cmake.args[0]",)),
    Case("division-by-zero", recipe(tail='[cmake]\nargs = ["{{ 1 // 0 }}"]\n'),
         names=("cmake.args[0]",)),
    Case("args-200k", recipe(tail=ARGS_200K), names=("cmake.args",)),
    # sizes and numbers
    Case("compile-mem-zero", recipe(tail='[cmake]\n[resources]\ncompile_mem = "0B"\n'),
         names=("resources.compile_mem",)),
    Case("cpu-hours-nan", recipe(tail="[cmake]\n[resources]\ncpu_hours = nan\n"),
         names=("resources.cpu_hours",)),
    # files that are not UTF-8 text, or not files
    Case("recipe-not-utf8", setup=_non_utf8("b.toml"), names=("b.toml", "UTF-8")),
    Case("stack-not-utf8", setup=_non_utf8("stack.toml"), names=("stack.toml", "UTF-8")),
    Case("config-not-utf8", config=b'[rocbuild]\njobs = "\xff"\n',
         names=("rocbuild.toml", "UTF-8")),
    Case("name-like-a-leftover", setup=lambda folder: _write(folder / "b.old.toml", GOOD_RECIPE),
         names=("b.old.toml", "'.old'")),
    Case("fifo-recipe", setup=_fifo, names=("pipe.toml", "not a regular file")),
    Case("config-unknown-table", config="[rocbuild]\njobs = 2\n[rocbuidl]\nparallel = 2\n",
         names=("rocbuild.toml", "'rocbuidl'", "Did you mean 'rocbuild'")),
    Case("config-unknown-subtable", config="[rocbuild]\njobs = 2\n[rocbuild.job]\nx = 1\n",
         names=("rocbuild.toml", "'job'", "Did you mean 'jobs'")),
    # patches/ that is not a series: never skipped, never blocking
    Case("patches-a-file", setup=_patches(lambda p: (p / "a").write_text("--- a/x\n")),
         names=("patches/a is a file, not a folder",)),
    Case("patches-fifo", setup=_series("0001-x.patch", None),
         names=("0001-x.patch is a FIFO",)),
    Case("patches-stray-file", setup=_series("notes.txt"),
         names=("notes.txt is a file without the .patch suffix",)),
    Case("patches-empty", setup=_series("0001-x.patch", ""), names=("0001-x.patch is empty",)),
    Case("patches-unknown-component",
         setup=_patches(lambda p: (p / "aa").mkdir()),
         names=("patches/aa is named after no recipe", "Did you mean 'a'")),
    Case("patches-top-level-file",
         setup=_patches(lambda p: (p / "0001-x.patch").write_text("x")),
         names=("0001-x.patch is a file; patches/ holds one folder per component",)),
    # jinja2's globals and what grows a string in one call; a loop that never ends
    *(Case(f"global-{name}", recipe(tail=f'[cmake]\nargs = ["{{{{ {name}{call} }}}}"]\n'),
           names=("cmake.args[0]", f"'{name}' is undefined"))
      for name, call in (("lipsum", "(10**6)"), ("cycler", "(1, 2)"), ("joiner", "()"),
                         ("namespace", "(a=1)"))),
    Case("format-width", recipe(tail="[cmake]\nargs = [\"{{ '%999999999d' % 1 }}\"]\n"),
         names=("cmake.args[0]", "asks for a width")),
    Case("str-format-width",
         recipe(tail="[cmake]\nargs = [\"{{ '{:999999999}'.format(1) }}\"]\n"),
         names=("cmake.args[0]", "asks for a width")),
    Case("center-huge", recipe(tail="[cmake]\nargs = [\"{{ 'x' | center(10**9) }}\"]\n"),
         names=("cmake.args[0]", "a width of 1000000000")),
    # 50 MB each without their bounds: then caught only after building it, by another rule
    Case("replace-huge",
         recipe(tail="[cmake]\nargs = [\"{{ ('x' * 1000).replace('x', 'y' * 50000) }}\"]\n"),
         names=("cmake.args[0]", "the replacement would build more than")),
    Case("join-huge",
         recipe(tail="[cmake]\nargs = [\"{{ ('x' * 1000).join(['y'] * 50000) }}\"]\n"),
         names=("cmake.args[0]", "joining would build more than")),
    Case("join-filter-huge",
         recipe(tail="[cmake]\nargs = [\"{{ (['y'] * 50000) | join('x' * 1000) }}\"]\n"),
         names=("cmake.args[0]", "joining would build more than")),
    Case("loop-forever", recipe(tail='[cmake]\nargs = ["{% for i in range(100000) %}{% for j in '
                                     'range(100000) %}{% endfor %}{% endfor %}"]\n'),
         names=("cmake.args[0]", "ran longer than")),
    Case("output-huge", recipe(tail="[cmake]\nargs = [\"{% for i in range(100000) %}"
                                    "{{ 'x' * 1000 }}{% endfor %}\"]\n"),
         names=("cmake.args[0]", "renders to more than")),
    # rocbuild's own prefix files, and CMake modes that are no configure
    Case("claims-env-sh", recipe(tail='[cmake]\n[install.files]\n"env.sh" = "x"\n'),
         names=('install.files."env.sh"', "rocbuild's own file")),
    Case("claims-build-info",
         recipe(tail='[cmake]\n[install.files]\n".rocbuild/build-info.json" = "{}"\n'),
         names=('install.files.".rocbuild/build-info.json"', "rocbuild's own file")),
    Case("claims-modulefiles", recipe(tail='[cmake]\n[install.links]\n"modulefiles" = "share"\n'),
         names=('install.links."modulefiles"', "rocbuild's own file")),
    Case("cmake-script-mode", recipe(tail='[cmake]\nargs = ["-P", "x.cmake"]\n'),
         names=("cmake.args[0]", "another mode (-P)")),
    # counts a host cannot run
    Case("parallel-huge", flags=("--parallel", "1000000000"),
         names=("flag --parallel: 1000000000 is more than this host can use",)),
    Case("jobs-huge", flags=("--jobs", "99999999"), names=("flag --jobs: 99999999",)),
    # the per-host bound, not the total of remote slots (which 100000 is over too)
    Case("distcc-slots-huge", flags=("--distcc", "box/100000"),
         names=("flag --distcc: 'box/100000' is more than this host can use: at most 1024",)),
    Case("parallel-in-config", config="[rocbuild]\nparallel = 1000000000\n",
         names=("rocbuild.toml", "is more than this host can use")),
    # workdirs that cannot be one
    Case("workdir-proc", flags=("--workdir", "/proc/self"), names=("--workdir", "/proc")),
    Case("workdir-a-file", flags=("--workdir", "/etc/hostname"), names=("--workdir",
                                                                         "is a file")),
]


def _write_case(tmp_path: Path, case: Case) -> list[str]:
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "stack.toml").write_text(
        '[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\nprefix = "/opt/x"\n')
    (folder / "a.toml").write_text(case.recipe)
    if case.setup:
        case.setup(folder)
    if case.config is not None:
        config = tmp_path / "rocbuild.toml"
        if isinstance(case.config, bytes):
            config.write_bytes(case.config)
        else:
            config.write_text(case.config)
    return ["--recipes", str(folder), "--workdir", str(tmp_path / "work"),
            "--prefix", str(tmp_path / "prefix"), *case.flags]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_message(case: Case, tmp_path: Path) -> None:
    flags = _write_case(tmp_path, case)
    result = run_cli("plan", *flags, cwd=tmp_path, expect=2, timeout=60)
    message = result.stderr
    assert message.startswith("rocbuild: error: "), result.explain()
    assert len(message) < 3000, result.explain()  # one message, not a dump
    for name in case.names:
        assert name in message, result.explain()
    if case.recipe != GOOD_RECIPE:
        assert "a.toml" in message, result.explain()
    assert not (tmp_path / "CANARY").exists()


def test_the_good_recipe_of_the_table_loads(tmp_path: Path) -> None:
    """The table's base case passes, so each refusal comes from the one thing each case breaks."""
    run_cli("plan", *_write_case(tmp_path, Case("good")), cwd=tmp_path, expect=0)


# --- build time: prefixes, damaged state, machine faults ----------------------------------


def _with_prefix(flags: list[str], prefix: str) -> list[str]:
    flags = list(flags)
    flags[flags.index("--prefix") + 1] = prefix
    return flags


@pytest.mark.parametrize("prefix", ["/", "/usr", "HOME", "/usr/include", "/usr/local/lib",
                                    "/usr/sbin", "/etc/ssl", "/var/lib", "/opt", "HOME/.."])
def test_system_and_home_prefixes_are_refused(small: list[str], tmp_path: Path,
                                              prefix: str) -> None:
    home = tmp_path / "home"
    (home / "env.sh").write_text("# the user's own file\n")
    flags = _with_prefix(small, prefix.replace("HOME", str(home)))
    result = run_cli("build", *flags, "--no-verify", "--allow-existing-prefix",
                     env={"HOME": str(home)}, expect=2)
    assert "installs only into a folder of its own" in result.stderr, result.explain()
    assert (home / "env.sh").read_text() == "# the user's own file\n"
    assert not (tmp_path / "work" / "src").exists()  # refused before anything ran


@pytest.mark.parametrize("where", ["prefix", "prefix/work"])
def test_a_workdir_in_the_prefix_is_refused(small: list[str], tmp_path: Path,
                                            where: str) -> None:
    flags = list(small)
    flags[flags.index("--workdir") + 1] = str(tmp_path / where)
    result = run_cli("build", *flags, "--no-verify", expect=2)
    assert f"--workdir {tmp_path / where} is " in result.stderr, result.explain()
    assert "the prefix" in result.stderr and not (tmp_path / "prefix").exists()


def test_a_recipe_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    """Windows editors write a UTF-8 BOM; TOML has no use for it and it carries nothing in
    UTF-8 (never "Invalid statement (line 1, column 1)")."""
    case = Case("bom", recipe="\ufeff" + GOOD_RECIPE)
    flags = _write_case(tmp_path, case)
    (tmp_path / "recipes" / "stack.toml").write_text(
        "\ufeff" + (tmp_path / "recipes" / "stack.toml").read_text())
    plan = json.loads(run_cli("plan", *flags, "--json", cwd=tmp_path, expect=0).stdout)
    assert "-DX=1" in plan["components"][0]["configure_args"]


def test_cmake_code_files_are_shown_in_the_plan(tmp_path: Path) -> None:
    case = Case("code", recipe=recipe(tail='[cmake]\nargs = ["-C", "init.cmake", '
                                      '"-DCMAKE_TOOLCHAIN_FILE=/x/tc.cmake"]\n'))
    flags = _write_case(tmp_path, case)
    shown = run_cli("plan", *flags, cwd=tmp_path, expect=0).stdout
    assert "CMake code the recipes load" in shown
    assert "-C init.cmake" in shown and "-DCMAKE_TOOLCHAIN_FILE=/x/tc.cmake" in shown
    plan = json.loads(run_cli("plan", *flags, "--json", cwd=tmp_path, expect=0).stdout)
    assert plan["components"][0]["cmake_code"] == ["-C init.cmake",
                                                   "-DCMAKE_TOOLCHAIN_FILE=/x/tc.cmake"]


@pytest.mark.slow
def test_existing_folder_needs_the_flag(small: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    (prefix / "env.sh").write_text("mine\n")
    result = run_cli("build", *small, "--no-verify", expect=2)
    assert f"--prefix {prefix} already holds files rocbuild did not install (env.sh)" in \
        result.stderr and "--allow-existing-prefix" in result.stderr, result.explain()
    assert not (tmp_path / "work" / "src").exists()
    run_cli("build", *small, "--no-verify", "--allow-existing-prefix", expect=0)
    assert (prefix / "share" / "a.txt").is_file() and (prefix / ".rocbuild").is_dir()
    run_cli("build", *small, "--no-verify", expect=0)  # the prefix is rocbuild's now


@pytest.mark.slow
def test_damaged_state_is_recovered(small: list[str], tmp_path: Path) -> None:
    """A garbage doit DB, a corrupt build-info and a cap of 0 jobs are each recovered from,
    and the stamps keep everything that was built (nothing runs again)."""
    run_cli("build", *small, "--no-verify", expect=0)
    state = tmp_path / "work" / "state"
    (state / "doit.sqlite").write_bytes(b"this is not a database" * 100)
    info = tmp_path / "prefix" / ".rocbuild" / "build-info.json"
    info.write_text("{ not json")
    (state / "caps").mkdir(exist_ok=True)
    (state / "caps" / "a.json").write_text('{"jobs": 0}')
    (state / "stamps" / "a" / ".install.json.4242.tmp").write_text("{")
    result = run_cli("build", *small, "--no-verify", expect=0)
    assert "doit's DB" in result.output and "started a new one" in result.output
    assert "not a rocbuild build-info file" in result.output  # the warning
    assert "▶" not in result.stdout, result.explain()  # stamps are the truth: nothing re-ran
    assert '"complete": true' in info.read_text()
    assert not (state / "stamps" / "a" / ".install.json.4242.tmp").exists()
    # a cap of 0 jobs is ignored: a forced rebuild compiles with a sane job count
    (state / "stamps" / "a" / "compile.json").unlink()
    result = run_cli("build", *small, "--no-verify", expect=0)
    assert "▶ a: compile" in result.stdout, result.explain()
    jobs = json.loads((state / "stamps" / "a" / "compile.json").read_text())["jobs"]
    assert isinstance(jobs, int) and jobs >= 1, result.explain()
    assert "cap 0" not in result.stdout, result.explain()  # no nonsense figure either


@pytest.mark.slow
def test_fifos_in_the_state_and_the_prefix_never_block(small: list[str], tmp_path: Path) -> None:
    """rocbuild opens nothing that is not a regular file (a FIFO named like a file
    rocbuild reads would wait for a writer forever): a stamp, build-info and the lock's pid file
    replaced by FIFOs are treated as damaged, and the run goes on."""
    run_cli("build", *small, "--no-verify", expect=0)
    state = tmp_path / "work" / "state"
    for path in (state / "stamps" / "a" / "install.json",
                 tmp_path / "prefix" / ".rocbuild" / "build-info.json"):
        path.unlink()
        os.mkfifo(path)
    result = run_cli("build", *small, "--no-verify", expect=0, timeout=120)
    assert "▶ a: install" in result.stdout, result.explain()
    assert (state / "stamps" / "a" / "install.json").is_file()
    status = run_cli("status", *small, expect=0, timeout=120)
    assert "everything is built and current" in status.stdout, status.explain()


@pytest.mark.slow
def test_fifos_at_the_prefix_registry_and_the_workdirs_configurations_never_block(
        small: list[str], tmp_path: Path) -> None:
    """The prefix registry and the workdir's configurations are read like every other state
    file: a FIFO at the user's prefix registry or at the workdir's configs.json is no record,
    and nothing waits on it."""
    run_cli("build", *small, "--no-verify", expect=0)
    registry = Path(os.environ["XDG_STATE_HOME"]) / "rocbuild" / "prefixes.json"
    configs = tmp_path / "work" / "state" / "configs.json"
    for path in (registry, configs):
        assert path.is_file(), path
        path.unlink()
        os.mkfifo(path)
    run_cli("status", *small, expect=0, timeout=60)
    run_cli("prefixes", *small, expect=0, timeout=60)
    run_cli("build", *small, "--no-verify", expect=0, timeout=120)


needs_mount = pytest.mark.skipif(mount_problem() is not None, reason=mount_problem() or "")


def test_the_mount_skip_reason_says_what_failed_for_root(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Root in a chroot was told "needs a private mount namespace (root or userns)": the
    reason names the failure and, for root, that the container or chroot forbids it."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "unshare").write_text("#!/bin/sh\necho 'unshare: unshare failed: Operation not "
                                  "permitted' >&2\nexit 1\n")
    (fake / "unshare").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    mount_problem.cache_clear()
    try:
        reason = mount_problem()
    finally:
        mount_problem.cache_clear()
    assert reason is not None and "Operation not permitted" in reason, reason
    assert ("running as root" if os.geteuid() == 0 else "needs root") in reason, reason
    assert "(root or userns)" not in reason


def _run_in_mount(script: str, args: list[str], cwd: Path) -> CliResult:
    """rocbuild in a private mount namespace, after ``script`` mounted what the case needs."""
    argv = [sys.executable, "-m", "rocbuild", *args]
    quoted = " ".join(f"'{a}'" for a in argv)
    done = subprocess.run(["unshare", "-m", "sh", "-ec", f"{script}\nexec {quoted}"], cwd=cwd,
                          env=child_env(), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    result = CliResult(argv, done.returncode, done.stdout, done.stderr)
    assert_no_traceback(result)
    return result


@needs_mount
def test_full_disk_under_the_workdir_is_one_message(small: list[str], tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    fill = textwrap.dedent(f"""\
        mount -t tmpfs -o size=4m tmpfs {work}
        dd if=/dev/zero of={work}/filler bs=64k 2>/dev/null || true""")
    result = _run_in_mount(fill, ["build", *small, "--no-verify"], tmp_path)
    assert result.returncode == 1, result.explain()
    assert "no space left on the device" in result.output, result.explain()
    assert "then run the same command again" in result.output


@needs_mount
def test_read_only_prefix_is_reported_as_such(small: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    script = f"mount -t tmpfs -o size=1m,ro tmpfs {prefix}"
    result = _run_in_mount(script, ["build", *small, "--no-verify"], tmp_path)
    assert result.returncode == 2, result.explain()
    assert f"the prefix {prefix} is on a read-only file system" in result.stderr
    assert "sudo chown" not in result.stderr


@needs_mount
def test_a_full_prefix_is_named_in_the_failure_message(tmp_path: Path) -> None:
    """The summary (and status, and --json) said only "cmake exited with 1": the
    failure message now carries the tool's "No space left on device", the path and the room
    left there."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    files = {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
                               "install(FILES a.txt big.txt DESTINATION share)\n",
             "a.txt": "a\n", "big.txt": "x" * (3 << 20)}
    flags = one_component_stack(tmp_path, "a", files, '[cmake]\n[resources]\ndisk = "1KiB"\n')
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    result = _run_in_mount(f"mount -t tmpfs -o size=2m tmpfs {prefix}",
                           ["build", *flags, "--no-verify", "--quiet"], tmp_path)
    assert result.returncode == 1, result.explain()
    lines = unstamped(result.stdout).splitlines()  # a build's piped output: a log
    # the message (one line in a pipe; wrapped at spaces on a terminal) up to the log line
    after = lines[lines.index("FAILED a: install") + 1:]
    message = " ".join(" ".join(after[:next(i for i, line in enumerate(after)
                                             if line.startswith("log:"))]).split())
    assert message.startswith("a: install failed: cmake exited with 1: No space left on device "
                              f"while writing {prefix / 'share' / 'big.txt'} (the file system "
                              f"of {prefix / 'share'} has "), result.explain()
    status = run_cli("status", *flags, "--json", expect=1).stdout  # the record keeps it
    assert "No space left on device while writing" in status


FILLS_THE_DISK = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
                      # the build itself fills the workdir's file system mid-step
                      "add_custom_target(fill ALL COMMAND sh ${CMAKE_SOURCE_DIR}/fill.sh)\n"
                      "install(FILES a.txt DESTINATION share)\n",
    "a.txt": "a\n",
}
# the build fills the disk once (the marker lives outside the small file system)
FILL_ONCE = "[ -e {marker} ] && exit 0\ntouch {marker}\ndd if=/dev/zero of=big bs=64k 2>/dev/null\n"


@needs_mount
def test_disk_filling_during_a_step_is_one_failure_and_resumes(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    files = {**FILLS_THE_DISK, "fill.sh": FILL_ONCE.format(marker=tmp_path / "filled")}
    flags = one_component_stack(tmp_path, "a", files,
                                "[cmake]\n[resources]\ndisk = \"1MiB\"\nsource_disk = \"1MiB\"\n")
    work = tmp_path / "work"
    work.mkdir()
    argv = " ".join(f"'{a}'" for a in [sys.executable, "-m", "rocbuild", "build", *flags,
                                        "--no-verify"])
    script = textwrap.dedent(f"""\
        mount -t tmpfs -o size=8m tmpfs {work}
        set +e
        {argv} >{tmp_path}/first.out 2>&1; echo $? >{tmp_path}/first.rc
        rm -f {work}/build/a/big
        {argv} >{tmp_path}/second.out 2>&1; echo $? >{tmp_path}/second.rc""")
    subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=tmp_path, env=child_env(),
                   check=True, timeout=300, stdin=subprocess.DEVNULL)
    first = (tmp_path / "first.out").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "1", first
    assert "Traceback" not in first, first
    # ninja or rocbuild meets the full disk first: either way one failure naming the cause
    assert "no space left on" in first.lower(), first
    assert "run the same command again" in first or "continues where it stopped" in first, first
    second = (tmp_path / "second.out").read_text()
    assert (tmp_path / "second.rc").read_text().strip() == "0", second
    assert (tmp_path / "prefix" / "share" / "a.txt").is_file()


@pytest.mark.parametrize("variable, value, message", [
    ("ROCBUILD_JOBS", "abc", "rocbuild: error: env ROCBUILD_JOBS: 'abc' is not a whole number"),
    ("ROCBUILD_RECIPES", "{bad}", "invalid TOML"),
])
def test_plain_doit_reports_bad_input_like_the_cli(tmp_path: Path, variable: str, value: str,
                                                   message: str) -> None:
    """dodo.py loads the same settings and recipes: one message and its TIP (errors.report),
    exit 2, no traceback from doit's loader."""
    bad = tmp_path / "recipes"
    bad.mkdir()
    (bad / "stack.toml").write_text("components = [\n")
    repo = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "doit", "list"]
    done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=120,
                          env=child_env({variable: value.replace("{bad}", str(bad))}))
    result = CliResult(argv, done.returncode, done.stdout, done.stderr)
    assert_no_traceback(result)
    assert result.returncode == 2, result.explain()
    lines = result.stderr.splitlines()
    assert message in lines[0] and lines[0].startswith("rocbuild: error: "), result.explain()
    assert lines[1].startswith("TIP: ") and len(lines) == 2, result.explain()


@needs_mount
def test_preflight_sums_workdir_and_prefix_on_one_disk(tmp_path: Path) -> None:
    """Preflight checked the workdir and the prefix each against all the free space: on one
    10 MiB disk that holds either (8 MiB of build, 2 MiB of install) but not both, it passed
    and the night failed later. It now sums them per filesystem, as doctor does."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "a", {"CMakeLists.txt": "project(a NONE)\n"},
                                '[cmake]\n[resources]\ndisk = "8MiB"\nsource_disk = "1KiB"\n')
    disk = tmp_path / "disk"
    disk.mkdir()
    where = ["--workdir", str(disk / "work"), "--prefix", str(disk / "prefix")]
    result = _run_in_mount(f"mount -t tmpfs -o size=10m tmpfs {disk}",
                           ["build", *flags, *where, "--no-verify"], tmp_path)
    assert result.returncode == 2, result.explain()
    assert "preflight found 1 problem" in result.stderr, result.explain()
    assert f"workdir {disk / 'work'} and prefix {disk / 'prefix'}" in result.stderr
