"""`rocbuild plan` as the user runs it: a child process (tests/cli.py run_cli), its exit code
and stderr, no traceback. Moved from tests/unit/test_cli_plan.py (unit tests start no
processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.parametrize("args, message", [
    (["plan", "--target", "gfx9060"], "rocbuild: error: flag --target: 'gfx9060'"),
    (["plan", "nosuch"], "rocbuild: error: unknown component 'nosuch'"),
    (["plan", "--jobs", "x"], "rocbuild: error: flag --jobs: 'x' is not a whole number"),
])
def test_bad_input_exit_2_without_traceback(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.stderr and "TIP:" in result.stderr


def test_broken_recipe_folder_exit_2_without_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "stack.toml").write_text('[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\n'
                                       'prefix = "/opt/x"\n')
    (folder / "a.toml").write_text('[source]\ngit = "x"\nref = "y"\n[cmake]\nargs = "-DX=1"\n')
    result = run_cli("plan", "--recipes", str(folder), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{folder / 'a.toml'}: key 'cmake.args' must be a list of strings" in result.stderr


def test_human_plan_lists_components(tmp_path: Path) -> None:
    result = run_cli("plan", "--target", "gfx906", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "prefix:  /opt/rocm-6.4-gfx906" in result.stdout
    positions = [result.stdout.index(f"\n{n} ") for n in ("llvm", "hip", "rocblas", "hipblas",
                                                          "llama.cpp")]
    assert positions == sorted(positions)


def test_plan_roads_cost_and_doctor_give_one_disk_figure_and_a_memory_line(
        tmp_path: Path) -> None:
    """The roads' summary said 27.7 GiB (build trees only) under a need of 32.3 GiB workdir
    + 6.9 GiB prefix, and doctor said 39.3: one figure, from one function. And one line says
    how much memory the stack needs."""
    import json

    from rocbuild.model.resources import format_bytes

    flags = ["--workdir", str(tmp_path / "work"), "--prefix", str(tmp_path / "prefix"),
             "--target", "gfx906"]
    doc = json.loads(run_cli("plan", *flags, "--json", cwd=tmp_path, expect=0).stdout)
    disk = doc["cost"]["disk"]
    need = disk["workdir"] + disk["prefix"]
    assert doc["roads"]["full"]["disk"] == need, (doc["roads"], disk)
    assert doc["roads"]["full"]["disk_workdir"] == disk["workdir"]
    memory = doc["cost"]["memory"]
    assert memory["component"] == "llvm" and memory["kind"] == "link", memory
    text = " ".join(run_cli("plan", *flags, env={"COLUMNS": "80"}, cwd=tmp_path,
                            expect=0).stdout.split())
    assert "memory: at least 7.0 GiB free (llvm's link jobs take about 6.0 GiB each" in text
    checks = {c["id"]: c for c in json.loads(
        run_cli("doctor", *flags, "--json", cwd=tmp_path).stdout)["checks"]}
    assert f"about {format_bytes(need)} needed" in checks["disk"]["summary"], checks["disk"]
    assert "one llvm link job needs 6.0 GiB" in checks["memory"]["summary"], checks["memory"]
