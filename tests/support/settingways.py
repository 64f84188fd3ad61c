"""A setting given each of the three ways a user can (flag, environment variable, the
project's rocbuild.toml), for tests parametrized over ``how``; with the words rocbuild uses to
say where the value came from."""

from __future__ import annotations

from pathlib import Path

WAYS = ("flag", "env", "config")


def given(how: str, folder: Path, flag: list[str], variable: dict[str, str],
          config: str) -> tuple[list[str], dict[str, str], str]:
    """The extra arguments, the environment and the source words (``flag --x``, ``env
    ROCBUILD_X``, ``config <file>``) of the setting given ``how``; ``config`` is written to
    ``folder``/rocbuild.toml for that way."""
    if how == "flag":
        return flag, {}, f"flag {flag[0]}"
    if how == "env":
        return [], variable, f"env {next(iter(variable))}"
    (folder / "rocbuild.toml").write_text(config)
    return [], {}, f"config {folder / 'rocbuild.toml'}"
