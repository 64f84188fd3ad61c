"""env.sh / env.fish / Lmod modulefile rendering (the shells themselves run in
tests/e2e/test_envfiles_shell.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocbuild.cli import main as cli
from rocbuild.errors import ConfigError
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from rocbuild.prefix import envfiles
from rocbuild.prefix.envfiles import EnvSpec, render, spec_for, write_env_files
from tests.support.envspec import rocm_spec

PREFIX = Path("/opt/rocm-6.4-gfx906")
SPEC = rocm_spec(prefix=PREFIX, version="6.4.3", series="6.4", targets=("gfx906",))
TUNE_NAMES = ("HSA_FORCE_FINE_GRAIN_PCIE", "AMD_DIRECT_DISPATCH", "GPU_MAX_HW_QUEUES",
              "HSA_ENABLE_SDMA", "HIP_FORCE_DEV_KERNARG")


def code_lines(text: str, comment: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and
            not line.lstrip().startswith(comment)]


@pytest.mark.parametrize(("shell", "comment"), [("bash", "#"), ("fish", "#"), ("lmod", "--")])
def test_no_file_ever_sets_an_hsa_override(shell: str, comment: str) -> None:
    for tune in (False, True):
        text = render(rocm_spec(PREFIX, "6.4.3", "6.4", ("gfx906",), tune=tune), shell)
        setting = [line for line in code_lines(text, comment)
                   if re.search(r"(export|set -gx|setenv\()\s*\"?HSA_OVERRIDE", line)]
        assert setting == []
        assert "HSA_OVERRIDE_GFX_VERSION" in text  # ...but each file warns when one is set


def test_the_lmod_file_sets_and_prepends_every_variable() -> None:
    text = render(SPEC, "lmod")
    for line in (
        # the prefix is where the file lies, else the folder it was written into
        'local prefix = myFileName():match("^(.*)/modulefiles/[^/]+/[^/]+$") or '
        '"/opt/rocm-6.4-gfx906"',
        'setenv("ROCM_PATH", prefix)',
        'setenv("HIP_PATH", prefix)',
        'setenv("HIP_PLATFORM", "amd")',
        'setenv("HIP_DEVICE_LIB_PATH", prefix .. "/amdgcn/bitcode")',
        'prepend_path("PATH", prefix .. "/bin")',
        'prepend_path("CMAKE_PREFIX_PATH", prefix)',
        'family("rocm")',
        'whatis("Version: 6.4.3")',
    ):
        assert line in text.splitlines()
    assert "module load rocm/6.4-gfx906" in text
    assert "LD_LIBRARY_PATH" not in text  # programs find their libraries through RUNPATH


def test_ld_library_path_only_for_recipes_that_opted_out_of_the_runpath() -> None:
    spec = rocm_spec(PREFIX, "6.4.3", "6.4", ("gfx906",),
                   runpath_opt_outs=(("oldlib", "links with -rpath of its own"),))
    for shell in ("bash", "fish", "lmod", "tcl"):
        text = render(spec, shell)
        assert "LD_LIBRARY_PATH" in text and "oldlib (links with -rpath of its own)" in text


def test_module_is_named_after_the_prefix_folder() -> None:
    # the default prefix keeps the name it always had; another prefix for the same targets
    # gets its own, so `module list` tells the two apart
    assert envfiles.relative_path(SPEC, "lmod") == Path("modulefiles/rocm/6.4-gfx906.lua")
    test = rocm_spec(Path("/opt/rocm-6.4-gfx906-test"), "6.4.3", "6.4", ("gfx906",))
    assert test.module_name == "rocm/6.4-gfx906-test"
    two = rocm_spec(Path("/opt/rocm-6.4-gfx906:xnack-_gfx90a"), "6.4.3", "6.4",
                  ("gfx906:xnack-", "gfx90a"))
    assert envfiles.relative_path(two, "lmod") == Path(
        "modulefiles/rocm/6.4-gfx906_xnack-_gfx90a.lua")
    assert rocm_spec(Path("/srv/my stack"), "6.4.3", "6.4", ("gfx906",)).module_version == \
        "my_stack"
    assert envfiles.relative_path(SPEC, "zsh") == Path("env.sh")
    with pytest.raises(ConfigError, match="unknown shell"):
        envfiles.relative_path(SPEC, "tcsh")


@pytest.mark.parametrize(("shell", "comment"), [("bash", "#"), ("fish", "#"), ("lmod", "--")])
def test_tune_adds_each_article_variable_with_a_comment(shell: str, comment: str) -> None:
    plain = render(SPEC, shell)
    tuned = render(rocm_spec(PREFIX, "6.4.3", "6.4", ("gfx906",), tune=True), shell)
    lines = tuned.splitlines()
    for name in TUNE_NAMES:
        assert name not in plain
        code = [i for i, line in enumerate(lines)
                if name in line and not line.lstrip().startswith(comment)]
        assert len(code) == 1
        assert lines[code[0] - 1].startswith(f"{comment} {name}=")  # its comment right above
    assert "llama-bench" in tuned


def test_values_are_quoted_for_each_language() -> None:
    odd = "/tmp/it's a \"rocm\"\\dir"
    assert envfiles.quote_fish(odd) == "'/tmp/it\\'s a \"rocm\"\\\\dir'"
    assert envfiles.quote_lua(odd) == '"/tmp/it\'s a \\"rocm\\"\\\\dir"'
    assert envfiles.quote_sh(odd) == "'/tmp/it'\"'\"'s a \"rocm\"\\dir'"


def test_a_prefix_with_a_colon_or_newline_is_refused(write_recipes) -> None:
    folder = write_recipes()
    for bad in ("/opt/ro:cm", "/opt/ro\ncm"):
        # refused when the stack is loaded (plan, before any build), so spec_for never sees it
        with pytest.raises(ConfigError, match="prefix"):
            spec_for(load_stack(resolve({"recipes": str(folder), "prefix": bad}, env={})))


def test_spec_comes_from_the_stack(write_recipes) -> None:
    folder = write_recipes()
    stack = load_stack(resolve({"recipes": str(folder), "target": "gfx906,gfx1030"}, env={}))
    spec = spec_for(stack, tune=True)
    assert spec == EnvSpec(Path("/opt/rocm-6.4-gfx906-gfx1030"), "6.4.3", "6.4",
                           ("gfx906", "gfx1030"), tune=True, name="rocm", title="rocm",
                           gpu_code=False)  # no recipe of the stack says gpu_code


def test_write_env_files_puts_three_whole_files_in_the_prefix(tmp_path: Path) -> None:
    spec = rocm_spec(tmp_path / "prefix", "6.4.3", "6.4", ("gfx906",))
    written = write_env_files(spec)
    assert [p.relative_to(spec.prefix) for p in written] == [
        Path("env.sh"), Path("env.fish"), Path("modulefiles/rocm/prefix.lua"),
        Path("modulefiles/rocm/prefix")]
    assert written[0].read_text() == render(spec, "bash")
    assert written[2].read_text() == render(spec, "lmod")
    assert written[3].read_text() == render(spec, "tcl")
    leftovers = [p for p in spec.prefix.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_cli_env_prints_what_would_be_written(write_recipes, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_recipes()
    prefix = tmp_path / "rb"
    (prefix / ".rocbuild").mkdir(parents=True)  # a prefix rocbuild built into
    code = cli.main(["env", "--shell", "fish", "--tune", "--recipes", str(folder),
                     "--prefix", str(prefix)])
    assert code == 0
    expected = render(EnvSpec(prefix, "6.4.3", "6.4", ("gfx906",), tune=True, title="rocm",
                              gpu_code=False),
                      "fish")  # a stack of no recipes: it provides no variables, no GPU code
    assert capsys.readouterr().out == expected


def test_module_is_named_after_the_stack() -> None:
    chain = EnvSpec(Path("/opt/chain-1.0-gfx906"), "1.0", "1.0", ("gfx906",), name="chain")
    assert chain.module_name == "chain/1.0-gfx906"
    assert envfiles.relative_path(chain, "lmod") == Path("modulefiles/chain/1.0-gfx906.lua")
    assert envfiles.relative_path(chain, "tcl") == Path("modulefiles/chain/1.0-gfx906")
    for shell in ("lmod", "tcl"):
        text = render(chain, shell)
        assert "module load chain/1.0-gfx906" in text
        assert "rocm/" not in text
    assert 'family("chain")' in render(chain, "lmod")
    assert "conflict {chain}" in render(chain, "tcl")


def test_spec_takes_the_stack_name(write_recipes) -> None:
    folder = write_recipes(stack="""
        [stack]
        name = "chain"
        version = "1.0"
        targets = ["gfx906"]
        prefix = "/opt/chain"
    """)
    spec = spec_for(load_stack(resolve({"recipes": str(folder)}, env={})))
    assert spec.module_name.startswith("chain/")


def test_compiled_templates_render_the_same_and_follow_an_edited_template(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25: finish keeps the templates' compiled code in the workdir; the files are the
    same as without it, and a changed template (a new rocbuild) is compiled again."""
    compiled = tmp_path / "work" / "cache" / "templates"
    plain = {shell: render(SPEC, shell) for shell in ("bash", "fish", "lmod", "tcl")}
    for _ in range(2):  # the second time from the compiled code
        assert {shell: render(SPEC, shell, compiled) for shell in plain} == plain
    assert len(list(compiled.iterdir())) == 4
    templates = tmp_path / "templates"
    templates.mkdir()
    for template in envfiles._TEMPLATES.iterdir():
        (templates / template.name).write_text(template.read_text())
    monkeypatch.setattr(envfiles, "_TEMPLATES", templates)
    envfiles._environment.cache_clear()
    try:
        name = envfiles._TEMPLATE_OF["bash"]
        (templates / name).write_text("# edited\n" + (templates / name).read_text())
        assert render(SPEC, "bash", compiled) == "# edited\n" + plain["bash"]
    finally:
        envfiles._environment.cache_clear()  # the next test's environment reads the real ones
