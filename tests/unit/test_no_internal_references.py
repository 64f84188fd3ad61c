"""Users never see the project's internal references: doctor said "the source
articles recommend Ubuntu 22.04" and `env --tune` cited 'the source article "AMD 本地大模型部署
实战" (seed 000)', which no user can open. Every string the package can print (string
constants other than docstrings and comments, the env-file templates, the failure table's
causes and fixes) is checked; the doctor of a captured host says the fact with a public
source instead."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.cli import run_cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

PACKAGE = Path(__file__).resolve().parents[2] / "rocbuild"
HOSTS = Path(__file__).resolve().parents[1] / "data" / "hosts"
INTERNAL = re.compile(r"source articles?|\bseed \d{3}\b|\(seed|\barticle \d{3}\b|DESIGN\.md|"
                      r"anchors\.md|gfx906-facts|rocm-6\.4-components\.md|doit-notes\.md|"
                      r"\breference/[\w.-]+\.md|本地")


def printable_strings(path: Path) -> list[str]:
    """The string constants of a module, without its docstrings (maintainers read those)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_no_string_the_package_prints_cites_an_internal_reference() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += [(path.name, s) for s in printable_strings(path) if INTERNAL.search(s)]
    for path in sorted(PACKAGE.rglob("*.j2")):
        found += [(path.name, line) for line in path.read_text(encoding="utf-8").splitlines()
                  if INTERNAL.search(line)]
    table = tomllib.loads((PACKAGE / "checks" / "diagnose.toml").read_text(encoding="utf-8"))
    for rows in table.values():
        for row in rows if isinstance(rows, list) else []:
            found += [("diagnose.toml", row[key]) for key in ("cause", "fix")
                      if INTERNAL.search(row.get(key, ""))]
    assert found == []


def test_doctor_says_the_fact_and_a_public_source(tmp_path: Path) -> None:
    out = " ".join(run_cli("doctor", "--root", str(HOSTS / "rdna2"), "--user", "x",
                           cwd=tmp_path).stdout.split())
    assert "Debian" in out and "AMD lists for ROCm 6.4 (https://rocm.docs.amd.com/" in out, out
    assert not INTERNAL.search(out), out
