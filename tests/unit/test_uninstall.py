"""uninstall's rules where they live (prefix/uninstall.py): a file another component's record
also holds is kept, compared where the paths really land through links in the prefix (either
record may spell it through the link); rocbuild's own files and anything outside the prefix
are never removed; folders left empty go, then the record."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rocbuild.model import layout
from rocbuild.prefix import records
from rocbuild.prefix.uninstall import uninstall


def record(prefix: Path, component: str, *files: str) -> None:
    path = records.record_path(prefix, component)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"component": component, "format": records.RECORD_FORMAT,
                                "files": list(files), "extras": [], "entries": {}}))


def touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_file_another_record_holds_through_a_link_is_kept(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    shared = touch(prefix / "lib" / "libmid.so")
    also = touch(prefix / "lib" / "libtwo.so")
    keep = touch(prefix / "share" / "keep")
    os.symlink("../lib", prefix / "share" / "l")
    own = touch(prefix / "share" / "a" / "a.txt", "abc")
    # "a" names libmid through the link and libtwo as it is; "b" the other way round
    record(prefix, "a", "share/l/libmid.so", "lib/libtwo.so", "share/a/a.txt")
    record(prefix, "b", "lib/libmid.so", "share/l/libtwo.so")
    removed = uninstall(prefix, "a", "rocm")
    assert shared.is_file() and also.is_file()
    assert removed.kept == ("lib/libtwo.so", "share/l/libmid.so")
    assert (removed.files, removed.size) == (1, 3)
    assert not own.exists() and not own.parent.exists()  # its folder, left empty, went too
    assert keep.is_file()
    assert not records.record_path(prefix, "a").exists()
    assert records.record_path(prefix, "b").is_file()


def test_rocbuilds_own_files_and_what_lies_outside_are_never_removed(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    outside = touch(tmp_path / "outside" / "victim.so")
    prefix.mkdir()
    os.symlink(outside.parent, prefix / "out")
    info = touch(prefix / layout.INFO_DIR / "build-info.json")
    env = touch(prefix / "env.sh")
    record(prefix, "a", "out/victim.so", f"{layout.INFO_DIR}/build-info.json", "env.sh")
    removed = uninstall(prefix, "a", "rocm")
    assert outside.is_file() and info.is_file() and env.is_file()
    assert removed.files == 0
