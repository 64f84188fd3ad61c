"""`rocbuild plan` on the shipped recipes and on broken input, through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocbuild.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_plan_gfx906_prefix_and_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--target", "gfx906", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["prefix"] == "/opt/rocm-6.4-gfx906" and doc["targets"] == ["gfx906"]
    names = [c["name"] for c in doc["components"]]
    chain = ["llvm", "hip", "rocblas", "hipblas", "llama.cpp"]
    assert [names.index(n) for n in chain] == sorted(names.index(n) for n in chain)
    for comp in doc["components"]:  # every dependency comes before its user
        assert all(names.index(d) < names.index(comp["name"]) for d in comp["depends"])
    rocblas = next(c for c in doc["components"] if c["name"] == "rocblas")
    assert rocblas["state"] == "pending"
    assert rocblas["source"]["url"] == "https://github.com/ROCm/rocBLAS.git"
    assert rocblas["source"]["ref"] == "rocm-6.4.3"
    assert "-DGPU_TARGETS=gfx906" in rocblas["configure_args"]
    assert rocblas["configure_args"][:3] == ["cmake", "-G", "Ninja"]
    assert doc["settings"]["target"] == {"value": ["gfx906"], "source": "flag --target"}
    assert rocblas["jobs"]["compile"]["jobs"] >= 1 and "job" in rocblas["jobs"]["compile"]["reason"]


def test_plan_settings_sources_and_mirror(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCBUILD_MIRROR", "https://github.com/=file:///srv/mirror/")
    assert main(["plan", "rocm-cmake", "--json", "--jobs", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["settings"]["jobs"] == {"value": 3, "source": "flag --jobs"}
    assert doc["settings"]["mirror"]["source"] == "env ROCBUILD_MIRROR"
    assert [c["name"] for c in doc["components"]] == ["rocm-cmake"]
    assert doc["components"][0]["source"]["url"] == "file:///srv/mirror/ROCm/rocm-cmake.git"
    assert doc["components"][0]["jobs"]["compile"]["jobs"] <= 3


def test_global_options_before_or_after_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--target", "gfx90a", "plan", "rocm-cmake", "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert main(["plan", "rocm-cmake", "--json", "--target", "gfx90a"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert before["targets"] == after["targets"] == ["gfx90a"]


def test_two_targets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "rocblas", "--target", "gfx906,gfx90a", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["prefix"] == "/opt/rocm-6.4-gfx906-gfx90a"
    rocblas = next(c for c in doc["components"] if c["name"] == "rocblas")
    assert "-DGPU_TARGETS=gfx906;gfx90a" in rocblas["configure_args"]


def test_commands_are_paste_ready(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", "rocm-cmake", "--commands", "--workdir", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    src = tmp_path / "w/src/rocm-cmake"
    assert "fetch --depth 1 --no-tags -- https://github.com/ROCm/rocm-cmake.git rocm-6.4.3" in out
    assert f"mv {src}.partial {src}" in out
    assert "cmake -G Ninja -S" in out and "-DCMAKE_INSTALL_PREFIX=/opt/rocm-6.4-gfx906" in out
    assert 'PATH=/opt/rocm-6.4-gfx906/bin:"$PATH"' in out
    assert f"cmake --install {tmp_path / 'w/build/rocm-cmake'}" in out


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCBUILD_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "rocbuild", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


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
