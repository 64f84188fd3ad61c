"""Every input of the binary cache's key, pinned: each change below must give the
changed component (and what depends on it) another key, or `--cache` would serve an artifact
built from something else. Making the key use a patch's name instead of its contents, or
leaving out the targets, the base's fingerprint, the recipe's environment (its compiler), the
configure command or a dependency's key, fails one of these."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from rocbuild.model.graph import Stack, load_stack
from rocbuild.model.settings import resolve
from rocbuild.run.cache import cache
from tests.unit.test_base import make_base

SRC = '[source]\ngit = "https://example.com/{{ name }}.git"\nref = "v1"\n'
LOW = SRC + '[cmake]\nargs = []\n[base]\nprovides = ["lib/liblow.so"]\n'
LIB = 'depends = ["low"]\n' + SRC + '[cmake]\nargs = ["-DX=1"]\n[env]\nCC = "gcc"\n'
APP = 'depends = ["lib"]\n' + SRC + '[cmake]\nargs = []\n'
PATCH = "--- a/x.h\n+++ b/x.h\n@@ -1 +1 @@\n-int x;\n+int y;\n"


def _keys(folder: Path, **flags: object) -> dict[str, str]:
    settings = resolve({"recipes": str(folder), "prefix": "/opt/k", "workdir":
                        str(folder.parent / "work"), **flags}, env={}, cwd=folder)
    stack: Stack = load_stack(settings)
    return {c.name: cache.component_key(stack, c) for c in stack.selected()}


def _edit(folder: Path, name: str, old: str, new: str) -> None:
    recipe = folder / f"{name}.toml"
    text = recipe.read_text()
    assert old in text, (old, text)
    recipe.write_text(text.replace(old, new, 1))


def _patch(folder: Path, text: str) -> None:
    patches = folder.parent / "patches" / "lib"
    patches.mkdir(parents=True, exist_ok=True)
    (patches / "0001-fix.patch").write_text(text)


def _add_patch(folder: Path) -> None:
    (folder.parent / "patches" / "lib" / "0002-more.patch").write_text(PATCH)


def _base_file(folder: Path, data: str) -> None:
    path = folder.parent / "base" / "lib" / "liblow.so"
    path.write_text(data)
    os.utime(path, ns=(1, 1))  # the same mtime: only the content (size) moved


CHANGES: dict[str, Callable[[Path], dict[str, object] | None]] = {
    # same patch file name, other contents (a key of names would serve the old build)
    "patch contents": lambda f: _patch(f, PATCH.replace("int y;", "int z;")),
    "a patch added": lambda f: _add_patch(f),
    "cmake args": lambda f: _edit(f, "lib", '"-DX=1"', '"-DX=2"'),
    "the compiler (recipe env CC)": lambda f: _edit(f, "lib", 'CC = "gcc"', 'CC = "clang"'),
    "the compiler (a CMake option)": lambda f: _edit(
        f, "lib", '"-DX=1"', '"-DX=1", "-DCMAKE_C_COMPILER=clang"'),
    "build type": lambda f: _edit(f, "lib", "args = [", 'build_type = "Debug"\nargs = ['),
    "source ref": lambda f: _edit(f, "lib", 'ref = "v1"', 'ref = "v2"'),
    "source url": lambda f: _edit(f, "lib", "example.com", "example.org"),
    "install links": lambda f: _edit(f, "lib", "[env]", '[install.links]\n"lib/l" = "x"\n[env]'),
    "install files": lambda f: _edit(f, "lib", "[env]", '[install.files]\n"share/n" = "n"\n[env]'),
    "a dependency's recipe": lambda f: _edit(f, "low", "args = []", 'args = ["-DLOW=1"]'),
    "targets": lambda f: {"target": "gfx90a"},
    "the base's files": lambda f: _base_file(f, "a newer liblow, longer"),
}


@pytest.mark.parametrize("what", sorted(CHANGES))
def test_each_input_of_the_key_changes_it(write_recipes, tmp_path: Path, what: str) -> None:
    folder = write_recipes(low=LOW, lib=LIB, app=APP)
    _patch(folder, PATCH)
    make_base(tmp_path, files=("lib/liblow.so",))
    _base_file(folder, "liblow")
    # low comes from the base (so the base's files count), except where low's own recipe is
    # the change: then low is built and lib, above it, must follow
    flags: dict[str, object] = ({} if what == "a dependency's recipe" else
                                {"base": str(tmp_path / "base")})
    before = _keys(folder, **flags)
    assert _keys(folder, **flags) == before  # the key is stable when nothing changes
    extra = CHANGES[what](folder) or {}
    after = _keys(folder, **{**flags, **extra})
    assert after["lib"] != before["lib"], what
    assert after["app"] != before["app"], f"{what}: a component above it keeps its key"


def test_what_does_not_shape_the_build_keeps_the_key(write_recipes, tmp_path: Path) -> None:
    """The prefix, the workdir and the speed settings are not inputs (the other side of the
    pins above: two machines share artifacts)."""
    folder = write_recipes(low=LOW, lib=LIB, app=APP)
    first = _keys(folder)
    assert _keys(folder, prefix="/opt/elsewhere", workdir=str(tmp_path / "w2"), jobs=3,
                 ccache="off") == first
