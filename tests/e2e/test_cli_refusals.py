"""The command line's own refusals look like every other rocbuild error: argparse's
(an unknown command or flag, a bad choice), bare `rocbuild`, `rocbuild help`, and the values
that used to pass (an env file for a prefix never built, a malformed distcc host, an unknown
ROCBUILD_* variable, an abbreviated commit). Each runs rocbuild as a child: exit code, the
`rocbuild: error:` line, the TIP, no traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocbuild.checks import privilege
from tests.cli import CliResult, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def refused(*args: str, **kwargs: object) -> CliResult:
    result = run_cli(*args, expect=2, **kwargs)  # type: ignore[arg-type]
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("rocbuild: error: "), result.explain()
    assert any(line.startswith("TIP: ") for line in lines), result.explain()
    assert "usage:" not in result.stderr  # argparse's own shape is gone
    return result


@pytest.mark.parametrize(("argv", "says"), [
    (("biuld",), "'biuld' is not a command of rocbuild. Did you mean 'build'?"),
    (("plan", "--jbos", "4"), "'--jbos' is not an option here (did you mean '--jobs'?)"),
    (("env", "--shell", "sh"), "--shell: 'sh' is not one of bash, zsh, fish, lmod, tcl."),
    (("cache", "pus"), "'pus' is not a command of rocbuild cache. Did you mean 'push'?"),
    (("help", "biuld"), "'biuld' is not a command. Did you mean 'build'?"),
    (("logs",), "rocbuild logs: missing COMPONENT"),
    (("gfx906",), "'gfx906' is a GPU target: give it as --target gfx906"),
    # a misspelt flag before the command is named, never lost behind "no command given" or
    # taken as the command ('3' is not a command)
    (("--verison",), "'--verison' is not an option of rocbuild (did you mean '--version'?)"),
    (("--jbos", "3", "plan"), "'--jbos' is not an option of rocbuild (did you mean '--jobs'?)"),
    (("--json", "status"), "'--json' is an option of `rocbuild status`: give it after"),
])
def test_argparse_refusals_name_the_word_and_the_nearest(argv: tuple[str, ...], says: str,
                                                          tmp_path: Path) -> None:
    result = refused(*argv, cwd=tmp_path)
    assert says in result.stderr


# argparse's messages in other words (a translation, another Python's wording): rocbuild's
# refusals are built from argparse's hooks (the action, the value, the leftover words), never
# from the English text of its messages
REWORDED = ("import argparse, sys; argparse._ = lambda s: s.replace('invalid choice', "
            "'ungueltige Wahl').replace('unrecognized arguments', 'unbekannte Argumente'); "
            "from rocbuild.cli.main import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize(("argv", "says"), [
    (("biuld",), "'biuld' is not a command of rocbuild. Did you mean 'build'?"),
    (("env", "--shell", "sh"), "--shell: 'sh' is not one of bash, zsh, fish, lmod, tcl."),
    (("plan", "--jbos", "4"), "'--jbos' is not an option here (did you mean '--jobs'?)"),
])
def test_refusals_do_not_read_argparses_wording(argv: tuple[str, ...], says: str,
                                                 tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.cli import assert_no_traceback, child_env

    command = [sys.executable, "-c", REWORDED, *argv]
    done = subprocess.run(command, cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    result = CliResult(command, done.returncode, done.stdout, done.stderr)
    assert_no_traceback(result)
    assert result.returncode == 2 and says in result.stderr, result.explain()


def test_a_bad_flag_names_the_commands_help_and_the_global_options(tmp_path: Path) -> None:
    result = refused("plan", "--jbos", "4", cwd=tmp_path)
    assert "TIP: `rocbuild plan --help` lists its options; `rocbuild help options`" in \
        result.stderr


def test_bare_rocbuild_lists_the_commands_and_how_to_start(tmp_path: Path) -> None:
    result = run_cli(cwd=tmp_path, expect=2)
    err = result.stderr
    assert err.startswith("rocbuild: error: no command given")
    for command in ("plan", "build", "status", "doctor", "targets"):
        assert f"\n  {command} " in err
    first = err.split("to start:\n", 1)[1].splitlines()[:3]
    assert [line.split()[1] for line in first] == ["doctor", "plan", "build"]
    assert "\nTIP: " in err


def test_help_command_prints_a_commands_help(tmp_path: Path) -> None:
    assert run_cli("help", "build", cwd=tmp_path, expect=0).stdout == \
        run_cli("build", "--help", cwd=tmp_path, expect=0).stdout
    nested = run_cli("help", "cache", "push", cwd=tmp_path, expect=0).stdout
    assert nested.startswith("usage: rocbuild cache push")
    assert "--workdir" in run_cli("help", "options", cwd=tmp_path, expect=0).stdout
    # a broken config file does not stop help from being read
    (tmp_path / "rocbuild.toml").write_text("[rocbuild\n")
    assert run_cli("help", "plan", cwd=tmp_path, expect=0).stdout.startswith("usage:")


def test_a_mistyped_target_shows_three_near_names_not_all_55(tmp_path: Path) -> None:
    result = refused("plan", "--target", "gfx9066", cwd=tmp_path)
    first = result.stderr.splitlines()[0]
    assert "Did you mean 'gfx906'?" in first and "close: gfx906, " in first
    assert "`rocbuild targets`" in first and "gfx1201" not in first
    assert len(first) < 400  # was one ~900-character line
    listing = run_cli("targets", cwd=tmp_path, expect=0).stdout
    assert "gfx906" in listing and "AMD Instinct MI50" in listing and "gfx1201" in listing


def test_env_for_a_prefix_never_built_is_refused(tmp_path: Path) -> None:
    result = refused("env", "--prefix", str(tmp_path / "does" / "not" / "exist"), cwd=tmp_path)
    assert "does not exist" in result.stderr and "rocbuild build" in result.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "x").write_text("")
    result = refused("env", "--prefix", str(plain), cwd=tmp_path)
    assert "is not a prefix rocbuild built" in result.stderr


@pytest.mark.parametrize("hosts", ["box1/x", "box1:port/4", "-j8"])
def test_a_malformed_distcc_host_is_refused(hosts: str, tmp_path: Path) -> None:
    result = refused("plan", f"--distcc={hosts}", cwd=tmp_path)
    assert f"'{hosts.split()[0]}' is not a distcc host" in result.stderr
    assert "flag --distcc" in result.stderr


def test_a_good_distcc_list_is_accepted(tmp_path: Path) -> None:
    run_cli("plan", "--distcc", "box1/8 box2:3632/4 localhost/2 --randomize", cwd=tmp_path,
            expect=0)


def test_an_unknown_rocbuild_variable_is_named_with_the_nearest(tmp_path: Path) -> None:
    result = run_cli("plan", cwd=tmp_path, env={"ROCBUILD_WRKDIR": str(tmp_path / "w")},
                     expect=0)
    assert ("rocbuild: warning: environment variable ROCBUILD_WRKDIR is not a rocbuild setting "
            "and is ignored. Did you mean 'ROCBUILD_WORKDIR'?") in result.stderr
    quiet = run_cli("plan", cwd=tmp_path, env={"ROCBUILD_WORKDIR": str(tmp_path / "w"),
                                               "ROCBUILD_LINK": "/tmp/x"}, expect=0)
    assert "warning: environment variable" not in quiet.stderr


def test_every_rocbuild_variable_the_code_reads_is_declared() -> None:
    """A new ROCBUILD_* variable must be declared (settings.EXTRA_VARIABLES or OPTIONS), or
    every user who sets it is warned that it is ignored."""
    import re

    from rocbuild.model import settings

    package = Path(__file__).resolve().parents[2] / "rocbuild"
    used = {m for p in package.rglob("*.py")
            for m in re.findall(r"ROCBUILD_[A-Z][A-Z_]*", p.read_text())}
    used -= {"ROCBUILD_"}
    assert used <= set(settings.known_variables()), used - set(settings.known_variables())


def test_an_abbreviated_commit_ref_is_refused_at_plan(write_recipes, tmp_path: Path) -> None:
    folder = write_recipes(a='[source]\ngit = "https://example.invalid/a.git"\n'
                             'ref = "d99724f2"\n[cmake]\n')
    result = refused("plan", "--recipes", str(folder), cwd=tmp_path)
    assert "'d99724f2' looks like an abbreviated commit id" in result.stderr
    assert "a.toml" in result.stderr and "git rev-parse d99724f2" in result.stderr


def test_install_advice_fits_this_host(write_recipes, tmp_path: Path) -> None:
    """Preflight's fix for a missing package is a command that runs here: no `sudo` for
    root (CI runs as root on a host without sudo), sudo or su for another user."""
    folder = write_recipes(a='system_packages = ["rocbuild-test-no-such-package"]\n'
                             'system_checks = { "rocbuild-test-no-such-package" = '
                             '"tool:rocbuild-test-no-such-tool" }\n'
                             '[source]\ngit = "https://example.invalid/a.git"\nref = "v1"\n'
                             '[cmake]\n')
    result = run_cli("build", "--recipes", str(folder), "--workdir", str(tmp_path / "w"),
                     "--prefix", str(tmp_path / "p"), cwd=tmp_path, expect=2)
    expected = privilege.apt_install("rocbuild-test-no-such-package")
    assert expected in result.stderr, result.explain()
    if os.geteuid() == 0:
        assert "sudo " not in result.stderr
