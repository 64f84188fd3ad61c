"""`rocbuild plan --commands` pasted into a real shell builds what `rocbuild build` would:
fetch through the cache and a checkout assembled beside the source folder, then cmake."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rocbuild.run.sources import sources
from tests.cli import run_flags
from tests.support.chain import FAKE_HOST, Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_pasted_commands_build_the_chain(chain: Chain) -> None:
    listing = run_flags(chain.flags(), "plan", "--commands", expect=0).stdout
    assert "# --- alpha ---" in listing and "# --- gamma ---" in listing
    cache = sources.cache_dir(chain.workdir / "cache" / "git",
                              f"{chain.repos.as_uri()}/alpha.git")
    assert f"git -C {cache} fetch --depth 1 --no-tags" in listing  # into the cache first
    assert f"{chain.workdir}/src/alpha.partial" in listing  # then a checkout from it
    script = chain.root / "pasted.sh"
    script.write_text("set -eu\n" + listing)
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (cache / "HEAD").is_file()
    assert not (chain.workdir / "src" / "alpha.partial").exists()
    assert chain.run_gamma() == "gamma 11"
    assert FAKE_HOST not in listing  # the mirror rule is applied, nothing leaves the host


def test_commands_show_the_build_venv_before_the_first_configure(tmp_path: Path) -> None:
    listing = run_flags(["--workdir", str(tmp_path / "w")], "plan", "rocblas", "--commands",
                        expect=0).stdout
    lines = listing.splitlines()
    venv = next(i for i, line in enumerate(lines) if " -m venv --clear " in line)
    first_configure = lines.index("# configure")
    first_fetch = lines.index("# fetch")
    assert first_fetch < venv < first_configure
    assert any(f"-m pip download --disable-pip-version-check -d {tmp_path}/w/wheels" in line
               for line in lines)
    assert sum(" -m venv --clear " in line for line in lines) == 1
