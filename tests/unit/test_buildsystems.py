"""Every build system keeps the seam's contracts (buildsystems.CONTRACTS: the install RUNPATH,
the compiler launchers, the refusal of arguments rocbuild sets, the lint of the recipe's
arguments, the install record) or names the one it cannot keep, with the reason, in
``lacks``: a system that silently leaves one out (the way a third system once lost RUNPATH and
ccache) fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.model import buildsystems
from rocbuild.model.buildsystems import CONTRACTS, BuildSystem
from tests.support.make_system import Make

SYSTEMS = {**{kind: buildsystems.for_kind(kind) for kind in buildsystems.kinds()
              if kind != buildsystems.SOURCE_ONLY}, "make (tests)": Make()}


@pytest.mark.parametrize("kind", sorted(SYSTEMS))
def test_each_contract_is_kept_or_declined_with_a_reason(kind: str) -> None:
    system = SYSTEMS[kind]
    for contract in CONTRACTS:
        kept = getattr(type(system), contract) is not getattr(BuildSystem, contract)
        reason = system.lacks.get(contract, "").strip()
        assert kept != bool(reason), (
            f"{kind}: {contract} is " + ("kept and declined" if kept else
                                         "neither kept nor declined in `lacks` with a reason"))
    assert set(system.lacks) <= set(CONTRACTS), f"{kind}: lacks names no contract"


def test_cmake_keeps_every_contract() -> None:
    assert not buildsystems.for_kind("cmake").lacks


def test_the_contracts_have_no_default() -> None:
    """A default would let a system leave a contract out without the test above seeing it."""
    for contract in CONTRACTS:
        body = getattr(BuildSystem, contract)
        with pytest.raises(NotImplementedError):
            body(BuildSystem(), *([None] * (body.__code__.co_argcount - 1)))


@pytest.mark.parametrize("kind", sorted(SYSTEMS))
def test_a_jobserver_client_names_the_tool_its_tree_builds_with(kind: str) -> None:
    """The run asks that tool whether it speaks the jobserver (run/engine/jobs.py), so a
    system whose build may run as the pool's client says which program its tree runs."""
    system = SYSTEMS[kind]
    told = type(system).tree_build_tool is not BuildSystem.tree_build_tool
    assert told or not system.jobserver_client, kind


def test_a_cmake_tree_builds_with_its_cache_s_make_program(tmp_path: Path) -> None:
    from types import SimpleNamespace

    cmake = buildsystems.for_kind("cmake")
    comp = SimpleNamespace(build_dir=tmp_path)
    assert cmake.tree_build_tool(comp) is None  # type: ignore[arg-type]  # not configured
    (tmp_path / "CMakeCache.txt").write_text("CMAKE_AR:FILEPATH=/usr/bin/ar\n"
                                             "CMAKE_MAKE_PROGRAM:FILEPATH=/opt/ninja/ninja\n")
    assert cmake.tree_build_tool(comp) == "/opt/ninja/ninja"  # type: ignore[arg-type]
    (tmp_path / "CMakeCache.txt").write_text("CMAKE_MAKE_PROGRAM:FILEPATH=\n")
    assert cmake.tree_build_tool(comp) is None  # type: ignore[arg-type]
