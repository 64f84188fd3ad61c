"""`rocbuild plan` on the shipped recipes and on broken input, through the real CLI."""

from __future__ import annotations

import json
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
