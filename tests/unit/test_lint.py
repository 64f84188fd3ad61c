"""`rocbuild lint-recipes`: recipe warnings, the two-target rendering, the -D option check
against fake source trees, and the parser of CMake's unused-variable warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocbuild.checks.lint import lint_recipes, lint_sources
from rocbuild.cli.main import main
from rocbuild.model.buildsystems.cmake import cmake_defines, unused_cmake_variables
from rocbuild.model.settings import resolve

SRC = '[source]\ngit = "https://example.com/{{ name }}.git"\nref = "v1"\n'
GOOD = ('summary = "s"\nsystem_packages = ["cmake"]\n' + SRC
        + '[resources]\ndisk = "1GiB"\ncpu_hours = 0.1\n')
TARGETS = "{{ targets | join(';') }}"

# What cmake 3.25.1 printed for `cmake -S src -B b -DFOO_UNUSED=1 -DBAR:BOOL=ON` on a project
# that reads neither (captured verbatim; test_unused_variables_from_real_cmake re-runs it).
REAL_CMAKE_LOG = """\
-- Configuring done
-- Generating done
CMake Warning:
  Manually-specified variables were not used by the project:

    BAR
    FOO_UNUSED


-- Build files have been written to: /tmp/cm/b
"""


def settings_for(folder: Path, **flags: str):
    return resolve({"recipes": str(folder), **flags}, env={}, cwd=folder)


def messages(report, level: str) -> list[str]:
    return [str(f) for f in report.findings if f.level == level]


# --- unused_cmake_variables ---------------------------------------------------------------
def test_unused_variables_from_captured_log() -> None:
    assert unused_cmake_variables(REAL_CMAKE_LOG) == ["BAR", "FOO_UNUSED"]
    assert unused_cmake_variables("-- Configuring done\n-- Generating done\n") == []


def test_unused_variables_stop_at_the_block_end_and_merge_repeats() -> None:
    log = REAL_CMAKE_LOG + "  indented later line\n" + REAL_CMAKE_LOG.replace("BAR", "BAZ")
    assert unused_cmake_variables(log) == ["BAR", "FOO_UNUSED", "BAZ"]


# --- parsing and recipe warnings ------------------------------------------------------------
def test_cmake_defines_forms() -> None:
    argv = ["cmake", "-G", "Ninja", "-DA=1", "-D", "B=two", "-DC:BOOL=ON", "-DD=x=y", "-Wno-dev"]
    assert cmake_defines(argv) == [("A", "1"), ("B", "two"), ("C", "ON"), ("D", "x=y")]


def test_clean_recipe_has_no_finding(write_recipes) -> None:
    folder = write_recipes(a=GOOD + f'[cmake]\nargs = ["-DGPU_TARGETS={TARGETS}"]\n')
    report = lint_recipes(settings_for(folder))
    assert report.findings == ()
    assert report.targets == ("gfx906", "gfx906,gfx90a")


def test_recipe_warnings(write_recipes) -> None:
    folder = write_recipes(
        bare=SRC + '[cmake]\nargs = ["-DX=1"]\n',
        dup=GOOD + '[cmake]\nargs = ["-DX=1", "-DX:STRING=2", "-DCMAKE_BUILD_TYPE=Debug"]\n',
        fixed=GOOD + f'[cmake]\nargs = ["-DGPU_TARGETS=gfx906", "-DAMDGPU_TARGETS={TARGETS}"]\n',
        src=SRC.replace("[source]", 'summary = "headers"\nkind = "source-only"\n[source]'),
    )
    report = lint_recipes(settings_for(folder))
    warnings = messages(report, "warning")
    assert "bare: no 'summary' (plan and doctor show it)" in warnings
    assert any(w.startswith("bare: no 'system_packages'") for w in warnings)
    assert "bare: [resources] has no disk or cpu_hours estimate" in warnings
    assert "dup: -DX is given twice ('1' and '2'); CMake keeps the last one" in warnings
    assert any(w.startswith("dup: -DCMAKE_BUILD_TYPE is given twice") for w in warnings)
    # hard-coded: right for gfx906 by chance, wrong for the two-target rendering
    assert any(w.startswith("fixed: -DGPU_TARGETS=gfx906 does not follow") for w in warnings)
    assert not any("AMDGPU_TARGETS" in w for w in warnings)
    assert not any(w.startswith("src:") for w in warnings)  # source-only: not built
    assert report.errors == []


def test_error_only_in_two_target_rendering_is_reported(write_recipes,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    tricky = "{% if targets | length > 1 %}{{ no_such_var }}{% endif %}"
    folder = write_recipes(a=GOOD + f'[cmake]\nargs = ["-DY={tricky}"]\n')
    assert main(["plan", "--recipes", str(folder), "--json"]) == 0  # default targets: fine
    assert main(["lint-recipes", "--recipes", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "no_such_var" in err and "a.toml" in err and "Traceback" not in err


def test_shipped_recipes_lint_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint-recipes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["findings"] == []
    assert {"rocblas", "llama.cpp-vulkan", "hip"} <= set(doc["components"])


# --- the -D option check against source trees ----------------------------------------------
def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture
def option_stack(write_recipes):
    """app depends on lib; app passes options read by itself, by lib, by nobody."""
    args = ('["-DREAD_HERE=ON", "-DREAD_BY_LIB=ON", "-DNEVER_READ=1", "-DONLY_COMMENTED=1", '
            '"-DFoo_DIR=/x", "-DCMAKE_CXX_COMPILER=c++", "-DBUILD_SHARED_LIBS=ON"]')
    return write_recipes(
        lib=GOOD + "[cmake]\n",
        app=GOOD.replace("[source]", 'depends = ["lib"]\n[source]') + f"[cmake]\nargs = {args}\n",
        tool=GOOD + '[cmake]\njob_args = ["-DTOOL_JOBS={{ jobs.compile }}"]\n',
    )


def test_unread_option_is_an_error(option_stack, tmp_path: Path) -> None:
    src = tmp_path / "src"
    write_tree(src, {
        "app/CMakeLists.txt": "option(READ_HERE \"x\" OFF)\n  # set(ONLY_COMMENTED 1)\n"
                              "find_package(Foo CONFIG)\n",
        "app/cmake/deps.cmake.in": "",
        "lib/lib-config.cmake.in": "if(NOT DEFINED READ_BY_LIB)\nendif()\n",
        "tool/CMakeLists.txt": "message(${TOOL_JOBS})\n",
        "app/.git/CMakeLists.txt": "NEVER_READ\n",  # .git is not the project
        "app/notes.txt": "NEVER_READ\n",  # not a CMake file
    })
    report = lint_sources(settings_for(option_stack), src)
    assert messages(report, "error") == [
        "app: -DNEVER_READ is never read by app's CMake files (nor its dependencies')",
        "app: -DONLY_COMMENTED is never read by app's CMake files (nor its dependencies')",
    ]
    app = next(s for s in report.sources if s.component == "app")
    assert app.options == ("READ_HERE", "READ_BY_LIB", "NEVER_READ", "ONLY_COMMENTED", "Foo_DIR",
                           "BUILD_SHARED_LIBS")  # CMAKE_* left to CMake
    assert dict(app.read_by) == {"READ_HERE": "app", "READ_BY_LIB": "lib", "Foo_DIR": "app",
                                 "BUILD_SHARED_LIBS": "app"}
    assert app.searched == ("app", "lib")
    tool = next(s for s in report.sources if s.component == "tool")
    assert tool.options == ("TOOL_JOBS",) and tool.unread == ()


def test_cli_exit_codes_and_default_sources_dir(option_stack, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    workdir = tmp_path / "w"
    write_tree(workdir / "src", {"app/CMakeLists.txt": "READ_HERE READ_BY_LIB NEVER_READ "
                                                       "ONLY_COMMENTED Foo\n",
                                 "lib/CMakeLists.txt": "", "tool/CMakeLists.txt": "TOOL_JOBS"})
    base = ["lint-recipes", "--recipes", str(option_stack), "--workdir", str(workdir)]
    assert main([*base, "--sources"]) == 0  # no DIR: <workdir>/src
    assert "0 errors" in capsys.readouterr().out
    (workdir / "src/app/CMakeLists.txt").write_text("READ_HERE\n")
    assert main([*base, "--sources", str(workdir / "src"), "--json"]) == 2  # recipes are input
    doc = json.loads(capsys.readouterr().out)
    assert not doc["ok"]
    assert {f["message"].split()[0] for f in doc["findings"] if f["level"] == "error"} == {
        "-DREAD_BY_LIB", "-DNEVER_READ", "-DONLY_COMMENTED", "-DFoo_DIR"}


def test_missing_checkouts_are_noted_not_failed(option_stack, tmp_path: Path) -> None:
    src = tmp_path / "src"
    write_tree(src, {"app/CMakeLists.txt": "READ_HERE READ_BY_LIB NEVER_READ ONLY_COMMENTED "
                                           "Foo\n"})
    report = lint_sources(settings_for(option_stack), src)
    assert report.errors == []
    notes = messages(report, "note")
    assert f"lib: not checked (no checkout at {src / 'lib'})" in notes
    assert f"tool: not checked (no checkout at {src / 'tool'})" in notes
    app = next(s for s in report.sources if s.component == "app")
    assert app.checked and app.missing == ("lib",)


def test_unread_with_a_dependency_missing_is_still_an_error(option_stack,
                                                            tmp_path: Path) -> None:
    """A missing dependency checkout is named in the finding, but does not excuse it."""
    src = tmp_path / "src"
    write_tree(src, {"app/CMakeLists.txt": "READ_HERE READ_BY_LIB ONLY_COMMENTED Foo\n"})
    report = lint_sources(settings_for(option_stack), src)
    assert messages(report, "error") == [
        "app: -DNEVER_READ is never read by app's CMake files (nor its dependencies') "
        "(not searched: lib, no checkout)"]


def test_component_in_another_checkout_is_searched_at_its_subdir(write_recipes,
                                                                 tmp_path: Path) -> None:
    folder = write_recipes(
        mono='summary = "m"\nkind = "source-only"\n' + SRC,
        part=GOOD.replace(SRC, '[source]\nfrom = "mono"\nsubdir = "sub/part"\n')
        + '[cmake]\nargs = ["-DPART_OPT=1", "-DSIBLING_OPT=1"]\n',
    )
    src = tmp_path / "src"
    write_tree(src, {"mono/sub/part/CMakeLists.txt": "PART_OPT\n",
                     "mono/other/CMakeLists.txt": "SIBLING_OPT\n"})
    report = lint_sources(settings_for(folder), src)
    part = report.sources[0]
    assert part.source_dir == src / "mono/sub/part"
    # the owning checkout is a dependency, so the whole checkout counts (as for LLVM's clang/)
    assert dict(part.read_by) == {"PART_OPT": "part", "SIBLING_OPT": "mono"}
    (src / "mono/other/CMakeLists.txt").write_text("")
    assert lint_sources(settings_for(folder), src).sources[0].unread == ("SIBLING_OPT",)


def test_sources_with_nothing_to_check_exits_2(option_stack, tmp_path: Path) -> None:
    from tests.cli import run_cli

    empty = tmp_path / "not-the-src"
    empty.mkdir()
    result = run_cli("lint-recipes", "--recipes", str(option_stack), "--sources", str(empty),
                     expect=2)
    assert f"nothing could be checked: no component has a checkout in {empty}" in result.stderr
    assert "TIP:" in result.stderr


def test_an_option_read_by_the_base_s_cmake_files_is_read(write_recipes, tmp_path: Path) -> None:
    """On a --base, a dependency taken from it has no checkout; the option is read by its
    installed package files (hipBLAS's -DGPU_TARGETS by the base's hip-config-amd.cmake:
    before, `build hipblas --base /usr` stopped at its options step, "never read")."""
    folder = write_recipes(
        lib=GOOD + '[cmake]\n[base]\nprovides = ["lib/liblib.so"]\n',
        app=GOOD.replace("[source]", 'depends = ["lib"]\n[source]')
        + '[cmake]\nargs = ["-DREAD_BY_LIB=ON", "-DNEVER_READ=1"]\n')
    base = tmp_path / "usr"
    write_tree(base, {".info/version": "6.4.3\n", "lib/liblib.so": "",
                      "lib/x86_64-linux-gnu/cmake/lib/lib-config.cmake":
                      "if(DEFINED READ_BY_LIB)\nendif()\n"})
    src = tmp_path / "src"
    write_tree(src, {"app/CMakeLists.txt": "project(app)\n"})
    report = lint_sources(settings_for(folder, base=str(base)), src)
    app = next(s for s in report.sources if s.component == "app")
    assert dict(app.read_by) == {"READ_BY_LIB": "the base's lib/x86_64-linux-gnu/cmake"}
    assert app.unread == ("NEVER_READ",)
