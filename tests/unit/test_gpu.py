"""GPU detection on the hand-made host trees in tests/data/hosts (see their README)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rocbuild.checks import gpu
from rocbuild.checks.gpu import (
    Gpu,
    bdf_from_location,
    decode_gfx_target_version,
    detect_gpus,
    override_spelling,
    parse_link_speed,
    recommended_targets,
)
from rocbuild.model.targets import PROCESSOR_FEATURES

HOSTS = Path(__file__).resolve().parent.parent / "data" / "hosts"
GIB = 1 << 30


@pytest.mark.parametrize(("value", "isa"), [
    (90006, "gfx906"), (90010, "gfx90a"), (100300, "gfx1030"), (90012, "gfx90c"),
    (90000, "gfx900"), (90008, "gfx908"), (110000, "gfx1100"), (110501, "gfx1151"),
    (0, None), (91600, None), (90016, None),
])
def test_gfx_target_version_decodes_like_libhsakmt(value: int, isa: str | None) -> None:
    assert decode_gfx_target_version(value) == isa


def test_override_spelling_is_three_decimal_fields() -> None:
    # HSA_OVERRIDE_GFX_VERSION is decimal: gfx90a is 9.0.10, not 9.0.a
    assert override_spelling(90010) == "9.0.10"
    assert override_spelling(90006) == "9.0.6"


@pytest.mark.parametrize(("text", "speed"), [
    ("8.0 GT/s PCIe\n", 8.0), ("2.5 GT/s PCIe", 2.5), ("16 GT/s", 16.0), ("Unknown", None),
    (None, None),
])
def test_link_speed_parses_old_and_new_sysfs_spelling(text: str | None, speed: float | None
                                                      ) -> None:
    assert parse_link_speed(text) == speed


def test_location_id_is_bus_and_devfn() -> None:
    assert bdf_from_location(0, 1280) == "0000:05:00.0"
    assert bdf_from_location(1, (0x41 << 8) | (0x1F << 3) | 3) == "0001:41:1f.3"


def test_pci_table_covers_every_vega20_id_and_only_known_processors() -> None:
    for device in (0x66A0, 0x66A1, 0x66A2, 0x66A3, 0x66A4, 0x66A7, 0x66AF):
        assert gpu.PCI_TABLE[device][1] == "gfx906"
    assert {isa for _, isa in gpu.PCI_TABLE.values()} <= set(PROCESSOR_FEATURES)
    assert gpu.PCI_TABLE[0x73BF][1] == "gfx1030"
    assert gpu.PCI_TABLE[0x740C][1] == "gfx90a"


def test_mi50_comes_from_kfd_with_its_degraded_board_link() -> None:
    (mi50,) = detect_gpus(HOSTS / "mi50")  # the AST BMC VGA is not AMD: ignored
    assert (mi50.source, mi50.node, mi50.bdf, mi50.gfx) == ("kfd", 2, "0000:05:00.0", "gfx906")
    assert mi50.device_id == 0x66A1 and "MI50" in mi50.name
    assert str(mi50.target) == "gfx906"
    assert mi50.driver == "amdgpu"
    assert mi50.vram == mi50.visible_vram == 17163091968
    link = mi50.link
    assert link is not None
    # measured on the card's upstream switch port, not the always-perfect internal link
    assert link.device == "0000:03:00.0"
    assert (link.speed, link.width, link.max_speed, link.slot_max_speed) == (2.5, 16, 16.0, 8.0)
    assert link.expected_speed == 8.0
    assert link.slower_than_possible and not link.narrower_than_possible
    bar = mi50.vram_bar
    assert bar is not None and (bar.index, bar.size) == (0, 16 * GIB)


def test_radeon_vii_has_a_small_bar_and_its_audio_function_is_not_a_gpu() -> None:
    (card,) = detect_gpus(HOSTS / "radeon7")
    assert (card.gfx, card.device_id, card.node) == ("gfx906", 0x66AF, 1)
    assert card.vram_bar is not None and card.vram_bar.size == 256 << 20
    assert card.visible_vram == 256 << 20 and card.vram == 17163091968
    assert card.link is not None and not card.link.slower_than_possible


def test_without_the_driver_the_pci_table_finds_the_mi50() -> None:
    (card,) = detect_gpus(HOSTS / "nodriver")  # the Matrox BMC VGA is ignored
    assert (card.source, card.node, card.gfx, card.driver) == ("pci", None, "gfx906", None)
    assert card.bdf == "0000:05:00.0" and card.vram is None
    assert card.vram_bar is not None and card.vram_bar.size == 16 * GIB
    assert not gpu.kfd_present(HOSTS / "nodriver")


def test_rdna2_is_gfx1030_behind_the_navi_switch_at_gen4() -> None:
    (card,) = detect_gpus(HOSTS / "rdna2")
    assert (card.gfx, card.gfx_target_version, card.device_id) == ("gfx1030", 100300, 0x73BF)
    assert card.link is not None and card.link.device == "0000:01:00.0"
    assert (card.link.speed, card.link.expected_speed) == (16.0, 16.0)


def test_a_card_the_driver_did_not_bring_up_is_listed_from_pci(tmp_path: Path) -> None:
    root = tmp_path / "host"
    shutil.copytree(HOSTS / "mi50", root, symlinks=True)
    folder = root / "sys/devices/pci0000:00/0000:00:02.0/0000:82:00.0"
    folder.mkdir(parents=True)
    for name, text in {"vendor": "0x1002", "device": "0x66af", "class": "0x030000"}.items():
        (folder / name).write_text(text + "\n")
    os.symlink("../../../devices/pci0000:00/0000:00:02.0/0000:82:00.0",
               root / "sys/bus/pci/devices/0000:82:00.0")
    found = detect_gpus(root)
    assert [(g.source, g.bdf, g.gfx) for g in found] == [
        ("kfd", "0000:05:00.0", "gfx906"), ("pci", "0000:82:00.0", "gfx906")]


def test_an_absolute_symlink_in_a_copied_tree_stays_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "host"
    shutil.copytree(HOSTS / "rdna2", root, symlinks=True)
    link = root / "sys/bus/pci/devices/0000:03:00.0"
    target = os.readlink(link)
    link.unlink()
    os.symlink("/sys/" + target.split("../")[-1], link)  # /sys/devices/pci0000:00/...
    (card,) = detect_gpus(root)
    assert card.link is not None and card.link.device == "0000:01:00.0"


def test_recommended_targets_are_distinct_known_processors_in_order() -> None:
    def fake(isa: str | None) -> Gpu:
        return Gpu(source="kfd", node=1, bdf=None, device_id=None, name="x", gfx=isa,
                   gfx_target_version=None, driver=None, vram=None, visible_vram=None,
                   link=None, bars=())

    found = [fake("gfx1030"), fake("gfx906"), fake("gfx1030"), fake("gfx9999"), fake(None)]
    assert [str(t) for t in recommended_targets(found)] == ["gfx1030", "gfx906"]


def test_no_topology_and_no_pci_bus_means_no_gpus(tmp_path: Path) -> None:
    assert detect_gpus(tmp_path) == []
