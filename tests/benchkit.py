"""Test kit for `rocbuild bench`: a fake prefix whose llama-bench is a stand-in script that
replays real recorded llama-bench output (tests/data/llama-bench), a copy of a recorded
sysfs tree, and small real GGUF models written with the ``gguf`` package.

The stand-in is a real child process: it prints the recorded JSON on stdout and the recorded
stderr, appends what it saw (argv, environment, VRAM reading, signals) to a JSON-lines log,
and can hold "VRAM" (write a higher mem_info_vram_used) or ignore SIGINT/SIGTERM.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild.bench.host import read_host
from rocbuild.bench.llamabench import BenchSettings
from rocbuild.bench.model import read_model
from rocbuild.bench.runner import Limits
from rocbuild.bench.session import BenchResult, choose_binaries, run_session
from rocbuild.prefix.buildinfo import BuildInfo, ComponentInfo, read_build_info, write_build_info

DATA = Path(__file__).resolve().parent / "data"
RECORDED = DATA / "llama-bench"
HAND_MADE = DATA / "bench"
HOSTS = DATA / "hosts"
GPU_DIR = Path("sys/devices/pci0000:00/0000:00:03.0/0000:03:00.0/0000:04:00.0/0000:05:00.0")
IDLE_VRAM = 15335424
# trees that add files to another: name -> (base tree, overlay folder)
OVERLAYS = {"mi50-bench": ("mi50", "mi50-bench")}

STANDIN = r'''#!{python}
"""Stand-in llama-bench: replays recorded output (see tests/benchkit.py)."""
import json, os, signal, subprocess, sys, time

cfg = json.load(open(os.path.abspath(__file__) + ".replay.json"))


def record(event):
    with open(cfg["log"], "a") as log:
        log.write(json.dumps(event) + "\n")


def vram():
    try:
        return int(open(cfg["vram_file"]).read())
    except (KeyError, OSError, ValueError):
        return None


record({{"pid": os.getpid(), "name": cfg["name"], "argv": sys.argv[1:], "vram_at_start": vram(),
        "env": {{k: os.environ.get(k) for k in cfg["env_keys"]}}}})
if cfg.get("hold_vram"):
    open(cfg["vram_file"], "w").write(str(cfg["hold_vram"]))
if cfg.get("stubborn"):
    def note(signum, frame):
        record({{"signal": signal.Signals(signum).name}})
    signal.signal(signal.SIGINT, note)
    signal.signal(signal.SIGTERM, note)
    record({{"ready": True}})
    while True:
        time.sleep(0.05)
if "-nkvo" in sys.argv and cfg.get("cpu"):  # a CPU run of this build replays a CPU recording
    cfg.update(cfg["cpu"])
if cfg.get("stderr"):
    sys.stderr.write(open(cfg["stderr"]).read())
tests = json.load(open(cfg["json"]))
for test in tests:
    for key, value in cfg.get("fields", {{}}).items():
        test[key] = value
    factor = 1.0
    for var, scale in cfg.get("scale", {{}}).items():
        if os.environ.get(var):
            factor *= scale
    test["samples_ts"] = [v * factor for v in test["samples_ts"]]
sys.stdout.write(json.dumps(tests, indent=2) + "\n")
if cfg.get("release_after") is not None:
    # the driver frees VRAM a moment after the process ends
    subprocess.Popen([sys.executable, "-c",
                      "import os, sys, time; time.sleep(float(sys.argv[1])); "
                      "open(sys.argv[2] + '.new', 'w').write(sys.argv[3]); "
                      "os.replace(sys.argv[2] + '.new', sys.argv[2])",  # sysfs reads are whole
                      str(cfg["release_after"]), cfg["vram_file"], str(cfg["idle"])],
                     start_new_session=True, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
sys.exit(cfg.get("exit", 0))
'''

ENV_KEYS = ("AMD_DIRECT_DISPATCH", "HSA_FORCE_FINE_GRAIN_PCIE", "GPU_MAX_HW_QUEUES",
            "HSA_ENABLE_SDMA", "HIP_FORCE_DEV_KERNARG", "LD_LIBRARY_PATH")

# replays: (recorded JSON, stderr, JSON fields replaced). The HIP replays reuse the recorded
# Vulkan GPU run's figures with the fields a HIP build prints (there is no HIP recording).
HIP_FIELDS = {"backends": "ROCm", "gpu_info": "AMD Instinct MI60 / MI50"}
REPLAYS: dict[str, tuple[Path, Path | None, dict[str, Any]]] = {
    "hip-gpu": (RECORDED / "vulkan-gpu.json", HAND_MADE / "hip-mi50.stderr", HIP_FIELDS),
    "hip-no-device": (RECORDED / "cpu-tiny-llama.json", HAND_MADE / "hip-no-device.stderr",
                      {}),
    "vulkan-gpu": (RECORDED / "vulkan-gpu.json", RECORDED / "vulkan-gpu.stderr", {}),
    "vulkan-no-device": (RECORDED / "vulkan-build-no-device.json",
                         RECORDED / "vulkan-build-no-device.stderr", {}),
    "vulkan-no-driver": (RECORDED / "vulkan-no-driver.json",
                         RECORDED / "vulkan-no-driver.stderr", {}),
    "cpu": (RECORDED / "cpu-tiny-llama.json", None, {}),
}
WHERE = {"hip": Path("bin/llama-bench"), "vulkan": Path("llama.cpp-vulkan/bin/llama-bench")}


@dataclass
class Rig:
    prefix: Path
    root: Path  # the sysfs tree copy
    log: Path

    @property
    def vram_file(self) -> Path:
        return self.root / GPU_DIR / "mem_info_vram_used"

    def events(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def starts(self, name: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events() if "argv" in e and (name is None or e["name"] == name)]

    def standin(self, backend: str, replay: str, cpu_replay: str | None = None,
                **options: Any) -> Path:
        """Install (or replace) the llama-bench of ``backend`` with a replay (and, for the
        runs with ``-ngl 0 -nkvo 1``, ``cpu_replay``)."""
        path = self.prefix / WHERE[backend]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(STANDIN.format(python=sys.executable))
        path.chmod(0o755)
        cfg = {"name": backend, **_replay(replay), "log": str(self.log),
               "vram_file": str(self.vram_file), "idle": IDLE_VRAM, "env_keys": list(ENV_KEYS),
               "cpu": _replay(cpu_replay) if cpu_replay else None, **options}
        Path(str(path) + ".replay.json").write_text(json.dumps(cfg))
        return path


def _replay(name: str) -> dict[str, Any]:
    json_file, stderr, fields = REPLAYS[name]
    return {"json": str(json_file), "stderr": str(stderr) if stderr else None, "fields": fields}


def make_rig(tmp_path: Path, host: str = "mi50-bench", *, build_info: bool = True) -> Rig:
    """A prefix with a build-info file and a copy of the host tree ``host``."""
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    root = tmp_path / "root"
    base, overlay = OVERLAYS.get(host, (host, None))
    shutil.copytree(HOSTS / base, root, symlinks=True)
    if overlay is not None:
        shutil.copytree(HOSTS / overlay, root, symlinks=True, dirs_exist_ok=True)
    if build_info:
        components = {"llama.cpp": ComponentInfo("b6900", "236fdc5e1b2c3d4e", "f1"),
                      "llama.cpp-vulkan": ComponentInfo("b6900", "236fdc5e1b2c3d4e", "f2")}
        write_build_info(prefix, BuildInfo(
            rocbuild_version="0", stack="rocm", version="6.4.3", series="6.4",
            targets=("gfx906",), prefix=str(prefix), recipe_fingerprint="x",
            components=components, started="2026-12-01T00:00:00+00:00", complete=True))
    return Rig(prefix, root, tmp_path / "standin.log")


def write_model(path: Path, *, name: str = "tiny", file_type: int = 0,
                size_label: str | None = None) -> Path:
    """A real, small GGUF file (header and one tensor) written with the gguf package."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_file_type(file_type)
    if size_label:
        writer.add_size_label(size_label)
    writer.add_block_count(2)
    writer.add_token_list(["<unk>", "<s>", "</s>", "a", "b"])
    writer.add_tensor("token_embd.weight", np.zeros((5, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def samples(replay: str, test: int) -> list[float]:
    return [float(v) for v in json.loads(REPLAYS[replay][0].read_text())[test]["samples_ts"]]


FAST = Limits(run_timeout=60, stop_grace=5, poll=0.05)


def bench(rig: Rig, model: Path, *, env: dict[str, str] | None = None, tune: bool = False,
          limits: Limits = FAST, vram_timeout: float = 30, cpu: bool = False,
          backends: list[str] | None = None, settings: BenchSettings | None = None,
          ) -> BenchResult:
    host = read_host(rig.root, env or {}, read_build_info(rig.prefix))
    return run_session(read_model(model), settings or BenchSettings(), host, rig.prefix,
                       choose_binaries(rig.prefix, backends, cpu), tune=tune, limits=limits,
                       vram_timeout=vram_timeout, env=env or dict(os.environ))
