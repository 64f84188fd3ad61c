"""`rocbuild bench` pieces on recorded data: statistics, device truth, the GGUF header, the
host record and its warnings, the VRAM wait, published figures, recipes that do not collide."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from rocbuild.bench import llamabench, published, stats
from rocbuild.bench.host import VRAM_SLACK, VramWatcher, host_warnings, read_host
from rocbuild.bench.llamabench import BenchSettings
from rocbuild.bench.model import read_model
from rocbuild.errors import ConfigError
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from rocbuild.prefix.buildinfo import read_build_info
from tests.benchkit import HAND_MADE, HOSTS, IDLE_VRAM, RECORDED, make_rig, write_model


def recorded(name: str) -> list[dict]:
    return json.loads((RECORDED / name).read_text())


# --- statistics ---------------------------------------------------------------------------
def test_median_comes_from_samples_ts_after_the_warmup_not_from_avg_ts() -> None:
    pp = recorded("cpu-tiny-llama.json")[0]  # samples 12576.4, 11085.3, 3226.09
    summary = stats.summarize(pp["samples_ts"])
    assert summary is not None
    assert summary.discarded == (12576.4,)
    assert summary.samples == (11085.3, 3226.09)
    assert summary.median == pytest.approx(statistics.median([11085.3, 3226.09]))
    assert summary.median != pytest.approx(pp["avg_ts"])
    assert (summary.low, summary.high) == (3226.09, 11085.3)


def test_the_outlier_first_repetition_does_not_reach_the_figure() -> None:
    tg = recorded("vulkan-gpu.json")[1]  # 520.822 first, then ~5600-5860
    summary = stats.summarize(tg["samples_ts"])
    assert summary is not None and summary.low > 5000
    assert summary.n == len(tg["samples_ts"]) - 1


def test_one_repetition_leaves_nothing_to_report() -> None:
    assert stats.summarize([123.0]) is None


def test_compare_needs_ranges_that_do_not_overlap() -> None:
    base = stats.summarize([0, 100, 102, 104])
    assert base is not None
    faster = stats.summarize([0, 105, 107, 110])
    overlapping = stats.summarize([0, 103, 106, 109])
    slower = stats.summarize([0, 90, 95, 99])
    assert faster and overlapping and slower
    assert stats.compare(base, faster) == stats.HELPED
    assert stats.compare(base, overlapping) == stats.WITHIN
    assert stats.compare(base, slower) == stats.HURT


# --- device truth -----------------------------------------------------------------------------
@pytest.mark.parametrize(("backend", "json_file", "stderr", "found", "evidence"), [
    ("vulkan", "vulkan-gpu.json", RECORDED / "vulkan-gpu.stderr", True, "Found 1 Vulkan"),
    ("vulkan", "vulkan-build-no-device.json", RECORDED / "vulkan-build-no-device.stderr",
     False, "No devices found"),
    ("vulkan", "vulkan-no-driver.json", RECORDED / "vulkan-no-driver.stderr", False,
     "Found no drivers"),
    ("hip", "cpu-tiny-llama.json", HAND_MADE / "hip-no-device.stderr", False,
     "failed to initialize ROCm"),
])
def test_device_comes_from_stderr_and_gpu_info_not_backends(
        backend: str, json_file: str, stderr: Path, found: bool, evidence: str) -> None:
    tests = recorded(json_file)
    check = llamabench.check_device(backend, stderr.read_text(), tests)
    assert check.found is found
    assert evidence in check.evidence
    if json_file == "vulkan-build-no-device.json":
        assert check.backends == "Vulkan"  # the field that lies


def test_hip_device_line_names_the_gfx906() -> None:
    tests = [{**t, "backends": "ROCm", "gpu_info": "AMD Instinct MI60 / MI50"}
             for t in recorded("vulkan-gpu.json")]
    check = llamabench.check_device("hip", (HAND_MADE / "hip-mi50.stderr").read_text(), tests)
    assert check.found
    assert check.devices[0].name.startswith("AMD Instinct MI60 / MI50, gfx906:sramecc+")


def test_a_device_line_with_a_json_from_another_backend_is_no_device() -> None:
    """Vulkan device lines, but the JSON says the run went to the CPU: no figure."""
    tests = [{**t, "backends": "CPU"} for t in recorded("vulkan-gpu.json")]
    check = llamabench.check_device("vulkan", (RECORDED / "vulkan-gpu.stderr").read_text(),
                                    tests)
    assert not check.found


def test_argv_runs_one_extra_repetition_and_the_same_settings_per_backend() -> None:
    settings = BenchSettings(flash_attn=True, depth=4096, batch=1024, repetitions=5)
    hip = llamabench.bench_argv(Path("/p/bin/llama-bench"), Path("m.gguf"), settings, "hip")
    vk = llamabench.bench_argv(Path("/p/vk"), Path("m.gguf"), settings, "vulkan")
    assert hip[1:] == vk[1:]
    joined = " ".join(hip)
    for part in ("-o json", "-r 6", "-p 512", "-n 128", "-fa 1", "-d 4096", "-b 1024",
                 "-ngl 99"):
        assert part in joined
    cpu = " ".join(llamabench.bench_argv(Path("/p/vk"), Path("m.gguf"), settings, "cpu"))
    assert "-ngl 0 -nkvo 1 -nopo 1" in cpu


def test_test_names_follow_llama_bench() -> None:
    pp, tg = recorded("vulkan-gpu.json")
    assert [llamabench.test_name(pp), llamabench.test_name(tg)] == ["pp512", "tg128"]
    assert llamabench.test_name({**tg, "n_depth": 4096}) == "tg128 @ d4096"


def test_bad_json_is_a_reason_not_a_crash() -> None:
    assert "not JSON" in llamabench.parse_json("garbage").error
    assert "no JSON" in llamabench.parse_json("").error
    assert "samples_ts" in llamabench.parse_json('[{"n_prompt": 512}]').error


# --- the model header -----------------------------------------------------------------------
def test_model_header_read_from_a_real_gguf(tmp_path: Path) -> None:
    path = write_model(tmp_path / "m.gguf", name="LLaMA v2", file_type=2, size_label="7B")
    model = read_model(path)
    assert (model.name, model.architecture, model.quant, model.size_label) == \
        ("LLaMA v2", "llama", "Q4_0", "7B")
    assert model.size == path.stat().st_size and model.tensors == 1


@pytest.mark.parametrize("content", [b"", b"GGML1234", b"GGUF\x03\x00\x00\x00\x01"])
def test_not_a_model_is_bad_input_naming_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.gguf"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=r"broken\.gguf: not a GGUF model"):
        read_model(path)


# --- the host record, warnings and the VRAM wait ------------------------------------------------
def test_host_record_from_the_recorded_tree(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    env = {"HSA_OVERRIDE_GFX_VERSION": "9.0.6", "AMD_DIRECT_DISPATCH": "1", "HOME": "/x"}
    host = read_host(rig.root, env, read_build_info(rig.prefix))
    facts = host.gpu
    assert facts is not None
    assert (facts.gpu.gfx, facts.power_level) == ("gfx906", "auto")
    assert facts.read_vram_used() == IDLE_VRAM
    assert host.kernel == "5.15.0-119-generic" and host.rocm_version == "6.4.3"
    assert host.llama_cpp["llama.cpp"].startswith("b6900 (commit 236fdc5")
    assert host.variables == {"AMD_DIRECT_DISPATCH": "1", "HSA_OVERRIDE_GFX_VERSION": "9.0.6"}
    keys = {w.key for w in host_warnings(host, link_under_load=2.5)}
    assert keys == {"power-level-auto", "pcie-below-max", "hsa-override-gfx906"}


def test_no_warning_when_set_up_well(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    power = rig.root / "sys/bus/pci/devices/0000:05:00.0/power_dpm_force_performance_level"
    power.write_text("high\n")
    host = read_host(rig.root, {}, read_build_info(rig.prefix))
    assert host_warnings(host, link_under_load=8.0) == []
    # the idle link (2.5 GT/s here) alone is no finding: amdgpu lowers it when idle
    assert host_warnings(host, link_under_load=None) == []


def test_a_card_without_driver_is_no_gpu_to_bench_on() -> None:
    assert read_host(HOSTS / "nodriver", {}, None).gpu is None


class FakeVram:
    def __init__(self, readings: list[int | None]) -> None:
        self.readings, self.clock_now, self.sleeps = readings, 0.0, 0

    def read(self) -> int | None:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.clock_now += seconds


def test_vram_wait_polls_until_back_to_idle() -> None:
    fake = FakeVram([1000, 9_000_000_000, 5_000_000_000, 1000 + VRAM_SLACK])
    watcher = VramWatcher(fake.read, timeout=60, poll=1, sleep=fake.sleep,
                          clock=lambda: fake.clock_now)
    watcher.start()
    result = watcher.wait()
    assert result.reached and result.polls == 3 and fake.sleeps == 2


def test_a_failed_reading_between_runs_is_polled_again_not_taken_as_the_end() -> None:
    """A reading that fails once (None) must not end the wait as "not back to idle": it
    ended a real test run early while the stand-in driver was writing the file."""
    fake = FakeVram([1000, 9_000_000_000, None, 1000])
    watcher = VramWatcher(fake.read, timeout=60, poll=1, sleep=fake.sleep,
                          clock=lambda: fake.clock_now)
    watcher.start()
    result = watcher.wait()
    assert result.reached and result.polls == 3 and result.last == 1000


def test_vram_wait_gives_up_at_its_time_limit() -> None:
    fake = FakeVram([1000, 9_000_000_000])
    watcher = VramWatcher(fake.read, timeout=5, poll=1, sleep=fake.sleep,
                          clock=lambda: fake.clock_now)
    watcher.start()
    result = watcher.wait()
    assert not result.reached and result.last == 9_000_000_000 and fake.sleeps == 5


# --- published figures ---------------------------------------------------------------------------
def test_published_mi50_figure_only_for_the_same_model_and_settings(tmp_path: Path) -> None:
    llama2 = read_model(write_model(tmp_path / "llama-2-7b.Q4_0.gguf", name="LLaMA v2",
                                    file_type=2))
    other = read_model(write_model(tmp_path / "mistral-7b.Q4_0.gguf", name="Mistral",
                                   file_type=2))
    q8 = read_model(write_model(tmp_path / "llama-2-7b.Q8_0.gguf", name="LLaMA v2",
                                file_type=7))
    fa = BenchSettings(flash_attn=True)
    ref = published.matching(llama2, fa, "gfx906", "hip", "pp512")
    assert ref is not None and ref.tokens_per_s == 1228.8 and "kyuz0" in ref.source
    assert published.matching(llama2, fa, "gfx906", "hip", "tg128").tokens_per_s == 96.8
    for args in [(other, fa, "gfx906", "hip", "pp512"), (q8, fa, "gfx906", "hip", "pp512"),
                 (llama2, BenchSettings(), "gfx906", "hip", "pp512"),
                 (llama2, fa, "gfx1030", "hip", "pp512"),
                 (llama2, fa, "gfx906", "vulkan", "pp512"),
                 (llama2, BenchSettings(flash_attn=True, depth=512), "gfx906", "hip", "pp512")]:
        assert published.matching(*args) is None


# --- the two llama.cpp builds in one prefix ---------------------------------------------------
def test_hip_and_vulkan_builds_install_into_separate_folders() -> None:
    stack = load_stack(resolve({"target": "gfx906"}), ["llama.cpp", "llama.cpp-vulkan"])
    hip, vulkan = stack.components["llama.cpp"], stack.components["llama.cpp-vulkan"]
    assert hip.install_prefix == vulkan.install_prefix == stack.prefix
    dirs = dict(a[2:].split("=", 1) for a in vulkan.build_args if a.startswith("-DCMAKE_INSTALL_"))
    assert dirs == {"CMAKE_INSTALL_BINDIR": "llama.cpp-vulkan/bin",
                    "CMAKE_INSTALL_LIBDIR": "llama.cpp-vulkan/lib",
                    "CMAKE_INSTALL_INCLUDEDIR": "llama.cpp-vulkan/include"}
    assert not any(a.startswith("-DCMAKE_INSTALL_") for a in hip.build_args)  # bin/, lib/
    vulkan_bench = Path(dirs["CMAKE_INSTALL_BINDIR"]) / "llama-bench"
    assert llamabench.BENCH_PATHS["vulkan"] == vulkan_bench
    assert llamabench.BENCH_PATHS["hip"] == Path("bin/llama-bench")
    # static, so the Vulkan programs never load the HIP build's libllama/libggml
    assert "-DBUILD_SHARED_LIBS=OFF" in vulkan.build_args
