"""The layers import one way (README, Development): the CLI uses everything; running a build
uses the model, the checks and the prefix; the checks and the prefix use the model only; the
model uses nothing of the others. errors, faults, files and proc (the one way to run a
program) are shared by all."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rocbuild"
SHARED = {"errors", "faults", "files", "proc", "__init__", "__version__"}
ALLOWED = {
    "model": {"model"},
    "checks": {"checks", "model"},
    "prefix": {"prefix", "model"},
    "run": {"run", "model", "checks", "prefix"},
    "bench": {"bench", "model", "checks", "prefix"},
    "cli": {"cli", "run", "model", "checks", "prefix", "bench"},
}


def imported_layers(path: Path) -> set[tuple[str, int]]:
    """The rocbuild layers a module imports, with the line of each import (lazy ones too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "rocbuild":
                names = [f"rocbuild.{a.name}" for a in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "rocbuild" and len(parts) > 1 and parts[1] not in SHARED:
                found.add((parts[1], node.lineno))
    return found


def test_every_module_sits_in_a_layer() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.stem not in SHARED | {"__main__"})
    assert loose == [], f"put these in a layer folder: {loose}"


def test_imports_go_one_way() -> None:
    wrong = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for used, line in sorted(imported_layers(path)):
                if used not in allowed:
                    wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports rocbuild.{used}")
    assert wrong == [], "layers import one way:\n" + "\n".join(wrong)
