"""A stack's env files say what the stack is and set what its recipes provide: a
stack without ROCm gets no ROCM_PATH and no "ROCm" in its files; the shipped stack's files
keep their text byte for byte (tests/golden/envfiles/). Child processes as a user runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild import __version__
from tests.cli import REPO, run_cli
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROCM_VARIABLES = ("ROCM_PATH", "HIP_PATH", "HIP_PLATFORM", "HIP_DEVICE_LIB_PATH")


@pytest.mark.e2e
def test_a_custom_stack_gets_no_rocm_identity(chain: Chain) -> None:
    run_cli("build", *chain.flags(), "--no-verify", "alpha", expect=0)
    files = [chain.prefix / "env.sh", chain.prefix / "env.fish",
             *sorted((chain.prefix / "modulefiles" / "chain").iterdir())]
    assert len(files) == 4
    for path in files:
        text = path.read_text()
        assert not [v for v in ROCM_VARIABLES if v in text], path
        assert "ROCm 1.0" not in text and "this ROCm" not in text, path
    assert "chain 1.0 built for gfx906" in (chain.prefix / "env.sh").read_text()
    # and a recipe of the stack that declares a variable gets it, at the prefix
    chain.write_recipe("alpha", (chain.recipes / "alpha.toml").read_text()
                       + '[provides_env]\nALPHA_HOME = "{{ prefix }}"\n'
                         'ALPHA_MODE = { value = "fast", comment = "how alpha runs" }\n')
    shown = run_cli("env", *chain.flags(), "--shell", "bash", expect=0).stdout
    assert 'export ALPHA_HOME="$_rocbuild_prefix"' in shown, shown
    assert "# how alpha runs\nexport ALPHA_MODE=fast" in shown, shown


@pytest.mark.parametrize("shell", ["bash", "fish", "lmod", "tcl"])
def test_the_shipped_stacks_env_files_keep_their_text(shell: str, tmp_path: Path) -> None:
    prefix = tmp_path / "opt" / "rocm-6.4-gfx906"  # the golden text's /opt/rocm-6.4-gfx906
    (prefix / ".rocbuild").mkdir(parents=True)  # a prefix rocbuild built (prefixguard)
    printed = run_cli("env", "--shell", shell, "--prefix", str(prefix),
                      "--workdir", str(tmp_path / "work"), "--recipes", str(REPO / "recipes"),
                      expect=0).stdout
    golden = (REPO / "tests" / "golden" / "envfiles" / f"{shell}.txt").read_text()
    assert printed.replace(__version__, "<rocbuild version>").replace(
        str(prefix), "/opt/rocm-6.4-gfx906") == golden


def test_a_bad_provides_env_entry_is_refused(chain: Chain) -> None:
    chain.write_recipe("alpha", (chain.recipes / "alpha.toml").read_text()
                       + '[provides_env]\nALPHA_HOME = ["x"]\n')
    refused = run_cli("plan", *chain.flags(), expect=2)
    assert "provides_env.ALPHA_HOME" in refused.stderr and "alpha.toml" in refused.stderr


@pytest.mark.e2e
def test_prefixes_and_activate_name_a_custom_stack_by_its_title(chain: Chain) -> None:
    stack = chain.recipes / "stack.toml"
    stack.write_text(stack.read_text().replace('name = "chain"', 'name = "chain"\ntitle = "Chain"'))
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    listed = " ".join(run_cli("prefixes", *chain.flags(), expect=0).stdout.split())
    assert "Chain 1.0; gfx906" in listed and "ROCm 1.0" not in listed, listed
    link = chain.root / "link"
    done = run_cli("activate", *chain.flags(), "--unproven", "--link", str(link),
                   str(chain.prefix), expect=0)
    assert "Chain 1.0 for gfx906; load it with:" in done.stdout, done.explain()
    assert "Chain 1.0 built for gfx906" in (chain.prefix / "env.sh").read_text()


def test_activate_refuses_an_incomplete_custom_stack_by_its_title(chain: Chain) -> None:
    """After `rocbuild uninstall gamma` the chain prefix is incomplete; activate's refusal
    names it by the stack's title, not "a half-installed ROCm"."""
    stack = chain.recipes / "stack.toml"
    stack.write_text(stack.read_text().replace('name = "chain"', 'name = "chain"\ntitle = "Chain"'))
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    run_cli("uninstall", "gamma", *chain.flags(), expect=0)
    refused = run_cli("activate", *chain.flags(), "--unproven", "--link",
                      str(chain.root / "link"), str(chain.prefix), expect=2)
    said = " ".join(refused.stderr.split())
    assert "half-installed Chain" in said and "ROCm" not in said, refused.explain()


# a project that records, at configure, the variables a ROCm stack's steps get, and installs
# what it saw: a stack of other projects must build as cmake by hand would
RECORDER = {
    "CMakeLists.txt": (
        "cmake_minimum_required(VERSION 3.20)\nproject(rec NONE)\n"
        'file(WRITE ${CMAKE_BINARY_DIR}/seen.txt "rocm=$ENV{ROCM_PATH} '
        'platform=$ENV{HIP_PLATFORM} hip=$ENV{HIP_PATH} '
        'tensile=$ENV{Tensile_CXX_COMPILER_LAUNCHER}")\n'
        "install(FILES ${CMAKE_BINARY_DIR}/seen.txt DESTINATION share)\n"),
}


@pytest.mark.e2e
def test_a_stack_of_other_projects_gets_no_rocm_words_or_variables(tmp_path: Path) -> None:
    """A plain stack's steps ran with HIP_PLATFORM=amd, ROCM_PATH=<prefix> and Tensile's
    launcher variables, and its env files spoke of native gfx906 code, HSA_OVERRIDE and
    "hipcc, clang, rocminfo, llama.cpp tools"; activate's refusal of its unproven prefix said
    nothing showed the libraries carry gfx906 code. All of that comes from the recipes now."""
    from tests.conftest import require_tool
    from tests.support.chain import one_component_stack

    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "rec", RECORDER)
    prefix = tmp_path / "prefix"
    shell = {"ROCM_PATH": "", "HIP_PLATFORM": "", "HIP_PATH": ""}  # none in the user's shell
    run_cli("build", *flags, "--no-verify", "--ccache", "on", env=shell, expect=0)
    assert (prefix / "share/seen.txt").read_text() == "rocm= platform= hip= tensile="
    for path in (prefix / "env.sh", prefix / "env.fish",
                 *sorted((prefix / "modulefiles").rglob("*"))):
        if path.is_dir():
            continue
        text = path.read_text()
        for word in ("HSA_OVERRIDE", "native", "hipcc", "rocminfo", "ROCM_PATH", "ROCm",
                     "find_package(hip"):
            assert word not in text, (path, word)
    env_sh = (prefix / "env.sh").read_text()
    assert "# the programs of rocm\n" in env_sh  # the stack's name: its stack.toml has none
    refused = run_cli("activate", *flags, "--link", str(tmp_path / "link"), str(prefix),
                      expect=2)
    said = " ".join(refused.stderr.split())
    assert "nothing shows every program finds its libraries" in said, said
    assert "gfx906" not in said, said


@pytest.mark.e2e
def test_a_prefix_named_like_its_stack_gets_a_module_of_its_version(chain: Chain) -> None:
    """`--prefix ~/opt/mystack` gave the module `mystack/mystack`."""
    prefix = chain.root / "opt" / "chain"
    flags = [*chain.flags()[:-4], "--prefix", str(prefix), *chain.flags()[-2:]]
    run_cli("build", *flags, "--no-verify", "alpha", expect=0)
    modules = sorted(p.relative_to(prefix / "modulefiles").as_posix()
                     for p in (prefix / "modulefiles").rglob("*") if p.is_file())
    assert modules == ["chain/1.0", "chain/1.0.lua"], modules
    assert "module load chain/1.0\n" in (prefix / "modulefiles/chain/1.0.lua").read_text()


@pytest.mark.e2e
def test_activate_says_to_load_the_env_file_through_the_link(chain: Chain) -> None:
    """activate printed `. <the prefix>/env.sh`: a profile that keeps that line does not
    follow the next switch of the link."""
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    link = chain.root / "link"
    done = run_cli("activate", *chain.flags(), "--unproven", "--link", str(link),
                   str(chain.prefix), expect=0, env={"COLUMNS": "200"})
    assert f"  . {link}/env.sh\n" in done.stdout, done.explain()
    assert f"{chain.prefix}/env.sh" not in done.stdout, done.explain()
