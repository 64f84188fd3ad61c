"""``rocbuild doctor``: is this host ready to build and run the stack, and for which target?

Each check returns ok / warn / fail (or skip when it cannot apply) with a one-line summary
and, unless ok, the fix. Files are read relative to ``Host.root``, so a tree captured on
another machine (``--root DIR``: its ``sys/``, ``proc/``, ``dev/``, ``etc/``) is diagnosed the
same way as ``/``. The environment, the user name, the tool search path and the disk probe
are parameters too: tests never depend on the machine they run on. Checks about the machine
running rocbuild (toolchain, packages, disk) are skipped for a captured tree.

Sources for the advice: ROCm 6.4 system requirements (OS, kernels), MI50 owners'
published build and setup notes (CSM, ASPM, PCIe Gen3 on MI50, large BAR, nouveau, swap) and
docs/architecture.md, Facts (KFD detection, HSA_OVERRIDE_GFX_VERSION, shadowing headers).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rocbuild.checks import hostload, hostreqs, launchtools, privilege
from rocbuild.checks.gpu import (
    Gpu,
    decode_gfx_target_version,
    detect_gpus,
    format_speed,
    kfd_present,
    override_spelling,
    read_text,
    recommended_targets,
)
from rocbuild.model import launchers, resources
from rocbuild.model.base import dpkg_listings
from rocbuild.model.layout import info_path
from rocbuild.model.resources import GIB, format_bytes
from rocbuild.model.targets import TargetId

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
SCHEMA = 1

# What one LLVM link job needs when the recipes do not say (recipes/llvm.toml link_mem; the
# TheRock environment guide gives 4-8 GB per amd-llvm link job, docs/architecture.md, Facts).
REFERENCE_LINK_MEM = 8 * GIB
# Free disk when no recipe has resources.disk: rocbuild's own estimate for sources + build
# trees of this stack and for the installed prefix, not a measurement.
REFERENCE_DISK_WORKDIR = 80 * GIB
REFERENCE_DISK_PREFIX = 20 * GIB

# ROCm 6.4 "Supported operating systems": ROCm/rocm-install-on-linux
# docs/reference/system-requirements.rst as published for 6.4.x (Ubuntu 24.04.2: 6.8 GA,
# 6.11 HWE; 22.04.5: 5.15 GA, 6.8 HWE; RHEL 9.4/9.5/9.6 and 8.10; SLES 15 SP6), plus the
# 6.14 HWE kernel of Ubuntu 24.04.3 from the 6.4.3 compatibility matrix. Keyed by os-release
# ID and VERSION_ID; the value is the kernel series AMD tested (empty: not checked).
SUPPORTED_OS: dict[tuple[str, str], tuple[str, ...]] = {
    ("ubuntu", "24.04"): ("6.8", "6.11", "6.14"),
    ("ubuntu", "22.04"): ("5.15", "6.8"),
    ("rhel", "9.6"): ("5.14",), ("rhel", "9.5"): ("5.14",), ("rhel", "9.4"): ("5.14",),
    ("rhel", "8.10"): ("4.18",),
    ("sles", "15.6"): (),
}
# Listed in the same table, but only for one accelerator (its footnotes): it works for
# many, it is not what AMD tests for an MI50 or a Radeon.
LIMITED_OS: dict[tuple[str, str], str] = {
    ("debian", "12"): "AMD lists Debian 12 for ROCm 6.4 only for Instinct MI300X, single node",
    ("ol", "8"): "AMD lists Oracle Linux 8 for ROCm 6.4 only for Instinct MI300X",
    ("ol", "9"): "AMD lists Oracle Linux 9 for ROCm 6.4 only for Instinct MI300X",
    ("azurelinux", "3.0"): "AMD lists Azure Linux 3.0 for ROCm 6.4 only for MI300X and V710",
}
# What each road means on a distribution AMD does not list for an MI50 (README, "Your
# distribution"): Debian 12's own ROCm is 5.2 and Debian 13's 5.7, which --base refuses
# (another series), and AMD's 6.4 packages are made for Debian 12 for the MI300X only; Debian
# testing (forky) and sid package ROCm 6.4 themselves (libamdhip64-dev 6.4.3, librocblas-dev
# 6.4.4, llama.cpp-tools 0.7.0: Debian's package lists, docs/base-road.md). Testing and sid
# have no VERSION_ID in os-release.
_FROM_SOURCE = ("for an MI50 here: the whole stack from source needs nothing of AMD's "
                "(`rocbuild build --target gfx906`, the overnight job)")
OS_ROADS: dict[tuple[str, str], str] = {
    ("debian", "12"): f"{_FROM_SOURCE}; Debian 12's own ROCm is 5.2, too old for --base, and "
                      "AMD's 6.4 packages are not made for this system; Debian testing and sid "
                      "package ROCm 6.4 (--base /usr)",
    ("debian", "13"): f"{_FROM_SOURCE}; Debian 13's own ROCm is 5.7, too old for --base; "
                      "Debian testing and sid package ROCm 6.4 (--base /usr)",
    ("debian", ""): "Debian packages ROCm 6.4 here: `apt install llama.cpp-tools "
                    "libggml0-backend-hip` (gfx906 included, nothing to build), or `rocbuild "
                    "build --base /usr --target gfx906` for a llama.cpp of your own on it",
}
_KERNEL_PACKAGES = {"22.04": "linux-generic (5.15) or linux-generic-hwe-22.04 (6.8)",
                    "24.04": "linux-generic (6.8) or linux-generic-hwe-24.04"}


@dataclass(frozen=True)
class Check:
    id: str
    status: str
    summary: str
    fix: str | None = None


RunTool = Callable[[Sequence[str]], "tuple[int, str] | None"]


run_tool = hostreqs.run_tool
free_space = hostreqs.free_space


@dataclass(frozen=True)
class Host:
    """Everything the checks look at; tests inject each part."""

    root: Path = Path("/")
    env: Mapping[str, str] = field(default_factory=dict)
    user: str = "root"
    tools_path: str | None = None  # PATH for the toolchain; None: skip (captured tree)
    free_space: Callable[[Path], tuple[int, int]] | None = None  # None: skip the disk check
    run_tool: RunTool = run_tool

    @property
    def live(self) -> bool:
        return self.root == Path("/")

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def read(self, rel: str) -> str | None:
        return read_text(self.path(rel))


@dataclass(frozen=True)
class Needs:
    """What the stack asks of the host, from the recipes (or reference figures)."""

    targets: tuple[TargetId, ...]
    targets_source: str
    workdir: Path
    prefix: Path | None
    link_mem: int = REFERENCE_LINK_MEM  # the stack's largest job (cost.memory_need)
    largest_job: str = "one LLVM link job"  # which job that is, in words
    disk_workdir: int = REFERENCE_DISK_WORKDIR
    disk_prefix: int = REFERENCE_DISK_PREFIX
    packages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # component -> pkgs
    swap_weight: float = 0.5
    stack_summary: str = ""
    problem: str | None = None  # the recipes could not be loaded
    reqs: hostreqs.Requirements | None = None  # None: from ``packages`` alone
    # the base audit (model/baseaudit.py): the base, and (ok, line) per GPU library read
    base: Path | None = None
    base_audit: tuple[tuple[bool, str], ...] = ()
    # the ROCm the stack compiles HIP code against (the prefix, or a --base), when a recipe
    # says it carries GPU code; None: the stack compiles no HIP (distribution HIP headers
    # in /usr/include/hip are then nothing to it)
    hip_rocm: Path | None = Path("/opt/rocm-6.4-gfx906")


@dataclass(frozen=True)
class Context:
    host: Host
    needs: Needs
    gpus: list[Gpu]


@dataclass(frozen=True)
class Report:
    root: Path
    checks: tuple[Check, ...]
    gpus: tuple[Gpu, ...]
    recommended: tuple[TargetId, ...]

    @property
    def recommended_target(self) -> str | None:
        return ",".join(str(t) for t in self.recommended) or None

    @property
    def exit_code(self) -> int:
        return 1 if any(c.status == FAIL for c in self.checks) else 0

    def check(self, check_id: str) -> Check:
        return next(c for c in self.checks if c.id == check_id)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "root": str(self.root),
                "checks": [asdict(c) for c in self.checks],
                "gpus": [g.to_json() for g in self.gpus],
                "recommended_target": self.recommended_target}


# --- helpers -------------------------------------------------------------------------------


def parse_os_release(text: str | None) -> dict[str, str]:
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def kernel_release(host: Host) -> str | None:
    match = re.match(r"Linux version (\S+)", host.read("proc/version") or "")
    return match.group(1) if match else None


def loaded_modules(host: Host) -> set[str]:
    return {line.split()[0] for line in (host.read("proc/modules") or "").splitlines()
            if line.strip()}


def cmdline(host: Host) -> list[str]:
    return (host.read("proc/cmdline") or "").split()


def read_groups(host: Host) -> dict[str, tuple[int, set[str]]] | None:
    text = host.read("etc/group")
    if text is None:
        return None
    groups = {}
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[2].isdigit():
            groups[parts[0]] = (int(parts[2]), {m for m in parts[3].split(",") if m})
    return groups


def primary_gid(host: Host, user: str) -> int | None:
    for line in (host.read("etc/passwd") or "").splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[0] == user and parts[3].isdigit():
            return int(parts[3])
    return None


def read_meminfo(host: Host) -> dict[str, int]:
    """``/proc/meminfo`` in bytes (the file says kB, meaning KiB)."""
    out = {}
    for line in (host.read("proc/meminfo") or "").splitlines():
        match = re.match(r"(\w+):\s+(\d+)(?:\s+kB)?", line)
        if match:
            out[match.group(1)] = int(match.group(2)) * (1024 if "kB" in line else 1)
    return out


# --- checks ----------------------------------------------------------------------------------
def check_os(ctx: Context) -> Check:
    host = ctx.host
    rel = parse_os_release(host.read("etc/os-release"))
    kernel = kernel_release(host) or "unknown"
    if not rel:
        return Check("os", WARN, f"no /etc/os-release; kernel {kernel}",
                     "rocbuild is tested on Ubuntu 22.04 and 24.04 (the systems ROCm 6.4 lists)")
    name = rel.get("PRETTY_NAME") or f"{rel.get('NAME', '?')} {rel.get('VERSION_ID', '')}"
    os_id, version = rel.get("ID", "").lower(), rel.get("VERSION_ID", "")
    what = f"{name}, kernel {kernel}"
    series = ".".join(re.findall(r"\d+", kernel)[:2])
    key = (os_id, version) if (os_id, version) in SUPPORTED_OS else (os_id, version.split(".")[0])
    if key in SUPPORTED_OS:
        kernels = SUPPORTED_OS[key]
        if not kernels or series in kernels:
            return Check("os", OK, f"{what}: a system ROCm 6.4 is tested on")
        hint = _KERNEL_PACKAGES.get(version, "the distribution's GA or HWE kernel")
        return Check("os", WARN, f"{what}: ROCm 6.4 is tested on {name.split(' LTS')[0]} with "
                                 f"kernel {' or '.join(kernels)}, not {series}",
                     f"boot a tested kernel: `{privilege.as_root('apt install ' + hint)}`; the "
                     "in-tree amdgpu driver of other kernels usually works, but AMD did not "
                     "test it")
    major = version.split(".")[0]
    limited = LIMITED_OS.get((os_id, version)) or LIMITED_OS.get((os_id, major))
    roads = OS_ROADS.get((os_id, major))  # ("debian", ""): testing and sid
    if limited:
        return Check("os", WARN, f"{what}: works for many, but not official: {limited}",
                     (f"{roads}; " if roads else "") + "for the tested path use Ubuntu 22.04 "
                     "or 24.04, the systems AMD lists for ROCm 6.4 (https://rocm.docs.amd.com/"
                     "projects/install-on-linux/en/docs-6.4.3/reference/system-requirements.html)")
    return Check("os", WARN, f"{what}: not a system ROCm 6.4 lists",
                 (f"{roads}; " if roads else "") + "the build may still work; for the tested "
                 "path use Ubuntu 22.04 or 24.04")


def _amdgpu_blockers(host: Host) -> list[str]:
    blockers = []
    for arg in cmdline(host):
        blacklist = arg.split("=")[0] in ("modprobe.blacklist", "module_blacklist",
                                          "rd.driver.blacklist") and "amdgpu" in arg
        if arg in ("nomodeset", "amdgpu.modeset=0") or blacklist:
            blockers.append(arg)
    return blockers


def check_amdgpu(ctx: Context) -> Check:
    host = ctx.host
    if "amdgpu" in loaded_modules(host):
        return Check("amdgpu", OK, "amdgpu kernel module loaded")
    if host.path("sys/module/amdgpu/parameters").is_dir():
        return Check("amdgpu", OK, "amdgpu built into the kernel")
    if not ctx.gpus:
        return Check("amdgpu", WARN, "amdgpu is not loaded and there is no AMD GPU: fine for a "
                                     "build-only host, running the result needs both",
                     f"on the GPU host: `{privilege.as_root('modprobe amdgpu')}`")
    blockers = _amdgpu_blockers(host)
    if blockers:
        args = " ".join(blockers)
        return Check("amdgpu", FAIL, f"amdgpu is not loaded; the kernel command line has {args}",
                     f"remove {args} from GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, run "
                     f"`{privilege.as_root('update-grub')}` and reboot")
    return Check("amdgpu", FAIL, "amdgpu kernel module is not loaded",
                 f"`{privilege.as_root('modprobe amdgpu')}`; if it fails, read "
                 f"`{privilege.as_root('dmesg')} | grep -i amdgpu` "
                 "(missing firmware: install linux-firmware; Ubuntu ships amdgpu in "
                 "linux-modules-extra-$(uname -r))")


def check_devices(ctx: Context) -> Check:
    host = ctx.host
    kfd = host.path("dev/kfd")
    renders = sorted(p.name for p in host.path("dev/dri").glob("renderD*"))
    amdgpu = "amdgpu" in loaded_modules(host)
    if not kfd.exists() and not ctx.gpus:
        return Check("devices", WARN, "no /dev/kfd and no AMD GPU: fine for a build-only host",
                     "run the result on a host with an AMD GPU and amdgpu loaded")
    if not kfd.exists():
        fix = ("the kernel has amdgpu without the compute driver (CONFIG_HSA_AMD); use the "
               "distribution's generic kernel" if amdgpu else "load amdgpu first (see the "
               "amdgpu check)")
        return Check("devices", FAIL, "/dev/kfd is missing, so no ROCm program can reach a GPU",
                     fix)
    if not renders:
        return Check("devices", FAIL, "/dev/kfd exists but there is no /dev/dri/renderD* node",
                     "load amdgpu (see the amdgpu check) and check `ls -l /dev/dri`")
    nodes = ", ".join(["/dev/kfd", *(f"/dev/dri/{r}" for r in renders)])
    if not host.live:
        return Check("devices", OK, f"{nodes} present (access is not checked in a captured tree)")
    wanted = os.R_OK | os.W_OK
    denied = [str(p) for p in (kfd, *(host.path(f"dev/dri/{r}") for r in renders))
              if not os.access(p, wanted)]
    if denied:
        return Check("devices", FAIL, f"{host.user} cannot open {', '.join(denied)}",
                     f"`{privilege.as_root(f'usermod -aG render,video {host.user}')}`, then log "
                     "out and back in")
    return Check("devices", OK, f"{nodes} readable and writable by {host.user}")


def check_groups(ctx: Context) -> Check:
    host, user = ctx.host, ctx.host.user
    groups = read_groups(host)
    if groups is None:
        return Check("groups", SKIP, "no /etc/group to read")
    if user == "root":
        return Check("groups", OK, "running as root, which may open the GPU devices")
    gid = primary_gid(host, user)
    listed = any(user in members for _, members in groups.values())
    if not host.live and gid is None and not listed:
        return Check("groups", SKIP, f"user {user} is not in the captured tree's /etc/passwd",
                     "name the user to check with --user")
    member_of = {name for name, (g, members) in groups.items() if user in members or g == gid}
    wanted = [g for g in ("render", "video") if g in groups]
    missing = [g for g in wanted if g not in member_of]
    if not missing:
        return Check("groups", OK, f"{user} is in {' and '.join(wanted) or 'the GPU groups'}")
    return Check("groups", WARN, f"{user} is not in the {' and '.join(missing)} group"
                                 f"{'s' if len(missing) > 1 else ''} that own /dev/kfd and "
                                 "/dev/dri/renderD* (a desktop seat may still grant access, "
                                 "ssh sessions and services do not get it)",
                 f"`{privilege.as_root(f'usermod -aG {chr(44).join(missing)} {user}')}`, then log "
                 "out and back in "
                 "(ROCm's install guide adds users to render and video)")


def check_gpus(ctx: Context) -> Check:
    gpus = ctx.gpus
    if not gpus:
        return Check("gpus", WARN, "no AMD GPU found (KFD topology empty, no vendor 0x1002 display "
                                   "device on the PCI bus)",
                     "check the card is seated and powered (`lspci -nn -d 1002:`); you can "
                     "still build for a target you name with --target")
    listing = "; ".join(g.label for g in gpus)
    from_pci = [g for g in gpus if g.source == "pci"]
    unknown = [g for g in gpus if g.target is None]
    if from_pci:
        names = ", ".join(g.bdf or "?" for g in from_pci)
        cause = "the driver is not loaded" if not kfd_present(ctx.host.root) else \
            "the driver did not bring these up"
        return Check("gpus", WARN, f"{listing} — from the PCI-ID table because {cause} "
                                   f"({names}); the target is a best guess",
                     "load amdgpu (see the amdgpu check); with the driver the target comes "
                     "from the KFD topology, which is authoritative")
    if unknown:
        return Check("gpus", WARN, f"{listing} — ISA not known to the LLVM of ROCm 6.4",
                     "build for a target you name with --target")
    return Check("gpus", OK, f"{listing} — from the KFD topology")


_PCIE_FIX = (
    "check it under load (amdgpu lowers the link speed when the GPU idles: run llama-bench and "
    "read current_link_speed again); if it stays low, set this slot to Gen3 instead of Auto in "
    "the firmware setup, disable ASPM, and reseat the card or replace the riser: MI50 owners "
    "report links that retrain under load with Auto/Gen4 negotiation and ASPM on")
_WIDTH_FIX = ("move the card to a slot wired x16 (or check the slot's bifurcation setting); a "
              "riser with fewer lanes does this too")


def check_pcie(ctx: Context) -> Check:
    problems, fixes, fine = [], [], []
    for gpu in ctx.gpus:
        link = gpu.link
        if link is None:
            continue
        now = format_speed(link.speed, link.width)
        possible = format_speed(link.expected_speed, link.expected_width)
        if link.slower_than_possible or link.narrower_than_possible:
            problems.append(f"{gpu.bdf} runs at {now}, card and slot allow {possible}")
            fixes.append(_PCIE_FIX if link.slower_than_possible else _WIDTH_FIX)
        else:
            fine.append(f"{gpu.bdf} at {now}")
    if problems:
        return Check("pcie", WARN, "; ".join(problems + fine), " / ".join(dict.fromkeys(fixes)))
    if not fine:
        return Check("pcie", SKIP, "no PCIe link information for the GPUs found")
    return Check("pcie", OK, "; ".join(fine) + " (the most card and slot allow)")


def check_firmware(ctx: Context) -> Check:
    if ctx.host.path("sys/firmware/efi").is_dir():
        return Check("firmware", OK, "booted via UEFI (no CSM legacy boot)")
    return Check("firmware", WARN, "booted via legacy BIOS / CSM (no /sys/firmware/efi)",
                 "switch the firmware to UEFI boot and disable CSM: Above 4G decoding and "
                 "Resizable BAR, which let the driver map the whole VRAM, work only with UEFI "
                 "boot; the system then boots from an EFI partition (grub-efi)")


def check_aspm(ctx: Context) -> Check:
    host = ctx.host
    if "pcie_aspm=off" in cmdline(host):
        return Check("aspm", OK, "ASPM disabled on the kernel command line (pcie_aspm=off)")
    text = host.read("sys/module/pcie_aspm/parameters/policy")
    match = re.search(r"\[(\w+)\]", text or "")
    if not match:
        return Check("aspm", SKIP, "ASPM policy not exposed (kernel without CONFIG_PCIEASPM, or "
                                   "not in the captured tree)")
    policy = match.group(1)
    if policy in ("powersave", "powersupersave"):
        return Check("aspm", WARN, f"ASPM policy is {policy}: PCIe links enter low-power states",
                     "set ASPM to Disabled in the firmware setup or boot with pcie_aspm=off: "
                     "a link that leaves a low-power state retrains, which users of MI50s "
                     "report as link errors and stalls under load")
    note = " (the firmware's settings)" if policy == "default" else ""
    return Check("aspm", OK, f"ASPM policy is {policy}{note}")


def check_bar(ctx: Context) -> Check:
    problems: list[str] = []
    fine: list[str] = []
    for gpu in ctx.gpus:
        bar = gpu.vram_bar
        if bar is None:
            continue
        window = gpu.visible_vram or bar.size
        if gpu.vram:
            text = (f"{gpu.bdf}: BAR{bar.index} {format_bytes(bar.size)} for "
                    f"{format_bytes(gpu.vram)} VRAM")
            (fine if window >= gpu.vram else problems).append(text)
        else:
            text = f"{gpu.bdf}: BAR{bar.index} {format_bytes(bar.size)} (VRAM size unknown)"
            (fine if bar.size >= 4 * GIB else problems).append(text)
    if problems:
        return Check("bar", WARN, "small BAR: " + "; ".join(problems + fine),
                     "enable Above 4G Decoding and Resizable BAR in the firmware setup (needs "
                     "UEFI boot). ROCm works with a small BAR, but the CPU "
                     "then reaches VRAM only through that window (slower uploads, no large "
                     "peer-to-peer mappings)")
    if not fine:
        return Check("bar", SKIP, "no BAR information for the GPUs found")
    return Check("bar", OK, "large BAR: " + "; ".join(fine))


def check_nouveau(ctx: Context) -> Check:
    modules = loaded_modules(ctx.host)
    if "nouveau" not in modules:
        return Check("nouveau", OK, "nouveau not loaded")
    beside = " beside amdgpu" if "amdgpu" in modules else ""
    return Check("nouveau", WARN, f"nouveau is loaded{beside}",
                 "unless an NVIDIA card drives your display: `"
                 + privilege.pipe_to_root("printf 'blacklist nouveau\\noptions nouveau "
                                          "modeset=0\\n'",
                                          "tee /etc/modprobe.d/blacklist-nouveau.conf")
                 + " && " + privilege.as_root("update-initramfs -u")
                 + "`, then reboot (nouveau claims display devices that amdgpu should drive "
                 "when no NVIDIA card needs it)")


def check_memory(ctx: Context) -> Check:
    host, needs = ctx.host, ctx.needs
    info = read_meminfo(host)
    if "MemTotal" not in info:
        return Check("memory", SKIP, "no /proc/meminfo to read")
    total, swap_total = info["MemTotal"], info.get("SwapTotal", 0)
    available = info.get("MemAvailable", info.get("MemFree", 0))
    swap_free = info.get("SwapFree", 0)
    if host.live:  # the same numbers the job sizing uses, cgroup limits included
        snap = hostload.snapshot(host.root)
        available, swap_free = snap.mem_available, snap.swap_free
    weight, reserve, need = needs.swap_weight, resources.DEFAULT_RESERVE, needs.link_mem
    budget = resources.memory_budget(available, swap_free, weight)
    what = (f"{format_bytes(available)} of {format_bytes(total)} RAM available, swap "
            f"{format_bytes(swap_free)} free of {format_bytes(swap_total)}")
    job = f"{needs.largest_job} needs {format_bytes(need)}"
    if budget >= need:
        return Check("memory", OK, f"{what}: {job}, which fits")
    if weight <= 0:
        return Check("memory", WARN, f"{what}: {job}, and --swap-weight 0 counts no swap",
                     "close memory-hungry programs before the build, or raise --swap-weight")
    status = FAIL if total + swap_total < need else WARN
    return Check("memory", status,
                 f"{what}: {job} (+{format_bytes(reserve)} reserve, swap counted at ×{weight:g}); "
                 f"short by {format_bytes(need - budget)}",
                 hostload.swap_advice(need, available, swap_free, weight))


def check_disk(ctx: Context) -> Check:
    host, needs = ctx.host, ctx.needs
    if host.free_space is None:
        return Check("disk", SKIP, "free disk is not checked for a captured tree")
    wants = [("workdir", needs.workdir, needs.disk_workdir)]
    if needs.prefix is not None:
        wants.append(("prefix", needs.prefix, needs.disk_prefix))
    uses = hostreqs.disk_by_filesystem(wants, host.free_space)
    parts = [f"{use.names}: {format_bytes(use.free)} free, about {format_bytes(use.need)} needed"
             for use in uses]
    if any(use.short for use in uses):
        return Check("disk", WARN, "; ".join(parts),
                     "free space there, or point --workdir / --prefix at a larger disk (the "
                     "amounts are rocbuild's estimates unless recipes set resources.disk)")
    return Check("disk", OK, "; ".join(parts))


def _probe(host: Host) -> hostreqs.Probe:
    assert host.tools_path is not None
    return hostreqs.Probe(path=host.tools_path, run=host.run_tool, env=host.env)


def _requirements(needs: Needs) -> hostreqs.Requirements:
    return needs.reqs or hostreqs.Requirements(
        packages=hostreqs.users_by_package(needs.packages.items()))


def _as_check(check_id: str, findings: Sequence[hostreqs.Finding], ok: str) -> Check:
    """The findings of one check (the same preflight refuses a build on) as one line."""
    if not findings:
        return Check(check_id, OK, ok)
    status = FAIL if any(f.level == hostreqs.FAIL for f in findings) else WARN
    # a fix that is one install line is a command to paste: whole (cmd_doctor glues it)
    return Check(check_id, status, "; ".join(f.what for f in findings),
                 " / ".join(dict.fromkeys(f"`{f.fix}`" if f.installs else f.fix
                                          for f in findings)))


def check_toolchain(ctx: Context) -> Check:
    host = ctx.host
    if host.tools_path is None:
        return Check("toolchain", SKIP, "the build toolchain is not checked for a captured tree")
    findings = hostreqs.tool_findings(_requirements(ctx.needs), _probe(host))
    cmake = shutil.which("cmake", path=host.tools_path)
    version = hostreqs.cmake_version(cmake, _probe(host)) if cmake else None
    shown = f"cmake {'.'.join(map(str, version))}, " if version else ""
    return _as_check("toolchain", findings,
                     f"{shown}{', '.join(t for t in hostreqs.BASE_TOOLS if t != 'cmake')} found")


def check_ccache(ctx: Context) -> Check:
    """The compiler cache rocbuild uses by default (launchers.py decides what is enough)."""
    if ctx.host.tools_path is None:
        return Check("ccache", SKIP, "ccache is not checked for a captured tree")
    path = shutil.which("ccache", path=ctx.host.tools_path)
    result = ctx.host.run_tool([path, "--version"]) if path else None
    version = launchers.parse_ccache_version(result[1]) if result else None
    level, summary, fix = launchtools.ccache_check(path, version)
    if fix == launchtools.ccache_install():  # one install line: a command to paste, whole
        fix = f"`{fix}`"
    return Check("ccache", level, summary, fix)


def check_packages(ctx: Context) -> Check:
    host, reqs = ctx.host, _requirements(ctx.needs)
    if host.tools_path is None:
        return Check("packages", SKIP, "system packages are not checked for a captured tree")
    if not reqs.packages:
        return Check("packages", SKIP, "the recipes list no system packages")
    findings, unchecked = hostreqs.package_findings(reqs, _probe(host))
    if findings:
        return _as_check("packages", findings, "")
    if unchecked:
        return Check("packages", SKIP, "dpkg-query not found (not Debian/Ubuntu) and no "
                                       "system_checks probe in the recipes; check these with "
                                       f"your package manager: {' '.join(unchecked)}")
    return Check("packages", OK, f"{len(reqs.packages)} system packages the recipes list are "
                                 "installed")


def check_prefix(ctx: Context) -> Check:
    host, prefix = ctx.host, ctx.needs.prefix
    if host.tools_path is None or prefix is None:
        return Check("prefix", SKIP, "the prefix is not checked for a captured tree")
    return _as_check("prefix", hostreqs.prefix_findings(prefix, host.user),
                     f"{prefix} can be created and written by {host.user}")


def _rocbuild_prefix_behind(host: Host, link: Path) -> Path | None:
    """The rocbuild prefix a symlink such as /opt/rocm points at, if it is one."""
    target = os.readlink(link)
    resolved = Path(target) if os.path.isabs(target) else link.parent / target
    inside = host.path(str(resolved)) if os.path.isabs(target) else resolved
    return resolved if info_path(inside).is_file() else None


def dpkg_owners(host: Host, folder: str) -> list[str]:
    """The installed packages that hold files in ``folder`` (absolute, e.g.
    ``/usr/include/hip``), from dpkg's own record (``var/lib/dpkg/info/<package>.list``, what
    `dpkg -S` reads); empty without one (not Debian/Ubuntu)."""
    inside = folder.rstrip("/") + "/"
    return [package for package, lines in dpkg_listings(host.path("var/lib/dpkg"))
            if any(line.startswith(inside) for line in lines)]


def _hip_headers(ctx: Context) -> tuple[str, str] | None:
    """(finding, fix) when distribution HIP headers in /usr/include/hip can reach a HIP
    compile of the stack against another ROCm: llama.cpp's HIP build against a separate ROCm
    took them and failed (ggml-org/llama.cpp#16320). Nothing when the stack compiles no HIP,
    or compiles it against /usr itself (--base /usr: they are the base's headers)."""
    host, rocm = ctx.host, ctx.needs.hip_rocm
    if not host.path("usr/include/hip").is_dir() or rocm is None or rocm == Path("/usr"):
        return None
    owners = dpkg_owners(host, "/usr/include/hip")
    which = f" of {', '.join(owners)}" if owners else ""
    remove = (f"`{privilege.as_root('apt remove ' + ' '.join(owners))}` (apt names what goes "
              "with them)" if owners else "remove the package that installed them")
    return (f"distribution HIP headers{which} in /usr/include/hip can take the place of "
            f"{rocm}'s in a HIP compile against it",
            f"before building llama.cpp's HIP backend against {rocm}: {remove}; or build on "
            "them with --base /usr (ggml-org/llama.cpp#16320)")


def check_shadow(ctx: Context) -> Check:
    host = ctx.host
    headers = _hip_headers(ctx)
    found, fixes = ([headers[0]], [headers[1]]) if headers is not None else ([], [])
    opt_rocm = host.path("opt/rocm")
    note, other = "", None
    if opt_rocm.is_symlink():
        ours = _rocbuild_prefix_behind(host, opt_rocm)
        if ours is None:
            other = f"/opt/rocm -> {os.readlink(opt_rocm)} (not a rocbuild prefix)"
        else:
            note = f"; /opt/rocm points at the rocbuild prefix {ours}"
    elif opt_rocm.is_dir():
        version = (host.read("opt/rocm/.info/version") or "").strip()
        other = f"a ROCm {version + ' ' if version else ''}installed in /opt/rocm"
    if other is not None:
        found.append(f"{other} can shadow the prefix")
        fixes.append("CMake projects and hipcc look in /opt/rocm by default: build and run "
                     "with the prefix's env.sh, which puts the prefix first in PATH and "
                     "CMAKE_PREFIX_PATH, or move the other ROCm aside")
    if found:
        return Check("shadow", WARN, "; ".join(found), " / ".join(fixes))
    return Check("shadow", OK, "no other ROCm/HIP in /usr/include/hip or /opt/rocm" + note)


def _override_target(value: str) -> str | None:
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value)
    if not match:
        return None
    major, minor, step = (int(g) for g in match.groups())
    return decode_gfx_target_version(major * 10000 + minor * 100 + step)


def check_hsa_override(ctx: Context) -> Check:
    env = ctx.host.env
    names = sorted(k for k in env if k == "HSA_OVERRIDE_GFX_VERSION"
                   or k.startswith("HSA_OVERRIDE_GFX_VERSION_"))
    if not names:
        return Check("hsa-override", OK, "HSA_OVERRIDE_GFX_VERSION is not set")
    built = {t.processor for t in ctx.needs.targets} or \
        {t.processor for t in recommended_targets(ctx.gpus)}
    bad: list[tuple[Gpu, str, str]] = []
    other: list[tuple[Gpu, str, str]] = []
    used: set[str] = set()
    for gpu in ctx.gpus:
        # libhsakmt reads HSA_OVERRIDE_GFX_VERSION_<KFD node> first, then the global one
        per_node = f"HSA_OVERRIDE_GFX_VERSION_{gpu.node}" if gpu.node is not None else None
        var = per_node if per_node is not None and per_node in env \
            else "HSA_OVERRIDE_GFX_VERSION"
        if var not in env:
            continue
        used.add(var)
        value = env[var]
        text = f"{var}={value} applies to {gpu.bdf} ({gpu.gfx or 'unknown ISA'})"
        (bad if gpu.gfx in built else other).append((gpu, value, text))
    stray = [n for n in names if n not in used]
    if bad:
        gpu, value, text = bad[0]
        as_gfx = _override_target(value)
        identity = gpu.gfx_target_version is not None and \
            value.strip() == override_spelling(gpu.gfx_target_version)
        why = ("an identity override: it changes nothing today and newer libhsakmt rejects it"
               if identity else
               f"the runtime then treats the {gpu.gfx} as {as_gfx or 'another chip'} and loads "
               "code built for it: memory access faults (ROCm/ROCm#5238)")
        return Check("hsa-override", FAIL,
                     f"{'; '.join(t for _, _, t in bad)}: {gpu.gfx} is a target this stack is "
                     f"built for, so it needs no override; {why}",
                     f"unset {' '.join(sorted({t.split('=')[0] for _, _, t in bad}))} and remove "
                     "it from ~/.bashrc, ~/.profile, ~/.config/fish/config.fish and service "
                     "files (gfx906 is a native ROCm ISA, ROCm/ROCm#3065)")
    texts = [t for _, _, t in other] + [f"{n}={env[n]} matches no GPU found" for n in stray]
    return Check("hsa-override", WARN, "; ".join(texts) + " (not a target of this stack)",
                 "keep it only if you run prebuilt ROCm code on that GPU; it never belongs on a "
                 "GPU the stack is built for")


def check_recipes(ctx: Context) -> Check:
    needs = ctx.needs
    if needs.problem:
        return Check("recipes", WARN, f"recipes could not be loaded ({needs.problem}); memory and "
                                      "disk use reference figures",
                     "fix the recipe named above (run `rocbuild plan` for details)")
    targets = ", ".join(str(t) for t in needs.targets)
    return Check("recipes", OK,
                 f"{needs.stack_summary}, targets {targets} ({needs.targets_source})")


def check_base(ctx: Context) -> Check:
    """The base audit: which of the --base's GPU libraries lack the targets (rocbuild builds
    those it has a recipe for; ``plan`` shows each library)."""
    needs = ctx.needs
    if needs.base is None:
        return Check("base", OK, "no --base: every GPU library is built from source")
    targets = ", ".join(str(t) for t in needs.targets)
    lacking = [text for ok, text in needs.base_audit if not ok]
    if not lacking:
        return Check("base", OK, f"{needs.base}: {len(needs.base_audit)} GPU libraries read, "
                                 f"each carries {targets}")
    return Check("base", WARN, f"{needs.base}: {len(lacking)} of {len(needs.base_audit)} GPU "
                               f"libraries lack {targets}: " + " | ".join(lacking),
                 f"`rocbuild plan --base {needs.base}` shows what rocbuild builds instead; "
                 "a library without a recipe needs a ROCm that carries the target")


def check_target(ctx: Context) -> Check:
    recommended = recommended_targets(ctx.gpus)
    if not ctx.gpus:
        return Check("target", WARN, "no GPU found to recommend a target for",
                     "name the target: `rocbuild build --target gfx906` (MI50/MI60/Radeon "
                     "VII)")
    if not recommended:
        return Check("target", WARN, "the GPUs found have no ISA known to ROCm 6.4's LLVM",
                     "name the target with --target")
    text = ",".join(str(t) for t in recommended)
    configured = {t.processor for t in ctx.needs.targets}
    absent = [t for t in recommended if t.processor not in configured]
    if configured and absent:
        current = ",".join(str(t) for t in ctx.needs.targets)
        return Check("target", WARN, f"this host has {text}, but the stack is set to build "
                                     f"{current} ({ctx.needs.targets_source})",
                     f"`rocbuild build --target {text}`")
    return Check("target", OK, f"recommended: --target {text}")


CHECKS: tuple[Callable[[Context], Check], ...] = (
    check_os, check_amdgpu, check_devices, check_groups, check_gpus, check_pcie,
    check_firmware, check_aspm, check_bar, check_nouveau, check_memory, check_disk,
    check_prefix, check_toolchain, check_ccache, check_packages, check_recipes, check_shadow,
    check_hsa_override, check_base, check_target,
)


def run(host: Host, needs: Needs) -> Report:
    """Every check, in CHECKS order, on the host under ``host.root``."""
    gpus = detect_gpus(host.root)
    ctx = Context(host=host, needs=needs, gpus=gpus)
    checks = tuple(check(ctx) for check in CHECKS)
    return Report(root=host.root, checks=checks, gpus=tuple(gpus),
                  recommended=recommended_targets(gpus))
