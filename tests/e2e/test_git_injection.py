"""git never reads a recipe string as an option: with the load-time check bypassed, a ref or
URL of ``--upload-pack=<command>`` reaches git after ``--`` and the command never runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.errors import BuildFailed
from rocbuild.run.sources import sources
from tests.cli import run_cli
from tests.conftest import require_tool
from tests.support.chain import make_repo

pytestmark = pytest.mark.e2e


def _request(tmp_path: Path, url: str, ref: str) -> sources.FetchRequest:
    return sources.FetchRequest(name="a", url=url, ref=ref, submodules=False,
                                checkout_dir=tmp_path / "src" / "a",
                                cache_root=tmp_path / "cache", attempts=1, retry_delay=0)


@pytest.mark.parametrize("where", ["ref", "url"])
def test_upload_pack_in_a_ref_or_url_never_runs(tmp_path: Path, where: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    require_tool("git")
    repo = make_repo(tmp_path / "repos", "a", {"f.txt": "x\n"})
    canary = tmp_path / "CANARY"
    evil = f"--upload-pack=touch {canary};git-upload-pack"
    monkeypatch.chdir(tmp_path)
    url, ref = (repo.as_uri(), evil) if where == "ref" else (evil, "v1")
    with pytest.raises(BuildFailed):
        sources.fetch(_request(tmp_path, url, ref), lambda line: None)
    assert not canary.exists(), "git ran the command given as --upload-pack"


def test_the_same_ref_in_a_recipe_is_refused_at_load(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\nprefix = "/opt/x"\n')
    (recipes / "a.toml").write_text('[source]\ngit = "https://example.invalid/a.git"\n'
                                    f'ref = "--upload-pack=touch {tmp_path}/CANARY"\n[cmake]\n')
    result = run_cli("build", "--recipes", str(recipes), "--workdir", str(tmp_path / "w"),
                     "--prefix", str(tmp_path / "p"), expect=2)
    assert "key 'source.ref'" in result.stderr and "a.toml" in result.stderr
    assert not (tmp_path / "CANARY").exists() and not (tmp_path / "w" / "cache").exists()
