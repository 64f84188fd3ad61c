"""Tool windows, package probes and the cost model, with answers handed in."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from rocbuild.checks import hostreqs, privilege
from rocbuild.checks.hostreqs import FAIL, WARN, Probe, Requirements
from rocbuild.cli import cmd_doctor
from rocbuild.errors import ConfigError
from rocbuild.model import cost
from rocbuild.model.graph import load_stack
from rocbuild.model.recipes import load_recipe
from rocbuild.model.resources import GIB, HostSnapshot
from rocbuild.model.settings import resolve


def probe_answering(tmp_path: Path, answers: dict[str, str]) -> Probe:
    """A PATH of empty executables named like the tools; run() answers --version like them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("cmake", "ninja", "git", "g++", "python3"):
        (bin_dir / tool).write_text("")
        (bin_dir / tool).chmod(0o755)

    def run(argv: Sequence[str]) -> tuple[int, str] | None:
        return 0, answers.get(Path(argv[0]).name + " " + argv[1], "")

    return Probe(path=str(bin_dir), run=run, root=tmp_path)


def whats(findings: list[hostreqs.Finding]) -> list[tuple[str, str]]:
    return [(f.level, f.what) for f in findings]


@pytest.mark.parametrize(("cmake", "blockers", "level"), [
    ("3.21.0", (), FAIL), ("3.22.1", (), WARN), ("3.28.3", (), None),
    ("4.0.0", (), WARN), ("4.1.2", ("device-libs",), FAIL)])
def test_cmake_has_a_window(tmp_path: Path, cmake: str, blockers: tuple[str, ...],
                            level: str | None) -> None:
    probe = probe_answering(tmp_path, {"cmake --version": f"cmake version {cmake}\n",
                                       "ninja --version": "1.11.1\n"})
    found = [f for f in hostreqs.tool_findings(Requirements(cmake4_blockers=blockers), probe)
             if "cmake" in f.what]
    assert [f.level for f in found] == ([level] if level else [])
    if found:
        assert "'cmake>=3.25,<4'" in found[0].fix


def test_old_ninja_fails_and_gcc_15_warns_with_the_way_out(tmp_path: Path) -> None:
    probe = probe_answering(tmp_path, {"cmake --version": "cmake version 3.28.0",
                                       "ninja --version": "1.4.0", "g++ -dumpfullversion": "15.1.0",
                                       "g++ --version": "g++ (GCC) 15.1.0"})
    found = whats(hostreqs.tool_findings(Requirements(), probe))
    assert (FAIL, "ninja 1.4 is older than 1.5, which job pools (LLVM_PARALLEL_LINK_JOBS) need") \
        in found
    gcc = [f for f in hostreqs.tool_findings(Requirements(gcc15_unfixed=("rocr",)), probe)
           if f.what.startswith("g++")]
    assert gcc[0].level == WARN and "CXX=g++-14" in gcc[0].fix
    assert gcc[0].what.startswith("g++ 15.1: GCC 15 breaks rocr of ROCm 6.4")
    # with the fixes carried (the shipped patches) GCC 15 is no concern
    assert not [f for f in hostreqs.tool_findings(Requirements(), probe)
                if f.what.startswith("g++")]


def test_the_shipped_recipes_carry_the_gcc_15_fixes(tmp_path: Path) -> None:
    """ROCR's <cstdint> and HIP's __glibcxx_assert: the shipped patches carry both,
    so a GCC 15 host does not decide whether the night works; a recipes folder without
    them is named."""
    settings = resolve({"workdir": str(tmp_path), "ccache": "off"}, env={})
    stack = load_stack(settings, ["rocr", "clr"])
    assert hostreqs.requirements(stack).gcc15_unfixed == ()
    names = {p.path.name for c in ("rocr", "clr") for p in stack.components[c].patches}
    assert {"0001-gcc15-include-cstdint.patch", "0003-gcc15-no-glibcxx-assert.patch"} <= names


def test_tensile_python_outside_the_tested_window_warns_only_when_rocblas_is_built(
        tmp_path: Path) -> None:
    probe = probe_answering(tmp_path, {"cmake --version": "cmake version 3.28.0",
                                       "python3 --version": "Python 3.14.0"})
    assert any("Tensile's venv" in w for _, w in
               whats(hostreqs.tool_findings(Requirements(tensile_python=True), probe)))
    assert not any("Tensile" in w for _, w in
                   whats(hostreqs.tool_findings(Requirements(), probe)))


def test_a_declared_probe_meets_a_package_without_dpkg(tmp_path: Path) -> None:
    include = tmp_path / "inc"
    include.mkdir()
    (include / "there.h").write_text("")
    probe = Probe(path=str(tmp_path / "nothing"), env={"CPATH": str(include)}, root=tmp_path)
    reqs = Requirements(packages={"libthere-dev": ("a",), "libgone-dev": ("b",)},
                        checks={"libthere-dev": "header:there.h", "libgone-dev": "header:gone.h"})
    findings, unchecked = hostreqs.package_findings(reqs, probe)
    assert [f.what for f in findings] == ["not installed: libgone-dev (b)"]
    assert "header:gone.h" in findings[0].fix and unchecked == []


def test_one_install_line_for_everything_missing() -> None:
    findings = [hostreqs.Finding("toolchain", FAIL, "x", "install ninja", ("ninja-build",)),
                hostreqs.Finding("packages", FAIL, "y", "install them", ("libelf-dev", "xxd")),
                hostreqs.Finding("packages", WARN, "z", "maybe", ("ccache",))]
    assert hostreqs.one_install_line(findings) == \
        privilege.apt_install("ninja-build", "libelf-dev", "xxd")


@pytest.mark.parametrize(("text", "message"), [
    ('system_checks = { "libx-dev" = "header:x.h" }\n', "is not in system_packages"),
    ('system_packages = ["libx-dev"]\nsystem_checks = { "libx-dev" = "headr:x.h" }\n',
     "Did you mean 'header'"),
])
def test_system_checks_errors_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    recipe = tmp_path / "x.toml"
    recipe.write_text(text + '[source]\ngit = "g"\nref = "r"\n[cmake]\n')
    with pytest.raises(ConfigError, match=message) as err:
        load_recipe(recipe)
    assert f"{recipe}: key 'system_checks.libx-dev'" in str(err.value)


BIG = """
    [source]
    git = "https://example.invalid/big.git"
    ref = "v1"
    [cmake]
    [resources]
    source_disk = "3GiB"
    """


def test_doctor_and_plan_agree_on_the_disk_needed(write_recipes, tmp_path: Path) -> None:
    folder = write_recipes(big=BIG + '    disk = "10GiB"\n    cpu_hours = 4.0\n'
                                     '    link_mem = "6GiB"\n')
    settings = resolve({"recipes": str(folder), "workdir": str(tmp_path / "w")}, env={})
    stack = load_stack(settings)
    host = HostSnapshot(cpus=4, cpu_reason="4 CPUs", mem_available=32 * GIB, swap_free=0,
                        mem_reason="memory")
    estimate = cost.estimate(stack, host, ["big"], swap_weight=0.5, cap=None)
    needs = cmd_doctor.needs_from(settings)
    assert (needs.disk_workdir, needs.disk_prefix) == \
        (estimate.disk.workdir, estimate.disk.prefix) == (13 * GIB, int(2.5 * GIB))
    assert estimate.cpu_hours == 4.0 and estimate.wall_hours == pytest.approx(4.0 / 4)
    assert [r.component for r in estimate.risks] == ["big"]


def test_a_package_nothing_can_check_is_named_as_a_warning(tmp_path: Path) -> None:
    probe = probe_answering(tmp_path, {"cmake --version": "cmake version 3.28.0"})
    reqs = Requirements(packages={"libunknown-dev": ("a",)})
    found = [f for f in hostreqs.host_findings(reqs, probe, None, "me") if f.check == "packages"]
    assert [(f.level, f.what.endswith(": libunknown-dev")) for f in found] == [(WARN, True)]


def test_a_checkout_already_there_costs_no_source_disk(write_recipes, tmp_path: Path) -> None:
    folder = write_recipes(big=BIG + '    disk = "1GiB"\n')
    stack = load_stack(resolve({"recipes": str(folder), "workdir": str(tmp_path / "w")}, env={}))
    assert cost.disk_needed(stack, ["big"]).sources == 3 * GIB
    stack.components["big"].checkout_dir.mkdir(parents=True)
    assert cost.disk_needed(stack, ["big"]) == cost.DiskNeed(sources=0, build=GIB, prefix=GIB // 4)


def test_rocblas_takes_msgpack_cxx_headers_where_libmsgpack_dev_is_the_c_library(
        tmp_path: Path) -> None:
    """Debian 12+ and Ubuntu 24.04 ship msgpack's C++ headers as libmsgpack-cxx-dev (what
    Debian's own rocblas build-depends on); a sid host without libmsgpack-dev but with
    msgpack.hpp passes the shipped rocBLAS recipe's preflight (before: "not installed:
    libmsgpack-dev (rocblas)", nothing built)."""
    settings = resolve({"workdir": str(tmp_path), "ccache": "off"}, env={})
    reqs = hostreqs.requirements(load_stack(settings, ["rocblas"]))
    include = tmp_path / "include"
    include.mkdir()
    (include / "msgpack.hpp").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dpkg-query").write_text("")
    (bin_dir / "dpkg-query").chmod(0o755)

    def dpkg(argv: Sequence[str]) -> tuple[int, str]:  # every package installed but that one
        return 0, "".join(f"{p}\tii \n" for p in argv[3:] if p != "libmsgpack-dev")

    # root: the system folders of tmp_path, so a host with msgpack.hpp in /usr/include (its
    # libmsgpack-cxx-dev) does not answer for the test
    probe = Probe(path=str(bin_dir), run=dpkg, env={"CPATH": str(include)}, root=tmp_path)
    findings, _ = hostreqs.package_findings(reqs, probe)
    assert not any("libmsgpack-dev" in f.what for f in findings), whats(findings)
    (include / "msgpack.hpp").unlink()
    findings, _ = hostreqs.package_findings(reqs, probe)
    assert any("libmsgpack-dev" in f.what for f in findings)
