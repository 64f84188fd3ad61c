"""Issue 31's tracebacks and wrong exits: each is one message (exit 2 for bad input) or a
warning and a recovery, never a traceback. Every case runs rocbuild as a child.

The load-time table reuses test_bad_input's one-recipe stack (``plan`` loads and renders);
the state cases build a one-component project for real and then damage one file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.e2e.conftest import SMALL_PROJECT
from tests.e2e.test_bad_input import Case, _run_in_mount, _write_case, needs_mount
from tests.support.chain import one_component_stack
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DEEP = 100_000  # nesting levels: far past Python's recursion limit
SECRET = "s3cretPassw0rd"


def deep_toml(key: str = "x") -> str:
    return f"{key} = " + "[" * DEEP + "]" * DEEP + "\n"


def deep_json() -> str:
    return "[" * DEEP + "]" * DEEP


def with_arg(arg: str) -> str:
    return ('[source]\ngit = "https://example.invalid/a.git"\nref = "v1"\n'
            f"[cmake]\nargs = [{json.dumps(arg)}]\n")


def with_env(name: str, value: str) -> str:
    return ('[source]\ngit = "https://example.invalid/a.git"\nref = "v1"\n[cmake]\n'
            f"[env]\n{name} = {json.dumps(value)}\n")


def _deep_stack(folder: Path) -> None:
    (folder / "stack.toml").write_text(
        '[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\nprefix = "/opt/x"\n' + deep_toml())


def _loop(folder: Path) -> None:
    (folder / "loopA").symlink_to("loopB")
    (folder / "loopB").symlink_to("loopA")


LOAD_CASES = [
    # deeply nested TOML: RecursionError in the parser
    Case("deep-toml-recipe", recipe=deep_toml() + with_arg("-DX=1"), names=("nested",)),
    Case("deep-toml-stack", setup=_deep_stack, names=("stack.toml", "nested")),
    Case("deep-toml-config", config=deep_toml("jobs"), names=("rocbuild.toml", "nested")),
    Case("deep-toml-inline-table", recipe="x = " + "{a=" * DEEP + "1" + "}" * DEEP + "\n"
         + with_arg("-DX=1"), names=("nested",)),
    # jinja filters that raise something else than a TemplateError
    Case("jinja-wordwrap-int", recipe=with_arg("{{ 1|wordwrap }}"), names=("cmake.args[0]",)),
    Case("jinja-truncate-negative", recipe=with_arg("{{ 'abc'|truncate(-1) }}"),
         names=("cmake.args[0]",)),
    Case("jinja-xmlattr-tuple", recipe=with_arg("{{ (1,2)|xmlattr }}"),
         names=("cmake.args[0]",)),
    Case("jinja-dictsort-list", recipe=with_arg("{{ [1,2]|dictsort }}"),
         names=("cmake.args[0]",)),
    Case("jinja-attr-of-int", recipe=with_arg("{{ (1).__class__ }}"), names=("cmake.args[0]",)),
    Case("jinja-unique-attr", recipe=with_arg("{{ [1]|unique(attribute='x')|list }}"),
         names=("cmake.args[0]",)),
    Case("jinja-groupby-none", recipe=with_arg("{{ [1]|groupby('x') }}"),
         names=("cmake.args[0]",)),
    # undefined names inside containers: the documented undefined-variable error
    Case("undefined-in-list", recipe=with_arg("{{ [nosuch] }}"), names=("nosuch", "undefined")),
    Case("undefined-in-dict", recipe=with_arg("{{ dict(a=nosuch) }}"),
         names=("nosuch", "undefined")),
    Case("undefined-attribute-map", recipe=with_arg("{{ [1]|map(attribute='typo')|list }}"),
         names=("typo", "undefined")),
    Case("undefined-in-tuple", recipe=with_arg("{{ (1, nosuch) }}"),
         names=("nosuch", "undefined")),
    Case("undefined-tojson", recipe=with_arg("{{ [nosuch]|tojson }}"), names=("nosuch",)),
    # paths with control characters, refused where they are given
    Case("workdir-newline", flags=("--workdir", "/tmp/a\nb"), names=("--workdir", "newline")),
    Case("prefix-newline", flags=("--prefix", "/tmp/p\nq"), names=("--prefix", "newline")),
    Case("recipes-tab", flags=("--recipes", "/tmp/r\tq"), names=("--recipes", "control")),
    # a loop of symbolic links where a folder should be (*own*: a RuntimeError at build)
    Case("workdir-symlink-loop", setup=_loop, flags=("--workdir", "recipes/loopA/w"),
         names=("--workdir", "loop of symbolic links")),
    Case("prefix-symlink-loop", setup=_loop, flags=("--prefix", "recipes/loopA"),
         names=("--prefix", "loop of symbolic links")),
    # an environment value exec cannot pass
    Case("env-200k", recipe=with_env("BIG", "x" * 200_000), names=("env.BIG", "bytes")),
    Case("env-many-100k", recipe=with_env("A", "x" * 100_000).replace(
        "[env]\n", "[env]\n" + "".join(f'V{i} = "{"y" * 100_000}"\n' for i in range(24))),
        names=("env", "bytes")),
]


@pytest.mark.parametrize("case", LOAD_CASES, ids=[c.id for c in LOAD_CASES])
def test_bad_input_is_one_message(case: Case, tmp_path: Path) -> None:
    flags = _write_case(tmp_path, case)
    result = run_cli("plan", *flags, cwd=tmp_path, expect=2, timeout=120)
    message = result.stderr
    assert message.startswith("rocbuild: error: "), result.explain()
    assert len(message) < 3000, result.explain()
    for name in case.names:
        assert name in message, result.explain()


def test_a_password_in_a_url_is_never_printed(tmp_path: Path) -> None:
    """A recipe's ``source.git`` with a password: not in plan, not in a refusal, not in a
    failed fetch's message or log (the fetch fails: nothing listens there)."""
    url = f"https://builder:{SECRET}@127.0.0.1:9/a.git"
    recipe = f'[source]\ngit = "{url}"\nref = "v1"\n[cmake]\n'
    flags = _write_case(tmp_path, Case("secret", recipe=recipe))
    shown = [run_cli("plan", *flags, cwd=tmp_path, expect=0),
             run_cli("plan", "--commands", *flags, cwd=tmp_path, expect=0),
             run_cli("plan", "--json", *flags, cwd=tmp_path, expect=0)]
    (tmp_path / "recipes" / "a.toml").write_text(recipe.replace('ref = "v1"', 'ref = "-v1"'))
    shown.append(run_cli("plan", *flags, cwd=tmp_path, expect=2))
    (tmp_path / "recipes" / "a.toml").write_text(recipe)
    shown.append(run_cli("build", *flags, "--no-verify",
                         cwd=tmp_path, expect=1, timeout=300))
    shown.append(run_cli("status", *flags, cwd=tmp_path))
    shown.append(run_cli("logs", "a", "fetch", *flags, cwd=tmp_path))
    for result in shown:
        assert SECRET not in result.output, result.explain()
    assert "builder:***@127.0.0.1" in shown[1].output, shown[1].explain()  # the URL, redacted
    for log in (tmp_path / "work").rglob("*.log"):
        assert SECRET not in log.read_text(errors="replace"), log


# --- build time: damaged state and prefix files ------------------------------------------

# (the `small` fixture: tests/e2e/conftest.py)

def test_deeply_nested_json_in_state_and_prefix_files_is_damage_not_a_crash(
        small: list[str], tmp_path: Path) -> None:
    run_cli("build", *small, "--no-verify", expect=0)
    state, prefix = tmp_path / "work" / "state", tmp_path / "prefix"
    damaged = [state / "stamps" / "a" / "compile.json", prefix / ".rocbuild" / "build-info.json",
               prefix / ".rocbuild" / "installed" / "a.json"]
    for file in damaged:
        assert file.is_file(), file
        file.write_text(deep_json())
    for command in (["status"], ["plan"], ["build", "--no-verify"], ["prefixes"],
                    ["verify"]):
        result = run_cli(*command, *small, cwd=tmp_path, timeout=300)
        assert result.returncode in (0, 1, 4), result.explain()
    # the prefix registry, a leftover process record, the activate link's record
    registry = Path(os.environ["XDG_STATE_HOME"]) / "rocbuild" / "prefixes.json"
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(deep_json())
    (state / "running").mkdir(exist_ok=True)
    (state / "running" / "4242.json").write_text(deep_json())
    link = tmp_path / "current"
    run_cli("activate", str(prefix), "--link", str(link), "--unproven", expect=0)
    (tmp_path / ".current.rocbuild-state.json").write_text(deep_json())
    run_cli("prefixes", *small, cwd=tmp_path, expect=0)
    run_cli("build", *small, "--no-verify", cwd=tmp_path, expect=0)
    assert not (state / "running" / "4242.json").exists()
    result = run_cli("activate", "--previous", "--link", str(link), cwd=tmp_path)
    assert result.returncode == 2, result.explain()


def test_non_utf8_build_info_is_rewritten_with_a_warning(small: list[str], tmp_path: Path) -> None:
    run_cli("build", *small, "--no-verify", expect=0)
    info = tmp_path / "prefix" / ".rocbuild" / "build-info.json"
    info.write_bytes(b'{"rocbuild": "\xff\xfe"}')
    run_cli("status", *small, cwd=tmp_path)
    result = run_cli("build", *small, "--no-verify", cwd=tmp_path, expect=0)
    assert "build-info" in result.output, result.explain()
    assert json.loads(info.read_text())["complete"] is True
    run_cli("status", *small, cwd=tmp_path, expect=0)


def test_activate_with_the_global_prefix_flag_too_activates(small: list[str],
                                                            tmp_path: Path) -> None:
    run_cli("build", *small, "--no-verify", expect=0)
    prefix = tmp_path / "prefix"
    link = tmp_path / "current"
    run_cli("activate", str(prefix), "--prefix", str(prefix), "--link", str(link),
            "--unproven", cwd=tmp_path, expect=0)
    assert link.resolve() == prefix.resolve()


def test_a_killed_patch_check_leaves_nothing_in_tmp(tmp_path: Path) -> None:
    """The patch check's scratch index lives beside the checkout (a kill there leaves it
    where the next run clears it), never in the shared /tmp: rocbuild is killed while a
    ``git apply --check`` of the check hangs (a git first on PATH that waits there)."""
    from tests.support.chain import add_gamma_patch, make_chain

    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    chain = make_chain(tmp_path)
    add_gamma_patch(chain)
    scratch, bindir, marker = tmp_path / "tmp", tmp_path / "bin", tmp_path / "in-check"
    scratch.mkdir()
    bindir.mkdir()
    real_git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True,
                              text=True).stdout.strip()
    (bindir / "git").write_text(f'#!/bin/sh\ncase "$*" in *"apply --cached --check"*) '
                                f'touch {marker}; sleep 300;; esac\nexec {real_git} "$@"\n')
    (bindir / "git").chmod(0o755)
    env = child_env({"TMPDIR": str(scratch), "PATH": f"{bindir}:{os.environ['PATH']}"})
    argv = [sys.executable, "-m", "rocbuild", "build", "--no-verify", "--quiet", *chain.flags()]
    runner = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    wait_for(lambda: marker.exists() or runner.poll() is not None, "the patch check ran")
    assert marker.exists(), "the patch check never ran"
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    assert not list(scratch.iterdir()), "the killed check left its scratch in /tmp"
    left = list(chain.workdir.rglob(".rocbuild-patchcheck-*"))
    assert left, "the check's scratch folder is beside the checkout"
    env["PATH"] = os.environ["PATH"]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "removed the scratch folder of a patch check" in done.stdout, done.stdout
    assert not list(chain.workdir.rglob("*patchcheck*"))


@needs_mount
def test_a_full_disk_message_names_a_path_to_look_at(small: list[str], tmp_path: Path) -> None:
    """A write that failed without a file name (a write to an open file) still names where
    to look: never "cannot write a file ... (df -h )"."""
    full = tmp_path / "work"
    full.mkdir(exist_ok=True)
    fill = (f"mount -t tmpfs -o size=4m tmpfs {full}\n"
            f"dd if=/dev/zero of={full}/filler bs=64k 2>/dev/null || true")
    result = _run_in_mount(fill, ["build", *small, "--no-verify", "--allow-existing-prefix"],
                           tmp_path)
    assert result.returncode == 1, result.explain()
    assert "no space left" in result.output.lower(), result.explain()
    assert "df -h )" not in result.output and "a file" not in result.output, result.explain()
    assert "df -h /" in result.output, result.explain()


def test_a_password_in_a_mirror_rule_or_a_cache_url_is_never_printed(tmp_path: Path) -> None:
    flags = _write_case(tmp_path, Case("mirror-secret"))
    mirror = ["--mirror", f"https://example.invalid/=https://u:{SECRET}@127.0.0.1:9/"]
    shown = [run_cli("plan", *flags, *mirror, cwd=tmp_path, expect=0),
             run_cli("plan", "--json", *flags, *mirror, cwd=tmp_path, expect=0),
             run_cli("status", *flags, *mirror, cwd=tmp_path)]
    # a cache URL's credentials are never sent (urllib has no place for them): refused, and
    # the refusal does not repeat the password (it was a traceback: InvalidURL)
    shown.append(run_cli("plan", *flags, "--cache", f"https://u:{SECRET}@127.0.0.1:9/c",
                         cwd=tmp_path, expect=2))
    for result in shown:
        assert SECRET not in result.output, result.explain()
    assert "u:***@" in shown[0].output + shown[2].output


def test_a_built_component_keeps_no_password_in_the_workdir_or_prefix(tmp_path: Path) -> None:
    """A whole build from a URL with a password (a mirror rule maps it to the local repo):
    no stamp, log, record or prefix file keeps the password (a workdir or prefix may be
    shared), and the rerun finds everything current."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "a", SMALL_PROJECT)
    secret_host = f"https://u:{SECRET}@example.invalid/"
    recipe = tmp_path / "recipes" / "a.toml"
    recipe.write_text(recipe.read_text().replace("https://example.invalid/", secret_host))
    at = flags.index("--mirror") + 1
    flags[at] = flags[at].replace("https://example.invalid/", secret_host)
    run_cli("build", *flags, "--no-verify", cwd=tmp_path, expect=0)
    again = run_cli("build", *flags, "--no-verify", cwd=tmp_path, expect=0)
    assert "▶" not in again.stdout, again.explain()
    for root in (tmp_path / "work", tmp_path / "prefix", Path(os.environ["XDG_STATE_HOME"])):
        for file in root.rglob("*"):
            if file.is_file() and not file.is_symlink() and ".git" not in file.parts:
                assert SECRET.encode() not in file.read_bytes(), file
