"""The shipped Tensile carries the fix for LLVM 21+ (ROCm/rocm-libraries#2110): gfx906's
int8 MAC written without op_sel modifiers, which Debian clang 21.1.8 rejects ("not a valid
operand") and which encode the defaults anyway; and the resume of an interrupted
TensileCreateLibrary (its ResumeKernels module, run here as the patch adds it). The Tensile
source is not here (no network in tests): the patches' own lines are checked, and that the
stack applies them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from tests.support.tensilepatch import RESUME_PATCH, resume_module

PATCH = (Path(__file__).resolve().parent.parent.parent / "patches" / "tensile"
         / "0001-v-dot4-no-op-sel.patch")


def test_the_patch_drops_op_sel_from_v_dot4_only() -> None:
    lines = PATCH.read_text().splitlines()
    removed = [x for x in lines if x.startswith("-") and not x.startswith("---")]
    added = [x for x in lines if x.startswith("+") and not x.startswith("+++")]
    assert len(removed) == len(added) == 2  # Components/MAC_I8X4.py and Code.py
    for old, new in zip(removed, added, strict=True):
        assert "v_dot4_i32_i8" in old and "op_sel:[0,0] op_sel_hi:[1,1]" in old
        assert "op_sel" not in new
        assert new[1:] == old[1:].replace(" op_sel:[0,0] op_sel_hi:[1,1]", "")


def test_tensile_is_patched_when_rocblas_is_built(tmp_path: Path) -> None:
    settings = resolve({"workdir": str(tmp_path), "ccache": "off"}, env={})
    stack = load_stack(settings, ["rocblas"])
    assert [p.path for p in stack.components["tensile"].patches] == [PATCH, RESUME_PATCH]


def test_the_resume_key_follows_every_input(tmp_path: Path) -> None:
    resume = resume_module(tmp_path / "Tensile")
    logic = tmp_path / "vega20_Cijk_Ailk_Bjlk_SB.yaml"
    logic.write_text("- kernel a\n")
    assembler = tmp_path / "clang++"
    assembler.write_text("#!/bin/sh\n")
    key = resume.resumeKey([str(logic)], str(assembler), ["--jobs=2", "logic", "out"])
    assert key == resume.resumeKey([str(logic)], str(assembler), ["--jobs=2", "logic", "out"])
    assert key != resume.resumeKey([str(logic)], str(assembler), ["--jobs=3", "logic", "out"])
    logic.write_text("- kernel b\n")
    changed_logic = resume.resumeKey([str(logic)], str(assembler), ["--jobs=2", "logic", "out"])
    assert changed_logic != key
    assembler.write_text("#!/bin/sh\nexit 0\n")  # another assembler: size and mtime
    assert resume.resumeKey([str(logic)], str(assembler),
                            ["--jobs=2", "logic", "out"]) != changed_logic
    # Tensile's own files (the patch's module lies among them), but not its tests
    before = resume.resumeKey([], None, [])
    (tmp_path / "Tensile" / "Tests").mkdir()
    (tmp_path / "Tensile" / "Tests" / "test_x.py").write_text("x = 1\n")
    assert resume.resumeKey([], None, []) == before
    (tmp_path / "Tensile" / "KernelWriter.py").write_text("# another writer\n")
    assert resume.resumeKey([], None, []) != before


@pytest.mark.parametrize("same", [True, False])
def test_a_folder_of_the_same_inputs_is_kept_and_of_others_emptied(tmp_path: Path,
                                                                   same: bool) -> None:
    resume = resume_module(tmp_path / "Tensile")
    asm = tmp_path / "build_tmp" / "TENSILE" / "assembly"
    asm.mkdir(parents=True)
    assert resume.prepareResume(asm, "key-1") == 0  # a new folder: the key is written
    for name in ("done", "half"):
        (asm / f"{name}.o").write_bytes(b"o")
    (asm / "done.co").write_bytes(b"co")
    (asm / "half.co.partial").write_bytes(b"c")  # its link was stopped
    (asm / "asm-new.sh").write_text("#!/bin/sh\n")  # prepAsm's script is not a kernel
    kept = resume.prepareResume(asm, "key-1" if same else "key-2")
    assert kept == (1 if same else 0)
    assert resume.finished(str(asm), "done") is same
    assert resume.finished(str(asm), "half") is False
    left = sorted(p.name for p in asm.iterdir())
    assert left == (["asm-new.sh", "done.co", "done.o", "half.co.partial", "half.o",
                     "resume-key"] if same else ["asm-new.sh", "resume-key"])
    assert (asm / "resume-key").read_text() == ("key-1\n" if same else "key-2\n")
    assert resume.prepareResume(asm, None) == 0  # no key (Tensile's other callers): untouched
    assert sorted(p.name for p in asm.iterdir()) == left
