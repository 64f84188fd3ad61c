"""Each command's exit code follows the documented table (errors.py, `rocbuild --help`),
checked on a real child process: 2 bad input, 4 verify found missing GPU code."""

from __future__ import annotations

from pathlib import Path

from tests.cli import run_cli


def test_verify_missing_gpu_code_exits_4(tmp_path: Path) -> None:
    (tmp_path / "empty" / "lib").mkdir(parents=True)
    result = run_cli("verify", "--prefix", str(tmp_path / "empty"), "--target", "gfx906",
                     "--no-smoke", expect=4)
    assert "no library or program with GPU code under" in result.stdout


def test_logs_of_a_step_that_never_ran_exits_2(tmp_path: Path) -> None:
    result = run_cli("logs", "rocm-cmake", "--workdir", str(tmp_path / "w"), expect=2)
    assert result.stderr.startswith("rocbuild: error: no log for rocm-cmake yet")
    assert "TIP:" in result.stderr
