"""Shared fixtures: every test runs with a clean rocbuild environment in its own folder."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ROCBUILD_* variable, config file or cache of the developer's leaks into a test."""
    for name in list(os.environ):
        # CCACHE_*/DISTCC_*: a developer's compiler cache or hosts would change what runs
        if name.startswith(("ROCBUILD_", "CCACHE_", "DISTCC_")):
            monkeypatch.delenv(name)
    for name in ("COLUMNS", "LINES"):  # output is laid out for 80 columns unless a test says
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local/state"))
    monkeypatch.setenv("DOCKER_CONFIG", str(home / ".docker"))  # no registry login leaks in
    monkeypatch.chdir(tmp_path)


RecipeWriter = Callable[..., Path]


@pytest.fixture
def write_recipes(tmp_path: Path) -> RecipeWriter:
    """Write a recipes folder: ``write_recipes(stack=..., a="...toml...", ...)``.

    Keyword names are component names (``_`` stands for ``.`` is not needed: pass a dict via
    ``files`` for odd names). Returns the folder.
    """

    def write(stack: str | None = None, folder: str = "recipes",
              files: dict[str, str] | None = None, **recipes: str) -> Path:
        root = tmp_path / folder
        root.mkdir(exist_ok=True)
        (root / "stack.toml").write_text(textwrap.dedent(stack or """
            [stack]
            version = "6.4.3"
            targets = ["gfx906"]
            prefix = "/opt/rocm-{{ series }}-{{ targets | join('-') }}"
        """))
        for name, text in {**recipes, **(files or {})}.items():
            (root / f"{name}.toml").write_text(textwrap.dedent(text))
        return root

    return write


def require_tool(name: str) -> str:
    """The tool's path; skip the test when it is missing, or fail when CI says tools are
    required (RB_TEST_REQUIRE_TOOLS=1 in .ci/run), so a missing install can't pass quietly."""
    import shutil

    path = shutil.which(name)
    if path is None:
        if os.environ.get("RB_TEST_REQUIRE_TOOLS"):
            pytest.fail(f"{name} is not installed but RB_TEST_REQUIRE_TOOLS is set")
        pytest.skip(f"{name} is not installed")
    return path
