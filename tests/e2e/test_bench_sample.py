"""docs/bench.md's bench sample (docs/bench-sample.txt and docs/bench-sample.svg) is what the
replay of recorded llama-bench output produces: regenerate with
``RB_UPDATE_GOLDEN=1 python -m pytest tests/e2e/test_bench_sample.py``."""

from __future__ import annotations

import io
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from rocbuild.bench.chart import render_svg
from rocbuild.bench.report import print_report
from tests.benchkit import bench, make_rig, write_model

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
SAMPLE_TXT = REPO / "docs" / "bench-sample.txt"
SAMPLE_SVG = REPO / "docs" / "bench-sample.svg"
NOTE = ("Replay of recorded llama-bench output (Vulkan: NVIDIA H200, CPU: 2-core Xeon, "
        "0.4 MB random model), not a GPU run")


def replay_sample(tmp_path: Path) -> tuple[str, str]:
    """HIP: no ROCm device (hand-made stderr); Vulkan: the recorded NVIDIA H200 run; CPU:
    the recorded 2-core Xeon run; host facts: the hand-made mi50-bench tree."""
    rig = make_rig(tmp_path)
    rig.standin("hip", "hip-no-device")
    rig.standin("vulkan", "vulkan-gpu", cpu_replay="cpu")
    model = write_model(tmp_path / "tiny.gguf", name="tiny")
    result = bench(rig, model, cpu=True)
    buffer = io.StringIO()
    print_report(result, Console(file=buffer, width=80, color_system=None, highlight=False))
    return buffer.getvalue(), render_svg(result, note=NOTE)


def test_docs_sample_is_the_replay_output(tmp_path: Path) -> None:
    text, svg = replay_sample(tmp_path)
    if os.environ.get("RB_UPDATE_GOLDEN"):
        SAMPLE_TXT.write_text(text)
        SAMPLE_SVG.write_text(svg)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "HIP (ROCm): no device found: ggml_cuda_init: failed" in text
    ET.fromstring(svg)  # well-formed
    assert "not a GPU run" in svg and "not shown: HIP (ROCm): no device" in svg
    assert SAMPLE_TXT.read_text() == text, "regenerate: RB_UPDATE_GOLDEN=1 (see docstring)"
    assert SAMPLE_SVG.read_text() == svg, "regenerate: RB_UPDATE_GOLDEN=1 (see docstring)"
    page = (REPO / "docs" / "bench.md").read_text()
    assert text.strip() in page and "](bench-sample.svg)" in page
