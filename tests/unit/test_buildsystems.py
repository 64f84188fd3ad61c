"""Every build system keeps the seam's contracts (buildsystems.CONTRACTS: the install RUNPATH,
the compiler launchers, the refusal of arguments rocbuild sets, the lint of the recipe's
arguments, the install record) or names the one it cannot keep, with the reason, in
``lacks``: a system that silently leaves one out (the way a third system once lost RUNPATH and
ccache) fails here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from rocbuild.model import buildsystems
from rocbuild.model.buildsystems import CONTRACTS, BuildSystem
from rocbuild.model.buildsystems.cmake import CMake
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


class FakeHost:
    """HostPrograms with made-up versions (checks/buildtools.py asks the real programs)."""

    def __init__(self, versions: Mapping[str, tuple[int, ...]], on_path: str | None = None,
                 others: tuple[str, ...] = ()) -> None:
        self.versions, self.on_path, self.others = versions, on_path, others

    def version(self, program: str) -> tuple[int, ...] | None:
        return self.versions.get(program)

    def which(self, name: str) -> str | None:
        return self.on_path

    def candidates(self, name: str) -> list[str]:
        return [p for p in (self.on_path, *self.others) if p]


def test_a_cmake_tree_is_a_pool_client_where_its_ninja_is_one(tmp_path: Path) -> None:
    """CMake answers for the ninja its tree recorded, not for the one on PATH now."""
    cmake = CMake()
    comp: Any = SimpleNamespace(build_dir=tmp_path)
    host = FakeHost({"/opt/new/ninja": (1, 13, 1), "/usr/bin/ninja": (1, 11, 1)},
                    on_path="/opt/new/ninja")
    assert "no jobserver client" in cmake.why_no_pool_client(comp, host)  # no tree yet
    for program, why in (("/opt/new/ninja", ""), ("/usr/bin/ninja", "this build tree's ninja "
                                                  "is older than 1.13: no jobserver client")):
        (tmp_path / "CMakeCache.txt").write_text(f"CMAKE_MAKE_PROGRAM:FILEPATH={program}\n")
        assert cmake.why_no_pool_client(comp, host) == why


def test_the_runs_pool_client_is_asked_of_its_build_systems() -> None:
    """The run's line and --parallel auto name whatever client the run's build systems have
    (CMake's ninja >= 1.13), or say why none in their words; run/ names no build tool."""
    new = FakeHost({"/usr/bin/ninja": (1, 13, 2)}, on_path="/usr/bin/ninja")
    old = FakeHost({"/usr/bin/ninja": (1, 11, 1)}, on_path="/usr/bin/ninja")
    assert buildsystems.pool_client(["cmake"], new) == ("ninja 1.13.2", "")
    assert buildsystems.pool_client(["cmake"], old) == (
        "", "no ninja >= 1.13 here (`pip install ninja`)")
    assert buildsystems.pool_client([], new) == ("", "")


def test_a_new_cmake_tree_gets_a_jobserver_ninja_first_on_path() -> None:
    cmake = CMake()
    wheel = "/venv/bin/ninja"
    versions = {"/usr/bin/ninja": (1, 11, 1), wheel: (1, 13, 0), "/opt/ninja": (1, 13, 2)}
    assert cmake.configure_programs(FakeHost(versions, "/usr/bin/ninja", (wheel,))) == {
        "ninja": wheel}
    assert cmake.configure_programs(FakeHost(versions, None, (wheel,))) == {"ninja": wheel}
    assert cmake.configure_programs(FakeHost(versions, "/opt/ninja", (wheel,))) == {}
    assert cmake.configure_programs(FakeHost(versions, "/usr/bin/ninja")) == {}  # none here
    # a system that records nothing leaves the environment as it is
    assert BuildSystem().configure_programs(FakeHost(versions, None, (wheel,))) == {}


def test_make_is_a_pool_client_from_4_2_through_a_bridge_before_4_4(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import make_system

    make, stack = Make(), cast(Any, None)
    comp: Any = SimpleNamespace(build_dir=Path("/b"), source_dir=Path("/s"))
    assert make.why_no_pool_client(comp, FakeHost({"make": (4, 3)})) == ""
    assert "no jobserver client" in make.why_no_pool_client(comp, FakeHost({"make": (4, 1)}))
    plain = ["make", "-C", "/b", "-f", "/s/Makefile"]
    assert make.build(stack, comp, 4) == [[*plain, "-j4"]]
    monkeypatch.setattr(make_system.buildtools, "version", lambda program: (4, 4, 1))
    assert make.build(stack, comp, None) == [plain]  # it reads the fifo: form itself
    monkeypatch.setattr(make_system.buildtools, "version", lambda program: (4, 3))
    assert make.build(stack, comp, None) == [
        ["sh", "-c", make_system.BRIDGE, "make-jobserver-bridge", *plain]]


def test_a_cmake_tree_builds_with_its_cache_s_make_program(tmp_path: Path) -> None:
    cmake = CMake()
    comp: Any = SimpleNamespace(build_dir=tmp_path)
    assert cmake.tree_build_tool(comp) is None  # not configured
    (tmp_path / "CMakeCache.txt").write_text("CMAKE_AR:FILEPATH=/usr/bin/ar\n"
                                             "CMAKE_MAKE_PROGRAM:FILEPATH=/opt/ninja/ninja\n")
    assert cmake.tree_build_tool(comp) == "/opt/ninja/ninja"
    (tmp_path / "CMakeCache.txt").write_text("CMAKE_MAKE_PROGRAM:FILEPATH=\n")
    assert cmake.tree_build_tool(comp) is None
