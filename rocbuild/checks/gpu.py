"""AMD GPU detection from sysfs: KFD topology first, the PCI-ID table only as a fallback.

Every read is relative to ``root`` so ``rocbuild doctor --root DIR`` can inspect a tree captured
on another machine (tests use hand-made trees under ``tests/data/hosts``).

Why KFD first (docs/architecture.md, Facts): the kernel's compute driver exports
``gfx_target_version`` per GPU node, derived from the GC IP version, so it is right for every
GPU the driver knows. A PCI-ID table goes stale and cannot tell some APUs apart; it is only
used when the driver is not loaded (no ``/sys/class/kfd``), to still recommend a ``--target``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild.model.targets import PROCESSOR_FEATURES, TargetId, parse_target

AMD_VENDOR = 0x1002
KFD_NODES = "sys/class/kfd/kfd/topology/nodes"
PCI_DEVICES = "sys/bus/pci/devices"
_BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

# --- PCI-ID fallback table ---------------------------------------------------------------------
# device id -> (name, gfx). Device ids and their ASIC come from the kernel's amdgpu PCI table
# (torvalds/linux:drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c, ``pciidlist``: CHIP_VEGA10,
# CHIP_VEGA20, CHIP_ARCTURUS, CHIP_ALDEBARAN, CHIP_SIENNA_CICHLID, CHIP_NAVY_FLOUNDER,
# CHIP_DIMGREY_CAVEFISH); the ASIC -> gfx_target_version step is KFD's (kfd_device.c:
# Vega10 90000, Vega20 90006, Arcturus 90008, Aldebaran 90010, Navi21 100300, Navi22 100301,
# Navi23 100302). Names are pci.ids (2023.04.10) entries. Which Vega 20 id is which board is
# not settled (docs/architecture.md, Facts), and
# it does not matter here: all seven are gfx906. Newer GPUs (RDNA3 on) are matched by the
# kernel through IP discovery, not by id, so they are deliberately absent: load the driver.
PCI_TABLE: dict[int, tuple[str, str]] = {
    # Vega 20 (GCN 5.1) — MI50, MI60, Radeon VII, Radeon Pro VII
    0x66A0: ("Vega 20 [Radeon Instinct]", "gfx906"),
    0x66A1: ("Vega 20 [Radeon Pro VII / Radeon Instinct MI50]", "gfx906"),
    0x66A2: ("Vega 20", "gfx906"),
    0x66A3: ("Vega 20 [Radeon Pro Vega II / Vega II Duo]", "gfx906"),
    0x66A4: ("Vega 20", "gfx906"),
    0x66A7: ("Vega 20 [Radeon Pro Vega 20]", "gfx906"),
    0x66AF: ("Vega 20 [Radeon VII]", "gfx906"),
    # Vega 10 (GCN 5.0)
    0x6860: ("Vega 10 [Instinct MI25/MI25x2/V340/V320]", "gfx900"),
    0x6863: ("Vega 10 XTX [Radeon Vega Frontier Edition]", "gfx900"),
    0x687F: ("Vega 10 XL/XT [Radeon RX Vega 56/64]", "gfx900"),
    # CDNA 1 / CDNA 2
    0x7388: ("Arcturus GL-XL", "gfx908"),
    0x738C: ("Arcturus GL-XL [Instinct MI100]", "gfx908"),
    0x7408: ("Aldebaran/MI200", "gfx90a"),
    0x740C: ("Aldebaran/MI200 [Instinct MI250X/MI250]", "gfx90a"),
    0x740F: ("Aldebaran/MI200 [Instinct MI210]", "gfx90a"),
    0x7410: ("Aldebaran/MI200", "gfx90a"),
    # RDNA 2
    0x73A1: ("Navi 21 [Radeon Pro V620]", "gfx1030"),
    0x73A2: ("Navi 21 Pro-XTA [Radeon Pro W6900X]", "gfx1030"),
    0x73A3: ("Navi 21 GL-XL [Radeon PRO W6800]", "gfx1030"),
    0x73A5: ("Navi 21 [Radeon RX 6950 XT]", "gfx1030"),
    0x73AF: ("Navi 21 [Radeon RX 6900 XT]", "gfx1030"),
    0x73BF: ("Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]", "gfx1030"),
    0x73DF: ("Navi 22 [Radeon RX 6700/6700 XT/6750 XT / 6800M/6850M XT]", "gfx1031"),
    0x73FF: ("Navi 23 [Radeon RX 6600/6600 XT/6600M]", "gfx1032"),
}

# PCIe switch ports that sit on the graphics card itself, between the slot and the GPU
# (pci.ids: 1022:1470/1471 "Vega 10 PCIe Bridge", used by Vega 10 and Vega 20 boards;
# 1002:1478/1479 "Navi 10 XL Upstream/Downstream Port of PCI Express Switch", Navi 1x/2x).
# The GPU's own link is to that switch, so it always looks perfect; the link that matters
# is the one from the card's upstream port to the board.
ON_CARD_SWITCH_PORTS = frozenset({(0x1022, 0x1470), (0x1022, 0x1471),
                                  (0x1002, 0x1478), (0x1002, 0x1479)})

# PCIe generation by transfer rate (GT/s).
_GEN_BY_SPEED = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}

# Linux ``struct resource`` flags as printed in a PCI device's ``resource`` file.
IORESOURCE_MEM = 0x200
IORESOURCE_PREFETCH = 0x2000


def decode_gfx_target_version(value: int) -> str | None:
    """KFD's ``gfx_target_version`` -> ISA name: 90006 -> gfx906, 90010 -> gfx90a.

    libhsakmt splits the number as major = v/10000 % 100, minor = v/100 % 100,
    stepping = v % 100, and the ISA name prints minor and stepping as one hex digit each
    (docs/architecture.md, Facts). 0 (a CPU node) or a field above 15 is not a GPU ISA: None.
    """
    if value <= 0:
        return None
    major, minor, stepping = (value // 10000) % 100, (value // 100) % 100, value % 100
    if major == 0 or minor > 15 or stepping > 15:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def override_spelling(gfx_target_version: int) -> str:
    """The same version as HSA_OVERRIDE_GFX_VERSION spells it: three decimal fields (9.0.6)."""
    v = gfx_target_version
    return f"{(v // 10000) % 100}.{(v // 100) % 100}.{v % 100}"


def format_speed(speed_gts: float | None, width: int | None) -> str:
    if speed_gts is None:
        return "unknown"
    gen = _GEN_BY_SPEED.get(speed_gts)
    text = f"{speed_gts:g} GT/s" + (f" (Gen{gen})" if gen else "")
    return text + (f" x{width}" if width else "")


# --- small readers -----------------------------------------------------------------------------
def read_text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def parse_properties(text: str | None) -> dict[str, int]:
    """KFD ``properties`` files: one ``name value`` pair per line, values decimal."""
    props: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                props[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return props


def read_int(text: str | None, base: int = 10) -> int | None:
    """A sysfs number (``16384\n``, in hex ``0x1002``), None when missing or not a number
    (bench/host.py too)."""
    try:
        return int(text.strip(), base) if text else None
    except ValueError:
        return None


def parse_link_speed(text: str | None) -> float | None:
    """``8.0 GT/s PCIe`` (or older kernels' ``8 GT/s``) -> 8.0; ``Unknown`` -> None."""
    match = re.match(r"\s*([0-9.]+)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


# --- PCI devices -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bar:
    index: int
    size: int
    prefetchable: bool


@dataclass(frozen=True)
class Link:
    """The card's link to the board: what it runs at, and what card and slot could do."""

    device: str  # the BDF whose link this is (the card's upstream switch port or the GPU)
    speed: float | None
    width: int | None
    max_speed: float | None  # the card's capability
    max_width: int | None
    slot_max_speed: float | None  # the port above it (root port or board switch)
    slot_max_width: int | None

    @property
    def expected_speed(self) -> float | None:
        known = [s for s in (self.max_speed, self.slot_max_speed) if s]
        return min(known) if known else None

    @property
    def expected_width(self) -> int | None:
        known = [w for w in (self.max_width, self.slot_max_width) if w]
        return min(known) if known else None

    @property
    def slower_than_possible(self) -> bool:
        return bool(self.speed and self.expected_speed and self.speed < self.expected_speed)

    @property
    def narrower_than_possible(self) -> bool:
        return bool(self.width and self.expected_width and self.width < self.expected_width)

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "speed_gts": self.speed, "width": self.width,
                "max_speed_gts": self.max_speed, "max_width": self.max_width,
                "slot_max_speed_gts": self.slot_max_speed, "slot_max_width": self.slot_max_width}


@dataclass(frozen=True)
class PciDevice:
    bdf: str
    path: Path  # the real sysfs folder (upstream bridges are its parent folders)
    vendor: int | None
    device: int | None
    pci_class: int | None
    driver: str | None

    def attr(self, name: str) -> str | None:
        text = read_text(self.path / name)
        return text.strip() if text is not None else None


def _resolve_in_root(root: Path, link: Path) -> Path:
    """Follow one sysfs symlink without leaving ``root``: real sysfs links are relative
    (``../../../devices/pci0000:00/...``), but a copied tree may hold absolute ones."""
    if not link.is_symlink():
        return link
    target = os.readlink(link)
    base = root if os.path.isabs(target) else link.parent
    return Path(os.path.normpath(base / target.lstrip("/")))


def _driver_of(path: Path) -> str | None:
    return next((line.partition("=")[2].strip() or None for line in
                 (read_text(path / "uevent") or "").splitlines() if line.startswith("DRIVER=")),
                None)


def pci_device(root: Path, bdf: str) -> PciDevice | None:
    link = root / PCI_DEVICES / bdf
    if not link.exists() and not link.is_symlink():
        return None
    return _device_at(_resolve_in_root(root, link), bdf)


def _device_at(path: Path, bdf: str) -> PciDevice:
    return PciDevice(bdf=bdf, path=path, vendor=read_int(read_text(path / "vendor"), 16),
                     device=read_int(read_text(path / "device"), 16),
                     pci_class=read_int(read_text(path / "class"), 16), driver=_driver_of(path))


def list_pci_devices(root: Path) -> list[PciDevice]:
    folder = root / PCI_DEVICES
    try:
        names = sorted(n for n in os.listdir(folder) if _BDF_RE.match(n))
    except OSError:
        return []
    found = [pci_device(root, name) for name in names]
    return [d for d in found if d is not None]


def _parent_device(dev: PciDevice) -> PciDevice | None:
    parent = dev.path.parent
    return _device_at(parent, parent.name) if _BDF_RE.match(parent.name) else None


def read_link(dev: PciDevice) -> Link | None:
    """The link between the card and the board. Climb over the card's own switch ports
    (ON_CARD_SWITCH_PORTS) first; the port above the card says what the slot can do."""
    edge = dev
    parent = _parent_device(edge)
    while parent is not None and (parent.vendor, parent.device) in ON_CARD_SWITCH_PORTS:
        edge, parent = parent, _parent_device(parent)
    speed = parse_link_speed(edge.attr("current_link_speed"))
    if speed is None and edge.attr("max_link_speed") is None:
        return None  # no PCIe capability exposed (virtual device, or not captured)
    return Link(device=edge.bdf, speed=speed, width=read_int(edge.attr("current_link_width")),
                max_speed=parse_link_speed(edge.attr("max_link_speed")),
                max_width=read_int(edge.attr("max_link_width")),
                slot_max_speed=parse_link_speed(parent.attr("max_link_speed")) if parent else None,
                slot_max_width=read_int(parent.attr("max_link_width")) if parent else None)


def read_bars(dev: PciDevice) -> tuple[Bar, ...]:
    """BAR sizes from the ``resource`` file: lines 0-5 are the BARs as
    ``start end flags`` in hex; an unassigned BAR reads as zeros."""
    bars = []
    lines = (dev.attr("resource") or "").splitlines()
    for index, line in enumerate(lines[:6]):
        parts = line.split()
        if len(parts) != 3:
            continue
        start, end, flags = (int(p, 16) for p in parts)
        if end <= start or not flags & IORESOURCE_MEM:
            continue
        bars.append(Bar(index=index, size=end - start + 1,
                        prefetchable=bool(flags & IORESOURCE_PREFETCH)))
    return tuple(bars)


def is_amd_display(dev: PciDevice) -> bool:
    """Vendor 0x1002 with a display class (0x03xxxx: VGA, 3D or 'display controller')."""
    return dev.vendor == AMD_VENDOR and dev.pci_class is not None and dev.pci_class >> 16 == 0x03


# --- GPUs --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Gpu:
    source: str  # "kfd" (driver loaded, authoritative) or "pci" (ID table fallback)
    node: int | None  # KFD node id (HSA_OVERRIDE_GFX_VERSION_<node> refers to it)
    bdf: str | None
    device_id: int | None
    name: str
    gfx: str | None
    gfx_target_version: int | None
    driver: str | None
    vram: int | None  # bytes
    visible_vram: int | None  # bytes the CPU can reach through the BAR, when the driver says
    link: Link | None
    bars: tuple[Bar, ...]

    @property
    def target(self) -> TargetId | None:
        """The processor as a build target; None when unknown to the LLVM of ROCm 6.4."""
        if self.gfx is None or self.gfx not in PROCESSOR_FEATURES:
            return None
        return parse_target(self.gfx)

    @property
    def vram_bar(self) -> Bar | None:
        """The VRAM aperture: the largest prefetchable memory BAR (BAR0 on AMD GPUs)."""
        candidates = [b for b in self.bars if b.prefetchable]
        return max(candidates, key=lambda b: b.size) if candidates else None

    @property
    def label(self) -> str:
        where = f"KFD node {self.node}" if self.node is not None else "PCI"
        return f"{self.name} ({self.gfx or 'unknown ISA'}, {where}, {self.bdf or '?'})"

    def to_json(self) -> dict[str, Any]:
        bar = self.vram_bar
        return {
            "source": self.source, "node": self.node, "pci": self.bdf,
            "device_id": f"0x{self.device_id:04x}" if self.device_id is not None else None,
            "name": self.name, "gfx": self.gfx, "gfx_target_version": self.gfx_target_version,
            "driver": self.driver, "vram_bytes": self.vram, "visible_vram_bytes": self.visible_vram,
            "vram_bar_bytes": bar.size if bar else None,
            "link": self.link.to_json() if self.link else None,
        }


def bdf_from_location(domain: int, location_id: int) -> str:
    """KFD's ``location_id`` is (bus << 8) | devfn, with devfn = (slot << 3) | function."""
    bus, devfn = location_id >> 8, location_id & 0xFF
    return f"{domain:04x}:{bus:02x}:{devfn >> 3:02x}.{devfn & 7}"


def _name_for(device_id: int | None) -> str:
    if device_id is not None and device_id in PCI_TABLE:
        return PCI_TABLE[device_id][0]
    return f"AMD GPU 1002:{device_id:04x}" if device_id is not None else "AMD GPU"


def _kfd_vram(node_dir: Path) -> int | None:
    """Local memory from the node's memory banks (heap type 1 = public, 2 = private FB)."""
    banks = (parse_properties(read_text(bank))
             for bank in sorted((node_dir / "mem_banks").glob("*/properties")))
    return sum(p.get("size_in_bytes", 0) for p in banks if p.get("heap_type") in (1, 2)) or None


def _node_ids(root: Path) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(root / KFD_NODES) if n.isdigit())
    except OSError:
        return []


def kfd_present(root: Path) -> bool:
    return (root / KFD_NODES).is_dir()


def _gpu_from_node(root: Path, node: int) -> Gpu | None:
    node_dir = root / KFD_NODES / str(node)
    props = parse_properties(read_text(node_dir / "properties"))
    # CPU nodes have no SIMDs and gfx_target_version 0 (docs/architecture.md, Facts)
    if not props.get("simd_count") or not props.get("gfx_target_version"):
        return None
    version = props["gfx_target_version"]
    device_id = props.get("device_id")
    bdf = bdf_from_location(props.get("domain", 0), props.get("location_id", 0))
    dev = pci_device(root, bdf)
    return Gpu(source="kfd", node=node, bdf=bdf, device_id=device_id, name=_name_for(device_id),
               gfx=decode_gfx_target_version(version), gfx_target_version=version,
               driver=dev.driver if dev else None,
               vram=((read_int(dev.attr("mem_info_vram_total")) if dev else None)
                     or _kfd_vram(node_dir)),
               visible_vram=read_int(dev.attr("mem_info_vis_vram_total")) if dev else None,
               link=read_link(dev) if dev else None, bars=read_bars(dev) if dev else ())


def _gpu_from_pci(dev: PciDevice) -> Gpu:
    name, gfx = PCI_TABLE.get(dev.device or -1, (_name_for(dev.device), None))
    return Gpu(source="pci", node=None, bdf=dev.bdf, device_id=dev.device, name=name, gfx=gfx,
               gfx_target_version=None, driver=dev.driver,
               vram=read_int(dev.attr("mem_info_vram_total")),
               visible_vram=read_int(dev.attr("mem_info_vis_vram_total")),
               link=read_link(dev), bars=read_bars(dev))


def detect_gpus(root: Path = Path("/")) -> list[Gpu]:
    """AMD GPUs of the host under ``root``: every KFD GPU node, then any AMD display device
    KFD does not list (driver not loaded, or it failed on that card) from the PCI table."""
    gpus = [g for g in (_gpu_from_node(root, n) for n in _node_ids(root)) if g is not None]
    covered = {g.bdf for g in gpus}
    gpus += [_gpu_from_pci(d) for d in list_pci_devices(root)
             if is_amd_display(d) and d.bdf not in covered]
    return gpus


def recommended_targets(gpus: list[Gpu]) -> tuple[TargetId, ...]:
    """One build target per distinct processor found, in detection order. Plain processor
    names (gfx906, not gfx906:sramecc+:xnack-): code for a plain target runs on any feature
    setting of that processor (targets.runs_on), so the build serves every card of that kind."""
    return tuple(dict.fromkeys(gpu.target for gpu in gpus if gpu.target is not None))
