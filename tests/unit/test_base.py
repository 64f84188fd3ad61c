"""--base: the [base] recipe table, the base's version, what it provides, its content key,
and the two roads' estimates (base.py, roads.py, the graph's cut at taken components)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocbuild.errors import ConfigError
from rocbuild.model.base import Base, Taken, device_lib_dir, llvm_home, read_version
from rocbuild.model.graph import load_stack
from rocbuild.model.roads import roads
from rocbuild.model.settings import resolve
from tests.unit.test_recipes import OK_SOURCE, error_of, settings_for

LOW = OK_SOURCE + '[cmake]\n[base]\nprovides = ["lib/liblow.so", "include/low/*.h"]\n'
MID = ('depends = ["low"]\n' + OK_SOURCE +
       '[cmake]\n[base]\nprovides = ["lib/libmid.so"]\ntensile = "lib/mid/library"\n'
       '[resources]\ncpu_hours = 2.0\ndisk = "1GiB"\n')
TOP = 'depends = ["mid"]\n' + OK_SOURCE + '[cmake]\n[resources]\ncpu_hours = 0.5\n'
SRC = 'kind = "source-only"\n' + OK_SOURCE  # needed only by low
LOW_WITH_SRC = 'depends = ["src"]\n' + LOW + '[resources]\ncpu_hours = 10.0\n'


def make_base(root: Path, version: str = "6.4.1", files: tuple[str, ...] = (
        "lib/liblow.so", "include/low/low.h", "lib/libmid.so")) -> Path:
    base = root / "base"
    for rel in (*files, ".info/version"):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(version + "-77\n" if rel == ".info/version" else "x")
    return base


def test_version_file_forms(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    assert read_version(base) == "6.4.1"
    (base / ".info/version").write_text("6.4\n")
    assert read_version(base) == "6.4.0"
    (base / ".info/version").write_text("")
    with pytest.raises(ConfigError, match=r"not a version like 6\.4\.3"):
        read_version(base)


def test_taken_components_are_cut_from_the_graph(write_recipes, tmp_path: Path) -> None:
    folder = write_recipes(low=LOW_WITH_SRC, mid=MID, top=TOP, src=SRC)
    stack = load_stack(settings_for(folder, base=str(make_base(tmp_path)), target="gfx906"))
    assert stack.order == ("mid", "top")  # low taken; src only needed by low
    assert stack.version == "6.4.1"
    assert stack.components["mid"].depends == ()
    assert stack.base.not_taken["mid"].reason == (
        "base lacks gfx906 Tensile kernels in lib/mid/library "
        "(TensileLibrary_lazy_gfx906.dat not found)")
    assert [p.name for p in stack.base.taken["low"].files] == ["liblow.so", "low.h"]
    mid = stack.components["mid"]
    assert mid.context["rocm"] == str(tmp_path / "base")
    assert mid.context["rocm_dirs"] == [str(stack.prefix), str(tmp_path / "base")]


def test_a_dependency_that_is_built_makes_the_base_copy_stale(write_recipes,
                                                              tmp_path: Path) -> None:
    folder = write_recipes(low=LOW, mid=MID, top=TOP)
    base = make_base(tmp_path, files=("lib/libmid.so", "lib/mid/library/x"))
    stack = load_stack(settings_for(folder, base=str(base), target="gfx906"))
    assert stack.order == ("low", "mid", "top")
    assert stack.base.not_taken["low"].reason == "base lacks lib/liblow.so, include/low/*.h"


def test_required_component_missing_from_the_base_is_refused(write_recipes,
                                                             tmp_path: Path) -> None:
    folder = write_recipes(low=LOW + "required = true\n", mid=MID, top=TOP)
    base = make_base(tmp_path, files=("lib/liblow.so",))
    message = error_of(folder, base=str(base))
    assert "lacks what the build needs from it: low (include/low/*.h)" in message


def test_the_base_is_in_every_fingerprint_built_on_it(write_recipes, tmp_path: Path) -> None:
    folder = write_recipes(low=LOW, mid=MID, top=TOP)
    without = load_stack(settings_for(folder)).components["top"].fingerprint
    base = make_base(tmp_path)
    first = load_stack(settings_for(folder, base=str(base))).components["top"].fingerprint
    assert first != without
    again = load_stack(settings_for(folder, base=str(base))).components["top"].fingerprint
    assert again == first
    (base / "include/low/low.h").write_text("changed by an upgrade")
    upgraded = load_stack(settings_for(folder, base=str(base))).components["top"].fingerprint
    assert upgraded != first
    info = (base / "lib/liblow.so").stat()
    os.utime(base / "lib/liblow.so", ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    touched = load_stack(settings_for(folder, base=str(base))).components["top"].fingerprint
    assert touched != upgraded


def test_prefix_may_not_be_the_base(write_recipes, tmp_path: Path) -> None:
    folder = write_recipes(low=LOW, mid=MID, top=TOP)
    base = make_base(tmp_path)
    assert "is the base itself" in error_of(folder, base=str(base), prefix=str(base))


@pytest.mark.parametrize("table, fragment", [
    ('[base]\nprovides = ["/opt/rocm/lib/x.so"]\n', "key 'base.provides[0]' must be a path"),
    ('[base]\nprovides = ["../x.so"]\n', "key 'base.provides[0]' must be a path"),
    ('[base]\ntensile = "lib/x"\n', "[base] needs 'provides'"),
    ('[base]\nprovides = ["x"]\nrequierd = true\n', "Did you mean 'required'?"),
    ('[base]\nprovides = ["x"]\nrequired = "yes"\n', "key 'base.required' must be true or false"),
])
def test_bad_base_tables(write_recipes, table: str, fragment: str) -> None:
    folder = write_recipes(a=OK_SOURCE + "[cmake]\n" + table)
    message = error_of(folder)
    assert "a.toml" in message and fragment in message


def test_refs_follow_the_version_and_an_unknown_version_is_refused(write_recipes) -> None:
    refs = ('[source]\ngit = "https://example.com/t.git"\n'
            '[source.refs]\n"6.4.3" = "abc123"\n"6.4.1" = "def456"\n[cmake]\n')
    folder = write_recipes(t=refs)
    assert load_stack(settings_for(folder)).components["t"].ref == "abc123"
    folder = write_recipes(stack='[stack]\nversion = "6.4.2"\ntargets = ["gfx906"]\n'
                                 'prefix = "/opt/x"\n', t=refs)
    message = error_of(folder)
    assert "t.toml: key 'source.refs' has no entry for ROCm 6.4.2 (pinned: 6.4.1, 6.4.3)" \
        in message


def test_refs_cannot_be_combined_with_from(write_recipes) -> None:
    folder = write_recipes(o=OK_SOURCE + "[cmake]\n",
                           a='[source]\nfrom = "o"\n[source.refs]\n"6.4.3" = "x"\n[cmake]\n')
    assert "key 'source.refs' cannot be combined with 'source.from'" in error_of(folder)


def test_base_setting_from_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "rocbuild.toml").write_text('base = "/opt/rocm-6.4.3"\n')
    settings = resolve({}, env={}, cwd=tmp_path)
    assert settings.base == Path("/opt/rocm-6.4.3")
    assert settings.source("base") == f"config {tmp_path / 'rocbuild.toml'}"


def test_roads_without_and_with_a_base(write_recipes, tmp_path: Path) -> None:
    folder = write_recipes(low=LOW_WITH_SRC, mid=MID, top=TOP, src=SRC)
    full, fast = roads(load_stack(settings_for(folder)))
    assert full.components == ("low", "mid", "top") and full.cpu_hours == 12.5
    # assumed: low taken (it has [base]); mid has a Tensile set AMD may lack, top is above it
    assert fast.components == ("mid", "top") and fast.cpu_hours == 2.5
    # its whole need: mid's build tree, the installs (a quarter of it), two checkouts
    assert fast.need.build == 1 << 30 and not fast.measured
    assert fast.disk == (1 << 30) + (1 << 30) // 4 + 2 * (200 << 20) == fast.need.total
    base = make_base(tmp_path)
    _, on_base = roads(load_stack(settings_for(folder, base=str(base))))
    assert on_base.measured and on_base.components == ("mid", "top")


# the road rules: a required component is never rebuilt behind the user's back, a
# dependency with build-time files only does not make the base's copies stale, and a
# source-only component a built one reads is fetched
TOOLS = OK_SOURCE + '[cmake]\n[base]\nprovides = ["share/tools.cmake", "lib/libtools.so"]\n'
RUNTIME = ('depends = ["tools"]\n' + OK_SOURCE +
           '[cmake]\n[base]\nprovides = ["lib/libruntime.so"]\nrequired = true\n')
USER = 'depends = ["tools"]\n' + OK_SOURCE + '[cmake]\n[base]\nprovides = ["lib/libuser.so"]\n'


def test_a_required_component_is_the_bases_even_when_a_dependency_is_built(
        write_recipes, tmp_path: Path) -> None:
    folder = write_recipes(tools=TOOLS, runtime=RUNTIME, user=USER)
    # the base has tools, but not whole: it is built, and the base's user would load the old
    base = make_base(tmp_path, files=("lib/libruntime.so", "lib/libuser.so", "share/tools.cmake"))
    stack = load_stack(settings_for(folder, base=str(base), target="gfx906"))
    assert "runtime" in stack.base.taken  # required: never rebuilt behind the user's back
    assert stack.base.not_taken["user"].reason == "depends on tools, which is built"
    assert stack.order == ("tools", "user")


def test_a_dependency_the_base_has_no_file_of_keeps_the_bases_users(
        write_recipes, tmp_path: Path) -> None:
    """Nothing in the base was linked against a component it has no file of (Debian's HIP
    and roctx without rocprofiler-register): its users stay the base's (before: "depends on
    tools, which is built", and Debian's roctracer, rocBLAS and hipBLAS were rebuilt)."""
    folder = write_recipes(tools=TOOLS, runtime=RUNTIME, user=USER)
    base = make_base(tmp_path, files=("lib/libruntime.so", "lib/libuser.so"))
    stack = load_stack(settings_for(folder, base=str(base), target="gfx906"))
    assert sorted(stack.base.taken) == ["runtime", "user"]
    assert stack.base.not_taken["tools"].reason.startswith("base lacks share/tools.cmake")


def test_a_dependency_with_build_time_files_only_keeps_the_bases_copies(
        write_recipes, tmp_path: Path) -> None:
    tools = "build_time_only = true\n" + TOOLS
    folder = write_recipes(tools=tools, runtime=RUNTIME, user=USER)
    base = make_base(tmp_path, files=("lib/libruntime.so", "lib/libuser.so"))
    stack = load_stack(settings_for(folder, base=str(base), target="gfx906"))
    assert sorted(stack.base.taken) == ["runtime", "user"]
    assert stack.order == ("tools",)


def test_a_taken_source_only_component_that_a_build_reads_is_fetched(
        write_recipes, tmp_path: Path) -> None:
    headers = ('kind = "source-only"\n' + OK_SOURCE +
               '[base]\nprovides = ["include/headers.h"]\n')
    reader = ('depends = ["headers"]\n' + OK_SOURCE +
              '[cmake]\nargs = ["-DHEADERS_DIR={{ src.headers }}"]\n'
              '[base]\nprovides = ["lib/libreader.so"]\n')
    folder = write_recipes(headers=headers, reader=reader)
    base = make_base(tmp_path, files=("include/headers.h",))
    stack = load_stack(settings_for(folder, base=str(base), target="gfx906"))
    assert stack.order == ("headers", "reader")
    assert "headers" not in stack.base.taken
    assert stack.base.not_taken["headers"].reason == (
        "fetched (source only): reader is built from it")
    checkout = stack.components["headers"].source_dir
    assert f"-DHEADERS_DIR={checkout}" in stack.components["reader"].build_args


def test_the_estimated_road_keeps_the_build_time_only_rule(write_recipes,
                                                           tmp_path: Path) -> None:
    """The estimate (roads.assumed_taken) and a real base (base.load_base) decide by the same
    rule: a dependency that is built but only read at build time leaves the base's users
    taken. Here tools has no [base] table, so it is always built."""
    tools = "build_time_only = true\n" + OK_SOURCE + "[cmake]\n"
    folder = write_recipes(tools=tools, runtime=RUNTIME, user=USER)
    _, estimate = roads(load_stack(settings_for(folder)))
    assert estimate.components == ("tools",)
    base = make_base(tmp_path, files=("lib/libruntime.so", "lib/libuser.so"))
    _, measured = roads(load_stack(settings_for(folder, base=str(base))))
    assert measured.components == estimate.components


def test_the_newest_llvm_and_its_own_bitcode_by_version_not_by_name() -> None:
    usr = Path("/usr")
    clangs = tuple(usr / f"lib/llvm-{n}/bin/clang" for n in (9, 19, 21))
    bitcode = tuple(usr / f"lib/llvm-{n}/lib/clang/{n}/amdgcn/bitcode/ocml.bc"
                    for n in (19, 21, 9))
    for order in (clangs, clangs[::-1]):
        base = Base(usr, "6.4.3", {"llvm": Taken("llvm", order),
                                   "device-libs": Taken("device-libs", bitcode)})
        assert llvm_home(base) == usr / "lib/llvm-21"
        assert device_lib_dir(base) == usr / "lib/llvm-21/lib/clang/21/amdgcn/bitcode"
    # no bitcode in the compiler's own tree: the newest by version
    base = Base(usr, "6.4.3", {"llvm": Taken("llvm", clangs[:1]),
                               "device-libs": Taken("device-libs", bitcode[:2])})
    assert device_lib_dir(base) == usr / "lib/llvm-21/lib/clang/21/amdgcn/bitcode"
