"""The inventory a Spack or EasyBuild user looks for first: `rocbuild list` (what
each prefix holds), `rocbuild info COMPONENT`, `plan --tree [--reverse]` and shell completion
generated from the parser, each through the real CLI, text and --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_list_and_info_read_what_the_build_recorded(chain: Chain, tmp_path: Path) -> None:
    flags = chain.flags()
    before = run_cli("list", *flags, expect=0).stdout
    assert "nothing installed" in before, before
    run_cli("build", *flags, expect=0)
    shown = run_cli("list", *flags, expect=0).stdout
    assert str(chain.prefix) in shown and "verified" in shown, shown
    rows = {line.split()[0]: line.split() for line in shown.splitlines()
            if line.split()[:1] in (["alpha"], ["beta"], ["gamma"])}
    assert sorted(rows) == ["alpha", "beta", "gamma"], shown
    assert rows["beta"][1] == "v1" and rows["beta"][6] == "built", shown  # ref, origin
    doc = json.loads(run_cli("list", *flags, "--json", expect=0).stdout)
    (prefix,) = doc["prefixes"]
    beta = next(c for c in prefix["components"] if c["name"] == "beta")
    assert beta["origin"] == "built" and beta["files"] == 5 and beta["size"] > 0, beta
    assert len(beta["commit"]) == 40 and beta["patches"] == [] and beta["installed"], beta
    # every prefix this user built, without --prefix (the registry)
    assert str(chain.prefix) in run_cli("list", "--workdir", str(chain.workdir),
                                        cwd=tmp_path, expect=0).stdout

    info = run_cli("info", "beta", *flags, expect=0).stdout
    for fact in ("beta.toml", "depends on  alpha", "needed by   gamma", "state       done",
                 "5 files", "lib/libbeta.so"):
        assert fact in info, (fact, info)
    doc = json.loads(run_cli("info", "beta", *flags, "--json", expect=0).stdout)
    assert doc["depends"] == ["alpha"] and doc["needed_by"] == ["gamma"], doc
    assert "lib/libbeta.so" in doc["installed"]["files"] and doc["state"] == "done", doc
    refused = run_cli("info", "bet", *flags, expect=2)
    assert "Did you mean 'beta'?" in refused.stderr, refused.explain()


def test_plan_tree_forward_reverse_and_json(chain: Chain) -> None:
    flags = chain.flags()
    tree = run_cli("plan", "--tree", *flags, expect=0).stdout.splitlines()
    assert tree == ["gamma", "└── beta", "    └── alpha"], tree
    back = run_cli("plan", "--tree", "--reverse", "alpha", *flags, expect=0).stdout
    assert back.splitlines() == ["alpha", "└── beta", "    └── gamma"], back
    doc = json.loads(run_cli("plan", "--tree", "--json", "beta", *flags, expect=0).stdout)
    assert doc["tree"] == [{"name": "beta", "children": [{"name": "alpha", "children": []}]}]


def test_a_repeated_subtree_is_drawn_once(tmp_path: Path) -> None:
    shown = run_cli("plan", "--tree", "--target", "gfx906", "--workdir", str(tmp_path / "w"),
                    cwd=tmp_path, expect=0).stdout
    assert "llvm (*)" in shown and "(*) drawn above" in shown, shown


def complete_in_bash(script: Path, words: list[str],
                     env: dict[str, str] | None = None) -> list[str]:
    """What bash's completion function offers for ``words`` (the last one being completed),
    as a user's <TAB> runs it: COMP_WORDS/COMP_CWORD, then the function `complete` names."""
    line = " ".join(words)
    program = (f"source {script}\n"
               f"COMP_WORDS=({' '.join(repr(w) for w in words)}); "
               f"COMP_CWORD={len(words) - 1}; COMP_LINE={line!r}; COMP_POINT={len(line)}\n"
               "func=$(complete -p rocbuild | sed -E 's/.*-F ([^ ]+).*/\\1/')\n"
               '"$func" rocbuild "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", program],
                          capture_output=True, text=True, check=True, env=env)
    return done.stdout.split()


def rocbuild_on_path(tmp_path: Path, recipes: Path) -> dict[str, str]:
    """An environment with a `rocbuild` command first on PATH (this checkout's, as a user's
    installed one) whose configured recipes are ``recipes`` (ROCBUILD_RECIPES)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    program = bin_dir / "rocbuild"
    program.write_text(f'#!/bin/sh\nexec {sys.executable} -m rocbuild "$@"\n')
    program.chmod(0o755)
    env = child_env({"ROCBUILD_RECIPES": str(recipes)})
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return env


def test_bash_completion_from_the_parser_completes_commands_and_flags(tmp_path: Path) -> None:
    require_tool("bash")
    script = tmp_path / "rocbuild.bash"
    script.write_text(run_cli("completion", "bash", cwd=tmp_path, expect=0).stdout)
    assert complete_in_bash(script, ["rocbuild", "bu"]) == ["build"]
    assert sorted(complete_in_bash(script, ["rocbuild", "li"])) == ["lint-recipes", "list"]
    # the global flags every command accepts, though each command's help hides them
    assert complete_in_bash(script, ["rocbuild", "build", "--wor"]) == ["--workdir"]
    assert complete_in_bash(script, ["rocbuild", "completion", ""]) == ["bash", "zsh", "fish"]


def test_completion_knows_component_names_steps_and_targets(chain: Chain,
                                                           tmp_path: Path) -> None:
    """`rocbuild logs <Tab>` offered nothing: completion knew commands and flags only. Every
    COMPONENT completes the configured stack's names (asked at <Tab>), `logs COMPONENT STEP`
    the step names and --target the processors, in bash and in fish."""
    require_tool("bash")
    env = rocbuild_on_path(tmp_path, chain.recipes)
    script = tmp_path / "rocbuild.bash"
    script.write_text(run_cli("completion", "bash", cwd=tmp_path, expect=0).stdout)
    assert complete_in_bash(script, ["rocbuild", "logs", ""], env) == ["alpha", "beta", "gamma"]
    assert complete_in_bash(script, ["rocbuild", "build", "alpha", "g"], env) == ["gamma"]
    assert complete_in_bash(script, ["rocbuild", "info", "be"], env) == ["beta"]
    assert complete_in_bash(script, ["rocbuild", "logs", "beta", "co"], env) == [
        "configure", "compile"]
    assert "gfx906" in complete_in_bash(script, ["rocbuild", "build", "--target", "gfx90"], env)
    # a recipes folder that cannot be read completes nothing, and prints no error
    broken = {**env, "ROCBUILD_RECIPES": str(tmp_path / "nowhere")}
    assert complete_in_bash(script, ["rocbuild", "logs", ""], broken) == []
    require_tool("fish")
    fish = tmp_path / "rocbuild.fish"
    fish.write_text(run_cli("completion", "fish", cwd=tmp_path, expect=0).stdout)
    done = subprocess.run(["fish", "--no-config", "-c", f"source {fish}; complete -C "
                           "'rocbuild logs '"], capture_output=True, text=True, check=True,
                          env=env)
    offered = [line.split("\t")[0] for line in done.stdout.splitlines()]
    assert {"alpha", "beta", "gamma"} <= set(offered), done.stdout


def test_fish_and_zsh_completion_load_in_their_shells(tmp_path: Path) -> None:
    require_tool("fish")
    require_tool("zsh")
    fish = tmp_path / "rocbuild.fish"
    fish.write_text(run_cli("completion", "fish", cwd=tmp_path, expect=0).stdout)
    done = subprocess.run(["fish", "--no-config", "-c",
                           f"source {fish}; complete -C 'rocbuild bu'"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.split("\t")[0] == "build", done
    zdir = tmp_path / "zsh"
    zdir.mkdir()
    (zdir / "_rocbuild").write_text(run_cli("completion", "zsh", cwd=tmp_path, expect=0).stdout)
    done = subprocess.run(["zsh", "-f", "-c", f"fpath=({zdir} $fpath); autoload -U compinit; "
                           "compinit -u; autoload -U _rocbuild; whence -w _rocbuild"],
                          capture_output=True, text=True, check=True)
    assert "_rocbuild: function" in done.stdout, done
    refused = run_cli("completion", "tcsh", cwd=tmp_path, expect=2)
    assert "not one of bash, zsh, fish" in refused.stderr, refused.explain()


def test_list_and_info_count_one_component_and_one_file_in_the_singular(chain: Chain) -> None:
    """A prefix of one component and a component of one file (gamma installs bin/gamma only):
    the week's replay printed "1 components" in `list` and "1 files" in `info`."""
    run_cli("build", *chain.flags(), "--no-verify", "alpha", expect=0)
    shown = run_cli("list", *chain.flags(), expect=0).stdout
    assert "; 1 component, " in shown, shown
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    info = run_cli("info", "gamma", *chain.flags(), expect=0).stdout
    assert f"installed 1 file in {chain.prefix}" in " ".join(info.split()), info


def test_list_shows_a_prefix_being_built(chain: Chain, tmp_path: Path) -> None:
    """A prefix whose first build runs, or stopped, has install records but no build-info
    yet: `list` showed nothing (and `prefixes` neither)."""
    import signal
    import sys

    from tests.cli import child_env
    from tests.e2e.test_engine import sleepers, slow_beta
    from tests.support.wait import wait_for

    marker = slow_beta(chain)  # beta's compile waits while the marker is there
    marker.unlink()
    chain.set_args("beta", "-DBETA_FAIL=ON")  # alpha installs, beta's compile fails
    run_cli("build", *chain.flags(), "--no-verify", expect=1)
    wide = {"COLUMNS": "200"}
    # without --prefix too: the prefix is on the user's list from its first install
    for flags in (chain.flags(), ["--workdir", str(chain.workdir), "--recipes",
                                  str(chain.recipes)]):
        shown = run_cli("list", *flags, env=wide, expect=0).stdout
        assert str(chain.prefix) in shown, shown
        assert ("being built: 1 component installed so far" in shown
                and "no build runs now: `rocbuild status` shows what is left" in shown), shown
        row = next(line.split() for line in shown.splitlines() if line.startswith("alpha"))
        assert row[1] == "v1" and row[6] == "built", shown  # from this workdir's stamps
    doc = json.loads(run_cli("list", *chain.flags(), "--json", expect=0).stdout)
    assert doc["prefixes"][0]["state"] == "being built"
    assert [c["name"] for c in doc["prefixes"][0]["components"]] == ["alpha"]
    prefixes = run_cli("prefixes", "--recipes", str(chain.recipes), env=wide,
                       expect=0).stdout
    assert str(chain.prefix) in prefixes, prefixes

    chain.set_args("beta")  # now beta's compile runs a while: list names the build
    marker.touch()
    build = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", *chain.flags(),
                              "--no-verify", "--quiet"], env=child_env(), cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: bool(sleepers(marker)) or build.poll() is not None,
                 "the slow step started")
        assert build.poll() is None, "the build ended before the slow step"
        shown = run_cli("list", *chain.flags(), env=wide, expect=0).stdout
        assert f"a build is installing into it now (pid {build.pid}" in shown, shown
    finally:
        build.send_signal(signal.SIGINT)
        build.wait(timeout=120)
