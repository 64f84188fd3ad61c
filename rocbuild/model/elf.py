"""Just enough of the ELF format for verify: the section table, a section's bytes by file
offset (never the whole file: libraries run to GBs), kernel names of AMDGPU code objects, and
the dynamic section (DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME) of host programs.

Sections and the dynamic section are read from 64-bit little-endian files only (every ROCm
host is x86_64 or aarch64 Linux, and AMDGPU code objects are ELF64 LE as well); the
identification (class, byte order, type, machine) is read from any ELF file, so the linkage
check can tell a 32-bit library with the right name from the one the loader would take.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ELF_MAGIC = b"\x7fELF"
_ELF_HEADER_SIZE = 64
_SECTION_HEADER_SIZE = 64
SHT_NOBITS = 8
SHT_SYMTAB = 2
SHT_DYNSYM = 11
SHT_DYNAMIC = 6
_SHN_XINDEX = 0xFFFF
# Elf64_Shdr: name, type, flags, addr, offset, size, link, info, addralign, entsize
_SHDR = "<IIQQQQIIQQ"
_SYMBOL_SIZE = 24  # Elf64_Sym
_DYN_SIZE = 16  # Elf64_Dyn: d_tag, d_val
DT_NULL, DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 14, 15, 29
ET_EXEC, ET_DYN = 2, 3
EM_AMDGPU = 224


class NotElf(Exception):
    """The file does not start with the ELF magic."""


class UnsupportedElf(Exception):
    """An ELF flavour this reader does not handle (32-bit, big-endian)."""


class FormatError(Exception):
    """The bytes claim a structure they do not hold; ``str()`` says what and where."""


class Source:
    """Random access to a file's bytes without reading all of it. ``window`` gives a view of
    one part (a section, a bundle's code object) with offsets counted from its start."""

    def __init__(self, read: Callable[[int, int], bytes], size: int) -> None:
        self._read = read
        self.size = size

    @classmethod
    def of_bytes(cls, data: bytes | bytearray) -> Source:
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

    def window(self, offset: int, size: int, what: str) -> Source:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise FormatError(f"{what} (offset {offset:#x}, {size} bytes) runs past the end "
                              f"of the file ({self.size} bytes): truncated?")
        read = self._read
        return Source(lambda at, length: read(offset + at, length), size)


@contextlib.contextmanager
def open_source(path: Path) -> Iterator[Source]:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        yield Source(lambda offset, length: os.pread(fd, length, offset), size)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Ident:
    """The ELF identification and header fields the dynamic loader checks first."""

    elf_class: int  # 1 = 32-bit, 2 = 64-bit
    data: int  # 1 = little-endian, 2 = big-endian
    type: int  # ET_EXEC, ET_DYN, ...
    machine: int  # EM_X86_64 = 62, EM_AARCH64 = 183, EM_AMDGPU = 224

    @property
    def abi(self) -> tuple[int, int, int]:
        """What a library must share with the file that needs it to be loadable."""
        return self.elf_class, self.data, self.machine


def read_ident(src: Source) -> Ident:
    """Raises NotElf or FormatError."""
    head = src.read(0, min(src.size, 20), "ELF header")
    if head[:4] != ELF_MAGIC:
        raise NotElf
    if len(head) < 20 or head[5] not in (1, 2):
        raise FormatError(f"ELF header is cut short: the file has only {src.size} bytes")
    order = "<" if head[5] == 1 else ">"
    elf_type, machine = struct.unpack_from(order + "HH", head, 16)
    return Ident(head[4], head[5], elf_type, machine)


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int


def section_list(src: Source) -> list[Section]:
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
        name = c_string(names, name_off)
        sections.append(Section(name, sh_type, offset, size, link, entsize))
    return sections


def parse_sections(src: Source) -> dict[str, Section]:
    """The section table by name (the first section of each name)."""
    sections: dict[str, Section] = {}
    for section in section_list(src):
        sections.setdefault(section.name, section)
    return sections


def c_string(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")


def section_data(src: Source, section: Section) -> bytes:
    if section.type == SHT_NOBITS:
        return b""
    return src.read(section.offset, section.size, f"section {section.name}")


def section_window(src: Source, section: Section) -> Source:
    """The section's bytes as a Source, read on demand (a .hip_fatbin runs to GBs)."""
    if section.type == SHT_NOBITS:
        return Source.of_bytes(b"")
    return src.window(section.offset, section.size, f"section {section.name}")


def kernel_names(code_object: bytes | Source) -> tuple[str, ...]:
    """Kernel symbols of an AMDGPU code object (from their ``.kd`` descriptors), sorted, to
    name the translation unit a bundle came from. Reads only the symbol and string tables.
    Best effort: a broken object gives ()."""
    try:
        src = code_object if isinstance(code_object, Source) else Source.of_bytes(code_object)
        sections = section_list(src)
        names: set[str] = set()
        for symtab in (s for s in sections if s.type in (SHT_SYMTAB, SHT_DYNSYM)):
            if symtab.link >= len(sections):
                continue
            strings = section_data(src, sections[symtab.link])
            data = section_data(src, symtab)
            for i in range(0, len(data) - _SYMBOL_SIZE + 1, _SYMBOL_SIZE):
                name = c_string(strings, struct.unpack_from("<I", data, i)[0])
                if name.endswith(".kd"):
                    names.add(name[:-3])
        return tuple(sorted(names))
    except (NotElf, UnsupportedElf, FormatError, struct.error):
        return ()


def _string_at(strings: Source, offset: int) -> str:
    """The NUL-terminated string at ``offset``, read a page at a time."""
    found = b""
    while offset < strings.size:
        piece = strings.read(offset, min(4096, strings.size - offset), "string table")
        end = piece.find(b"\0")
        if end >= 0:
            return (found + piece[:end]).decode("utf-8", "replace")
        found += piece
        offset += len(piece)
    return found.decode("utf-8", "replace")


@dataclass(frozen=True)
class Dynamic:
    """What the dynamic loader reads from a program or library to find its libraries."""

    needed: tuple[str, ...] = ()
    rpath: str | None = None  # DT_RPATH, used only when there is no DT_RUNPATH
    runpath: str | None = None
    soname: str | None = None


def dynamic_info(src: Source) -> Dynamic | None:
    """The dynamic section's entries, or None for a file without one (static programs,
    object files). Raises NotElf, UnsupportedElf or FormatError."""
    sections = section_list(src)
    dynamic = next((s for s in sections if s.type == SHT_DYNAMIC), None)
    if dynamic is None:
        return None
    if dynamic.link >= len(sections):
        raise FormatError(f"the dynamic section's string table index {dynamic.link} is "
                          f"outside the section table ({len(sections)} entries)")
    # .dynstr holds every exported symbol (MBs in libLLVM): read only the strings used
    strings = section_window(src, sections[dynamic.link])
    data = section_data(src, dynamic)
    values: dict[int, list[str]] = {}
    for i in range(0, len(data) - _DYN_SIZE + 1, _DYN_SIZE):
        tag, value = struct.unpack_from("<qQ", data, i)
        if tag == DT_NULL:
            break
        if tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH):
            if value >= max(strings.size, 1):
                raise FormatError(f"dynamic entry {tag} points outside the string table")
            values.setdefault(tag, []).append(_string_at(strings, value))

    def joined(tag: int) -> str | None:
        return ":".join(values[tag]) if tag in values else None

    return Dynamic(tuple(values.get(DT_NEEDED, ())), joined(DT_RPATH), joined(DT_RUNPATH),
                   joined(DT_SONAME))
