"""The one install sequence where it lives (prefix/install.py ``install``): the build and the
cache place their files through it; a transactional install (the cache's) leaves the prefix as
it was, bytes, links, build-info and record alike, whatever fails after it began, and removes
the last install's files only inside its transaction; a committed one leaves no undo folder
and records what it placed; the build's install (not transactional) is redone by a rerun."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.errors import BuildFailed
from rocbuild.model import layout
from rocbuild.model.graph import Component, Stack, load_stack
from rocbuild.prefix import install, records
from rocbuild.prefix.buildinfo import BuildInfo, read_build_info, write_build_info
from rocbuild.prefix.transaction import STAGING_NAME
from tests.unit.test_recipes import OK_SOURCE, settings_for
from tests.unit.test_transaction import tree

RECIPE = OK_SOURCE + '[cmake]\n[install.files]\n"share/a/extra.txt" = "extra"\n'


def stack_of(write_recipes, tmp_path: Path) -> tuple[Stack, Component]:
    folder = write_recipes(a=RECIPE)
    stack = load_stack(settings_for(folder, prefix=str(tmp_path / "prefix"),
                                    workdir=str(tmp_path / "work")))
    return stack, stack.components["a"]


def previous_install(stack: Stack, comp: Component) -> Path:
    """``a`` installed once: lib/liba.so (its manifest, as CMake writes it) and its record."""
    old = stack.prefix / "lib" / "liba.so"
    old.parent.mkdir(parents=True)
    old.write_text("old")
    comp.build_dir.mkdir(parents=True)
    (comp.build_dir / "install_manifest.txt").write_text(f"{old}\n")
    install.install(stack, comp, lambda _line: None, lambda _placing: ())
    write_build_info(stack.prefix, BuildInfo(  # the build finished: the prefix is complete
        rocbuild_version="0", stack="rocm", version="6.4.3", series="6.4", targets=("gfx906",),
        prefix=str(stack.prefix), recipe_fingerprint="x", components={},
        started="2026-01-01T00:00:00+00:00", complete=True))
    return old


def placing_then(failure: BaseException | None):
    """A place that removes the last install, writes lib/liba.so anew and bin/a, then fails."""
    def place(placing: install.Placing) -> list[str]:
        placing.remove_previous()
        prefix = placing.stack.prefix
        for rel, text in (("lib/liba.so", "new"), ("bin/a", "tool")):
            if placing.txn is not None:
                placing.txn.save(rel)
            (prefix / rel).parent.mkdir(parents=True, exist_ok=True)
            (prefix / rel).write_text(text)
        if failure is not None:
            raise failure
        return ["bin/a"]
    return place


@pytest.mark.parametrize("failure", [BuildFailed("refused"), KeyboardInterrupt()])
def test_a_transactional_install_that_fails_leaves_the_prefix_as_it_was(
        write_recipes, tmp_path: Path, failure: BaseException) -> None:
    stack, comp = stack_of(write_recipes, tmp_path)
    previous_install(stack, comp)
    before = tree(stack.prefix)
    assert "lib/liba.so" in before and f"{layout.INFO_DIR}/{layout.INFO_FILE}" in before
    with pytest.raises(type(failure)):
        install.install(stack, comp, lambda _line: None, placing_then(failure),
                        transaction=True)
    assert tree(stack.prefix) == before


def test_a_committed_install_records_what_it_placed_and_leaves_no_undo_folder(
        write_recipes, tmp_path: Path) -> None:
    stack, comp = stack_of(write_recipes, tmp_path)
    previous_install(stack, comp)
    install.install(stack, comp, lambda _line: None, placing_then(None), transaction=True)
    assert (stack.prefix / "lib" / "liba.so").read_text() == "new"
    info = read_build_info(stack.prefix)
    assert info is not None and not info.complete  # until the build finishes again
    assert not list(stack.prefix.glob(f"{STAGING_NAME}-*"))
    assert records.installed_by(stack.prefix, "a") >= {"bin/a", "lib/liba.so",
                                                       "share/a/extra.txt"}


def test_the_builds_install_is_not_undone_its_rerun_redoes_it(write_recipes,
                                                             tmp_path: Path) -> None:
    stack, comp = stack_of(write_recipes, tmp_path)
    previous_install(stack, comp)
    with pytest.raises(BuildFailed):
        install.install(stack, comp, lambda _line: None, placing_then(BuildFailed("x")))
    assert (stack.prefix / "lib" / "liba.so").read_text() == "new"
    install.install(stack, comp, lambda _line: None, placing_then(None))
    assert "bin/a" in records.installed_by(stack.prefix, "a")
