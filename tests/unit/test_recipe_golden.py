"""Golden files: the configure command and environment of every shipped recipe, rendered for
gfx906 and for gfx906,gfx90a. A recipe change shows up as a reviewable diff of these files.

To accept a change: ``RB_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_recipe_golden.py``
(not ROCBUILD_*: conftest removes those), then review ``git diff tests/golden``.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from rocbuild.model import launchers
from rocbuild.model.buildsystems.cmake import configure_argv
from rocbuild.model.graph import Component, Stack, load_stack
from rocbuild.model.recipes import load_recipes
from rocbuild.model.settings import resolve
from rocbuild.model.steps import env_overrides

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
WORKDIR = "/work/rb"
JOBS = {"compile": 4, "link": 2, "tensile": 4}  # fixed: job counts follow the host otherwise
PAIRED = ("-G", "-S", "-B")  # options whose value is the next argument: kept on one line


def shipped_stack(target: str) -> Stack:
    # ccache off, and no launcher programs on the host: the launcher would otherwise follow
    # what this host has installed (tests/unit/test_launchers)
    settings = resolve({"workdir": WORKDIR, "target": target, "ccache": "off"}, env={})
    return launchers.attach(load_stack(settings, sorted(load_recipes(settings.recipes).recipes)),
                            settings, launchers.HostTools(), env={})


def command_lines(argv: list[str]) -> list[str]:
    """One argument per line (paired options together) so a diff names the option."""
    lines, i = [], 1
    while i < len(argv):
        if argv[i] in PAIRED and i + 1 < len(argv):
            lines.append(f"{argv[i]} {shlex.quote(argv[i + 1])}")
            i += 2
        else:
            lines.append(shlex.quote(argv[i]))
            i += 1
    return [argv[0] + " \\", *(f"  {line} \\" for line in lines[:-1]), f"  {lines[-1]}"]


def component_block(stack: Stack, comp: Component) -> list[str]:
    out = [f"## {comp.name}"]
    if not comp.builds:
        where = comp.ref or f"checkout of {comp.checkout}"
        return [*out, f"# source only, not built ({where})"]
    out.append("# env")
    for key, value in env_overrides(stack, comp).items():
        if value.endswith(":$PATH"):  # keep $PATH expandable, as `plan --commands` prints it
            out.append(f'{key}={shlex.quote(value[: -len(":$PATH")])}:"$PATH"')
        else:
            out.append(f"{key}={shlex.quote(value)}")
    out.append("# configure")
    out += command_lines(configure_argv(stack, comp, JOBS))
    return out


def golden_text(stack: Stack) -> str:
    head = [f"# rocbuild configure commands for --target {','.join(map(str, stack.targets))}",
            f"# --workdir {WORKDIR}, prefix {stack.prefix}, jobs {JOBS}",
            "# regenerate: RB_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_recipe_golden.py"]
    blocks = [component_block(stack, c) for c in stack.selected()]
    return "\n\n".join("\n".join(b) for b in [head, *blocks]) + "\n"


@pytest.mark.parametrize(("target", "file"), [("gfx906", "configure-gfx906.txt"),
                                              ("gfx906,gfx90a", "configure-gfx906-gfx90a.txt")])
def test_configure_commands_match_golden(target: str, file: str) -> None:
    text = golden_text(shipped_stack(target))
    path = GOLDEN / file
    if os.environ.get("RB_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{path} is missing; create it with RB_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"rendered commands differ from {path}; if the change is intended, rerun with "
        "RB_UPDATE_GOLDEN=1 and review the diff")


def test_golden_covers_every_recipe_and_both_targets() -> None:
    """The files are not stale copies: every recipe has a block, and the targets differ."""
    names = sorted(load_recipes(shipped_stack("gfx906").recipes.folder).recipes)
    one = (GOLDEN / "configure-gfx906.txt").read_text()
    two = (GOLDEN / "configure-gfx906-gfx90a.txt").read_text()
    for name in names:
        assert f"\n## {name}\n" in one and f"\n## {name}\n" in two
    assert "'-DGPU_TARGETS=gfx906;gfx90a'" in two and "gfx90a" not in one
    assert "/opt/rocm-6.4-gfx906-gfx90a" in two
