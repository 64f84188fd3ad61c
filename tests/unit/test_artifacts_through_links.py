"""unpack never writes through a link that is already in the prefix and leads out of it
(artifacts._place's check): an artifact's own entries are all inside the prefix, but a
folder of the prefix may have been replaced by a link to somewhere else since."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.run.cache.artifacts import ArtifactRefused, Relocation, pack, unpack


def test_an_entry_below_a_link_out_of_the_prefix_is_refused_and_nothing_lands_there(
        tmp_path: Path) -> None:
    built = tmp_path / "built" / "opt" / "stack"
    (built / "lib").mkdir(parents=True)
    (built / "lib" / "libx.so").write_bytes(b"\x7fELF\0library")
    archive = tmp_path / "x.tar.zst"
    entries = pack(built, ["lib/libx.so"], archive)

    prefix = tmp_path / "opt" / "stack"
    prefix.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (prefix / "lib").symlink_to(elsewhere)  # lib/ leads out of the prefix now
    with pytest.raises(ArtifactRefused, match=r"would be written outside .* through a link"):
        unpack(archive, entries, prefix, Relocation(str(built), str(prefix)))
    assert list(elsewhere.iterdir()) == []


def test_a_refused_entry_makes_no_folder_out_there(tmp_path: Path) -> None:
    """The check comes before the folders are made, so a refused ``lib/sub/libx.so`` leaves
    no ``sub/`` in the folder the link leads to."""
    built = tmp_path / "built" / "opt" / "stack"
    (built / "lib" / "sub").mkdir(parents=True)
    (built / "lib" / "sub" / "libx.so").write_bytes(b"\x7fELF\0library")
    archive = tmp_path / "x.tar.zst"
    entries = pack(built, ["lib/sub/libx.so"], archive)

    prefix = tmp_path / "opt" / "stack"
    prefix.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (prefix / "lib").symlink_to(elsewhere)
    with pytest.raises(ArtifactRefused, match=r"would be written outside .* through a link"):
        unpack(archive, entries, prefix, Relocation(str(built), str(prefix)))
    assert list(elsewhere.iterdir()) == []
