"""Real GPU libraries for recorded base layouts: HIP libraries whose offload bundles hold code
objects for the given processors (Debian's hipcc, HIP_PLATFORM=amd, no GPU), the same for
generic processors such as gfx9-generic (clang-19: code object v6, which Debian's hipcc, clang
15, cannot make), and a library with whole code objects embedded as data, as ROCr embeds its
blit kernels. Each kind is compiled once per test process and copied where a layout needs
it."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import require_tool

KERNEL = """#include <hip/hip_runtime.h>
__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" void run(float* x) { k<<<1, 64>>>(x); }
"""


@functools.lru_cache(maxsize=1)
def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="rocbuild-gpulibs-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _hipcc(*args: str) -> None:
    subprocess.run([require_tool("hipcc"), *args], check=True, capture_output=True,
                   env={**os.environ, "HIP_PLATFORM": "amd"})


@functools.cache
def bundled(archs: tuple[str, ...]) -> Path:
    """A shared library with one offload bundle holding a code object per processor."""
    folder = _folder()
    source = folder / "k.hip"
    source.write_text(KERNEL)
    out = folder / f"bundled-{'-'.join(archs)}.so"
    _hipcc(*(f"--offload-arch={a}" for a in archs), "-fPIC", "-shared", str(source), "-o",
           str(out))
    return out


# the device library has no bitcode for the generic processors in Debian 12 (ROCm 5.2's),
# so the kernel calls none: no threadIdx (it calls __ockl_get_local_id), -O2 drops the
# unused __assert_fail, and -nogpulib links nothing
GENERIC_KERNEL = """#include <hip/hip_runtime.h>
__global__ void k(float* x) { x[__builtin_amdgcn_workitem_id_x()] += 1.0f; }
extern "C" void run(float* x) { k<<<1, 64>>>(x); }
"""


@functools.cache
def generic(archs: tuple[str, ...], compress: bool = False) -> Path:
    """A shared library with one offload bundle holding a code object per processor, generic
    ones among them (``gfx9-generic``), compiled by clang-19 for code object v6 (the only
    version a generic processor exists in); ``compress``: a zstd bundle (--offload-compress).
    Skips (fails under RB_TEST_REQUIRE_TOOLS) without clang-19 and lld-19."""
    out = _folder() / f"generic-{'-'.join(archs)}{'-z' if compress else ''}.so"
    _clang19_generic(archs, out, *(["--offload-compress"] if compress else []), "-fPIC",
                     "-shared")
    return out


def _clang19_generic(archs: tuple[str, ...], out: Path, *args: str) -> None:
    """GENERIC_KERNEL compiled by clang-19 for ``archs`` as code object v6 into ``out``."""
    clang = require_tool("clang++-19")
    require_tool("ld.lld-19")
    source = _folder() / "generic.hip"
    source.write_text(GENERIC_KERNEL)
    subprocess.run([clang, "-x", "hip", *(f"--offload-arch={a}" for a in archs),
                    "-mcode-object-version=6", "-O2", "-nogpulib", "--rocm-path=/usr", *args,
                    str(source), "-o", str(out)], check=True, capture_output=True)


@functools.cache
def embedded(archs: tuple[str, ...]) -> Path:
    """A host library whose .rodata holds one whole code object per processor (ROCr's
    blit kernels: ``xxd -i`` arrays), not a .hip_fatbin."""
    folder = _folder()
    source = folder / "blit.hip"
    source.write_text("#include <hip/hip_runtime.h>\n__global__ void blit(int* d) "
                      "{ d[threadIdx.x] = 1; }\n")
    blobs = []
    for arch in archs:
        co = folder / f"blit-{arch}.co"
        _hipcc(f"--offload-arch={arch}", "--cuda-device-only", "--no-gpu-bundle-output", "-c",
               str(source), "-o", str(co))
        blobs.append(co.read_bytes())
    return embedding(f"embedded-{'-'.join(archs)}", tuple(blobs))


def generic_code_object(arch: str) -> bytes:
    """One whole code object (not bundled) for a processor clang-19 knows, generic ones
    among them: code object v6, e_flags with the generic version."""
    out = _folder() / f"generic-{arch}.co"
    _clang19_generic((arch,), out, "--cuda-device-only", "--no-gpu-bundle-output", "-c")
    return out.read_bytes()


def embedding(name: str, blobs: tuple[bytes, ...]) -> Path:
    """A host library (gcc) whose .rodata holds each of ``blobs`` as a byte array."""
    folder = _folder()
    arrays = [f"const unsigned char blob_{i}[] = {{{', '.join(str(b) for b in blob)}}};\n"
              for i, blob in enumerate(blobs)]
    c_file = folder / f"{name}.c"
    c_file.write_text("".join(arrays))
    out = folder / f"{name}.so"
    subprocess.run([require_tool("gcc"), "-fPIC", "-shared", str(c_file), "-o", str(out)],
                   check=True, capture_output=True)
    return out


def place(root: Path, libraries: dict[str, Path]) -> None:
    """Copy each library to its path below ``root`` (replacing a placeholder)."""
    for rel, library in libraries.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        shutil.copy(library, target)
