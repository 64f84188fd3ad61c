"""A stack's env files say what the stack is and set what its recipes provide (issue 32): a
stack without ROCm gets no ROCM_PATH and no "ROCm" in its files; the shipped stack's files
keep their text byte for byte (tests/golden/envfiles/). Child processes as a user runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild import __version__
from tests.cli import REPO, run_cli
from tests.support.chain import Chain

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
    named it "a half-installed ROCm" (the week's replay, issue 32's identity item)."""
    stack = chain.recipes / "stack.toml"
    stack.write_text(stack.read_text().replace('name = "chain"', 'name = "chain"\ntitle = "Chain"'))
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    run_cli("uninstall", "gamma", *chain.flags(), expect=0)
    refused = run_cli("activate", *chain.flags(), "--unproven", "--link",
                      str(chain.root / "link"), str(chain.prefix), expect=2)
    said = " ".join(refused.stderr.split())
    assert "half-installed Chain" in said and "ROCm" not in said, refused.explain()
