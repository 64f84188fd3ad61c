"""AMDGPU code objects: embedded in a host library as data (not as ``.hip_fatbin`` bundles),
or a whole file (``bare_code_object``: rocBLAS's Tensile ``*_gfx906.co`` and ``.hsaco`` files).

ROCr compiles its blit and trap-handler kernels into one code object per target at build time
and links them into ``libhsa-runtime64.so`` as byte arrays (``xxd -i`` headers): the GPU code
sits in ``.rodata`` as whole AMDGPU ELF files. verify finds them by their ELF header (the
magic, ELF64 little-endian, ``e_machine`` EM_AMDGPU) and reads each one's target from
``e_flags`` (the processor in the low byte, the xnack and sramecc settings above it, by the
code object version in ``EI_ABIVERSION``), as the loader does (LLVM AMDGPUUsage, "ELF Header").
The data sections are streamed a chunk at a time; nothing is read whole.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rocbuild.model.elf import ELF_MAGIC, EM_AMDGPU, SHT_NOBITS, Section, Source

_HEADER = 64  # Elf64_Ehdr
_CHUNK = 1 << 20
ELFOSABI_AMDGPU_HSA = 64
# EI_ABIVERSION of an HSA code object: 1 = v3, 2 = v4, 3 = v5, 4 = v6
_V3, _V4 = 1, 2

# EF_AMDGPU_MACH: the processor in the low byte of e_flags (LLVM AMDGPUUsage)
MACH = {
    0x20: "gfx600", 0x21: "gfx601", 0x3a: "gfx602",
    0x22: "gfx700", 0x23: "gfx701", 0x24: "gfx702", 0x25: "gfx703", 0x26: "gfx704",
    0x3b: "gfx705", 0x3c: "gfx805",
    0x28: "gfx801", 0x29: "gfx802", 0x2a: "gfx803", 0x2b: "gfx810",
    0x2c: "gfx900", 0x2d: "gfx902", 0x2e: "gfx904", 0x2f: "gfx906", 0x30: "gfx908",
    0x31: "gfx909", 0x32: "gfx90c", 0x3f: "gfx90a", 0x40: "gfx940", 0x4b: "gfx941",
    0x4c: "gfx942", 0x4f: "gfx950",
    0x33: "gfx1010", 0x34: "gfx1011", 0x35: "gfx1012", 0x42: "gfx1013",
    0x36: "gfx1030", 0x37: "gfx1031", 0x38: "gfx1032", 0x39: "gfx1033", 0x3e: "gfx1034",
    0x3d: "gfx1035", 0x45: "gfx1036",
    0x41: "gfx1100", 0x46: "gfx1101", 0x47: "gfx1102", 0x44: "gfx1103", 0x43: "gfx1150",
    0x4a: "gfx1151", 0x48: "gfx1200", 0x4e: "gfx1201",
}


@dataclass(frozen=True)
class CodeObject:
    offset: int  # in the file
    target: str  # a target ID as bundles write it ("gfx906", "gfx906:sramecc+:xnack-")


def target_of(e_flags: int, abi_version: int) -> str:
    """The target ID a code object's ``e_flags`` name; ``mach-0x..`` for a processor this
    table does not know (it then matches no requested target)."""
    processor = MACH.get(e_flags & 0xFF, f"mach-{e_flags & 0xFF:#04x}")
    features: list[str] = []
    if abi_version >= _V4:
        # 0 unsupported, 1 any (left out of the ID), 2 off, 3 on
        sramecc, xnack = (e_flags >> 10) & 3, (e_flags >> 8) & 3
        features += [f"sramecc{'+' if sramecc == 3 else '-'}"] if sramecc >= 2 else []
        features += [f"xnack{'+' if xnack == 3 else '-'}"] if xnack >= 2 else []
    elif abi_version == _V3:  # a set bit means on; clear: off or not supported (left out)
        features += ["sramecc+"] if e_flags & 0x200 else []
        features += ["xnack+"] if e_flags & 0x100 else []
    return ":".join([processor, *features])


def _header_at(src: Source, offset: int) -> CodeObject | None:
    if offset + _HEADER > src.size:
        return None
    head = src.read(offset, _HEADER, "embedded ELF header")
    if head[4] != 2 or head[5] != 1 or head[7] != ELFOSABI_AMDGPU_HSA:
        return None
    (machine,) = struct.unpack_from("<H", head, 18)
    if machine != EM_AMDGPU:
        return None
    (e_flags,) = struct.unpack_from("<I", head, 48)
    return CodeObject(offset, target_of(e_flags, head[8]))


def bare_code_object(src: Source) -> CodeObject | None:
    """The file itself as an AMDGPU code object (its ELF header names EM_AMDGPU and the HSA
    OS ABI), or None. Tensile writes one per processor and library, loaded by file name."""
    return _header_at(src, 0) if src.size >= _HEADER else None


def _is_data(section: Section) -> bool:
    return section.type != SHT_NOBITS and section.size >= _HEADER and (
        section.name.startswith((".rodata", ".data", ".ldata", ".lrodata")))


def embedded_code_objects(src: Source, sections: list[Section]) -> list[CodeObject]:
    """The AMDGPU code objects whose ELF header lies in the file's data sections."""
    found: list[CodeObject] = []
    overlap = len(ELF_MAGIC) - 1
    for section in filter(_is_data, sections):
        end = section.offset + section.size
        start = section.offset
        while start < end:
            length = min(_CHUNK + overlap, end - start)
            chunk = src.read(start, length, f"section {section.name}")
            at = chunk.find(ELF_MAGIC)
            while at >= 0:
                code_object = _header_at(src, start + at)
                if code_object is not None:
                    found.append(code_object)
                at = chunk.find(ELF_MAGIC, at + 1)
            if start + length >= end:
                break
            start += length - overlap
    return found
