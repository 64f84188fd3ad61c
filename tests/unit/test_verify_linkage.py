"""The loader's search order as linkage.py models it, on ELF files built byte by byte in a
fake system root (real programs built with cc are in tests/e2e/test_verify_linkage.py)."""

from __future__ import annotations

from pathlib import Path

from rocbuild.checks import linkage
from rocbuild.model.elf import Dynamic
from tests.unit.test_verify_scan import make_elf

ABI = (2, 1, 62)  # ELF64, little-endian, x86_64


def library(folder: Path, name: str, elf_class: int = 2, machine: int = 62) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(make_elf([(".text", 1, b"\x90", 0)], elf_class=elf_class, machine=machine))
    return path


def resolve(root: Path, dynamic: Dynamic, name: str = "libx.so.1",
            origin: Path | None = None) -> tuple[Path | None, str | None]:
    program = (origin or root / "prefix/bin") / "app"
    return linkage.resolve(name, program, dynamic, ABI, linkage.System(root))


def test_runpath_hides_rpath_and_rpath_counts_without_it(tmp_path: Path) -> None:
    library(tmp_path / "opt/a", "libx.so.1")
    library(tmp_path / "opt/b", "libx.so.1")
    assert resolve(tmp_path, Dynamic(rpath="/opt/a", runpath="/opt/b")) == (
        tmp_path / "opt/b/libx.so.1", "RUNPATH")
    assert resolve(tmp_path, Dynamic(rpath="/opt/a")) == (tmp_path / "opt/a/libx.so.1", "RPATH")
    # an empty RUNPATH still hides the RPATH; empty entries (the current folder) are skipped
    assert resolve(tmp_path, Dynamic(rpath="/opt/a", runpath="::")) == (None, None)


def test_origin_lib_and_platform_tokens(tmp_path: Path) -> None:
    (tmp_path / "lib/x86_64-linux-gnu").mkdir(parents=True)
    system = linkage.System(tmp_path)
    origin = tmp_path / "prefix/bin"
    assert linkage.expand_tokens("$ORIGIN/../$LIB:${ORIGIN}/${PLATFORM}/${LIB}", origin, system,
                                 ABI) == (f"{origin}/../lib/x86_64-linux-gnu:"
                                          f"{origin}/x86_64/lib/x86_64-linux-gnu")
    # without a multiarch folder $LIB is lib64 for 64-bit files
    assert linkage.expand_tokens("$LIB", origin, linkage.System(tmp_path / "none"),
                                 ABI) == "lib64"
    origin.mkdir(parents=True)
    library(tmp_path / "prefix/lib", "libx.so.1")
    assert resolve(tmp_path, Dynamic(runpath="$ORIGIN/../lib")) == (
        origin / "../lib/libx.so.1", "RUNPATH")


def test_ld_so_conf_with_include_globs(tmp_path: Path) -> None:
    conf = tmp_path / "etc"
    (conf / "ld.so.conf.d").mkdir(parents=True)
    (conf / "ld.so.conf").write_text("# system\n/opt/first\ninclude ld.so.conf.d/*.conf\n"
                                     "include /etc/missing/*.conf\n")
    (conf / "ld.so.conf.d/b.conf").write_text("/opt/b  # comment\n")
    (conf / "ld.so.conf.d/a.conf").write_text("/opt/a\n/opt/first\n")
    system = linkage.System(tmp_path)
    assert system.conf_dirs() == [tmp_path / "opt/first", tmp_path / "opt/a", tmp_path / "opt/b"]
    library(tmp_path / "opt/b", "libx.so.1")
    library(tmp_path / "usr/lib", "libx.so.1")  # the default folders come after the conf
    assert resolve(tmp_path, Dynamic()) == (tmp_path / "opt/b/libx.so.1", "ld.so.conf")


def test_default_folders_multiarch_first(tmp_path: Path) -> None:
    library(tmp_path / "usr/lib", "libx.so.1")
    assert resolve(tmp_path, Dynamic()) == (tmp_path / "usr/lib/libx.so.1", "system")
    library(tmp_path / "usr/lib/x86_64-linux-gnu", "libx.so.1")
    assert resolve(tmp_path, Dynamic()) == (tmp_path / "usr/lib/x86_64-linux-gnu/libx.so.1",
                                            "system")


def test_candidate_of_another_class_or_machine_is_skipped(tmp_path: Path) -> None:
    library(tmp_path / "opt/a", "libx.so.1", elf_class=1)  # 32-bit
    library(tmp_path / "opt/b", "libx.so.1", machine=183)  # aarch64
    (tmp_path / "opt/c").mkdir(parents=True)
    (tmp_path / "opt/c/libx.so.1").write_text("INPUT(-lx)\n")  # a linker script
    library(tmp_path / "opt/d", "libx.so.1")
    assert resolve(tmp_path, Dynamic(runpath="/opt/a:/opt/b:/opt/c:/opt/d")) == (
        tmp_path / "opt/d/libx.so.1", "RUNPATH")
    assert resolve(tmp_path, Dynamic(runpath="/opt/a:/opt/b:/opt/c")) == (None, None)


def test_name_with_a_slash_is_a_path(tmp_path: Path) -> None:
    library(tmp_path / "opt/a", "libx.so.1")
    assert resolve(tmp_path, Dynamic(), name="/opt/a/libx.so.1") == (
        tmp_path / "opt/a/libx.so.1", "path")
    assert resolve(tmp_path, Dynamic(runpath="/opt/a"), name="a/libx.so.1") == (None, None)
