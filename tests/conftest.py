"""Shared fixtures: every test runs with a clean rocbuild environment in its own folder."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
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


INTERNAL_ERROR = "rocbuild error:"  # runner.INTERNAL_ERROR: how a step log marks one


@pytest.fixture(autouse=True)
def no_internal_errors_in_step_logs(request: pytest.FixtureRequest, tmp_path: Path
                                    ) -> Iterator[None]:
    """Fail a test when a step log under its folder holds an error inside rocbuild: the
    runner turns any exception into the step's failure (so the user never sees a traceback),
    which must not let a bug pass as an ordinary failed build. A test that provokes one on
    purpose says so with ``@pytest.mark.internal_error``."""
    yield
    if request.node.get_closest_marker("internal_error") is not None:
        return
    found = []
    for log in tmp_path.rglob("*.log"):
        if "logs" in log.relative_to(tmp_path).parts[:-1] and log.is_file():
            with log.open(encoding="utf-8", errors="replace") as f:
                if any(INTERNAL_ERROR in line for line in f):
                    found.append(log)
    if found:
        text = found[0].read_text(errors="replace")
        pytest.fail(f"an error inside rocbuild in {', '.join(map(str, found))}:\n"
                    + text[text.index(INTERNAL_ERROR):][:3000], pytrace=False)


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
