"""Issue 10: rebuilds that match the recipe, installs that run on their own, failures that are
never lost. Each test runs rocbuild as the user does (``python -m rocbuild`` in a child
process) on the generated ``calc`` project (tests/e2e/calc.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rocbuild.run.state.state import prefix_lock
from tests.cli import CliResult, run_cli
from tests.conftest import require_tool
from tests.support.calc import CALC_C, Calc, make_calc, value_patch
from tests.support.chain import Chain, git

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def calc(tmp_path: Path) -> Calc:
    for tool in ("git", "cmake", "ninja", "cc"):
        require_tool(tool)
    return make_calc(tmp_path)


def build(calc: Calc, *extra: str, expect: int = 0) -> CliResult:
    return run_cli("build", *calc.flags(), "--no-verify", *extra, expect=expect)


def ran_steps(result: CliResult) -> set[str]:
    return set(re.findall(r"^(?:[\d:]+ )?▶ calc: (\w+)$", result.stdout, re.M))


def status_steps(calc: Calc) -> dict[str, dict[str, object]]:
    doc = json.loads(run_cli("status", *calc.flags(), "--json").stdout)
    return {s["step"]: s for s in doc["components"][0]["steps"]}


def test_a_removed_option_gets_its_default_again(calc: Calc) -> None:
    calc.write_recipe(["-DCALC_EXTRA=ON", "-DCALC_VALUE=5"])
    build(calc)
    assert calc.run_tool().startswith("value=105 ")
    main_o = calc.build_dir / "CMakeFiles" / "calc-tool.dir" / "main.c.o"
    before = main_o.stat().st_mtime_ns
    calc.write_recipe(["-DCALC_VALUE=5"])  # CALC_EXTRA removed: back to OFF
    result = build(calc)
    assert calc.run_tool().startswith("value=5 ")
    assert "fresh configure" in (calc.workdir / "logs/calc/configure.log").read_text()
    cache = (calc.build_dir / "CMakeCache.txt").read_text()
    assert "CALC_EXTRA:BOOL=OFF" in cache
    assert ran_steps(result) == {"configure", "compile", "install"}
    # the objects were kept: main.c's flags did not change, so it was not compiled again
    assert main_o.stat().st_mtime_ns == before


def test_a_configure_that_runs_again_is_followed_by_compile_and_install(calc: Calc) -> None:
    build(calc)
    lib = calc.prefix / "lib" / "libcalc.so"
    lib.write_bytes(b"stale artifact")  # what a half-finished earlier install might leave
    (calc.build_dir / "CMakeCache.txt").unlink()
    assert status_steps(calc)["install"]["state"] == "stale"
    result = build(calc)
    assert ran_steps(result) == {"configure", "compile", "install"}
    assert calc.run_tool().startswith("value=1 ")


def test_a_deleted_build_tree_is_built_again(calc: Calc) -> None:
    build(calc)
    shutil.rmtree(calc.build_dir)
    steps = status_steps(calc)
    assert [steps[s]["state"] for s in ("configure", "compile", "install")] == ["stale"] * 3
    result = build(calc)
    assert ran_steps(result) == {"configure", "compile", "install"}
    assert calc.run_tool().startswith("value=1 ")
    assert ran_steps(build(calc)) == set()  # and then it is current


def test_a_replaced_build_tree_is_compiled_again(calc: Calc) -> None:
    """A build tree configured by hand (no build id of rocbuild's) is not trusted."""
    build(calc)
    shutil.rmtree(calc.build_dir)
    # (its own install prefix: if the check ever broke, the install must not reach /usr/local)
    subprocess.run(["cmake", "-G", "Ninja", "-S", str(calc.checkout), "-B", str(calc.build_dir),
                    f"-DCMAKE_INSTALL_PREFIX={calc.root / 'hand-prefix'}"],
                   check=True, capture_output=True)
    assert ran_steps(build(calc)) == {"configure", "compile", "install"}


def test_installed_programs_run_with_a_bare_environment_and_a_moved_prefix(calc: Calc) -> None:
    build(calc)
    assert calc.run_tool() == f"value=1 sub=7 rocm={calc.prefix}"
    dynamic = subprocess.run(["readelf", "-d", str(calc.prefix / "bin" / "calc-tool")],
                             capture_output=True, text=True, check=True).stdout
    assert re.search(r"\((RUNPATH|RPATH)\).*\$ORIGIN/\.\./lib", dynamic), dynamic
    moved = calc.root / "moved-prefix"
    shutil.copytree(calc.prefix, moved, symlinks=True)
    shutil.rmtree(calc.prefix)
    done = subprocess.run([str(moved / "bin" / "calc-tool")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout.startswith("value=1 "), done.stderr


def test_a_recipe_can_opt_out_of_the_runpath_only_with_a_reason(calc: Calc) -> None:
    calc.write_recipe(tail="[install]\nrunpath = false\n")
    result = run_cli("plan", *calc.flags(), expect=2)
    assert "install.runpath_reason" in result.stderr and "calc.toml" in result.stderr
    calc.write_recipe(tail='[install]\nrunpath = false\nrunpath_reason = "tested"\n')
    build(calc)
    done = subprocess.run([str(calc.prefix / "bin" / "calc-tool")], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and "libcalc.so" in done.stderr


def test_a_submodule_git_error_is_recorded_with_gits_own_words(calc: Calc) -> None:
    shutil.rmtree(calc.repos / "sub.git")  # the submodule's mirror is gone
    result = build(calc, expect=1)
    assert "FAILED calc: fetch" in result.stdout
    assert "does not appear to be a git repository" in result.output
    assert "attempts" not in result.output  # one attempt was made, so none is claimed
    steps = status_steps(calc)
    assert steps["fetch"]["state"] == "failed"
    status = run_cli("status", *calc.flags())
    assert "does not appear to be a git repository" in status.stdout


@pytest.mark.internal_error
def test_an_unexpected_error_inside_a_step_is_that_steps_failure(calc: Calc) -> None:
    # an [install.files] entry below a file that cmake --install created: rocbuild's own
    # code raises an OSError, which must not escape as a traceback (a file onto a folder is
    # a plain step failure, ownership.py)
    calc.write_recipe(tail='[install.files]\n"bin/calc-tool/x" = "under a file"\n')
    result = build(calc, expect=1)
    assert "FAILED calc: install" in result.stdout
    assert "an error inside rocbuild" in result.stdout
    log = (calc.workdir / "logs/calc/install.log").read_text()
    assert "Traceback (most recent call last)" in log  # the details are kept in the log
    assert status_steps(calc)["install"]["state"] == "failed"
    assert "steps are current; nothing to do" not in result.stdout


def test_local_edits_are_rebuilt_and_saved_before_a_reset(calc: Calc) -> None:
    build(calc)
    edited = CALC_C.replace("VALUE + EXTRA", "VALUE + EXTRA + 40")
    (calc.checkout / "calc.c").write_text(edited)
    steps = status_steps(calc)
    assert steps["compile"]["state"] == "stale"
    assert "your edits in the checkout: calc.c" in str(steps["compile"]["why"])
    assert ran_steps(build(calc)) == {"compile", "install"}
    assert calc.run_tool().startswith("value=41 ")  # the edit was built, not ignored
    # a new patch resets the checkout: the edit is saved first, and the user is told where
    calc.add_patch("0001-plus-two.patch", value_patch(1, 3))
    result = build(calc)
    assert calc.run_tool().startswith("value=3 ")
    saved = sorted((calc.workdir / "saved" / "calc").glob("*/files/calc.c"))
    assert len(saved) == 1 and saved[0].read_text() == edited
    assert str(saved[0].parent.parent) in result.stdout
    assert "+ 40" in (saved[0].parent.parent / "changes.patch").read_text()


def _with_old_time(path: Path, text: str) -> None:
    """Write ``text`` into ``path`` dated a year back, as `cp -p`, `rsync -a` or `tar x` of
    an older copy leave it (or an edit made before the clock was stepped back)."""
    old = path.stat().st_mtime - 365 * 86400
    path.write_text(text)
    os.utime(path, (old, old))


def test_an_edit_older_than_the_objects_is_built(calc: Calc) -> None:
    """ninja compares times: an edited file dated before the objects was not compiled, the
    step ran, exit 0, and the old program was installed. The edit, its undoing (the
    original copied back with its old time) and a second edit are each built."""
    build(calc)
    assert calc.run_tool().startswith("value=1 ")
    calc_c = calc.checkout / "calc.c"
    _with_old_time(calc_c, CALC_C.replace("VALUE + EXTRA", "VALUE + EXTRA + 40"))
    assert "your edits in the checkout: calc.c" in str(status_steps(calc)["compile"]["why"])
    assert ran_steps(build(calc)) == {"compile", "install"}
    assert calc.run_tool().startswith("value=41 ")
    _with_old_time(calc_c, CALC_C)  # the edit undone: the original, with its old time
    build(calc)
    assert calc.run_tool().startswith("value=1 ")
    _with_old_time(calc_c, CALC_C.replace("VALUE + EXTRA", "VALUE + EXTRA + 7"))
    build(calc)
    assert calc.run_tool().startswith("value=8 ")
    assert ran_steps(build(calc)) == set()  # and then nothing is left to do


def test_a_patched_file_set_back_and_forth_with_old_times_is_built_each_time(
        calc: Calc) -> None:
    """A patched file set back to the commit's content (an edit that reads "pristine") and
    then to the patched content again, each copied with an old time: both are contents
    other than the last compile's."""
    calc.add_patch("0001-plus-two.patch", value_patch(1, 3))
    build(calc)
    assert calc.run_tool().startswith("value=3 ")
    calc_c = calc.checkout / "calc.c"
    patched = calc_c.read_text()
    _with_old_time(calc_c, CALC_C)
    build(calc)
    assert calc.run_tool().startswith("value=1 ")
    _with_old_time(calc_c, patched)
    build(calc)
    assert calc.run_tool().startswith("value=3 ")


def test_an_old_dated_edit_of_the_build_files_configures_again(calc: Calc) -> None:
    """An edit of CMakeLists.txt with an old time: ninja's check of its own build files
    compares times too, so the edit was never configured."""
    build(calc)
    cmake = calc.checkout / "CMakeLists.txt"
    _with_old_time(cmake, cmake.read_text().replace(
        "target_compile_definitions(calc PRIVATE VALUE=${CALC_VALUE})",
        "target_compile_definitions(calc PRIVATE VALUE=${CALC_VALUE}0)"))
    build(calc)
    assert calc.run_tool().startswith("value=10 ")


def test_user_commits_in_a_checkout_survive_a_ref_change(calc: Calc) -> None:
    build(calc)
    (calc.checkout / "notes.txt").write_text("mine\n")
    git(calc.checkout, "-c", "user.name=u", "-c", "user.email=u@u", "add", "notes.txt")
    git(calc.checkout, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", "mine")
    calc.tag("v2", CALC_C.replace("VALUE + EXTRA", "VALUE + EXTRA + 1"))
    calc.write_recipe(ref="v2")
    result = build(calc)
    assert calc.run_tool().startswith("value=2 ")
    kept = list((calc.workdir / "saved" / "calc").glob("checkout-*/notes.txt"))
    assert len(kept) == 1 and kept[0].read_text() == "mine\n"
    assert str(kept[0].parent) in result.stdout


def test_two_runs_never_install_into_one_prefix_at_once(calc: Calc, tmp_path: Path) -> None:
    with prefix_lock(calc.prefix) as locked:
        assert locked
        flags = [*calc.flags()]
        flags[flags.index("--workdir") + 1] = str(tmp_path / "other-work")
        result = run_cli("build", *flags, "--no-verify", expect=3)
    assert f"is installing into {calc.prefix}" in result.stderr
    assert f"pid {os.getpid()}" in result.stderr
    assert not (calc.prefix / "bin").exists()  # nothing was installed meanwhile
    build(calc)  # the lock is gone with its holder


def test_a_busy_workdir_exits_3(calc: Calc) -> None:
    from rocbuild.run.state.state import StateDir

    with StateDir.shared(calc.workdir).lock():
        result = run_cli("build", *calc.flags(), "--no-verify", expect=3)
    assert "is using the workdir" in result.stderr


# --- guards that had no test (each fails when its line goes) ---------------------------------

def test_a_new_ref_is_fetched_and_built(calc: Calc) -> None:
    build(calc)
    calc.tag("v2", CALC_C.replace("VALUE + EXTRA", "VALUE + EXTRA + 1"))
    calc.write_recipe(ref="v2")
    assert "ref changed: v1 -> v2" in str(status_steps(calc)["fetch"]["why"])
    build(calc)
    assert calc.run_tool().startswith("value=2 ")


def test_offline_takes_a_new_ref_from_a_local_mirror_but_never_downloads(calc: Calc) -> None:
    """--offline means "the source cache and mirrors only": a new ref comes from the local
    (file://) mirror, while a ref from a remote URL is refused."""
    build(calc)
    calc.tag("v2", CALC_C.replace("VALUE + EXTRA", "VALUE + EXTRA + 1"))
    calc.write_recipe(ref="v2")
    run_cli("build", *calc.flags(), "--no-verify", "--offline", expect=0)
    assert calc.run_tool().startswith("value=2 ")
    calc.write_recipe(ref="v3")  # not in the cache; without the mirror its URL is remote
    flags = calc.flags()
    del flags[flags.index("--mirror"):flags.index("--mirror") + 2]
    result = run_cli("build", *flags, "--no-verify", "--offline", expect=2)
    assert "--offline forbids downloading it" in result.output, result.explain()
    assert calc.run_tool().startswith("value=2 ")


def test_a_deleted_checkout_is_fetched_again_without_saving_edits(calc: Calc) -> None:
    """Deleting the checkout is no edit of the user's: the patched files of the old checkout
    are not "reverted", so nothing is saved (no empty changes.patch, no warning
    that edits were saved)."""
    calc.add_patch("0001-value.patch", value_patch(1, 2))
    build(calc)
    shutil.rmtree(calc.checkout)
    result = run_cli("build", *calc.flags(), "--no-verify", expect=0)
    assert "▶ calc: fetch" in result.stdout, result.explain()
    assert "were saved" not in result.output and "your edits" not in result.output
    assert not (calc.workdir / "saved").exists()
    assert calc.run_tool().startswith("value=2 ")


def test_a_changed_patch_is_applied_to_the_pristine_commit(calc: Calc) -> None:
    patch = calc.add_patch("0001-value.patch", value_patch(1, 2))
    build(calc)
    assert calc.run_tool().startswith("value=2 ")
    patch.write_text(value_patch(1, 3))  # against v1: only applies to the pristine file
    build(calc)
    assert calc.run_tool().startswith("value=3 ")


def test_a_removed_patch_leaves_the_pristine_file(calc: Calc) -> None:
    """Issue 25: the patch step skips its reset only when nothing was ever applied (a fresh
    checkout with no series); a series that is gone is still undone."""
    patch = calc.add_patch("0001-value.patch", value_patch(1, 2))
    build(calc)
    assert calc.run_tool().startswith("value=2 ")
    patch.unlink()
    result = build(calc)
    assert calc.run_tool().startswith("value=1 "), result.explain()
    assert "nothing to reset" not in (calc.workdir / "logs" / "calc" / "patch.log").read_text()


def test_removing_a_previous_install_never_touches_files_outside_the_prefix(
        calc: Calc, tmp_path: Path) -> None:
    build(calc)
    outside = tmp_path / "outside.txt"
    outside.write_text("not rocbuild's")
    with (calc.build_dir / "install_manifest.txt").open("a") as f:
        f.write(f"\n{outside}")
    (calc.prefix / "bin" / "calc-tool").unlink()
    build(calc)
    assert outside.read_text() == "not rocbuild's"
    assert calc.run_tool().startswith("value=1 ")


def test_rocm_path_in_the_steps_environment_is_the_prefix(calc: Calc) -> None:
    env_rocm = {"ROCM_PATH": "/opt/rocm-from-the-users-shell"}
    result = run_cli("build", *calc.flags(), "--no-verify", env=env_rocm, expect=0)
    assert result.returncode == 0
    assert calc.run_tool().endswith(f"rocm={calc.prefix}")


def test_the_fetch_itself_refuses_to_download_when_offline(calc: Calc) -> None:
    """The second guard behind preflight's: sources.fetch never downloads with offline set,
    even when the URL would answer (plain `doit` runs skip preflight)."""
    from rocbuild.errors import BuildFailed
    from rocbuild.run.sources import sources

    req = sources.FetchRequest(
        name="calc", url="https://example.invalid/calc.git", ref="v1", submodules=False,
        checkout_dir=calc.workdir / "src" / "calc", cache_root=calc.workdir / "cache" / "git",
        offline=True)
    with pytest.raises(BuildFailed, match="--offline forbids downloading"):
        sources.fetch(req, lambda line: None)
    assert not req.checkout_dir.exists()
    # a local repository is no download: allowed offline
    sources.fetch(dataclasses.replace(req, url=(calc.repos / "calc.git").as_uri()),
                  lambda line: None)
    assert (req.checkout_dir / "calc.c").is_file()


def test_plain_output_echoes_each_command_before_it_runs(calc: Calc) -> None:
    """cibuildwheel's habit: on a plain console each program a step runs is shown
    as `+ command` first, so a piped log says what ran."""
    out = build(calc).stdout
    configure = re.search(r"^\S+ \+ cmake -G Ninja -S \S+ -B \S+", out, re.M)
    compile_ = re.search(r"^\S+ \+ cmake --build \S+ --parallel \d+", out, re.M)
    assert configure and compile_, out
    assert out.index(configure.group(0)) < out.index("calc:configure | ")


def test_files_dated_in_the_future_are_found_and_the_build_recovers(chain: Chain) -> None:
    """Clock skew: the build trees and the whole prefix dated two days ahead, then
    an edit of alpha's source. Before, ninja looped on the CMake package files in the prefix
    ("manifest 'build.ninja' still dirty after 100 tries") on every run after, and alpha's
    object looked newer than the edit. Now the run says so, repairs the times and the result
    has the edit; the next run has nothing to do."""
    import time

    run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=0)
    future = time.time() + 2 * 86400
    for tree in (chain.workdir / "build", chain.prefix):
        for path in tree.rglob("*"):
            os.utime(path, (future, future), follow_symlinks=False)
    source = chain.workdir / "src" / "alpha" / "alpha.c"
    source.write_text(source.read_text().replace("return 1 * FACTOR", "return 3 * FACTOR"))
    result = run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=0)
    assert "dated in the future (clock skew)" in result.output, result.explain()
    assert "still dirty" not in result.output
    assert chain.run_gamma() == "gamma 13"
    again = run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=0)
    assert "nothing to do" in again.stdout, again.explain()
