"""The user's recipe overlay: a recipe in ~/.config/rocbuild/recipes replaces the
shipped one of its name (a copy rocbuild ships cannot be edited after `pip install .`), plan
names where each recipe came from, and `rocbuild recipes edit NAME` puts a copy there. Every
rocbuild here runs as a child process (tests/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import REPO, run_cli

pytestmark = pytest.mark.e2e


def overlay_dir(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".config" / "rocbuild" / "recipes"  # conftest's XDG_CONFIG_HOME


def plan(tmp_path: Path, *args: str) -> dict:
    return json.loads(run_cli("plan", "--json", "--workdir", str(tmp_path / "work"), *args,
                              expect=0).stdout)


@pytest.mark.slow
def test_recipes_edit_puts_a_copy_in_the_overlay_that_replaces_the_shipped_one(
        tmp_path: Path) -> None:
    shipped = REPO / "recipes" / "rocm-cmake.toml"
    done = run_cli("recipes", "edit", "rocm-cmake", "--workdir", str(tmp_path / "work"),
                   expect=0)
    mine = overlay_dir(tmp_path) / "rocm-cmake.toml"
    assert mine.read_text() == shipped.read_text()
    assert done.stdout.splitlines()[-1] == str(mine)  # no $EDITOR / no terminal: the path
    mine.write_text(mine.read_text().replace('summary = "', 'summary = "MINE: ', 1))
    doc = plan(tmp_path)
    comp = next(c for c in doc["components"] if c["name"] == "rocm-cmake")
    assert comp["summary"].startswith("MINE: ") and comp["recipe"] == str(mine)
    assert comp["recipe_source"] == "overlay"
    other = next(c for c in doc["components"] if c["name"] == "rocblas")
    assert other["recipe_source"] == "recipes"
    assert doc["overlay"]["recipes"] == ["rocm-cmake"]
    text = run_cli("plan", "--workdir", str(tmp_path / "work"), expect=0).stdout
    assert "from your overlay" in text and "recipes rocm-cmake" in " ".join(text.split())
    # a second edit keeps the user's copy
    again = run_cli("recipes", "edit", "rocm-cmake", "--workdir", str(tmp_path / "work"),
                    expect=0)
    assert "already in your overlay" in " ".join(again.stdout.split())
    assert mine.read_text().count("MINE: ") == 1
    unknown = run_cli("recipes", "edit", "rocm-cmak", expect=2)
    assert "did you mean 'rocm-cmake'" in unknown.stderr.lower(), unknown.explain()


def test_an_overlay_patch_series_replaces_the_shipped_one(tmp_path: Path) -> None:
    series = overlay_dir(tmp_path).parent / "patches" / "rocm-cmake"
    series.mkdir(parents=True)
    (series / "0001-mine.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    comp = next(c for c in plan(tmp_path)["components"] if c["name"] == "rocm-cmake")
    assert comp["patches"] == [str(series / "0001-mine.patch")]
    assert comp["recipe_source"] == "overlay"


def test_an_overlay_never_changes_a_recipes_folder_the_user_gave(tmp_path: Path,
                                                                    write_recipes) -> None:
    folder = write_recipes(a='[source]\ngit = "https://e.com/a.git"\nref = "v1"\n[cmake]\n')
    overlay_dir(tmp_path).mkdir(parents=True)
    (overlay_dir(tmp_path) / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/x"\n')
    doc = plan(tmp_path, "--recipes", str(folder), "a")
    assert doc["version"] == "6.4.3" and doc["overlay"] is None
