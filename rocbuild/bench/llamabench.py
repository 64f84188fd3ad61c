"""llama-bench: the command line for one run, and what its output says really ran.

Flags as llama-bench documents them (tools/llama-bench/README.md):
``-m -p -n -d -b -ub -ngl -fa -r -o json``; ``-nkvo`` and ``-nopo`` keep a CPU run off the
GPU (``no_kv_offload``, ``no_op_offload`` appear in the JSON of the recorded b6900-era runs).

Which backend ran cannot be read from the JSON's ``backends`` alone: a Vulkan build with no
device still says ``Vulkan``, and one whose loader found no driver says ``CPU`` (recorded in
tests/data/llama-bench). So a GPU run counts only when the backend's own device lines on
stderr name a device *and* ``gpu_info`` is not empty.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# backend name -> (where its llama-bench lives in the prefix, the JSON's backends name)
BACKENDS = ("hip", "vulkan", "cpu")
GPU_BACKENDS = ("hip", "vulkan")
LABELS = {"hip": "HIP (ROCm)", "vulkan": "Vulkan", "cpu": "CPU"}
BENCH_PATHS = {"hip": Path("bin/llama-bench"),
               "vulkan": Path("llama.cpp-vulkan/bin/llama-bench")}
_JSON_BACKEND = {"hip": "ROCm", "vulkan": "Vulkan"}

# stderr device lines. HIP: ggml-cuda's init in a HIP build prints
#   ggml_cuda_init: found 1 ROCm devices:
#     Device 0: AMD Instinct MI60 / MI50, gfx906:sramecc+:xnack- (0x906), VMM: no, ...
# and "ggml_cuda_init: failed to initialize ROCm: ..." without one (docs/architecture.md, Facts).
# Vulkan (recorded): "ggml_vulkan: Found 1 Vulkan devices:" then "ggml_vulkan: 0 = NAME (...)
# | uma: 0 | ...", or "ggml_vulkan: No devices found."
_HIP_FOUND = re.compile(r"ggml_cuda_init: found (\d+) ROCm devices")
_HIP_DEVICE = re.compile(r"^\s*Device (\d+): (.+?)(?:, VMM:.*)?$")
_VK_FOUND = re.compile(r"ggml_vulkan: Found (\d+) Vulkan devices")
_VK_DEVICE = re.compile(r"^ggml_vulkan: (\d+) = (.+?)(?: \|.*)?$")
_NO_DEVICE = re.compile(r"ggml_vulkan: No devices found|failed to initialize ROCm|"
                        r"no ROCm-capable device|Found no drivers|vkCreateInstance.*fail",
                        re.IGNORECASE)


@dataclass(frozen=True)
class BenchSettings:
    """The same settings for every backend; what a published figure must match too."""

    prompt: int = 512
    gen: int = 128
    ngl: int = 99
    flash_attn: bool = False
    batch: int | None = None  # llama-bench's default 2048
    ubatch: int | None = None  # default 512
    depth: int = 0
    repetitions: int = 5  # measured; one more is run and thrown away as the warm-up
    threads: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"n_prompt": self.prompt, "n_gen": self.gen, "n_gpu_layers": self.ngl,
                "flash_attn": self.flash_attn, "n_batch": self.batch, "n_ubatch": self.ubatch,
                "n_depth": self.depth, "repetitions": self.repetitions,
                "warmup_repetitions": 1, "n_threads": self.threads}


def bench_argv(binary: Path, model: Path, settings: BenchSettings, backend: str) -> list[str]:
    """One llama-bench run of both tests (pp then tg) with one extra repetition to discard."""
    s = settings
    argv = [str(binary), "-m", str(model), "-o", "json", "-r", str(s.repetitions + 1),
            "-p", str(s.prompt), "-n", str(s.gen), "-fa", "1" if s.flash_attn else "0"]
    if s.depth:
        argv += ["-d", str(s.depth)]
    if s.batch is not None:
        argv += ["-b", str(s.batch)]
    if s.ubatch is not None:
        argv += ["-ub", str(s.ubatch)]
    if s.threads is not None:
        argv += ["-t", str(s.threads)]
    if backend == "cpu":
        # no layers, no KV cache and no large-batch op offload on a GPU: the CPU alone
        argv += ["-ngl", "0", "-nkvo", "1", "-nopo", "1"]
    else:
        argv += ["-ngl", str(s.ngl)]
    return argv


@dataclass(frozen=True)
class Device:
    index: int
    name: str  # as the backend printed it, e.g. "AMD Instinct MI60 / MI50, gfx906:sramecc+..."


@dataclass(frozen=True)
class DeviceCheck:
    """What the run's own output says about the device it used."""

    devices: tuple[Device, ...]
    gpu_info: str
    backends: str  # the JSON's field, shown but never trusted alone
    evidence: str  # the stderr line the verdict rests on

    @property
    def found(self) -> bool:
        return bool(self.devices) and bool(self.gpu_info)

    def to_json(self) -> dict[str, Any]:
        return {"found": self.found, "devices": [d.name for d in self.devices],
                "gpu_info": self.gpu_info, "backends": self.backends, "evidence": self.evidence}


def check_device(backend: str, stderr: str, tests: Sequence[dict[str, Any]]) -> DeviceCheck:
    gpu_info = next((str(t.get("gpu_info") or "") for t in tests), "")
    backends = next((str(t.get("backends") or "") for t in tests), "")
    lines = stderr.splitlines()
    devices: list[Device] = []
    evidence = ""
    if backend == "hip":
        found = next((ln for ln in lines if _HIP_FOUND.search(ln)), None)
        if found is not None:
            evidence = found.strip()
            start = lines.index(found)
            for line in lines[start + 1:]:
                match = _HIP_DEVICE.match(line)
                if not match:
                    break
                devices.append(Device(int(match.group(1)), match.group(2).strip()))
    elif backend == "vulkan":
        for line in lines:
            if _VK_FOUND.search(line):
                evidence = line.strip()
            match = _VK_DEVICE.match(line.strip())
            if match:
                devices.append(Device(int(match.group(1)), match.group(2).strip()))
    if not devices:
        evidence = next((ln.strip() for ln in lines if _NO_DEVICE.search(ln)),
                        evidence or "no device line on stderr")
    if backend in _JSON_BACKEND and devices and _JSON_BACKEND[backend] not in backends:
        evidence += f" (but the JSON says backends={backends!r})"
        devices = []
    return DeviceCheck(tuple(devices), gpu_info, backends, evidence)


def test_name(test: dict[str, Any]) -> str:
    """llama-bench's own label: pp512, tg128, pp512+tg128 style, "@ d4096" for a depth."""
    n_prompt, n_gen = int(test.get("n_prompt", 0)), int(test.get("n_gen", 0))
    if n_prompt and n_gen:
        name = f"pp{n_prompt}+tg{n_gen}"
    else:
        name = f"pp{n_prompt}" if n_prompt else f"tg{n_gen}"
    depth = int(test.get("n_depth", 0) or 0)
    return name + (f" @ d{depth}" if depth else "")


@dataclass(frozen=True)
class Parsed:
    tests: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


def parse_json(stdout: str) -> Parsed:
    """llama-bench ``-o json`` prints one array of test objects; tolerate fields it adds."""
    text = stdout.strip()
    if not text:
        return Parsed(error="llama-bench printed no JSON")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return Parsed(error=f"llama-bench output is not JSON ({exc.msg} at line {exc.lineno})")
    except RecursionError:  # nested past reading: damage like any other
        return Parsed(error="llama-bench output is not JSON (nested too deeply to read)")
    if not isinstance(doc, list) or not all(isinstance(t, dict) for t in doc):
        return Parsed(error="llama-bench JSON is not a list of test objects")
    bad = [test_name(t) for t in doc if not isinstance(t.get("samples_ts"), list)]
    if bad:
        return Parsed(error=f"no samples_ts in {', '.join(bad)} (a llama-bench too old?)")
    return Parsed(tests=doc)
