"""model/paths.py: the one "inside the prefix" answer, on text and through links."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.model.paths import resolves_within, within
from rocbuild.run.cache.artifacts import link_stays_inside


@pytest.mark.parametrize("path, inside", [
    ("/p", True), ("/p/", True), ("/p/lib/x", True), ("/p/./lib", True),
    ("/p/lib/../x", True), ("/p/../etc", False), ("/p/a/../../etc/x", False),
    ("/pp/x", False), ("/", False), ("/etc", False),
])
def test_within_compares_normalised_text(path: str, inside: bool) -> None:
    assert within(path, "/p") is inside
    assert within(Path(path), Path("/p/")) is inside


def test_pathlib_would_say_inside_where_within_does_not() -> None:
    # why one function: is_relative_to does not normalise '..'
    assert Path("/p/a/../../etc").is_relative_to("/p")
    assert not within("/p/a/../../etc", "/p")


def test_resolves_within_follows_links_of_paths_not_made_yet(tmp_path: Path) -> None:
    prefix, out = tmp_path / "p", tmp_path / "out"
    prefix.mkdir()
    out.mkdir()
    (prefix / "lib").symlink_to(out)
    (prefix / "share").mkdir()
    assert resolves_within(prefix / "share" / "new" / "x", prefix)
    assert not resolves_within(prefix / "lib" / "new" / "x", prefix)
    assert not (out / "new").exists()
    linked = tmp_path / "alias"
    linked.symlink_to(prefix)  # the prefix reached through a link of its own
    assert resolves_within(linked / "share", prefix)


@pytest.mark.parametrize("path, target, inside", [
    ("lib/libx.so", "libx.so.1", True), ("lib/a", "../bin/b", True),
    ("lib/a", "../../etc/passwd", False), ("a", "..", False), ("lib/a", "/p/bin/b", True),
    ("lib/a", "/etc/passwd", False), ("lib/a", ".", True),
])
def test_a_cache_link_is_judged_like_a_recipe_link(path: str, target: str, inside: bool) -> None:
    assert link_stays_inside(path, target, "/p") is inside
