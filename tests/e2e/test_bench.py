"""`rocbuild bench` end to end: a fake prefix whose llama-bench stand-ins replay recorded
llama-bench output as real child processes, a copied sysfs tree for the GPU's files."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest

from rocbuild.bench.runner import Limits
from rocbuild.prefix.envfiles import TUNE_VARIABLES
from tests.benchkit import IDLE_VRAM, bench, make_rig, samples, write_model
from tests.cli import run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_model(tmp_path / "llama-2-7b.Q4_0.gguf", name="LLaMA v2", file_type=2)


def test_each_backend_runs_in_its_own_process_with_the_same_settings(
        tmp_path: Path, model: Path) -> None:
    rig = make_rig(tmp_path)
    rig.standin("hip", "hip-gpu")
    rig.standin("vulkan", "vulkan-gpu")
    result = bench(rig, model)
    assert [r.status for r in result.runs] == ["ok", "ok"]
    starts = rig.starts()
    assert [s["name"] for s in starts] == ["hip", "vulkan"]
    assert starts[0]["pid"] != starts[1]["pid"]
    assert starts[0]["argv"] == starts[1]["argv"]
    assert "-r 6" in " ".join(starts[0]["argv"])  # five measured + one warm-up
    pp, tg = result.runs[0].tests
    assert pp.summary.median == statistics.median(samples("hip-gpu", 0)[1:])
    assert tg.summary.discarded == (samples("hip-gpu", 1)[0],)
    assert result.runs[0].device.devices[0].name.startswith("AMD Instinct MI60 / MI50")
    assert result.runs[1].device.devices[0].name.startswith("NVIDIA H200")


@pytest.mark.parametrize("replay", ["vulkan-no-device", "vulkan-no-driver"])
def test_a_backend_that_found_no_device_gets_no_figure(
        tmp_path: Path, model: Path, replay: str) -> None:
    rig = make_rig(tmp_path)
    rig.standin("hip", "hip-gpu")
    rig.standin("vulkan", replay)
    result = bench(rig, model)
    hip, vulkan = result.runs
    assert hip.status == "ok" and vulkan.status == "no device"
    assert vulkan.tests == []
    assert "no device found" in vulkan.detail
    doc = result.to_json()
    assert doc["runs"][1]["tests"] == [] and doc["ok"] is False


def test_the_next_backend_starts_only_when_vram_is_back_to_idle(
        tmp_path: Path, model: Path) -> None:
    rig = make_rig(tmp_path)
    # HIP leaves 9 GB in use; the "driver" frees it half a second after the process ended.
    # The time limit is far longer (the wait ends as soon as VRAM is idle): on a loaded
    # machine the default limit raced the releaser's own start-up
    rig.standin("hip", "hip-gpu", hold_vram=9_000_000_000, release_after=0.5)
    rig.standin("vulkan", "vulkan-gpu")
    result = bench(rig, model, vram_timeout=60)
    wait = result.runs[0].vram_wait
    assert wait is not None and wait.reached and wait.polls > 1
    assert wait.idle == IDLE_VRAM
    assert rig.starts("vulkan")[0]["vram_at_start"] == IDLE_VRAM


def test_vram_wait_has_a_time_limit(tmp_path: Path, model: Path) -> None:
    rig = make_rig(tmp_path)
    rig.standin("hip", "hip-gpu", hold_vram=9_000_000_000)  # never freed
    rig.standin("vulkan", "vulkan-gpu")
    result = bench(rig, model, vram_timeout=0.3)
    wait = result.runs[0].vram_wait
    assert wait is not None and not wait.reached and wait.last == 9_000_000_000
    assert result.runs[1].status == "ok"  # measured anyway, and the record says so


@pytest.mark.slow
def test_a_gpu_process_that_ignores_signals_is_never_sigkilled(
        tmp_path: Path, model: Path) -> None:
    rig = make_rig(tmp_path)
    rig.standin("hip", "hip-gpu", stubborn=True, hold_vram=9_000_000_000)
    rig.standin("vulkan", "vulkan-gpu")
    pid = None
    try:
        result = bench(rig, model, limits=Limits(run_timeout=0.5, stop_grace=0.5, poll=0.05))
        pid = rig.starts("hip")[0]["pid"]
        hip, vulkan = result.runs
        assert hip.status == "would not exit"
        assert hip.signals_sent == ["SIGINT", "SIGTERM"]
        assert [e["signal"] for e in rig.events() if "signal" in e] == ["SIGINT", "SIGTERM"]
        assert f"process {pid} still running" in hip.detail
        proc = psutil.Process(pid)  # a SIGKILL would have ended it
        assert proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
        assert vulkan.status == "not run" and rig.starts("vulkan") == []
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGKILL)  # the test's own stand-in, not a GPU process


def test_tune_says_which_variable_helped_beyond_the_spread(
        tmp_path: Path, model: Path) -> None:
    rig = make_rig(tmp_path)
    rig.standin("hip", "hip-gpu", scale={"AMD_DIRECT_DISPATCH": 1.5})
    rig.standin("vulkan", "vulkan-gpu")
    env = {**os.environ, "GPU_MAX_HW_QUEUES": "2"}  # set by the user: not in the baseline
    result = bench(rig, model, tune=True, env=env)
    hip_starts = rig.starts("hip")
    assert len(hip_starts) == len(TUNE_VARIABLES) + 2
    assert all(v is None for k, v in hip_starts[0]["env"].items() if k != "LD_LIBRARY_PATH")
    assert hip_starts[1]["env"]["HSA_FORCE_FINE_GRAIN_PCIE"] == "1"
    verdicts = {(v.variant, v.test): v.verdict for v in result.verdicts}
    assert verdicts[("+AMD_DIRECT_DISPATCH", "tg128")] == "helped"
    assert verdicts[("all tuning", "tg128")] == "helped"
    assert verdicts[("+HSA_ENABLE_SDMA", "tg128")] == "within the spread"
    assert len(rig.starts("vulkan")) == 1  # HIP runtime variables: Vulkan runs once


def test_pcie_link_is_read_under_load(tmp_path: Path, model: Path) -> None:
    rig = make_rig(tmp_path)  # the tree's card trained at 2.5 GT/s, slot and card allow 8
    rig.standin("hip", "hip-gpu")
    result = bench(rig, model, backends=["hip"])
    assert result.link_under_load == 2.5
    assert "pcie-below-max" in {w.key for w in result.warnings}


# --- through the command line ---------------------------------------------------------------
@pytest.mark.slow
def test_cli_writes_table_json_csv_and_chart(tmp_path: Path, model: Path) -> None:
    rig = make_rig(tmp_path)
    rig.standin("hip", "hip-gpu")
    rig.standin("vulkan", "vulkan-gpu")
    flags = ["--prefix", str(rig.prefix), "--gpu-root", str(rig.root), "-fa"]
    table = run_cli("bench", str(model), *flags, "--csv", "out.csv", "--chart", "out.svg",
                    cwd=tmp_path, expect=0)
    assert "1,228.8" in table.stdout and "kyuz0/mi50-gfx906-toolboxes" in table.stdout
    assert "power_dpm_force_performance_level is 'auto'" in table.stdout
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out.csv").read_text())))
    assert [(r["backend"], r["test"]) for r in rows] == \
        [("hip", "pp512"), ("hip", "tg128"), ("vulkan", "pp512"), ("vulkan", "tg128")]
    assert rows[0]["published_ts"] == "1228.8" and rows[2]["published_ts"] == ""
    svg = ET.parse(tmp_path / "out.svg").getroot()
    assert len(svg.findall("{http://www.w3.org/2000/svg}rect")) == 1 + 4  # background + bars
    assert "published MI50: 1,228.8 t/s" in (tmp_path / "out.svg").read_text()
    doc = json.loads(run_cli("bench", str(model), *flags, "--json", cwd=tmp_path,
                             expect=0).stdout)
    assert doc["host"]["gpus"][0]["power_level"] == "auto"
    assert doc["host"]["rocm_version"] == "6.4.3"
    assert doc["runs"][0]["tests"][0]["published"]["tokens_per_s"] == 1228.8
    assert doc["runs"][0]["tests"][0]["median_ts"] == \
        statistics.median(samples("hip-gpu", 0)[1:])


def test_without_a_gpu_only_the_cpu_runs_when_asked(tmp_path: Path, model: Path) -> None:
    rig = make_rig(tmp_path, host="nodriver")
    rig.standin("hip", "cpu")
    rig.standin("vulkan", "cpu")
    flags = ["--prefix", str(rig.prefix), "--gpu-root", str(rig.root)]
    refused = run_cli("bench", str(model), *flags, cwd=tmp_path, expect=2)
    assert "no AMD GPU found" in refused.stderr and "--cpu" in refused.stderr
    assert rig.starts() == []
    done = run_cli("bench", str(model), *flags, "--cpu", "--json", cwd=tmp_path, expect=0)
    doc = json.loads(done.stdout)
    assert [r["backend"] for r in doc["runs"]] == ["cpu"]
    assert doc["skipped_no_gpu"] == ["hip", "vulkan"]
    assert "-ngl 0" in " ".join(rig.starts()[0]["argv"])


@pytest.mark.parametrize(("args", "message"), [
    (["missing.gguf"], "missing.gguf: no such file"),
    (["notgguf.gguf"], "not a GGUF model"),
    (["MODEL", "-r", "0"], "must be 1 or more"),
    (["MODEL", "--chart", "c.png"], "written as SVG"),
    (["MODEL", "--backends", "vulkan"], "is not built"),
    (["MODEL", "--backends", "cpu", "--tune"], "the HIP backend is not among the runs"),
])
def test_bad_input_is_exit_2_without_traceback(
        tmp_path: Path, model: Path, args: list[str], message: str) -> None:
    rig = make_rig(tmp_path)
    rig.standin("hip", "hip-gpu")
    (tmp_path / "notgguf.gguf").write_text("hello")
    args = [str(model) if a == "MODEL" else a for a in args]
    result = run_cli("bench", *args, "--prefix", str(rig.prefix), "--gpu-root",
                     str(rig.root), cwd=tmp_path, expect=2)
    assert message in result.stderr


def test_a_prefix_without_llama_bench_is_bad_input(tmp_path: Path, model: Path) -> None:
    rig = make_rig(tmp_path)
    result = run_cli("bench", str(model), "--prefix", str(rig.prefix), cwd=tmp_path, expect=2)
    assert "no llama-bench in" in result.stderr and "rocbuild build llama.cpp" in result.stderr
