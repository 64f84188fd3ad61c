"""Real GPU libraries for recorded base layouts: HIP libraries whose offload bundles hold code
objects for the given processors (Debian's hipcc, HIP_PLATFORM=amd, no GPU), and a library
with whole code objects embedded as data, as ROCr embeds its blit kernels. Each kind is
compiled once per test process and copied where a layout needs it."""

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


@functools.cache
def embedded(archs: tuple[str, ...]) -> Path:
    """A host library whose .rodata holds one whole code object per processor (ROCr's
    blit kernels: ``xxd -i`` arrays), not a .hip_fatbin."""
    folder = _folder()
    source = folder / "blit.hip"
    source.write_text("#include <hip/hip_runtime.h>\n__global__ void blit(int* d) "
                      "{ d[threadIdx.x] = 1; }\n")
    arrays = []
    for arch in archs:
        co = folder / f"blit-{arch}.co"
        _hipcc(f"--offload-arch={arch}", "--cuda-device-only", "--no-gpu-bundle-output", "-c",
               str(source), "-o", str(co))
        data = ", ".join(str(b) for b in co.read_bytes())
        arrays.append(f"const unsigned char blit_{arch}[] = {{{data}}};\n")
    c_file = folder / f"embedded-{'-'.join(archs)}.c"
    c_file.write_text("".join(arrays))
    out = folder / f"embedded-{'-'.join(archs)}.so"
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
