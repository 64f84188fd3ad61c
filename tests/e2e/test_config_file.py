"""rocbuild.toml is found as cargo and git find their files: in the current folder
or the nearest one above it, never above the home folder; `rocbuild config` shows the file
read and every setting with its source. Every rocbuild here runs as a child process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def stack_folder(chain: Chain) -> Path:
    """The chain's project folder with a rocbuild.toml naming its folders relative to it."""
    project = chain.recipes.parent
    (project / "rocbuild.toml").write_text(
        '[rocbuild]\nrecipes = "recipes"\nworkdir = "../work"\nprefix = "../prefix"\njobs = 3\n')
    return project


def test_a_subfolder_of_a_stack_reads_the_stacks_rocbuild_toml(chain: Chain) -> None:
    project = stack_folder(chain)
    deep = project / "src" / "deeper"
    deep.mkdir(parents=True)
    plan = json.loads(run_cli("plan", "--json", cwd=deep, expect=0).stdout)
    assert sorted(c["name"] for c in plan["components"]) == ["alpha", "beta", "gamma"]
    assert plan["prefix"] == str(chain.prefix)
    config = json.loads(run_cli("config", "--json", cwd=deep, expect=0).stdout)
    assert config["config_file"] == str(project / "rocbuild.toml")
    rows = {row["name"]: row for row in config["settings"]}
    assert rows["recipes"] == {"name": "recipes", "value": str(chain.recipes),
                               "source": f"config {project / 'rocbuild.toml'}"}
    assert rows["workdir"]["value"] == str(chain.workdir)
    assert rows["jobs"]["value"] == "3"
    assert rows["parallel"] == {"name": "parallel", "value": "auto", "source": "default"}
    # a flag still wins, and the table says so
    text = run_cli("config", "--jobs", "2", cwd=deep, expect=0).stdout
    assert f"config file: {project / 'rocbuild.toml'}" in " ".join(text.split())
    assert "flag --jobs" in text


def test_no_config_file_above_the_home_folder_is_read(tmp_path: Path) -> None:
    home = tmp_path / "people" / "me"
    inside = home / "stack" / "sub"
    inside.mkdir(parents=True)
    (tmp_path / "people" / "rocbuild.toml").write_text('[rocbuild]\njobs = 7\n')
    config = json.loads(run_cli("config", "--json", cwd=inside, env={"HOME": str(home)},
                                expect=0).stdout)
    assert config["config_file"] is None, config
    assert str(home / "rocbuild.toml") in config["searched"]
    assert str(tmp_path / "people" / "rocbuild.toml") not in config["searched"]
    # the home folder's own file is read, from anywhere inside it
    (home / "rocbuild.toml").write_text('[rocbuild]\njobs = 5\n')
    config = json.loads(run_cli("config", "--json", cwd=inside, env={"HOME": str(home)},
                                expect=0).stdout)
    assert config["config_file"] == str(home / "rocbuild.toml")
    # outside the home folder the search goes up to the root
    outside = tmp_path / "srv" / "stack" / "sub"
    outside.mkdir(parents=True)
    (tmp_path / "srv" / "rocbuild.toml").write_text('[rocbuild]\njobs = 4\n')
    config = json.loads(run_cli("config", "--json", cwd=outside, env={"HOME": str(home)},
                                expect=0).stdout)
    assert config["config_file"] == str(tmp_path / "srv" / "rocbuild.toml")
