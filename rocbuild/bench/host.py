"""The host facts a benchmark figure depends on, read from sysfs below a ``root`` (tests use
recorded trees), and the warnings for setups known to cost throughput.

- ``power_dpm_force_performance_level``: an MI50 left at ``auto`` stayed at about half its
  shader clock during decode (docs/architecture.md, Facts); an MI50 study measured 8.3x on
  prompt processing and 2.5x on generation between ``auto`` and ``high``.
- the PCIe link: amdgpu lowers it when the GPU idles, so only a reading taken *during* a run
  says whether it trained below what card and slot allow (doctor's pcie check says the same).
- ``mem_info_vram_used``: read between runs so one backend's leftovers do not squeeze the next.
- HSA_OVERRIDE_GFX_VERSION on a gfx906 stack relabels a native ISA (docs/architecture.md, Facts).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocbuild.checks import doctor, gpu
from rocbuild.prefix.buildinfo import BuildInfo
from rocbuild.prefix.envfiles import TUNE_VARIABLES

POWER_FILE = "power_dpm_force_performance_level"
VRAM_USED_FILE = "mem_info_vram_used"
VRAM_SLACK = 64 << 20  # bytes above the idle reading that still count as idle
# variables that change what a run measures; recorded whenever they are set
WATCHED_VARIABLES = (*(v.name for v in TUNE_VARIABLES), "HSA_OVERRIDE_GFX_VERSION",
                     "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GGML_VK_VISIBLE_DEVICES",
                     "HSA_XNACK")


@dataclass(frozen=True)
class GpuFacts:
    gpu: gpu.Gpu
    root: Path
    sysfs: Path | None  # the PCI device folder, where amdgpu's files are
    power_level: str | None

    def read_vram_used(self) -> int | None:
        if self.sysfs is None:
            return None
        return gpu.read_int(gpu.read_text(self.sysfs / VRAM_USED_FILE))

    def read_link_speed(self) -> float | None:
        """The link speed now (of the card's upstream port, see gpu.read_link)."""
        dev = gpu.pci_device(self.root, self.gpu.bdf) if self.gpu.bdf else None
        link = gpu.read_link(dev) if dev else None
        return link.speed if link else None

    def to_json(self) -> dict[str, Any]:
        link = self.gpu.link
        return {"name": self.gpu.name, "gfx": self.gpu.gfx, "pci": self.gpu.bdf,
                "kfd_node": self.gpu.node, "vram_bytes": self.gpu.vram,
                "power_level": self.power_level,
                "pcie_idle": gpu.format_speed(link.speed, link.width) if link else None,
                "pcie_max": gpu.format_speed(link.expected_speed, link.expected_width)
                if link else None}


@dataclass(frozen=True)
class HostRecord:
    root: Path
    gpus: tuple[GpuFacts, ...]
    kernel: str | None
    rocm_version: str | None  # from the prefix's build-info
    llama_cpp: Mapping[str, str]  # component -> "b6900 (commit 236fdc5)"
    variables: Mapping[str, str]  # WATCHED_VARIABLES that are set
    targets: tuple[str, ...] = ()

    @property
    def gpu(self) -> GpuFacts | None:
        """The GPU the runs use: llama-bench's device 0 is the first one ROCr lists."""
        return self.gpus[0] if self.gpus else None

    def to_json(self) -> dict[str, Any]:
        return {"gpus": [g.to_json() for g in self.gpus], "kernel": self.kernel,
                "rocm_version": self.rocm_version, "llama_cpp": dict(self.llama_cpp),
                "targets": list(self.targets), "variables": dict(self.variables)}


def _gpu_facts(root: Path, found: gpu.Gpu) -> GpuFacts:
    dev = gpu.pci_device(root, found.bdf) if found.bdf else None
    power = dev.attr(POWER_FILE) if dev else None
    return GpuFacts(found, root, dev.path if dev else None, power)


def _component_version(info: BuildInfo | None, name: str) -> str | None:
    if info is None or name not in info.components:
        return None
    c = info.components[name]
    commit = f" (commit {c.commit[:9]})" if c.commit else ""
    return f"{c.ref or '?'}{commit}"


def read_host(root: Path, env: Mapping[str, str], info: BuildInfo | None) -> HostRecord:
    """GPUs the driver brought up (a card without a driver cannot run a benchmark)."""
    gpus = tuple(_gpu_facts(root, g) for g in gpu.detect_gpus(root)
                 if g.source == "kfd" or g.driver == "amdgpu")
    llama = {name: v for name in ("llama.cpp", "llama.cpp-vulkan")
             if (v := _component_version(info, name)) is not None}
    return HostRecord(root=root, gpus=gpus,
                      kernel=doctor.kernel_release(doctor.Host(root=root)),
                      rocm_version=info.version if info else None, llama_cpp=llama,
                      variables={k: env[k] for k in sorted(env) if k in WATCHED_VARIABLES
                                 or k.startswith("HSA_OVERRIDE_GFX_VERSION_")},
                      targets=tuple(info.targets) if info else ())


@dataclass(frozen=True)
class HostWarning:
    key: str
    text: str
    fix: str

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "text": self.text, "fix": self.fix}


def host_warnings(host: HostRecord, link_under_load: float | None) -> list[HostWarning]:
    """Warnings from the record and the fastest link speed seen while a run was going."""
    out: list[HostWarning] = []
    facts = host.gpu
    if facts is not None and facts.power_level == "auto":
        out.append(HostWarning(
            "power-level-auto",
            f"{facts.gpu.bdf} power_dpm_force_performance_level is 'auto': the clocks may not "
            "ramp up for llama.cpp (one MI50 study: 8.3x slower prompt processing, 2.5x slower "
            "generation than at 'high')",
            f"echo high | sudo tee /sys/bus/pci/devices/{facts.gpu.bdf}/{POWER_FILE}"))
    link = facts.gpu.link if facts is not None else None
    if facts is not None and link is not None and link_under_load is not None \
            and link.expected_speed and link_under_load < link.expected_speed:
        out.append(HostWarning(
            "pcie-below-max",
            f"{facts.gpu.bdf} PCIe link ran at {gpu.format_speed(link_under_load, None)} under "
            f"load; card and slot allow {gpu.format_speed(link.expected_speed, None)}",
            "see `rocbuild doctor` (pcie): set the slot to its generation instead of Auto, "
            "disable ASPM, reseat the card or replace the riser"))
    override = sorted(k for k in host.variables if k.startswith("HSA_OVERRIDE_GFX_VERSION"))
    gfx906 = "gfx906" in {t.split(":")[0] for t in host.targets} or \
        any(g.gpu.gfx == "gfx906" for g in host.gpus)
    if override and gfx906:
        values = ", ".join(f"{k}={host.variables[k]}" for k in override)
        out.append(HostWarning(
            "hsa-override-gfx906",
            f"{values} is set on a gfx906 stack: gfx906 is a native ROCm ISA, the override "
            "only relabels it (ROCm/ROCm#3065, #5238)",
            f"unset {' '.join(override)} and run the benchmark again"))
    return out


@dataclass(frozen=True)
class VramWait:
    idle: int | None  # the reading before the first run
    last: int | None  # the reading when the wait ended
    polls: int
    seconds: float
    reached: bool  # False: the time limit passed first (or nothing to read)

    def to_json(self) -> dict[str, Any]:
        return {"idle_bytes": self.idle, "last_bytes": self.last, "polls": self.polls,
                "seconds": round(self.seconds, 2), "back_to_idle": self.reached}


@dataclass
class VramWatcher:
    """Waits until VRAM use is back to the idle reading (with VRAM_SLACK), up to a limit."""

    read: Callable[[], int | None]
    timeout: float = 60.0
    poll: float = 0.25
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    idle: int | None = field(default=None)

    def start(self) -> None:
        self.idle = self.read()

    def wait(self) -> VramWait:
        started = self.clock()
        polls = 0
        while True:
            value = self.read()
            polls += 1
            if self.idle is None:  # nothing to compare with: no VRAM reading on this host
                return VramWait(None, value, polls, self.clock() - started, False)
            if value is not None and value <= self.idle + VRAM_SLACK:
                return VramWait(self.idle, value, polls, self.clock() - started, True)
            # a reading that fails now and then (None) is polled again, like a high one
            if self.clock() - started >= self.timeout:
                return VramWait(self.idle, value, polls, self.clock() - started, False)
            self.sleep(self.poll)
