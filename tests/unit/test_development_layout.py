"""docs/development.md's Layout lists every module of the package, and only modules that
exist: a newcomer reads the list to find where a thing lives."""

from __future__ import annotations

import fnmatch
import re

from tests.conftest import REPO

PACKAGE = REPO / "rocbuild"


def documented() -> dict[str, list[str]]:
    """folder (``""`` for the package's own) -> the names the Layout's block gives it: a line
    that starts with ``folder/`` opens a folder, the lines indented under it continue it, and
    ``#`` lines are words about it."""
    text = (REPO / "docs" / "development.md").read_text()
    block = re.search(r"^## Layout\n.*?^```\n(.*?)^```$", text, re.S | re.M)
    assert block, "docs/development.md has no Layout block"
    folders: dict[str, list[str]] = {}
    names: list[str] = []
    for line in block.group(1).splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if not line[0].isspace():  # a folder's first line
            folder = words.pop(0)
            assert folder.endswith("/"), f"a Layout line starts with a folder: {line!r}"
            folder = "" if folder == "rocbuild/" else folder.rstrip("/")
            assert folder not in folders, f"{folder}/ is listed twice"
            names = folders[folder] = []
        names.extend(words)
    return folders


def modules() -> dict[str, set[str]]:
    """folder -> the package's modules there, ``__init__`` and ``__main__`` aside."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        folder = path.parent.relative_to(PACKAGE).as_posix()
        found.setdefault("" if folder == "." else folder, set())
        if not path.stem.startswith("__"):
            found["" if folder == "." else folder].add(path.stem)
    return found


def test_the_layout_names_every_module_and_no_gone_one() -> None:
    listed, real = documented(), modules()
    missing, gone = [], []
    for folder, names in real.items():
        if not names:
            continue  # a folder of folders (run/)
        patterns = listed.get(folder, [])
        missing += [f"{folder}/{n}" for n in sorted(names)
                    if not any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    for folder, patterns in listed.items():
        gone += [f"{folder}/{p}" for p in patterns
                 if not any(fnmatch.fnmatchcase(n, p) for n in real.get(folder, ()))]
    assert not missing, f"docs/development.md's Layout misses {missing}"
    assert not gone, f"docs/development.md's Layout lists modules that are gone: {gone}"
