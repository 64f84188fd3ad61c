"""An interrupted TensileCreateLibrary resumes, it does not restart.

A stand-in that behaves as TensileCreateLibrary does with the shipped resume patch (its
ResumeKernels module is the one the patch adds: tests/support/tensilepatch.py) writes each
kernel into <cwd>/build_tmp/TENSILE/assembly progressively (.s, then .o, then .co linked under
another name and renamed) and links the .o files into the library at the end, under CMake and
ninja as rocBLAS runs it. The build is stopped mid-way by Ctrl-C (SIGINT to the process group),
a SIGKILL of everything, or a SIGKILL of the generator alone (the OOM killer's way); the same
command again must not generate a kernel that was finished, and must leave a whole library.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import one_component_stack
from tests.support.tensilepatch import MODULE, RESUME_PATCH, added_file

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KERNELS = [f"Cijk_Ailk_Bjlk_SB_MT{16 * (i + 1)}x16" for i in range(40)]
STOP_AFTER = 8  # finished kernels before the stop

# what TensileCreateLibrary does per assembly kernel with the patch (KernelWriter
# getSourceFileString / getSingleCodeObjectFile, TensileCreateLibrary.prepAsm)
STAND_IN = '''\
import os, sys, time
from pathlib import Path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ResumeKernels

logic, output = Path(sys.argv[1]), Path(sys.argv[2])
kernels = logic.read_text().split()
asm = Path.cwd() / "build_tmp" / output.name.upper() / "assembly"
asm.mkdir(parents=True, exist_ok=True)
kept = ResumeKernels.prepareResume(asm, ResumeKernels.resumeKey([str(logic)], None))
print(f"# Resuming: {kept} assembly kernels finished by an interrupted run are kept",
      flush=True)
log = Path.cwd() / "generated.log"
with open(log, "a") as out:
    out.write(f"# attempt {os.getpid()}\\n")
for name in kernels:
    if ResumeKernels.finished(str(asm), name):
        continue
    with open(log, "a") as out:
        out.write(name + "\\n")
    time.sleep(0.1)  # the kernel generation
    source = asm / f"{name}.s"
    source.write_text(f"kernel {name}\\n")
    (asm / f"{name}.o").write_bytes(source.read_bytes())  # assembled
    source.unlink()
    partial = asm / f"{name}.co{ResumeKernels.PARTIAL}"
    partial.write_bytes((asm / f"{name}.o").read_bytes())  # linked
    os.replace(partial, asm / f"{name}.co")
library = output / "library"
library.mkdir(parents=True, exist_ok=True)
(library / "TensileLibrary_gfx906.co").write_bytes(
    b"".join((asm / f"{name}.o").read_bytes() for name in kernels))
'''


def cmake_project() -> str:
    return f'''cmake_minimum_required(VERSION 3.20)
project(blas NONE)
set(lib "${{CMAKE_BINARY_DIR}}/Tensile/library/TensileLibrary_gfx906.co")
file(MAKE_DIRECTORY "${{CMAKE_BINARY_DIR}}/library/src")
add_custom_command(OUTPUT "${{lib}}"
  COMMAND "{sys.executable}" "${{CMAKE_SOURCE_DIR}}/tcl/TensileCreateLibrary.py"
          "${{CMAKE_SOURCE_DIR}}/logic/vega20.txt" "${{CMAKE_BINARY_DIR}}/Tensile"
  WORKING_DIRECTORY "${{CMAKE_BINARY_DIR}}/library/src"
  DEPENDS "${{CMAKE_SOURCE_DIR}}/logic/vega20.txt"
  COMMENT "Generating libraries with TensileCreateLibrary")
add_custom_target(tensile_library ALL DEPENDS "${{lib}}")
install(FILES "${{lib}}" DESTINATION lib/blas/library)
'''


def stop(build: subprocess.Popen[bytes], how: str) -> None:
    if how == "sigint":  # Ctrl-C in the terminal: the whole foreground group
        os.killpg(build.pid, signal.SIGINT)
    elif how == "sigkill":
        family = psutil.Process(build.pid).children(recursive=True)
        os.killpg(build.pid, signal.SIGKILL)
        for child in family:  # ninja's children may run in their own group
            with contextlib.suppress(psutil.Error):
                child.kill()
    else:  # the OOM killer ends the biggest process: the generator, not rocbuild
        for child in psutil.Process(build.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if any("TensileCreateLibrary.py" in arg for arg in child.cmdline()):
                    child.kill()
    build.wait(timeout=120)


@pytest.mark.parametrize("how", ["sigint", "sigkill", "oom"])
def test_an_interrupted_tensile_step_does_not_redo_finished_kernels(tmp_path: Path,
                                                                     how: str) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "blas", {
        "CMakeLists.txt": cmake_project(),
        "tcl/TensileCreateLibrary.py": STAND_IN,
        "tcl/ResumeKernels.py": added_file(RESUME_PATCH, MODULE),
        "logic/vega20.txt": "\n".join(KERNELS) + "\n",
    })
    src = tmp_path / "work" / "build" / "blas" / "library" / "src"
    asm = src / "build_tmp" / "TENSILE" / "assembly"
    argv = [sys.executable, "-m", "rocbuild", "build", *flags, "--no-verify", "--quiet"]
    build = subprocess.Popen(argv, env=child_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while build.poll() is None and len(list(asm.glob("*.co"))) < STOP_AFTER:
            time.sleep(0.01)
        assert build.poll() is None, "the build ended before it was stopped"
    finally:
        stop(build, how)
    assert build.returncode != 0
    finished = {p.stem for p in asm.glob("*.co")}
    assert STOP_AFTER <= len(finished) < len(KERNELS)

    result = run_cli(*argv[3:], expect=0)
    attempts = (src / "generated.log").read_text().split("# attempt ")[1:]
    assert len(attempts) == 2, attempts
    rerun = set(attempts[1].split()[1:])
    assert not rerun & finished, f"generated again: {sorted(rerun & finished)}"
    assert rerun | finished == set(KERNELS)
    installed = tmp_path / "prefix" / "lib" / "blas" / "library" / "TensileLibrary_gfx906.co"
    assert installed.read_text() == "".join(f"kernel {name}\n" for name in KERNELS), \
        result.explain()
