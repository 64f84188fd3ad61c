"""verify streams ``.hip_fatbin``: no read of the file is bigger than a chunk, and memory
stays far below the section's size (Debian's librocsparse took 1.32 GB when the section was
read whole). The sparse-file writer is shared with perf/verify_memory.py."""

from __future__ import annotations

import struct
import tracemalloc
import zlib
from pathlib import Path

from rocbuild.checks.verify import Verdict, verify_file
from rocbuild.model.bundles import CHUNK, Decoders, scan_fatbin, zstandard_decoder
from rocbuild.model.elf import Source
from rocbuild.model.targets import parse_target
from tests.unit.test_verify_scan import HOST, ccob, code_object, plain_bundle

GFX906 = (parse_target("gfx906"),)
FATBIN_AT = 4096  # where the section starts in the file


def big_tu(size: int, kernel: str, target: str = "gfx906") -> bytes:
    """A bundle whose code object carries ``size`` bytes of .text (and names its kernel)."""
    obj = code_object(kernel)
    padded = obj + b"\x90" * size  # bytes after the ELF's own tables: read by nobody
    return plain_bundle((HOST, b""), (f"hipv4-amdgcn-amd-amdhsa--{target}", padded))


def write_sparse_elf(path: Path, section_size: int, bundles: list[tuple[int, bytes]]) -> None:
    """An ELF64 file whose .hip_fatbin is ``section_size`` bytes of holes (a sparse file)
    with ``bundles`` written at their section offsets."""
    names = b"\0.hip_fatbin\0.shstrtab\0"
    table_at = 64 + len(names) + (-(64 + len(names)) % 8)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, table_at, 0, 64, 0, 0, 64, 3, 2)
    table = bytes(64)
    table += struct.pack("<IIQQQQIIQQ", 1, 1, 0, 0, FATBIN_AT, section_size, 0, 0, 4096, 0)
    table += struct.pack("<IIQQQQIIQQ", 12, 3, 0, 0, 64, len(names), 0, 0, 1, 0)
    assert table_at + len(table) <= FATBIN_AT
    with path.open("wb") as out:
        out.write(header + names + bytes(table_at - 64 - len(names)) + table)
        for offset, data in bundles:
            out.seek(FATBIN_AT + offset)
            out.write(data)
        out.truncate(FATBIN_AT + section_size)


def sample_bundles(code_size: int) -> list[bytes]:
    """A plain bundle, a zlib one and (with zstandard) a zstd one, each around code_size."""
    plain = big_tu(code_size, "kplain")
    inner = big_tu(code_size, "kzlib")
    found = [plain, ccob(inner, 3, data=zlib.compress(inner, 1))]
    try:
        import zstandard as zstd  # optional, as in verify itself
    except ImportError:
        return found
    inner = big_tu(code_size, "kzstd")
    return [*found, ccob(inner, 3, method=1, data=zstd.ZstdCompressor().compress(inner))]


class CountingSource(Source):
    def __init__(self, data: bytes) -> None:
        self.largest = 0
        view = memoryview(data)

        def read(offset: int, length: int) -> bytes:
            self.largest = max(self.largest, length)
            return bytes(view[offset:offset + length])

        super().__init__(read, len(data))


def test_no_read_is_bigger_than_a_chunk() -> None:
    bundles = sample_bundles(6 * CHUNK)
    blob = b"".join(b + bytes(-len(b) % 4096) for b in bundles)
    src = CountingSource(blob)
    found = scan_fatbin(src, Decoders(zstd=zstandard_decoder()))
    assert [b.kernels for b in found] == [("kplain",), ("kzlib",), ("kzstd",)][:len(bundles)]
    assert all(not b.corrupt for b in found) and len(found) == len(bundles)
    assert src.largest <= CHUNK + 64, f"a read of {src.largest} bytes"


def test_memory_stays_far_below_the_section(tmp_path: Path) -> None:
    """A 512 MiB section of holes with three 4 MiB bundles spread over it."""
    section = 512 * CHUNK
    bundles = sample_bundles(4 * CHUNK)
    placed = [(i * 160 * CHUNK, b) for i, b in enumerate(bundles)]
    path = tmp_path / "libsparse.so"
    write_sparse_elf(path, section, placed)
    tracemalloc.start()
    try:
        result = verify_file(path, GFX906, Decoders(zstd=zstandard_decoder()))
        _, peak = tracemalloc.get_traced_memory()
        print(f"peak {peak} bytes")
    finally:
        tracemalloc.stop()
    assert result.verdict is Verdict.PASS, result.problems
    assert [b.offset for b in result.bundles] == [o for o, _ in placed]
    # one code object kept (4 MiB) plus chunks: below two bundles, far below the
    # 512 MiB that reading the section whole takes
    assert peak < 2 * 4 * CHUNK, f"peak {peak} bytes"
