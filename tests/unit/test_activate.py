"""Prefix switching on a temporary link, build-info records and the prefix listing.
A real SIGKILL in the middle of a switch is in tests/e2e/test_activate_kill.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rocbuild.cli import cmd_prefixes
from rocbuild.cli import main as cli
from rocbuild.errors import ConfigError, RocbuildError
from rocbuild.model import layout
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from rocbuild.prefix import activate, buildinfo
from rocbuild.prefix.activate import activate_previous, current_target, temp_link_path
from rocbuild.prefix.buildinfo import BuildInfo, ComponentInfo, read_build_info, write_build_info


def make_prefix(base: Path, name: str, *, complete: bool = True, verified: bool = True,
                targets: tuple[str, ...] = ("gfx906",)) -> Path:
    prefix = base / name
    info = BuildInfo(rocbuild_version="0.1.0", stack="rocm", version="6.4.3", series="6.4",
                     targets=targets, prefix=str(prefix), recipe_fingerprint="f" * 64,
                     components={"llvm": ComponentInfo("rocm-6.4.3", "a" * 40, "b" * 64)},
                     started="2026-11-30T20:00:00+00:00")
    done = info.finish(when="2026-12-01T04:00:00+00:00", verified=verified)
    write_build_info(prefix, done if complete else info)
    return prefix


def test_an_unproven_prefix_needs_the_users_word(opt: Path) -> None:
    unproven = make_prefix(opt, "unproven", verified=False)
    link = opt / "rocm"
    with pytest.raises(ConfigError, match="complete but unproven"):
        activate.activate(unproven, link)
    assert not link.is_symlink()
    switch = activate.activate(unproven, link, unproven=True)
    assert switch.unproven and current_target(link) == unproven
    state = activate.read_state(link)
    assert state is not None and state.unproven


@pytest.fixture
def opt(tmp_path: Path) -> Path:
    folder = tmp_path / "opt"
    folder.mkdir()
    return folder


def test_switch_switch_again_and_roll_back(opt: Path) -> None:
    a, b = make_prefix(opt, "rocm-6.4-gfx906"), make_prefix(opt, "rocm-6.4-gfx1030")
    link = opt / "rocm"
    first = activate.activate(a, link)
    assert current_target(link) == a and first.previous is None
    assert (link / ".rocbuild" / "build-info.json").is_file()  # the link really leads there
    second = activate.activate(b, link)
    assert current_target(link) == b and second.previous == a
    back = activate_previous(link)
    assert current_target(link) == a and back.previous == b
    again = activate_previous(link)  # --previous twice toggles
    assert current_target(link) == b and again.previous == a


def test_activating_the_current_prefix_changes_nothing(opt: Path) -> None:
    a, b = make_prefix(opt, "a"), make_prefix(opt, "b")
    link = opt / "rocm"
    activate.activate(a, link)
    activate.activate(b, link)
    same = activate.activate(b, link)
    assert same.previous == b == same.target
    assert activate_previous(link).target == a  # the remembered previous survived


def test_an_incomplete_build_is_refused_and_the_link_stays(opt: Path) -> None:
    good, half = make_prefix(opt, "good"), make_prefix(opt, "half", complete=False)
    link = opt / "rocm"
    activate.activate(good, link)
    with pytest.raises(ConfigError, match="did not complete") as caught:
        activate.activate(half, link)
    assert "rocbuild build" in (caught.value.tip or "")
    assert current_target(link) == good


def test_a_prefix_without_build_info_or_not_a_folder_is_refused(opt: Path) -> None:
    (opt / "rocm-6.2.0").mkdir()
    with pytest.raises(ConfigError, match="not built by rocbuild"):
        activate.activate(opt / "rocm-6.2.0", opt / "rocm")
    with pytest.raises(ConfigError, match="not a directory"):
        activate.activate(opt / "nothing-here", opt / "rocm")
    assert not (opt / "rocm").exists() and not (opt / "rocm").is_symlink()


def test_a_real_directory_at_the_link_path_is_never_replaced(opt: Path) -> None:
    packaged = opt / "rocm"
    (packaged / "bin").mkdir(parents=True)
    with pytest.raises(ConfigError, match="real directory") as caught:
        activate.activate(make_prefix(opt, "rocm-6.4-gfx906"), packaged)
    assert "--link" in (caught.value.tip or "")
    assert packaged.is_dir() and not packaged.is_symlink() and (packaged / "bin").is_dir()


def test_the_link_itself_is_not_a_prefix(opt: Path) -> None:
    with pytest.raises(ConfigError, match="the link itself"):
        activate.activate(opt / "rocm", opt / "rocm")


def test_a_failed_rename_leaves_the_old_link_and_no_temp_link(
        opt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = make_prefix(opt, "a"), make_prefix(opt, "b")
    link = opt / "rocm"
    activate.activate(a, link)

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(activate.os, "replace", broken_replace)
    with pytest.raises(RocbuildError, match=r"cannot change .*Input/output error") as info:
        activate.activate(b, link)
    assert info.value.exit_code == 1  # not a permission problem: the switch itself failed
    monkeypatch.undo()
    assert current_target(link) == a
    assert not temp_link_path(link).is_symlink()
    assert activate.read_state(link) == activate.LinkState(current=a, previous=None)


def test_a_stray_temp_link_from_a_killed_switch_is_cleaned_by_the_next_one(opt: Path) -> None:
    a, b = make_prefix(opt, "a"), make_prefix(opt, "b")
    link = opt / "rocm"
    activate.activate(a, link)
    os.symlink(b, temp_link_path(link))  # what a SIGKILL between symlink and rename leaves
    assert current_target(link) == a  # the old link is intact
    switch = activate.activate(b, link)
    assert switch.removed_stray
    assert current_target(link) == b and not temp_link_path(link).is_symlink()


def test_a_crash_after_the_rename_but_before_the_state_write_still_rolls_back(
        opt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = make_prefix(opt, "a"), make_prefix(opt, "b")
    link = opt / "rocm"
    activate.activate(a, link)

    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(activate, "_write_state", crash)
    with pytest.raises(KeyboardInterrupt):
        activate.activate(b, link)
    monkeypatch.undo()
    assert current_target(link) == b  # the rename happened, the state still says "a"
    assert activate.previous_target(link) == a
    assert activate_previous(link).target == a


def test_previous_without_history_is_a_clear_error(opt: Path) -> None:
    with pytest.raises(ConfigError, match="no earlier activation"):
        activate_previous(opt / "rocm")
    activate.activate(make_prefix(opt, "a"), opt / "rocm")
    with pytest.raises(ConfigError, match="nothing to go back to"):
        activate_previous(opt / "rocm")


def test_previous_refuses_a_prefix_that_is_gone(opt: Path) -> None:
    a, b = make_prefix(opt, "a"), make_prefix(opt, "b")
    link = opt / "rocm"
    activate.activate(a, link)
    activate.activate(b, link)
    (a / ".rocbuild" / "build-info.json").unlink()
    with pytest.raises(ConfigError, match="not built by rocbuild"):
        activate_previous(link)
    assert current_target(link) == b


def test_cli_activate_and_previous(opt: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_prefix(opt, "a"), make_prefix(opt, "b")
    link = opt / "rocm"
    assert cli.main(["activate", str(a), "--link", str(link)]) == 0
    assert cli.main(["activate", str(b), "--link", str(link)]) == 0
    out = capsys.readouterr().out
    assert f"{link} -> {b} (was {a})" in " ".join(out.split())  # wrapped at spaces
    assert cli.main(["activate", "--previous", "--link", str(link)]) == 0
    assert current_target(link) == a
    half = make_prefix(opt, "half", complete=False)
    assert cli.main(["activate", str(half), "--link", str(link)]) == 2
    assert "did not complete" in capsys.readouterr().err


def test_cli_link_from_the_environment(opt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(activate.LINK_ENV, str(opt / "rocm-active"))
    assert cli.main(["activate", str(make_prefix(opt, "a"))]) == 0
    assert current_target(opt / "rocm-active") == opt / "a"


# --- build-info ----------------------------------------------------------------------------
def test_build_info_round_trips_and_keeps_unknown_fields(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path, "p", verified=False)
    info = read_build_info(prefix)
    assert info is not None and info.complete and not info.verified
    assert info.components["llvm"].commit == "a" * 40
    path = layout.info_path(prefix)
    doc = json.loads(path.read_text())
    for key in ("rocbuild_version", "version", "targets", "recipe_fingerprint", "components",
                "started", "finished", "complete", "verified"):
        assert key in doc
    doc["future_field"] = {"x": 1}
    path.write_text(json.dumps(doc))
    again = read_build_info(prefix)
    assert again is not None
    write_build_info(prefix, again)
    assert json.loads(path.read_text())["future_field"] == {"x": 1}
    assert [p.name for p in path.parent.iterdir()] == ["build-info.json"]  # no temp files


def test_missing_and_corrupt_build_info(tmp_path: Path) -> None:
    assert read_build_info(tmp_path) is None
    path = layout.info_path(tmp_path)
    path.parent.mkdir()
    path.write_text("{ not json")
    with pytest.raises(ConfigError, match="not a rocbuild build-info"):
        read_build_info(tmp_path)


def test_new_build_info_from_a_stack(write_recipes) -> None:
    folder = write_recipes(alpha="""
        [source]
        git = "https://example.invalid/alpha.git"
        ref = "rocm-{{ version }}"
        [cmake]
    """)
    stack = load_stack(resolve({"recipes": str(folder)}, env={}))
    info = buildinfo.new_build_info(stack, commits={"alpha": "c" * 40},
                                    started="2026-01-01T00:00:00+00:00")
    assert not info.complete and info.finished is None
    assert info.targets == ("gfx906",) and info.version == "6.4.3"
    assert info.components["alpha"] == ComponentInfo("rocm-6.4.3", "c" * 40,
                                                     stack.components["alpha"].fingerprint)
    other = load_stack(resolve({"recipes": str(folder), "target": "gfx1030"}, env={}))
    assert buildinfo.recipe_fingerprint(other) != info.recipe_fingerprint
    done = info.finish(verified=True)
    assert done.complete and done.verified and done.finished


# --- prefixes ------------------------------------------------------------------------------
def test_scan_lists_only_prefixes_with_build_info(opt: Path, tmp_path: Path) -> None:
    make_prefix(opt, "rocm-6.4-gfx906")
    make_prefix(opt, "rocm-6.4-gfx1030", complete=False)
    (opt / "rocm-6.2.0" / "bin").mkdir(parents=True)  # a packaged ROCm: not listed
    broken = opt / "rocm-broken"
    layout.info_path(broken).parent.mkdir(parents=True)
    layout.info_path(broken).write_text("[]")
    elsewhere = make_prefix(tmp_path / "home", "my-rocm")
    found = buildinfo.scan_prefixes(opt, (elsewhere, opt / "rocm-6.4-gfx906"))
    assert [f.path for f in found] == sorted(f.path for f in found)
    names = {f.path.name: f for f in found}
    assert set(names) == {"my-rocm", "rocm-6.4-gfx1030", "rocm-6.4-gfx906", "rocm-broken"}
    half = names["rocm-6.4-gfx1030"].info
    assert half is not None and not half.complete
    assert names["rocm-broken"].info is None
    assert "not a rocbuild" in (names["rocm-broken"].error or "")


def test_cli_prefixes_json_marks_the_active_one(opt: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_prefix(opt, "rocm-6.4-gfx906"), make_prefix(opt, "rocm-6.4-gfx1030")
    activate.activate(a, opt / "rocm")
    monkeypatch.setattr(cmd_prefixes, "SEARCH_DIR", opt)
    assert cli.main(["prefixes", "--json", "--link", str(opt / "rocm"),
                     "--prefix", str(opt / "rocm-6.4-gfx906")]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_name = {Path(p["prefix"]).name: p for p in doc["prefixes"]}
    assert by_name["rocm-6.4-gfx906"]["active"] is True
    assert by_name["rocm-6.4-gfx1030"]["active"] is False
    assert by_name["rocm-6.4-gfx906"]["targets"] == ["gfx906"]
    assert by_name["rocm-6.4-gfx906"]["complete"] is True
    assert str(b) in {p["prefix"] for p in doc["prefixes"]}
    assert cli.main(["prefixes", "--link", str(opt / "rocm")]) == 0
    assert "rocm-6.4-gfx906" in capsys.readouterr().out


def test_cli_activate_without_permission_exits_2(opt: Path, tmp_path: Path) -> None:
    """A link this user may not change is bad input (exit 2: sudo or --link), with no
    traceback. Root may write anywhere a test can make, but not in sysfs."""
    from tests.cli import run_cli

    prefix = make_prefix(opt, "rocm-6.4-gfx906")
    if os.geteuid() == 0:
        link = Path("/sys/rocbuild-test-link")
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        link = locked / "rocm"
    result = run_cli("activate", str(prefix), "--link", str(link), expect=2)
    assert f"rocbuild: error: cannot change {link}" in result.stderr
    assert "TIP: run it with sudo, or use --link" in result.stderr
    assert not link.is_symlink()
