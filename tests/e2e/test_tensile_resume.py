"""An interrupted TensileCreateLibrary resumes, it does not restart.

A stand-in that behaves as TensileCreateLibrary does with the shipped resume patches (their
ResumeKernels and ResumeStartup modules are the ones the patches add:
tests/support/tensilepatch.py) first asks a real assembler script about capabilities
(Common.tryAssembler) and parses its YAML logic file (parseLibraryLogicFiles), then writes
each kernel into <cwd>/build_tmp/TENSILE/assembly progressively (.s, then .o, then .co linked
under another name and renamed) and links the .o files into the library at the end, under
CMake and ninja as rocBLAS runs it. The build is stopped after its start-up, a few kernels in,
by Ctrl-C (SIGINT to the process group), a SIGKILL of everything, or a SIGKILL of the
generator alone (the OOM killer's way); the same command again must not ask the assembler,
parse the logic or generate a kernel again, and must leave a whole library. A changed logic
file or assembler makes the rerun do the start-up (and the kernels) again.
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
from tests.support.tensilepatch import (
    MODULE,
    RESUME_PATCH,
    STARTUP_MODULE,
    STARTUP_PATCH,
    added_file,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KERNELS = [f"Cijk_Ailk_Bjlk_SB_MT{16 * (i + 1)}x16" for i in range(40)]
STOP_AFTER = 8  # finished kernels before the stop
QUESTIONS = ["v_fma_f32 v0, v1, v2, v3", "v_mfma_f32_32x32x2bf16 a[0:31], v32, v33, a[0:31]",
             "v_dot2_f32_f16 v0, v1, v2, v3"]

# what TensileCreateLibrary does with the patches: its start-up (Common.tryAssembler,
# TensileCreateLibrary.parseLibraryLogicFiles) and each assembly kernel (KernelWriter
# getSourceFileString / getSingleCodeObjectFile, TensileCreateLibrary.prepAsm)
STAND_IN = """\
import os, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import yaml
import ResumeKernels, ResumeStartup

logic, output = Path(sys.argv[1]), Path(sys.argv[2])
for name in ("asked.log", "parsed.log", "generated.log"):
    with open(Path.cwd() / name, "a") as out:
        out.write(f"# attempt {os.getpid()}\\n")
folder = ResumeStartup.resumeFolder(os.getcwd(), str(output))
assembler = os.environ["TENSILE_ROCM_ASSEMBLER_PATH"]

def tryAssembler(isa, text):
    args = [assembler, "-x", "assembler", "-target", "amdgcn-amdhsa", "-mcpu=" + isa, "-"]
    known = ResumeStartup.PROBES.answer(args, text)
    if known is not None:
        return known
    result = subprocess.run(args, input=text.encode(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    answer = result.stdout == b"" and result.returncode == 0
    ResumeStartup.PROBES.record(args, text, answer)
    return answer

ResumeStartup.PROBES = ResumeStartup.AssemblerProbes(folder)
caps = [f"{isa} {text}: {tryAssembler(isa, text)}" for isa in ("gfx906", "gfx908")
        for text in QUESTIONS]
print(f"# Resuming: {ResumeStartup.PROBES.save()} assembler probes kept", flush=True)
ResumeStartup.PROBES = None

def readYAML(path):
    with open(Path.cwd() / "parsed.log", "a") as out:
        out.write(path + "\\n")
    with open(path) as text:
        return yaml.safe_load(text)

stamp = ResumeStartup.logicStamp(ResumeKernels.resumeKey([str(logic)], assembler))
kernels = ResumeStartup.readLogic(folder, stamp, str(logic), readYAML)["Kernels"]

asm = folder.parent / "assembly"
asm.mkdir(parents=True, exist_ok=True)
kept = ResumeKernels.prepareResume(asm, ResumeKernels.resumeKey([str(logic)], assembler))
print(f"# Resuming: {kept} assembly kernels finished by an interrupted run are kept",
      flush=True)
for name in kernels:
    if ResumeKernels.finished(str(asm), name):
        continue
    with open(Path.cwd() / "generated.log", "a") as out:
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
    "".join(line + "\\n" for line in caps).encode()
    + b"".join((asm / f"{name}.o").read_bytes() for name in kernels))
""".replace("QUESTIONS", repr(QUESTIONS))

# clang as Tensile's probes see it: anything on stdout (or a failure) means "no"; each run is
# logged in the build's cwd
ASSEMBLER = """\
#!/bin/sh
input=$(cat)
echo "$5 $input" >> asked.log
case "$5 $input" in
  "-mcpu=gfx906 v_mfma"*) echo "<stdin>:1:1: error: instruction not supported";;
esac
"""


def cmake_project() -> str:
    return f'''cmake_minimum_required(VERSION 3.20)
project(blas NONE)
set(lib "${{CMAKE_BINARY_DIR}}/Tensile/library/TensileLibrary_gfx906.co")
file(MAKE_DIRECTORY "${{CMAKE_BINARY_DIR}}/library/src")
add_custom_command(OUTPUT "${{lib}}"
  COMMAND "{sys.executable}" "${{CMAKE_SOURCE_DIR}}/tcl/TensileCreateLibrary.py"
          "${{CMAKE_SOURCE_DIR}}/logic/vega20.yaml" "${{CMAKE_BINARY_DIR}}/Tensile"
  WORKING_DIRECTORY "${{CMAKE_BINARY_DIR}}/library/src"
  DEPENDS "${{CMAKE_SOURCE_DIR}}/logic/vega20.yaml"
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


def logic_yaml(kernels: list[str]) -> str:
    return "Kernels:\n" + "".join(f"- {name}\n" for name in kernels)


def expected_library() -> str:
    caps = [f"{isa} {text}: {not (isa == 'gfx906' and text.startswith('v_mfma'))}"
            for isa in ("gfx906", "gfx908") for text in QUESTIONS]
    return "".join(line + "\n" for line in caps)


class Build:
    """The stand-in's project built by rocbuild, stopped once after its start-up."""

    def __init__(self, tmp_path: Path) -> None:
        for tool in ("git", "cmake", "ninja"):
            require_tool(tool)
        self.assembler = tmp_path / "tools" / "clang++"
        self.assembler.parent.mkdir()
        self.assembler.write_text(ASSEMBLER)
        self.assembler.chmod(0o755)
        flags = one_component_stack(tmp_path, "blas", {
            "CMakeLists.txt": cmake_project(),
            "tcl/TensileCreateLibrary.py": STAND_IN,
            "tcl/ResumeKernels.py": added_file(RESUME_PATCH, MODULE),
            "tcl/ResumeStartup.py": added_file(STARTUP_PATCH, STARTUP_MODULE),
            "logic/vega20.yaml": logic_yaml(KERNELS),
        }, recipe_tail=f'[env]\nTENSILE_ROCM_ASSEMBLER_PATH = "{self.assembler}"\n[cmake]\n')
        self.src = tmp_path / "work" / "build" / "blas" / "library" / "src"
        self.asm = self.src / "build_tmp" / "TENSILE" / "assembly"
        self.argv = [sys.executable, "-m", "rocbuild", "build", *flags, "--no-verify",
                     "--quiet"]
        self.installed = (tmp_path / "prefix" / "lib" / "blas" / "library"
                          / "TensileLibrary_gfx906.co")

    def start_and_stop(self, how: str) -> set[str]:
        """Build until STOP_AFTER kernels are finished, stop it; the finished kernels."""
        build = subprocess.Popen(self.argv, env=child_env(), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            while build.poll() is None and len(list(self.asm.glob("*.co"))) < STOP_AFTER:
                time.sleep(0.01)
            assert build.poll() is None, "the build ended before it was stopped"
        finally:
            stop(build, how)
        assert build.returncode != 0
        finished = {p.stem for p in self.asm.glob("*.co")}
        assert STOP_AFTER <= len(finished) < len(KERNELS)
        return finished

    def attempts(self, log: str) -> list[list[str]]:
        """What each start of the stand-in wrote to ``log`` (assembler runs, logic files
        parsed, kernels generated)."""
        chunks = (self.src / log).read_text().split("# attempt ")[1:]
        return [chunk.splitlines()[1:] for chunk in chunks]


@pytest.mark.parametrize("how", ["sigint", "sigkill", "oom"])
def test_an_interrupted_tensile_step_does_not_redo_its_start_up_or_finished_kernels(
        tmp_path: Path, how: str) -> None:
    build = Build(tmp_path)
    finished = build.start_and_stop(how)
    result = run_cli(*build.argv[3:], expect=0)
    asked, parsed, generated = (build.attempts(log)
                                for log in ("asked.log", "parsed.log", "generated.log"))
    assert len(asked) == len(parsed) == len(generated) == 2, result.explain()
    assert len(asked[0]) == 2 * len(QUESTIONS) and len(parsed[0]) == 1
    assert asked[1] == [], "the rerun asked the assembler again"
    assert parsed[1] == [], "the rerun parsed the logic file again"
    rerun = set(generated[1])
    assert not rerun & finished, f"generated again: {sorted(rerun & finished)}"
    assert rerun | finished == set(KERNELS)
    assert build.installed.read_text() == expected_library() + "".join(
        f"kernel {name}\n" for name in KERNELS), result.explain()


@pytest.mark.parametrize("change", ["logic", "assembler"])
def test_a_changed_input_redoes_the_start_up_on_the_rerun(tmp_path: Path, change: str) -> None:
    build = Build(tmp_path)
    build.start_and_stop("sigkill")
    kernels = KERNELS
    if change == "logic":  # the user edits a logic file of the checkout: one kernel more
        kernels = [*KERNELS, "Cijk_Ailk_Bjlk_SB_MT1024x16"]
        (tmp_path / "work" / "src" / "blas" / "logic" / "vega20.yaml").write_text(
            logic_yaml(kernels))
    else:  # another build of the assembler at the same path
        build.assembler.write_text(ASSEMBLER + "# rebuilt\n")
    result = run_cli(*build.argv[3:], expect=0)
    asked, parsed, generated = (build.attempts(log)
                                for log in ("asked.log", "parsed.log", "generated.log"))
    assert len(asked) == len(parsed) == len(generated) == 2, result.explain()
    # the assembler's answers do not depend on the logic: kept; anything else is redone
    assert len(asked[1]) == (0 if change == "logic" else 2 * len(QUESTIONS))
    assert len(parsed[1]) == 1, "the rerun took the logic data of other inputs"
    assert sorted(generated[1]) == sorted(kernels), "a kernel of other inputs was kept"
    assert build.installed.read_text() == expected_library() + "".join(
        f"kernel {name}\n" for name in kernels), result.explain()
