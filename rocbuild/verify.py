"""Prove, without a GPU, that installed files carry code objects for the requested targets.

HIP programs and libraries keep their device code in the ELF section ``.hip_fatbin``: a
concatenation of offload bundles, one per translation unit (``clang-offload-bundler --list``
reads only the first, so a library where one TU lacks gfx906 looks fine to it and fails at
run time with "invalid device function"). This module reads the section table itself, walks
every bundle, plain (``__CLANG_OFFLOAD_BUNDLE__``) or compressed (``CCOB``, zlib or zstd),
and checks each one against the requested targets with the loader's target-ID rules. It
also checks the rocBLAS/Tensile file set per target (gfx906-facts.md section 5).

Layers, top to bottom: ELF reading (``parse_sections``), bundle parsing (``scan_fatbin``),
target matching (``device_modes``, ``missing_in_bundle``), one file (``verify_file``), the
Tensile set (``check_tensile``), whole trees (``verify_prefix``, ``verify_paths``) and the
JSON document (``to_json``). Only the optional clang-offload-bundler fallback for zstd runs a
subprocess; every error in a file becomes that file's verdict, never an exception.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import struct
import subprocess
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from rocbuild.errors import ConfigError
from rocbuild.targets import PROCESSOR_FEATURES, TargetError, TargetId, parse_target, runs_on

JSON_SCHEMA = 1
_JSON_KERNELS = 10

# ---------------------------------------------------------------------------------------------
# ELF: just enough of the format to find a section by name (64-bit little-endian only: every
# ROCm host is x86_64 or aarch64 Linux, and AMDGPU code objects are ELF64 LE as well).

ELF_MAGIC = b"\x7fELF"
_ELF_HEADER_SIZE = 64
_SECTION_HEADER_SIZE = 64
_SHT_NOBITS = 8
_SHT_SYMTAB = 2
_SHT_DYNSYM = 11
_SHN_XINDEX = 0xFFFF
# Elf64_Shdr: name, type, flags, addr, offset, size, link, info, addralign, entsize
_SHDR = "<IIQQQQIIQQ"
_SYMBOL_SIZE = 24  # Elf64_Sym


class NotElf(Exception):
    """The file does not start with the ELF magic."""


class UnsupportedElf(Exception):
    """An ELF flavour this reader does not handle (32-bit, big-endian)."""


class FormatError(Exception):
    """The bytes claim a structure they do not hold; ``str()`` says what and where."""


class _Source:
    """Random access to a file's bytes without reading all of it (libraries run to GBs)."""

    def __init__(self, read: Callable[[int, int], bytes], size: int) -> None:
        self._read = read
        self.size = size

    @classmethod
    def of_bytes(cls, data: bytes) -> _Source:
        view = memoryview(data)
        return cls(lambda offset, length: bytes(view[offset:offset + length]), len(data))

    def read(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise FormatError(f"{what} (offset {offset:#x}, {length} bytes) runs past the end "
                              f"of the file ({self.size} bytes): truncated?")
        data = self._read(offset, length)
        if len(data) != length:
            raise FormatError(f"{what}: short read at offset {offset:#x}")
        return data


@contextlib.contextmanager
def _open_source(path: Path) -> Iterator[_Source]:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        yield _Source(lambda offset, length: os.pread(fd, length, offset), size)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int


def section_list(src: _Source) -> list[Section]:
    """The section table in index order. Raises NotElf, UnsupportedElf or FormatError; an
    ELF without a section table gives an empty list."""
    head = src.read(0, min(src.size, _ELF_HEADER_SIZE), "ELF header")
    if head[:4] != ELF_MAGIC:
        raise NotElf
    if len(head) < _ELF_HEADER_SIZE:
        raise FormatError(f"ELF header is cut short: the file has only {src.size} bytes")
    if head[4] != 2:
        raise UnsupportedElf("32-bit ELF" if head[4] == 1 else f"ELF class {head[4]}")
    if head[5] != 1:
        raise UnsupportedElf("big-endian ELF")
    (shoff,) = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if shoff == 0:
        return []
    if shentsize < _SECTION_HEADER_SIZE:
        raise FormatError(f"section header size {shentsize} is below the ELF64 size of 64")
    first = struct.unpack(_SHDR, src.read(shoff, _SECTION_HEADER_SIZE, "section table"))
    if shnum == 0:  # extended numbering: the real count lives in section 0's sh_size
        shnum = first[5]
    if shstrndx == _SHN_XINDEX:
        shstrndx = first[6]
    table = src.read(shoff, shnum * shentsize, f"section table ({shnum} entries)")
    headers = [struct.unpack_from(_SHDR, table, i * shentsize) for i in range(shnum)]
    if shstrndx >= shnum:
        raise FormatError(f"section name table index {shstrndx} is outside the section "
                          f"table ({shnum} entries)")
    names = src.read(headers[shstrndx][4], headers[shstrndx][5], "section name table")
    sections = []
    for name_off, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in headers:
        if name_off >= max(len(names), 1):
            raise FormatError(f"section name offset {name_off} is outside the name table")
        name = _c_string(names, name_off)
        sections.append(Section(name, sh_type, offset, size, link, entsize))
    return sections


def parse_sections(src: _Source) -> dict[str, Section]:
    """The section table by name (the first section of each name)."""
    sections: dict[str, Section] = {}
    for section in section_list(src):
        sections.setdefault(section.name, section)
    return sections


def _c_string(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")


def section_data(src: _Source, section: Section) -> bytes:
    if section.type == _SHT_NOBITS:
        return b""
    return src.read(section.offset, section.size, f"section {section.name}")


def kernel_names(code_object: bytes) -> tuple[str, ...]:
    """Kernel symbols of an AMDGPU code object (from their ``.kd`` descriptors), sorted, to
    name the translation unit a bundle came from. Best effort: a broken object gives ()."""
    try:
        src = _Source.of_bytes(code_object)
        sections = section_list(src)
        names: set[str] = set()
        for symtab in (s for s in sections if s.type in (_SHT_SYMTAB, _SHT_DYNSYM)):
            if symtab.link >= len(sections):
                continue
            strings = section_data(src, sections[symtab.link])
            data = section_data(src, symtab)
            for i in range(0, len(data) - _SYMBOL_SIZE + 1, _SYMBOL_SIZE):
                name = _c_string(strings, struct.unpack_from("<I", data, i)[0])
                if name.endswith(".kd"):
                    names.add(name[:-3])
        return tuple(sorted(names))
    except (NotElf, UnsupportedElf, FormatError, struct.error):
        return ()


# ---------------------------------------------------------------------------------------------
# Offload bundles (clang/lib/Driver/OffloadBundler.cpp; ClangOffloadBundler.html)

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
# CompressedOffloadBundle header: magic, u16 version, u16 method, then per version
# v1: u32 uncompressed size, u64 hash; v2: u32 total size, u32 uncompressed size, u64 hash;
# v3: u64 total size, u64 uncompressed size, u64 hash. "total size" includes the header.
_CCOB_HEADERS = {1: ("<IQ", 20), 2: ("<IIQ", 24), 3: ("<QQQ", 32)}
_METHODS = {0: "zlib", 1: "zstd"}  # llvm::compression::Format
_MAX_ID_LENGTH = 4096  # real IDs are ~50 bytes; a bigger one means a broken header

ZstdDecoder = Callable[[bytes, int], bytes]  # (compressed payload, expected size) -> bundle
BundleLister = Callable[[bytes], list[str]]  # (whole compressed bundle) -> entry IDs


_Span = tuple[int, int]  # (offset, size) of an entry's code object in the bundle's bytes


class DecodeError(Exception):
    """A compressed bundle that this host cannot open (its verdict is unknown, not fail)."""


@dataclass(frozen=True)
class Decoders:
    """How to open zstd bundles: the ``zstandard`` module, else the prefix's
    clang-offload-bundler (which only lists entry IDs), else not at all."""

    zstd: ZstdDecoder | None = None
    lister: BundleLister | None = None


@dataclass(frozen=True)
class Entry:
    """One entry of a bundle, e.g. ``hipv4-amdgcn-amd-amdhsa--gfx906:xnack-``."""

    id: str
    size: int | None = None  # None when only the ID is known (clang-offload-bundler listing)

    @property
    def kind(self) -> str:
        return self.id.split("-", 1)[0]

    @property
    def arch(self) -> str:
        parts = self.id.split("-", 2)
        return parts[1] if len(parts) > 1 else ""

    @property
    def target_text(self) -> str:
        """The target ID after the triple: ``<kind>-<arch>-<vendor>-<os>-<env>-<target>``.
        Generic targets such as gfx10-3-generic contain dashes, hence the split limit."""
        parts = self.id.split("-", 5)
        return parts[5] if len(parts) == 6 else ""

    @property
    def is_amdgcn(self) -> bool:
        return self.kind != "host" and self.arch == "amdgcn"

    @property
    def target(self) -> TargetId | None:
        """The parsed target ID; None for a processor targets.py does not know."""
        try:
            return parse_target(self.target_text)
        except TargetError:
            return None


@dataclass(frozen=True)
class Bundle:
    """One offload bundle in ``.hip_fatbin`` (one translation unit)."""

    index: int
    offset: int  # in the section
    compression: str | None = None  # "zlib", "zstd" or None
    entries: tuple[Entry, ...] = ()
    kernels: tuple[str, ...] = ()  # kernel symbols (mangled): which TU this bundle came from
    unreadable: str | None = None  # why its entries are unknown (zstd without a decoder)
    corrupt: str | None = None  # why its header or payload is broken

    @property
    def amdgcn(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.is_amdgcn)

    def label(self) -> str:
        """How a problem line names this bundle: index, offset and its kernels."""
        text = f"bundle #{self.index + 1} at {self.offset:#x}"
        if self.kernels:
            more = ", …" if len(self.kernels) > 3 else ""
            text += f" (kernels {', '.join(self.kernels[:3])}{more})"
        return text


def _parse_plain(data: bytes, start: int, what: str) -> tuple[list[Entry], list[_Span], int]:
    """Entries of an uncompressed bundle at ``start``, their (offset, size) in ``data``, and
    the end of the bundle. Raises FormatError naming the broken field."""
    if len(data) < start + 32:
        raise FormatError(f"{what}: header is cut short")
    (count,) = struct.unpack_from("<Q", data, start + 24)
    if count > (len(data) - start - 32) // 24:
        raise FormatError(f"{what}: entry count {count} cannot fit in {len(data) - start} bytes")
    pos, end = start + 32, start + 32
    entries: list[Entry] = []
    spans: list[_Span] = []
    for number in range(1, count + 1):
        if pos + 24 > len(data):
            raise FormatError(f"{what}: entry {number} header is cut short")
        offset, size, id_len = struct.unpack_from("<QQQ", data, pos)
        pos += 24
        if id_len == 0 or id_len > _MAX_ID_LENGTH or pos + id_len > len(data):
            raise FormatError(f"{what}: entry {number} has an impossible ID length {id_len}")
        try:
            entry_id = data[pos:pos + id_len].decode("ascii")
        except UnicodeDecodeError:
            raise FormatError(f"{what}: entry {number} ID is not text") from None
        pos += id_len
        if offset == 0 or start + offset + size > len(data):
            raise FormatError(f"{what}: entry {number} ({entry_id}) at offset {offset:#x} "
                              f"with {size} bytes runs past the end of the data")
        entries.append(Entry(entry_id, size))
        spans.append((start + offset, size))
        end = max(end, start + offset + size)
    return entries, spans, max(end, pos)


def _first_kernels(data: bytes, entries: list[Entry], spans: list[_Span]) -> tuple[str, ...]:
    for entry, (offset, size) in zip(entries, spans, strict=True):
        if entry.is_amdgcn and size:
            names = kernel_names(data[offset:offset + size])
            if names:
                return names
    return ()


def _ccob_header(blob: bytes, start: int, what: str) -> tuple[int, str, int, int | None, int, int]:
    """(version, method, header size, total size or None, uncompressed size, hash)."""
    if len(blob) < start + 8:
        raise FormatError(f"{what}: header is cut short")
    version, method_id = struct.unpack_from("<HH", blob, start + 4)
    if version not in _CCOB_HEADERS:
        raise FormatError(f"{what}: unknown compressed bundle version {version}")
    layout, header_size = _CCOB_HEADERS[version]
    if len(blob) < start + header_size:
        raise FormatError(f"{what}: version {version} header is cut short")
    fields = struct.unpack_from(layout, blob, start + 8)
    if method_id not in _METHODS:
        raise FormatError(f"{what}: unknown compression method {method_id}")
    if version == 1:
        total, (raw_size, digest) = None, fields
    else:
        total, raw_size, digest = fields
        if total < header_size or start + total > len(blob):
            raise FormatError(f"{what}: total size {total} does not fit the section "
                              f"({len(blob) - start} bytes left)")
    return version, _METHODS[method_id], header_size, total, raw_size, digest


def _md5_low(data: bytes) -> int:
    # llvm::MD5Result::low(): the first 8 digest bytes read as a little-endian integer
    return int.from_bytes(hashlib.md5(data).digest()[:8], "little")


def _inflate(payload: bytes, raw_size: int, what: str) -> tuple[bytes, int]:
    """zlib payload -> (data, compressed bytes used). Bounded by the declared size so a
    broken header cannot make us allocate gigabytes."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(payload, raw_size + 1)
    except zlib.error as exc:
        raise FormatError(f"{what}: zlib data is corrupt ({exc})") from None
    if not inflater.eof:
        raise FormatError(f"{what}: zlib data is cut short or longer than the declared "
                          f"{raw_size} bytes")
    return data, len(payload) - len(inflater.unused_data)


def _parse_compressed(blob: bytes, start: int, index: int,
                      decoders: Decoders) -> tuple[Bundle, int]:
    what = f"compressed bundle #{index + 1} at {start:#x}"
    _version, method, header_size, total, raw_size, digest = _ccob_header(blob, start, what)
    stop = start + total if total is not None else len(blob)  # v1 runs to its stream's end
    payload = blob[start + header_size:stop]
    if method == "zlib":
        data, used = _inflate(payload, raw_size, what)
        end = stop if total is not None else start + header_size + used
    else:
        # zstd: a version 1 bundle has no size, so the walk resumes at the next magic
        end = stop if total is not None else start + header_size
        if decoders.zstd is None:
            return _listed_bundle(blob[start:stop], start, index, decoders), end
        try:
            data = decoders.zstd(payload, raw_size)
        except DecodeError as exc:
            raise FormatError(f"{what}: zstd data is corrupt ({exc})") from None
    if len(data) != raw_size:
        raise FormatError(f"{what}: decompressed to {len(data)} bytes, header says {raw_size}")
    if _md5_low(data) != digest:
        raise FormatError(f"{what}: checksum of the decompressed data does not match")
    if not data.startswith(BUNDLE_MAGIC):
        raise FormatError(f"{what}: decompressed data is not an offload bundle")
    entries, spans, _ = _parse_plain(data, 0, what)
    bundle = Bundle(index, start, method, tuple(entries), _first_kernels(data, entries, spans))
    return bundle, end


def _listed_bundle(blob: bytes, start: int, index: int, decoders: Decoders) -> Bundle:
    """A zstd bundle without the zstandard module: ask clang-offload-bundler, or give up."""
    if decoders.lister is None:
        return Bundle(index, start, "zstd", unreadable=(
            "compressed with zstd; cannot read without zstandard or clang-offload-bundler "
            "(pip install zstandard)"))
    try:
        ids = decoders.lister(blob)
    except DecodeError as exc:
        return Bundle(index, start, "zstd", unreadable=str(exc))
    return Bundle(index, start, "zstd", tuple(Entry(i) for i in ids))


class _MagicFinder:
    """The next bundle magic at or after a position. Each magic's next hit is kept, so a
    section with thousands of bundles (rocBLAS) is searched about once, not once per bundle
    to its end (a 100 MB section with 2000 bundles took 90 s that way)."""

    def __init__(self, blob: bytes) -> None:
        self._blob = blob
        self._hits = {BUNDLE_MAGIC: -1, COMPRESSED_MAGIC: -1}

    def next(self, pos: int) -> int:
        for magic, hit in self._hits.items():
            if hit < pos:  # behind us: search again from here
                found = self._blob.find(magic, pos)
                self._hits[magic] = found if found >= 0 else len(self._blob)
        return min(self._hits.values())


def scan_fatbin(blob: bytes, decoders: Decoders | None = None) -> list[Bundle]:
    """Every bundle in a ``.hip_fatbin`` section. The linker pads bundles to their alignment,
    so the walk searches for the next magic after each bundle's end. A broken bundle is
    returned with ``corrupt`` set and the walk goes on after its magic."""
    decoders = decoders or Decoders()
    bundles: list[Bundle] = []
    finder = _MagicFinder(blob)
    pos = finder.next(0)
    while pos < len(blob):
        index = len(bundles)
        try:
            if blob.startswith(COMPRESSED_MAGIC, pos):
                bundle, end = _parse_compressed(blob, pos, index, decoders)
            else:
                entries, spans, end = _parse_plain(blob, pos, f"bundle #{index + 1} at {pos:#x}")
                bundle = Bundle(index, pos, None, tuple(entries),
                                _first_kernels(blob, entries, spans))
        except FormatError as exc:
            bundle, end = Bundle(index, pos, corrupt=str(exc)), pos + 4
        bundles.append(bundle)
        pos = finder.next(max(end, pos + 4))
    return bundles


# ---------------------------------------------------------------------------------------------
# Target matching

# Processors whose kernel driver runs them with XNACK off unless the user opts in
# (amdgpu.noretry=0 plus HSA_XNACK=1): the kernel's noretry default covers GC 9.0.1 (gfx900),
# 9.4.x (gfx906 = Vega 20, gfx908, gfx90a, gfx94x, gfx950) and every gfx10.3+ part.
_XNACK_OFF_BY_DEFAULT = frozenset(
    {"gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"})


def device_modes(request: TargetId) -> tuple[TargetId, ...]:
    """The device configurations a requested target stands for; a bundle must hold a code
    object that runs on each of them.

    A feature the request leaves out means "the devices users actually have":
    - xnack: the default mode of the processor, off for gfx906 (MI50, MI60 and Radeon VII run
      with xnack- unless the user opts in), so ``gfx906:xnack+`` code alone does not satisfy
      a plain ``gfx906`` request. Where the default is not known, either setting passes.
    - sramecc: both settings, because it is a property of the board, not a user choice: MI50
      and MI60 report ``gfx906:sramecc+:xnack-``, a Radeon VII ``gfx906:sramecc-:xnack-``
      (ollama/ollama#4780). So code for only ``gfx906:sramecc+`` fails a plain ``gfx906``
      request (it would not load on a Radeon VII); request ``gfx906:sramecc+`` to check for
      MI50/MI60 only. Plain ``gfx906`` code objects, what GPU_TARGETS=gfx906 builds, pass.
    An explicit feature in the request is taken as given.
    """
    features = dict(request.features)
    allowed = PROCESSOR_FEATURES.get(request.processor, frozenset())
    if "xnack" in allowed and "xnack" not in features and \
            request.processor in _XNACK_OFF_BY_DEFAULT:
        features["xnack"] = False
    modes = [features]
    if "sramecc" in allowed and "sramecc" not in features:
        modes = [{**m, "sramecc": on} for m in modes for on in (True, False)]
    return tuple(TargetId(request.processor, tuple(sorted(m.items()))) for m in modes)


def missing_in_bundle(bundle: Bundle, requests: Sequence[TargetId],
                      ) -> list[tuple[TargetId, list[TargetId]]]:
    """(request, its device modes that no code object of the bundle runs on), for each
    request the bundle does not fully satisfy."""
    found = [t for t in (e.target for e in bundle.amdgcn) if t is not None]
    result = []
    for request in requests:
        modes = [m for m in device_modes(request) if not any(runs_on(c, m) for c in found)]
        if modes:
            result.append((request, modes))
    return result


def describe_missing(missing: list[tuple[TargetId, list[TargetId]]]) -> str:
    """``no gfx906 code object`` when nothing fits, else the device modes left out."""
    parts = []
    for request, modes in missing:
        if len(modes) == len(device_modes(request)):
            parts.append(f"no code object for {request}")
        else:
            parts.append(f"no {request} code object that runs on "
                         f"{' or '.join(map(str, modes))}")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# One file


class Verdict(str, Enum):
    """Per-file result; the value is the stable JSON spelling, ``label`` the table's."""

    PASS = "pass"
    FAIL = "fail"
    UNKNOWN = "unknown"
    CORRUPT = "corrupt"
    NOT_ELF = "not-elf"
    NO_GPU_CODE = "no-gpu-code"
    UNSUPPORTED = "unsupported"

    @property
    def label(self) -> str:
        return {"not-elf": "not ELF", "no-gpu-code": "no GPU code"}.get(self.value, self.value)


# Verdicts of files that hold no GPU code at all: a tree scan counts and skips them.
NO_CODE_VERDICTS = frozenset({Verdict.NOT_ELF, Verdict.NO_GPU_CODE, Verdict.UNSUPPORTED})


@dataclass(frozen=True)
class FileResult:
    path: Path
    verdict: Verdict
    bundles: tuple[Bundle, ...] = ()
    problems: tuple[str, ...] = ()  # one line per thing wrong, naming the bundle
    note: str = ""  # why a file has no verdict on its code (not ELF, no .hip_fatbin, ...)

    @property
    def targets_found(self) -> tuple[str, ...]:
        """Every amdgcn target ID in the file, unparsed ones as written."""
        names = {str(e.target or e.target_text) for b in self.bundles for e in b.amdgcn}
        return tuple(sorted(names))


def verify_file(path: Path, targets: Sequence[TargetId],
                decoders: Decoders | None = None) -> FileResult:
    """Check one file; every failure becomes the verdict, never an exception."""
    try:
        with _open_source(path) as src:
            sections = parse_sections(src)
            fatbin = sections.get(".hip_fatbin")
            if fatbin is None:
                note = "no .hip_fatbin section" if sections else "no section table"
                return FileResult(path, Verdict.NO_GPU_CODE, note=note)
            blob = section_data(src, fatbin)
    except NotElf:
        return FileResult(path, Verdict.NOT_ELF, note="not an ELF file")
    except UnsupportedElf as exc:
        return FileResult(path, Verdict.UNSUPPORTED, note=f"{exc}: only 64-bit little-endian "
                          "ELF files are read")
    except FormatError as exc:
        return FileResult(path, Verdict.CORRUPT, problems=(f"corrupt: {exc}",))
    except OSError as exc:
        return FileResult(path, Verdict.UNKNOWN,
                          problems=(f"cannot read: {exc.strerror or exc}",))
    return judge(path, scan_fatbin(blob, decoders), targets, len(blob))


def judge(path: Path, bundles: list[Bundle], targets: Sequence[TargetId],
          section_size: int) -> FileResult:
    """The verdict of a file from its bundles."""
    problems = [f"corrupt: {b.corrupt}" for b in bundles if b.corrupt]
    if not bundles:
        if section_size == 0:
            return FileResult(path, Verdict.NO_GPU_CODE, note="empty .hip_fatbin section")
        problems.append(f"corrupt: no offload bundle in .hip_fatbin ({section_size} bytes)")
    gpu = [b for b in bundles if b.amdgcn]
    unreadable = [b for b in bundles if b.unreadable]
    if not problems and not gpu and not unreadable:
        others = sorted({e.id for b in bundles for e in b.entries if e.kind != "host"})
        note = "no amdgcn code object in .hip_fatbin"
        return FileResult(path, Verdict.NO_GPU_CODE, tuple(bundles),
                          note=note + (f" (only {', '.join(others)})" if others else ""))
    missing_any = False
    for bundle in gpu:
        missing = missing_in_bundle(bundle, targets)
        if missing:
            missing_any = True
            have = ", ".join(sorted({str(e.target or e.target_text) for e in bundle.amdgcn}))
            problems.append(f"{bundle.label()}: {describe_missing(missing)} (has {have})")
    problems += [f"{b.label()}: {b.unreadable}" for b in unreadable]
    if any(b.corrupt for b in bundles) or not bundles:
        verdict = Verdict.CORRUPT
    elif missing_any:
        verdict = Verdict.FAIL
    elif unreadable:
        verdict = Verdict.UNKNOWN
    else:
        verdict = Verdict.PASS
    return FileResult(path, verdict, tuple(bundles), tuple(problems))


# ---------------------------------------------------------------------------------------------
# rocBLAS / Tensile file set


@dataclass(frozen=True)
class TensileResult:
    library: Path  # <prefix>/lib/rocblas/library
    processor: str  # file names carry the processor only, e.g. gfx906
    missing: tuple[str, ...]  # the pieces not found, by name or pattern
    code_objects: int = 0  # *_<gfx>.co files found

    @property
    def ok(self) -> bool:
        return not self.missing


def check_tensile(library: Path, processor: str) -> TensileResult:
    """The rocBLAS lazy-loading file set for one processor (gfx906-facts.md 5.4): the parent
    catalog, at least one code object with its catalog, and the source-kernel object."""
    lazy = f"TensileLibrary_lazy_{processor}.dat"
    names = _nonempty_files(library)
    code_objects = [n for n in names if n.endswith(f"_{processor}.co")]
    catalogs = [n for n in names if n.endswith(f"_{processor}.dat") and n != lazy]
    kernels = [n for n in names if n.startswith(f"Kernels.so-000-{processor}")
               and n.endswith(".hsaco")
               and not n[len(f"Kernels.so-000-{processor}"):][:1].isalnum()]
    missing = []
    if lazy not in names:
        missing.append(lazy)
    if not code_objects:
        missing.append(f"*_{processor}.co")
    if not catalogs:
        missing.append(f"*_{processor}.dat (besides {lazy})")
    if not kernels:
        missing.append(f"Kernels.so-000-{processor}*.hsaco")
    return TensileResult(library, processor, tuple(missing), len(code_objects))


def _nonempty_files(folder: Path) -> set[str]:
    # an empty file is what an interrupted install leaves: it counts as missing
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return set()
    return {e.name for e in entries if e.is_file() and e.stat().st_size > 0}


# ---------------------------------------------------------------------------------------------
# Trees and the report


@dataclass(frozen=True)
class VerifyReport:
    targets: tuple[TargetId, ...]
    prefix: Path | None
    files: tuple[FileResult, ...]  # files with GPU code, broken files, and files named directly
    skipped: int = 0  # files in scanned folders that hold no GPU code
    tensile: tuple[TensileResult, ...] = ()
    problems: tuple[str, ...] = ()  # report-level: e.g. nothing with GPU code was found

    @property
    def ok(self) -> bool:
        return (not self.problems and all(f.verdict is Verdict.PASS for f in self.files)
                and all(t.ok for t in self.tensile))


def iter_files(roots: Iterable[Path]) -> Iterator[Path]:
    """Regular files under ``roots``, sorted, each inode once. Inside folders symlinks are
    skipped (lib/libfoo.so -> libfoo.so.1 -> libfoo.so.1.2 is one library) and symlinked
    folders are not entered; a root itself is followed (lib64 -> lib, a named .so link)."""
    seen: set[tuple[int, int]] = set()
    for root in roots:
        for path, follow in _walk(root):
            try:
                info = path.stat() if follow else path.lstat()
            except OSError:
                continue
            key = (info.st_dev, info.st_ino)
            if stat.S_ISREG(info.st_mode) and key not in seen:
                seen.add(key)
                yield path


def _walk(root: Path) -> Iterator[tuple[Path, bool]]:
    """(path, follow symlink) for a root file, or every file in a root folder."""
    if not root.is_dir():
        yield root, True
        return
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            yield Path(folder) / name, False


def _scan(paths: Iterable[Path], targets: Sequence[TargetId], decoders: Decoders,
          keep_no_code: bool) -> tuple[list[FileResult], int]:
    results, skipped = [], 0
    for path in iter_files(paths):
        result = verify_file(path, targets, decoders)
        if result.verdict in NO_CODE_VERDICTS and not keep_no_code:
            skipped += 1
        else:
            results.append(result)
    return results, skipped


def verify_prefix(prefix: Path, targets: tuple[TargetId, ...],
                  decoders: Decoders | None = None) -> VerifyReport:
    """Check an installed stack: every file with GPU code under lib/, lib64/ and bin/, and
    the Tensile set when rocBLAS is installed. ``report.ok`` is the build engine's gate."""
    if not prefix.is_dir():
        raise ConfigError(f"prefix {prefix} does not exist or is not a folder",
                          tip="pass --prefix PATH of an installed stack, or run "
                              "`rocbuild build` first")
    if not targets:
        raise ConfigError("no GPU target to verify", tip="pass --target, e.g. --target gfx906")
    decoders = decoders or default_decoders(prefix)
    roots = [prefix / d for d in ("lib", "lib64", "bin") if (prefix / d).exists()]
    files, skipped = _scan(roots, targets, decoders, keep_no_code=False)
    problems = []
    if not files:
        problems.append(f"no library or program with GPU code under {prefix} (lib/, lib64/, "
                        "bin/): nothing proves the stack can run on the GPU")
    tensile: tuple[TensileResult, ...] = ()
    if any((prefix / "lib").glob("librocblas.so*")):
        library = prefix / "lib" / "rocblas" / "library"
        processors = dict.fromkeys(t.processor for t in targets)
        tensile = tuple(check_tensile(library, p) for p in processors)
    return VerifyReport(targets, prefix, tuple(files), skipped, tensile, tuple(problems))


def verify_paths(paths: Sequence[Path], targets: tuple[TargetId, ...],
                 decoders: Decoders | None = None, prefix: Path | None = None) -> VerifyReport:
    """Check the given files (each gets a row, whatever it holds) and folders (scanned like a
    prefix: only files with GPU code get a row). ``prefix`` only supplies its
    clang-offload-bundler for zstd bundles."""
    decoders = decoders or default_decoders(prefix)
    files: list[FileResult] = []
    skipped = 0
    problems = []
    for path in paths:
        if not path.exists():
            raise ConfigError(f"path {path} does not exist",
                              tip="pass files or folders to check, e.g. "
                                  "`rocbuild verify /opt/rocm-6.4-gfx906/lib/libggml-hip.so`")
        found, no_code = _scan([path], targets, decoders, keep_no_code=not path.is_dir())
        files += found
        skipped += no_code
        if path.is_dir() and not found:
            problems.append(f"no file with GPU code under {path}")
    return VerifyReport(targets, None, tuple(files), skipped, (), tuple(problems))


# ---------------------------------------------------------------------------------------------
# zstd


def zstandard_decoder() -> ZstdDecoder | None:
    """The zstandard module's decoder, or None when it is not installed."""
    try:
        import zstandard  # optional: only compressed bundles made with zstd need it
    except ImportError:
        return None

    def decode(payload: bytes, size: int) -> bytes:
        # decompressobj stops at the end of the frame, so a version 1 bundle (no total size)
        # followed by more bundles decodes too
        try:
            return zstandard.ZstdDecompressor().decompressobj().decompress(payload)
        except zstandard.ZstdError as exc:
            raise DecodeError(str(exc)) from None

    return decode


def find_bundler(prefix: Path | None) -> Path | None:
    """The prefix's clang-offload-bundler (ROCm keeps LLVM in lib/llvm, older in llvm)."""
    if prefix is None:
        return None
    for candidate in (prefix / "lib/llvm/bin/clang-offload-bundler",
                      prefix / "llvm/bin/clang-offload-bundler"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def bundler_lister(bundler: Path) -> BundleLister:
    """List a compressed bundle's entry IDs with ``clang-offload-bundler --list``; it reads
    one bundle, which is why each bundle is handed to it alone."""

    def list_ids(blob: bytes) -> list[str]:
        with tempfile.NamedTemporaryFile(suffix=".bundle") as tmp:
            tmp.write(blob)
            tmp.flush()
            argv = [str(bundler), "--list", "--type=o", f"--input={tmp.name}"]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                                      check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise DecodeError(f"{bundler} could not run: {exc}") from None
        if proc.returncode != 0:
            why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise DecodeError(f"{bundler.name} cannot list this bundle: {why}")
        return [line.strip() for line in proc.stdout.splitlines() if line.strip()]

    return list_ids


def default_decoders(prefix: Path | None) -> Decoders:
    zstd = zstandard_decoder()
    bundler = None if zstd else find_bundler(prefix)
    return Decoders(zstd=zstd, lister=bundler_lister(bundler) if bundler else None)


# ---------------------------------------------------------------------------------------------
# JSON


def _bundle_json(bundle: Bundle, targets: Sequence[TargetId]) -> dict[str, Any]:
    return {
        "index": bundle.index,
        "offset": bundle.offset,
        "compression": bundle.compression,
        "entries": [{"id": e.id, "size": e.size,
                     "target": (str(e.target or e.target_text) if e.is_amdgcn else None)}
                    for e in bundle.entries],
        "kernels": list(bundle.kernels[:_JSON_KERNELS]),  # enough to tell which TU it is
        "kernel_count": len(bundle.kernels),
        "missing": [{"target": str(request), "device_modes": [str(m) for m in modes]}
                    for request, modes in missing_in_bundle(bundle, targets)]
        if bundle.amdgcn else [],
        "unreadable": bundle.unreadable,
        "corrupt": bundle.corrupt,
    }


def to_json(report: VerifyReport) -> dict[str, Any]:
    """The stable ``--json`` document (``schema`` changes when a key changes meaning)."""
    return {
        "schema": JSON_SCHEMA,
        "ok": report.ok,
        "targets": [str(t) for t in report.targets],
        "prefix": str(report.prefix) if report.prefix else None,
        "files": [{
            "path": str(f.path),
            "verdict": f.verdict.value,
            "targets_found": list(f.targets_found),
            "problems": list(f.problems),
            "note": f.note or None,
            "bundles": [_bundle_json(b, report.targets) for b in f.bundles],
        } for f in report.files],
        "skipped_without_gpu_code": report.skipped,
        "tensile": [{"library": str(t.library), "target": t.processor, "ok": t.ok,
                     "missing": list(t.missing), "code_objects": t.code_objects}
                    for t in report.tensile],
        "problems": list(report.problems),
    }


__all__ = [
    "Bundle", "Decoders", "Entry", "FileResult", "TensileResult", "Verdict", "VerifyReport",
    "check_tensile", "default_decoders", "describe_missing", "device_modes", "missing_in_bundle",
    "scan_fatbin",
    "to_json", "verify_file", "verify_paths", "verify_prefix",
]
