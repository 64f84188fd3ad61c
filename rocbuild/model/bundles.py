"""Offload bundles in a ``.hip_fatbin`` section, read as a stream.

clang/lib/Driver/OffloadBundler.cpp; ClangOffloadBundler.html. A section is a concatenation
of bundles, one per translation unit, plain (``__CLANG_OFFLOAD_BUNDLE__``) or compressed
(``CCOB``, zlib or zstd). Sections run to GBs, so nothing here holds a section: the walk
reads headers by file offset, searches for the next magic in small growing chunks,
decompresses through bounded streaming readers, and keeps only one code object (to name its
kernels) at a time. Memory is bounded by the largest code object in a bundle, not by the
section.
"""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from rocbuild.model.elf import FormatError, Source, kernel_names
from rocbuild.model.targets import TargetError, TargetId, parse_target

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
# CompressedOffloadBundle header: magic, u16 version, u16 method, then per version
# v1: u32 uncompressed size, u64 hash; v2: u32 total size, u32 uncompressed size, u64 hash;
# v3: u64 total size, u64 uncompressed size, u64 hash. "total size" includes the header.
_CCOB_HEADERS = {1: ("<IQ", 20), 2: ("<IIQ", 24), 3: ("<QQQ", 32)}
_METHODS = {0: "zlib", 1: "zstd"}  # llvm::compression::Format
_MAX_ID_LENGTH = 4096  # real IDs are ~50 bytes; a bigger one means a broken header
# Reads of the file and of decompressed data are at most this big (the memory bound's unit).
CHUNK = 1 << 20
_HEAD_READ = 64 << 10  # what a headers-only read decompresses at a time (a header is ~1 KiB)
_FIRST_SEARCH = 4096  # the next magic is usually within a page (the linker's alignment)


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


# (compressed payload as a stream) -> the decompressed bundle as a stream, read in chunks
ZstdDecoder = Callable[[io.RawIOBase], Readable]
BundleLister = Callable[[bytes], list[str]]  # (one whole compressed bundle) -> entry IDs


class DecodeError(Exception):
    """A compressed bundle that this host cannot open (its verdict is unknown, not fail)."""


@dataclass(frozen=True)
class Decoders:
    """How to open zstd bundles: the ``zstandard`` module, else the prefix's
    clang-offload-bundler (which only lists entry IDs), else not at all."""

    zstd: ZstdDecoder | None = None
    lister: BundleLister | None = None
    # read each bundle's entry IDs only: no kernel names, and a compressed bundle is
    # decompressed only as far as its header (no checksum): the base audit's read of a
    # library of GBs (model/codeaudit.py)
    headers_only: bool = False


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

    index: int  # 0-based, as in --json; people read ``number``
    offset: int  # in the section
    compression: str | None = None  # "zlib", "zstd" or None
    entries: tuple[Entry, ...] = ()
    kernels: tuple[str, ...] = ()  # kernel symbols (mangled): which TU this bundle came from
    unreadable: str | None = None  # why its entries are unknown (zstd without a decoder)
    corrupt: str | None = None  # why its header or payload is broken
    # not a bundle but the code objects embedded as data in a library (codeobjects.py),
    # one entry each, checked the same way: some entry must run on every target
    embedded: bool = False

    @property
    def number(self) -> int:
        """The bundle's number in text and in --json (``"number"``): 1 is the first."""
        return self.index + 1

    @property
    def amdgcn(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.is_amdgcn)

    def label(self) -> str:
        """How a problem line names this bundle: number, offset and its kernels."""
        if self.embedded:
            return f"{len(self.entries)} embedded code objects from {self.offset:#x}"
        text = f"bundle #{self.number} at {self.offset:#x}"
        if self.kernels:
            more = ", …" if len(self.kernels) > 3 else ""
            text += f" (kernels {', '.join(self.kernels[:3])}{more})"
        return text


_Span = tuple[int, int]  # (offset, size) of an entry's code object


# --- plain bundles ----------------------------------------------------------------------------
class _NeedMore(Exception):
    """A header parse ran out of the bytes received so far (streamed bundles)."""


def _parse_header(read: Callable[[int, int], bytes], available: int, what: str,
                  ) -> tuple[list[Entry], list[_Span], int]:
    """Entries of a plain bundle, their (offset, size) from the bundle's start, and where
    its header ends. ``read(offset, length)`` gives bundle bytes; ``available`` is how many
    exist. Raises FormatError naming the broken field."""
    if available < 32:
        raise FormatError(f"{what}: header is cut short")
    (count,) = struct.unpack("<Q", read(24, 8))
    if count > (available - 32) // 24:
        raise FormatError(f"{what}: entry count {count} cannot fit in {available} bytes")
    pos = 32
    entries: list[Entry] = []
    spans: list[_Span] = []
    for number in range(1, count + 1):
        if pos + 24 > available:
            raise FormatError(f"{what}: entry {number} header is cut short")
        offset, size, id_len = struct.unpack("<QQQ", read(pos, 24))
        pos += 24
        if id_len == 0 or id_len > _MAX_ID_LENGTH or pos + id_len > available:
            raise FormatError(f"{what}: entry {number} has an impossible ID length {id_len}")
        try:
            entry_id = read(pos, id_len).decode("ascii")
        except UnicodeDecodeError:
            raise FormatError(f"{what}: entry {number} ID is not text") from None
        pos += id_len
        if offset == 0 or offset + size > available:
            raise FormatError(f"{what}: entry {number} ({entry_id}) at offset {offset:#x} "
                              f"with {size} bytes runs past the end of the data")
        entries.append(Entry(entry_id, size))
        spans.append((offset, size))
    return entries, spans, pos


def _kernel_candidates(entries: list[Entry], spans: list[_Span]) -> list[_Span]:
    """The code objects that can name a bundle's kernels, in file order."""
    return sorted(s for e, s in zip(entries, spans, strict=True) if e.is_amdgcn and s[1])


def _parse_plain(src: Source, start: int, index: int,
                 headers_only: bool = False) -> tuple[Bundle, int]:
    what = f"bundle #{index + 1} at {start:#x}"
    available = src.size - start
    entries, spans, header_end = _parse_header(
        lambda offset, length: src.read(start + offset, length, what), available, what)
    kernels: tuple[str, ...] = ()
    for offset, size in [] if headers_only else _kernel_candidates(entries, spans):
        # a window, so only the code object's symbol and string tables are read
        kernels = kernel_names(src.window(start + offset, size, what))
        if kernels:
            break
    end = max([header_end, *(o + s for o, s in spans)])
    return Bundle(index, start, None, tuple(entries), kernels), start + end


# --- compressed bundles -----------------------------------------------------------------------
def _ccob_header(src: Source, start: int, what: str,
                 ) -> tuple[str, int, int | None, int, int]:
    """(method, header size, total size or None, uncompressed size, hash)."""
    if src.size < start + 8:
        raise FormatError(f"{what}: header is cut short")
    version, method_id = struct.unpack("<HH", src.read(start + 4, 4, what))
    if version not in _CCOB_HEADERS:
        raise FormatError(f"{what}: unknown compressed bundle version {version}")
    layout, header_size = _CCOB_HEADERS[version]
    if src.size < start + header_size:
        raise FormatError(f"{what}: version {version} header is cut short")
    fields = struct.unpack(layout, src.read(start + 8, header_size - 8, what))
    if method_id not in _METHODS:
        raise FormatError(f"{what}: unknown compression method {method_id}")
    if version == 1:
        total, (raw_size, digest) = None, fields
    else:
        total, raw_size, digest = fields
        if total < header_size or start + total > src.size:
            raise FormatError(f"{what}: total size {total} does not fit the section "
                              f"({src.size - start} bytes left)")
    return _METHODS[method_id], header_size, total, raw_size, digest


def _md5_low(digest: bytes) -> int:
    # llvm::MD5Result::low(): the first 8 digest bytes read as a little-endian integer
    return int.from_bytes(digest[:8], "little")


class _RegionReader(io.RawIOBase):
    """A file region as a stream, read in chunks by offset (for the zstd reader)."""

    def __init__(self, src: Source, start: int, stop: int, what: str) -> None:
        self._src, self._pos, self._stop, self._what = src, start, stop, what

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        length = min(len(buffer), self._stop - self._pos, CHUNK)
        if length <= 0:
            return 0
        buffer[:length] = self._src.read(self._pos, length, self._what)
        self._pos += length
        return length


class _InnerBundle:
    """The decompressed bundle, fed chunk by chunk: hashes and counts it, parses its header
    from the first bytes, and keeps one code object at a time to name the kernels."""

    def __init__(self, raw_size: int, what: str) -> None:
        self.raw_size, self.what = raw_size, what
        self.md5 = hashlib.md5()
        self.received = 0
        self.head = bytearray()  # the first bytes, until the header is parsed
        self.entries: list[Entry] | None = None
        self.error: FormatError | None = None  # reported after the size and hash checks
        self.kernels: tuple[str, ...] = ()
        self._candidates: list[_Span] = []
        self._kept = bytearray()

    def feed(self, data: bytes) -> None:
        start = self.received
        self.received += len(data)
        if self.received > self.raw_size:
            raise FormatError(f"{self.what}: decompressed to more than the {self.raw_size} "
                              "bytes the header says")
        self.md5.update(data)
        if self.entries is None and self.error is None:
            self.head += data
            self._try_header(final=False)  # on success it keeps code bytes from the head
        elif self.entries is not None:
            self._keep(start, data)

    def finish(self) -> tuple[list[Entry], tuple[str, ...]]:
        if self.received != self.raw_size:
            raise FormatError(f"{self.what}: decompressed to {self.received} bytes, header "
                              f"says {self.raw_size}")
        return self.entries or [], self.kernels

    def check(self, digest: int) -> list[Entry]:
        """After the stream: checksum, magic, then any header error, in that order."""
        if _md5_low(self.md5.digest()) != digest:
            raise FormatError(f"{self.what}: checksum of the decompressed data does not match")
        if self.entries is None and self.error is None:
            self._try_header(final=True)
        if not bytes(self.head[:len(BUNDLE_MAGIC)]) == BUNDLE_MAGIC and self.entries is None:
            raise FormatError(f"{self.what}: decompressed data is not an offload bundle")
        if self.error is not None:
            raise self.error
        return self.entries or []

    def _try_header(self, final: bool) -> None:
        head = self.head
        if len(head) >= len(BUNDLE_MAGIC) and not head.startswith(BUNDLE_MAGIC):
            self.error = FormatError(f"{self.what}: decompressed data is not an offload "
                                     "bundle")
            self.head = head[:len(BUNDLE_MAGIC)]
            return

        def read(offset: int, length: int) -> bytes:
            if offset + length > len(head):
                raise _NeedMore
            return bytes(head[offset:offset + length])

        try:
            entries, spans, _ = _parse_header(read, self.raw_size, self.what)
        except _NeedMore:
            if final:
                self.error = FormatError(f"{self.what}: header is cut short")
            return
        except FormatError as exc:
            self.error = exc
            self.head = head[:len(BUNDLE_MAGIC)]
            return
        self.entries = entries
        self._candidates = _kernel_candidates(entries, spans)
        # code objects that started in the bytes already held
        held = bytes(head)
        self.head = head[:len(BUNDLE_MAGIC)]
        self._keep(0, held)

    def _keep(self, start: int, data: bytes) -> None:
        """Collect the current candidate code object's bytes out of [start, start+len)."""
        while self._candidates and not self.kernels:
            offset, size = self._candidates[0]
            have = len(self._kept)
            want_from = offset + have
            if want_from >= start + len(data):
                return
            if want_from < start:  # its start passed before the header was known
                self._candidates.pop(0)
                self._kept.clear()
                continue
            take = data[want_from - start:want_from - start + size - have]
            self._kept += take
            if len(self._kept) < size:
                return
            self.kernels = kernel_names(Source.of_bytes(self._kept))  # no copy
            self._kept.clear()
            self._candidates.pop(0)


def _inflate(src: Source, start: int, stop: int, inner: _InnerBundle, what: str,
             header_only: bool = False) -> int:
    """Feed a zlib stream at [start, stop) through ``inner``; the end of the compressed data
    (a version 1 bundle has no size: the next one starts where its stream ends). With
    ``header_only`` it stops once the bundle's header is read (the caller knows the end)."""
    inflater = zlib.decompressobj()
    pos = start
    read = _HEAD_READ if header_only else CHUNK
    while pos < stop and not inflater.eof:
        chunk = src.read(pos, min(read, stop - pos), what)
        pos += len(chunk)
        try:
            while chunk and not inflater.eof:
                inner.feed(inflater.decompress(chunk, CHUNK))
                chunk = inflater.unconsumed_tail
                if header_only and (inner.entries is not None or inner.error is not None):
                    return pos
            if inflater.eof:
                return pos - len(inflater.unused_data)
        except zlib.error as exc:
            raise FormatError(f"{what}: zlib data is corrupt ({exc})") from None
    if not inflater.eof:
        raise FormatError(f"{what}: zlib data is cut short")
    return pos - len(inflater.unused_data)


def _unzstd(src: Source, start: int, stop: int, inner: _InnerBundle, what: str,
            decoder: ZstdDecoder, headers_only: bool = False) -> None:
    try:
        reader = decoder(_RegionReader(src, start, stop, what))
        while data := reader.read(_HEAD_READ if headers_only else CHUNK):
            inner.feed(data)
            if headers_only and (inner.entries is not None or inner.error is not None):
                return
    except DecodeError as exc:
        raise FormatError(f"{what}: zstd data is corrupt ({exc})") from None


def _parse_compressed(src: Source, start: int, index: int,
                      decoders: Decoders) -> tuple[Bundle, int]:
    what = f"compressed bundle #{index + 1} at {start:#x}"
    method, header_size, total, raw_size, digest = _ccob_header(src, start, what)
    stop = start + total if total is not None else src.size  # v1 runs to its stream's end
    inner = _InnerBundle(raw_size, what)
    if method == "zlib":
        # a version 1 bundle has no size: its stream is read to its end to find the next one
        header_only = decoders.headers_only and total is not None
        used = _inflate(src, start + header_size, stop, inner, what, header_only)
        end = stop if total is not None else used
        if header_only:
            if inner.entries is None:
                raise inner.error or FormatError(f"{what}: header is cut short")
            return Bundle(index, start, method, tuple(inner.entries)), end
    else:
        # zstd: a version 1 bundle has no size, so the walk resumes at the next magic
        end = stop if total is not None else start + header_size
        if decoders.zstd is None:
            return _listed_bundle(src, start, stop, index, decoders), end
        _unzstd(src, start + header_size, stop, inner, what, decoders.zstd,
                decoders.headers_only)
        if decoders.headers_only:
            if inner.entries is None:
                raise inner.error or FormatError(f"{what}: header is cut short")
            return Bundle(index, start, method, tuple(inner.entries)), end
    inner.finish()
    entries = inner.check(digest)
    return Bundle(index, start, method, tuple(entries), inner.kernels), end


def _listed_bundle(src: Source, start: int, stop: int, index: int,
                   decoders: Decoders) -> Bundle:
    """A zstd bundle without the zstandard module: ask clang-offload-bundler, or give up."""
    if decoders.lister is None:
        return Bundle(index, start, "zstd", unreadable=(
            "compressed with zstd; cannot read without zstandard or clang-offload-bundler "
            "(pip install zstandard)"))
    try:
        ids = decoders.lister(src.read(start, stop - start, f"bundle #{index + 1}"))
    except DecodeError as exc:
        return Bundle(index, start, "zstd", unreadable=str(exc))
    return Bundle(index, start, "zstd", tuple(Entry(i) for i in ids))


# --- the walk ---------------------------------------------------------------------------------
def _next_magic(src: Source, pos: int) -> int:
    """The next bundle magic at or after ``pos`` (src.size when none). The linker pads
    bundles to their alignment, so the search starts small and doubles up to CHUNK: a
    section of thousands of small bundles is read about once, a hole of GBs in chunks."""
    overlap = len(BUNDLE_MAGIC) - 1
    step = _FIRST_SEARCH
    while pos < src.size:
        length = min(step + overlap, src.size - pos)
        data = src.read(pos, length, "offload bundle search")
        hits = [i for i in (data.find(BUNDLE_MAGIC), data.find(COMPRESSED_MAGIC)) if i >= 0]
        if hits:
            return pos + min(hits)
        if pos + length >= src.size:
            break
        pos += step
        step = min(step * 2, CHUNK)
    return src.size


def iter_bundles(src: Source, decoders: Decoders | None = None) -> Iterator[Bundle]:
    """Every bundle in a ``.hip_fatbin`` section, one at a time. A broken bundle comes
    with ``corrupt`` set and the walk goes on after its magic."""
    decoders = decoders or Decoders()
    index = 0
    pos = _next_magic(src, 0)
    while pos < src.size:
        try:
            if src.read(pos, min(4, src.size - pos), "bundle magic") == COMPRESSED_MAGIC:
                bundle, end = _parse_compressed(src, pos, index, decoders)
            else:
                bundle, end = _parse_plain(src, pos, index, decoders.headers_only)
        except FormatError as exc:
            bundle, end = Bundle(index, pos, corrupt=str(exc)), pos + 4
        yield bundle
        index += 1
        pos = _next_magic(src, max(end, pos + 4))


def scan_fatbin(section: bytes | Source, decoders: Decoders | None = None) -> list[Bundle]:
    """Every bundle of a section given as bytes or as a Source read on demand."""
    src = section if isinstance(section, Source) else Source.of_bytes(section)
    return list(iter_bundles(src, decoders))


# --- zstd -------------------------------------------------------------------------------------
def zstandard_decoder() -> ZstdDecoder | None:
    """The zstandard module's streaming decoder, or None when it is not installed."""
    try:
        import zstandard  # optional: only compressed bundles made with zstd need it
    except ImportError:
        return None

    class _Reader:
        def __init__(self, source: io.RawIOBase) -> None:
            # one frame only: a version 1 bundle (no total size) is followed by more bundles
            self._reader = zstandard.ZstdDecompressor().stream_reader(
                source, read_size=CHUNK, read_across_frames=False,  # type: ignore[arg-type]
            )  # (a RawIOBase has the read() it uses)

        def read(self, size: int = -1, /) -> bytes:
            try:
                return bytes(self._reader.read(size))
            except zstandard.ZstdError as exc:
                raise DecodeError(str(exc)) from None

    return _Reader
