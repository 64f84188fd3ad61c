"""The shipped Tensile carries the fix for LLVM 21+ (ROCm/rocm-libraries#2110): gfx906's
int8 MAC written without op_sel modifiers, which Debian clang 21.1.8 rejects ("not a valid
operand") and which encode the defaults anyway. The Tensile source is not here (no network in
tests): the patch's own lines are checked, and that the stack applies it."""

from __future__ import annotations

from pathlib import Path

from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve

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
    assert [p.path for p in stack.components["tensile"].patches] == [PATCH]
