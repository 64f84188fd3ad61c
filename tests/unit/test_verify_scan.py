"""The pure scanner on ELF files and offload bundles built byte by byte here, so every field
the reader trusts can be broken on purpose. Real hipcc output is in tests/e2e."""

from __future__ import annotations

import hashlib
import struct
import time
import zlib
from pathlib import Path

import pytest

from rocbuild.checks.verify import (
    BUNDLE_MAGIC,
    Decoders,
    Entry,
    Verdict,
    kernel_names,
    scan_fatbin,
    verify_file,
)
from rocbuild.model.targets import parse_target

HOST = "host-x86_64-unknown-linux-gnu-"
GFX906 = (parse_target("gfx906"),)


# --- builders (also used by the other test_verify_* modules) ----------------------------------
def code_object(*kernels: str) -> bytes:
    """A minimal AMDGPU-like ELF whose symbol table names ``<kernel>.kd`` descriptors."""
    strtab = b"\0" + b"".join(k.encode() + b".kd\0" for k in kernels)
    symbols = bytes(24)  # the null symbol
    offset = 1
    for kernel in kernels:
        symbols += struct.pack("<IBBHQQ", offset, 0x11, 0, 1, 0, 64)
        offset += len(kernel) + 4
    return make_elf([(".text", 1, b"\0" * 16, 0), (".symtab", 2, symbols, 3),
                     (".strtab", 3, strtab, 0)], machine=224)


def plain_bundle(*entries: tuple[str, bytes]) -> bytes:
    """``__CLANG_OFFLOAD_BUNDLE__``, u64 count, (u64 offset, u64 size, u64 id length, id)*,
    then the entries' bytes; offsets count from the bundle's start."""
    header_size = len(BUNDLE_MAGIC) + 8 + sum(24 + len(i) for i, _ in entries)
    header, payload = BUNDLE_MAGIC + struct.pack("<Q", len(entries)), b""
    for entry_id, data in entries:
        header += struct.pack("<QQQ", header_size + len(payload), len(data), len(entry_id))
        header += entry_id.encode()
        payload += data
    return header + payload


def ccob(bundle: bytes, version: int = 2, method: int = 0, data: bytes | None = None,
         digest: int | None = None, raw_size: int | None = None) -> bytes:
    """A CompressedOffloadBundle around ``bundle`` (method 0 zlib, 1 zstd)."""
    if data is None:
        data = zlib.compress(bundle)
    if digest is None:
        digest = int.from_bytes(hashlib.md5(bundle).digest()[:8], "little")
    raw = len(bundle) if raw_size is None else raw_size
    head = b"CCOB" + struct.pack("<HH", version, method)
    if version == 1:
        return head + struct.pack("<IQ", raw, digest) + data
    if version == 2:
        return head + struct.pack("<IIQ", 24 + len(data), raw, digest) + data
    return head + struct.pack("<QQQ", 32 + len(data), raw, digest) + data


def fatbin(*bundles: bytes, align: int = 4096) -> bytes:
    """Bundles padded to ``align`` like the linker lays them out."""
    return b"".join(bundle + b"\0" * (-len(bundle) % align) for bundle in bundles)


def make_elf(sections: list[tuple[str, int, bytes, int]], elf_class: int = 2, data: int = 1,
             machine: int = 62) -> bytes:
    """ELF64 LE with the given (name, type, bytes, link) sections and a name table; section
    indexes start at 1 (0 is the null section)."""
    names = b"\0"
    name_offsets = []
    for name, *_ in [*sections, (".shstrtab", 3, b"", 0)]:
        name_offsets.append(len(names))
        names += name.encode() + b"\0"
    blobs = [(t, d, link) for _, t, d, link in sections] + [(3, names, 0)]
    body, placed = b"", []
    for _, blob, _ in blobs:
        placed.append(64 + len(body))
        body += blob + b"\0" * (-len(blob) % 8)
    shoff = 64 + len(body)
    table = bytes(64)
    for (sh_type, blob, link), offset, name_off in zip(blobs, placed, name_offsets, strict=True):
        table += struct.pack("<IIQQQQIIQQ", name_off, sh_type, 0, 0, offset, len(blob), link,
                             0, 1, 0)
    ident = b"\x7fELF" + bytes([elf_class, data, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                                 len(blobs) + 1, len(blobs))
    return header + body + table


def elf_with_fatbin(blob: bytes) -> bytes:
    return make_elf([(".text", 1, b"\x90" * 32, 0), (".hip_fatbin", 1, blob, 0)])


def tu(*targets: str, kernels: tuple[str, ...] = ("k",)) -> bytes:
    """One translation unit's bundle: a host entry plus one code object per target."""
    return plain_bundle((HOST, b""), *((f"hipv4-amdgcn-amd-amdhsa--{t}", code_object(*kernels))
                                       for t in targets))


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --- entry IDs --------------------------------------------------------------------------------
@pytest.mark.parametrize(("entry_id", "kind", "amdgcn", "target"), [
    ("hipv4-amdgcn-amd-amdhsa--gfx906", "hipv4", True, "gfx906"),
    ("hip-amdgcn-amd-amdhsa--gfx906:xnack+", "hip", True, "gfx906:xnack+"),
    ("hipv4-amdgcn-amd-amdhsa--gfx906:xnack-:sramecc+", "hipv4", True, "gfx906:sramecc+:xnack-"),
    ("hipv4-amdgcn-amd-amdhsa--gfx10-3-generic", "hipv4", True, "gfx10-3-generic"),
    ("host-x86_64-unknown-linux-gnu-", "host", False, None),
    ("host-x86_64-unknown-linux", "host", False, None),
])
def test_entry_ids(entry_id: str, kind: str, amdgcn: bool, target: str | None) -> None:
    entry = Entry(entry_id)
    assert entry.kind == kind and entry.is_amdgcn is amdgcn
    assert (str(entry.target) if entry.target else None) == target


def test_unknown_processor_kept_raw_and_never_matches(tmp_path: Path) -> None:
    entry = Entry("hipv4-amdgcn-amd-amdhsa--gfx9999")
    assert entry.target is None and entry.target_text == "gfx9999"
    result = verify_file(write(tmp_path, "x.so", elf_with_fatbin(tu("gfx9999"))), GFX906)
    assert result.verdict is Verdict.FAIL and result.targets_found == ("gfx9999",)


# --- bundles ----------------------------------------------------------------------------------
def test_every_bundle_is_walked_not_just_the_first() -> None:
    bundles = scan_fatbin(fatbin(tu("gfx906", kernels=("ka",)), tu("gfx1030", kernels=("kb",)),
                                 tu("gfx906", "gfx90a", kernels=("kc", "kd"))))
    assert [b.offset for b in bundles] == [0, 4096, 8192]
    assert [[str(e.target) for e in b.amdgcn] for b in bundles] == [
        ["gfx906"], ["gfx1030"], ["gfx906", "gfx90a"]]
    assert [b.kernels for b in bundles] == [("ka",), ("kb",), ("kc", "kd")]


def test_unaligned_bundles_back_to_back() -> None:
    bundles = scan_fatbin(fatbin(tu("gfx906"), tu("gfx1030"), align=1))
    assert len(bundles) == 2 and bundles[1].offset == len(tu("gfx906"))


def test_many_bundles_are_scanned_in_linear_time() -> None:
    """rocBLAS has thousands of bundles: searching to the section's end for every one of them
    made this take minutes; one pass takes milliseconds."""
    one = plain_bundle((HOST, b""), ("hipv4-amdgcn-amd-amdhsa--gfx906", b"\1" * 20000))
    blob = fatbin(*[one] * 1500)
    started = time.monotonic()
    bundles = scan_fatbin(blob)
    assert len(bundles) == 1500 and time.monotonic() - started < 5


def test_kernel_names_from_symbol_table() -> None:
    assert kernel_names(code_object("_Z3fooPf", "_Z3barPi")) == ("_Z3barPi", "_Z3fooPf")
    assert kernel_names(b"not an elf") == ()


@pytest.mark.parametrize("version", [1, 2, 3])
def test_zlib_compressed_bundle_versions(version: int) -> None:
    inner = tu("gfx906", "gfx1030", kernels=("kz",))
    bundles = scan_fatbin(fatbin(ccob(inner, version), tu("gfx906")))
    assert [b.compression for b in bundles] == ["zlib", None]
    assert [str(e.target) for e in bundles[0].amdgcn] == ["gfx906", "gfx1030"]
    assert bundles[0].kernels == ("kz",) and not bundles[0].corrupt


def test_version1_without_size_ends_where_its_zlib_stream_ends() -> None:
    # v1 has no total size: the walk goes on right after the deflate stream. Stored (level 0)
    # deflate keeps the inner bundle's magic readable, so searching from the header instead
    # would find a phantom bundle inside the payload.
    first, second = tu("gfx906"), tu("gfx1030")
    blob = ccob(first, 1, data=zlib.compress(first, 0)) + ccob(second, 1)
    bundles = scan_fatbin(blob)
    assert [[str(e.target) for e in b.amdgcn] for b in bundles] == [["gfx906"], ["gfx1030"]]
    assert [b.compression for b in bundles] == ["zlib", "zlib"]


def test_zstd_without_a_decoder_is_unknown_not_a_crash(tmp_path: Path) -> None:
    blob = fatbin(tu("gfx906"), ccob(tu("gfx906"), 2, method=1, data=b"\x28\xb5\x2f\xfd junk"))
    result = verify_file(write(tmp_path, "z.so", elf_with_fatbin(blob)), GFX906, Decoders())
    assert result.verdict is Verdict.UNKNOWN
    assert result.problems == ("bundle #2 at 0x1000: compressed with zstd; cannot read without "
                               "zstandard or clang-offload-bundler (pip install zstandard)",)


def test_zstd_with_zstandard(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard", reason="the zstandard module is not installed")
    from rocbuild.checks.verify import zstandard_decoder

    inner = tu("gfx906", kernels=("kzstd",))
    blob = fatbin(ccob(inner, 3, method=1, data=zstandard.ZstdCompressor().compress(inner)))
    decoders = Decoders(zstd=zstandard_decoder())
    result = verify_file(write(tmp_path, "z.so", elf_with_fatbin(blob)), GFX906, decoders)
    assert result.verdict is Verdict.PASS and result.bundles[0].kernels == ("kzstd",)
    assert result.bundles[0].compression == "zstd"


def test_lister_fallback_gets_only_ids(tmp_path: Path) -> None:
    """The clang-offload-bundler path hands over one whole CCOB bundle and gets IDs back."""
    seen: list[bytes] = []

    def lister(blob: bytes) -> list[str]:
        seen.append(blob)
        return [HOST, "hipv4-amdgcn-amd-amdhsa--gfx1030"]

    compressed = ccob(tu("gfx1030"), 2, method=1, data=b"zstd frame")
    blob = fatbin(compressed)
    result = verify_file(write(tmp_path, "z.so", elf_with_fatbin(blob)), GFX906,
                         Decoders(lister=lister))
    assert seen == [compressed]
    assert result.verdict is Verdict.FAIL and result.targets_found == ("gfx1030",)


# --- broken input: a verdict with a reason, never an exception --------------------------------
def corrupt_reason(tmp_path: Path, data: bytes) -> str:
    result = verify_file(write(tmp_path, "bad.so", data), GFX906)
    assert result.verdict is Verdict.CORRUPT, result
    return " | ".join(result.problems)


def test_corrupt_bundle_headers(tmp_path: Path) -> None:
    good = tu("gfx906")
    huge_count = good[:24] + struct.pack("<Q", 1 << 60) + good[32:]
    assert "entry count" in corrupt_reason(tmp_path, elf_with_fatbin(huge_count))
    huge_id = good[:48] + struct.pack("<Q", 1 << 40) + good[56:]
    assert "impossible ID length" in corrupt_reason(tmp_path, elf_with_fatbin(huge_id))
    past_end = good[:32] + struct.pack("<Q", 1 << 20) + good[40:]
    assert "runs past the end" in corrupt_reason(tmp_path, elf_with_fatbin(past_end))
    assert "cut short" in corrupt_reason(tmp_path, elf_with_fatbin(BUNDLE_MAGIC + b"\1"))


def test_corrupt_bundle_is_named_and_the_rest_still_read(tmp_path: Path) -> None:
    second = tu("gfx906")
    broken = second[:24] + struct.pack("<Q", 1 << 60) + second[32:]
    result = verify_file(write(tmp_path, "x.so", elf_with_fatbin(fatbin(tu("gfx906"), broken,
                                                                        tu("gfx1030")))), GFX906)
    assert result.verdict is Verdict.CORRUPT
    assert any(p.startswith("corrupt: bundle #2 at 0x1000: entry count") for p in result.problems)
    # bundle numbers count the corrupt one too, as --json does
    assert "no code object for gfx906 in 1 of 2 bundles: #3 (they have gfx1030; #3 has " \
        "kernels k)" in result.problems


def test_corrupt_compressed_bundles(tmp_path: Path) -> None:
    inner = tu("gfx906")
    cases = {
        "unknown compressed bundle version 7": ccob(inner, 7),
        "unknown compression method 5": ccob(inner, 2, method=5),
        "zlib data is corrupt": ccob(inner, 2, data=b"\x78\x9c" + b"\xff" * 40),
        "checksum": ccob(inner, 2, digest=1234),
        "header says": ccob(inner, 3, raw_size=len(inner) - 1),
        "does not fit the section": ccob(inner, 2)[:-10],
        "not an offload bundle": ccob(b"just some bytes, no magic", 2),
    }
    for why, blob in cases.items():
        assert why in corrupt_reason(tmp_path, elf_with_fatbin(blob)), why


def test_elf_level_failures(tmp_path: Path) -> None:
    good = elf_with_fatbin(tu("gfx906"))
    assert verify_file(write(tmp_path, "ok.so", good), GFX906).verdict is Verdict.PASS
    assert "truncated?" in corrupt_reason(tmp_path, good[: len(good) - 100])
    assert "ELF header is cut short" in corrupt_reason(tmp_path, good[:20])
    # .hip_fatbin claims more bytes than the file has
    header_at = struct.unpack_from("<Q", good, 0x28)[0] + 2 * 64
    big = bytearray(good)
    struct.pack_into("<Q", big, header_at + 32, 1 << 30)
    assert "section .hip_fatbin" in corrupt_reason(tmp_path, bytes(big))
    bad_strndx = bytearray(good)
    struct.pack_into("<H", bad_strndx, 0x3E, 99)
    assert "name table index 99" in corrupt_reason(tmp_path, bytes(bad_strndx))
    assert "no offload bundle" in corrupt_reason(tmp_path, elf_with_fatbin(b"\1" * 64))


def test_files_without_gpu_code(tmp_path: Path) -> None:
    cases = {
        "text.txt": (b"hello", Verdict.NOT_ELF, "not an ELF file"),
        "empty": (b"", Verdict.NOT_ELF, "not an ELF file"),
        "plain.so": (make_elf([(".text", 1, b"\x90", 0)]), Verdict.NO_GPU_CODE,
                     "no .hip_fatbin section"),
        "host-only.so": (elf_with_fatbin(plain_bundle((HOST, b""))), Verdict.NO_GPU_CODE,
                         "no amdgcn code object in .hip_fatbin"),
        "empty-fatbin.so": (elf_with_fatbin(b""), Verdict.NO_GPU_CODE,
                            "empty .hip_fatbin section"),
        "elf32.so": (make_elf([(".text", 1, b"", 0)], elf_class=1), Verdict.UNSUPPORTED,
                     "32-bit ELF: only 64-bit little-endian ELF files are read"),
        "be.so": (make_elf([(".text", 1, b"", 0)], data=2), Verdict.UNSUPPORTED,
                  "big-endian ELF: only 64-bit little-endian ELF files are read"),
    }
    for name, (data, verdict, note) in cases.items():
        result = verify_file(write(tmp_path, name, data), GFX906)
        assert (result.verdict, result.note) == (verdict, note), name


def test_unreadable_file(tmp_path: Path) -> None:
    result = verify_file(tmp_path / "missing.so", GFX906)
    assert result.verdict is Verdict.UNKNOWN and "cannot read" in result.problems[0]
