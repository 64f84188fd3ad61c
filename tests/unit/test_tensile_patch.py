"""The shipped Tensile carries the fix for LLVM 21+ (ROCm/rocm-libraries#2110): gfx906's
int8 MAC written without op_sel modifiers, which Debian clang 21.1.8 rejects ("not a valid
operand") and which encode the defaults anyway; and the resume of an interrupted
TensileCreateLibrary: its finished kernels (ResumeKernels) and its start-up's assembler probes
and logic data (ResumeStartup), the modules run here as the patches add them. The Tensile
source is not here (no network in tests): the patches' own lines are checked, and that the
stack applies them."""

from __future__ import annotations

import datetime
import os
import pickle
import stat
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from tests.support.tensilepatch import RESUME_PATCH, STARTUP_PATCH, resume_module, startup_module

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
    assert [p.path for p in stack.components["tensile"].patches] == [PATCH, RESUME_PATCH,
                                                                     STARTUP_PATCH]


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


def fake_assembler(path: Path, note: str = "") -> Path:
    """An assembler that logs each run beside itself and rejects MFMA code for gfx906, as
    Tensile's capability probes see clang do (output or a non-zero exit is a "no")."""
    path.write_text("#!/bin/sh\n" + note + 'input=$(cat)\necho "$3 $input" >> "$0.runs"\n'
                    'case "$3 $input" in "-mcpu=gfx906 v_mfma"*) echo "error: invalid";; esac\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def ask(probes: Any, assembler: Path, isa: str, text: str) -> bool:
    """Common.tryAssembler as the patch changes it: a kept answer, else the assembler's."""
    args = [str(assembler), "-x", "assembler", f"-mcpu={isa}", "-"]
    known = probes.answer(args, text)
    if known is not None:
        return bool(known)
    result = subprocess.run(args, input=text.encode(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, check=False)
    answer = result.stdout == b"" and result.returncode == 0
    probes.record(args, text, answer)
    return answer


QUESTIONS = [("gfx906", "v_fma_f32 v0, v1, v2, v3"), ("gfx906", "v_mfma_f32 a[0:31], v0, v1"),
             ("gfx908", "v_mfma_f32 a[0:31], v0, v1")]


def probe_all(startup: ModuleType, folder: Path, assembler: Path) -> tuple[list[bool], int]:
    """One start-up's probes: the answers and how many of them were kept from before."""
    probes = startup.AssemblerProbes(folder)
    answers = [ask(probes, assembler, isa, text) for isa, text in QUESTIONS]
    return answers, probes.save()


def runs(assembler: Path) -> int:
    log = Path(f"{assembler}.runs")
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_the_assembler_is_asked_each_question_once_per_assembler(tmp_path: Path) -> None:
    startup = startup_module(tmp_path / "Tensile")
    folder = tmp_path / "build_tmp" / "TENSILE" / "resume"
    assembler = fake_assembler(tmp_path / "clang++")
    assert probe_all(startup, folder, assembler) == ([True, False, True], 0)
    assert runs(assembler) == 3
    assert probe_all(startup, folder, assembler) == ([True, False, True], 3)
    assert runs(assembler) == 3  # the rerun asked nothing
    # a question not asked before goes to the assembler; the others are still kept
    probes = startup.AssemblerProbes(folder)
    assert ask(probes, assembler, "gfx90a", "v_mfma_f32 a[0:31], v0, v1") is True
    assert runs(assembler) == 4
    # another assembler (its size and mtime) is asked everything again
    fake_assembler(assembler, note="# another build of the assembler\n")
    assert probe_all(startup, folder, assembler) == ([True, False, True], 0)
    assert runs(assembler) == 7
    assert probe_all(startup, folder, assembler) == ([True, False, True], 3)
    assert runs(assembler) == 7


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "other format",
                                    "not answers"])
def test_a_damaged_or_foreign_probe_file_is_ignored(tmp_path: Path, damage: str) -> None:
    startup = startup_module(tmp_path / "Tensile")
    folder = tmp_path / "resume"
    assembler = fake_assembler(tmp_path / "clang++")
    probe_all(startup, folder, assembler)
    kept = folder / startup.PROBES_FILE
    blob = kept.read_bytes()
    if damage == "flipped byte":  # "true" becomes "trte": the sha256 tells
        at = blob.rindex(b"true")
        kept.write_bytes(blob[:at + 2] + b"t" + blob[at + 3:])
    elif damage == "cut short":
        kept.write_bytes(blob[:-5])
    elif damage == "other format":
        kept.write_bytes(b"tensile-resume 0\n" + blob.split(b"\n", 1)[1])
    else:  # whole and stamped, but not answers: never trusted
        startup.writeStamped(kept, startup.PROBES_FILE, b'{"a": "yes"}')
    assert probe_all(startup, folder, assembler) == ([True, False, True], 0)
    assert runs(assembler) == 6  # asked again, and the file replaced
    assert probe_all(startup, folder, assembler) == ([True, False, True], 3)


LOGIC = """\
- {MinimumRequiredVersion: 4.33.0}
- vega20
- {Architecture: gfx906}
- Solutions:
  - {WorkGroup: &id001 [16, 16, 1], Name: a}
  - {WorkGroup: *id001, Name: b}
"""


def reader(log: list[str]) -> Any:
    def read(path: str) -> Any:
        log.append(path)
        with open(path) as text:
            return yaml.load(text, yaml.SafeLoader)
    return read


def test_logic_data_is_kept_under_its_stamp_and_read_again_for_other_inputs(
        tmp_path: Path) -> None:
    startup = startup_module(tmp_path / "Tensile")
    folder = tmp_path / "resume"
    logic = tmp_path / "logic" / "vega20_Cijk_Ailk_Bjlk_SB.yaml"
    logic.parent.mkdir()
    logic.write_text(LOGIC)
    stamp = startup.logicStamp("resume-key-1")
    read: list[str] = []
    first = startup.readLogic(folder, stamp, str(logic), reader(read))
    assert read == [str(logic)] and startup.logicDataKept(folder, stamp, str(logic))
    again = startup.readLogic(folder, stamp, str(logic), reader(read))
    assert read == [str(logic)]  # the YAML was not parsed again
    assert again == first == yaml.safe_load(LOGIC)
    solutions = again[3]["Solutions"]
    assert solutions[0]["WorkGroup"] is solutions[1]["WorkGroup"]  # the anchor, as the YAML
    # another resume key (another command line, logic, Tensile or assembler) reads again
    other = startup.logicStamp("resume-key-2")
    assert other != stamp and not startup.logicDataKept(folder, other, str(logic))
    startup.readLogic(folder, other, str(logic), reader(read))
    assert read == [str(logic)] * 2
    # another file of the same name elsewhere is its own
    elsewhere = tmp_path / "other" / logic.name
    elsewhere.parent.mkdir()
    elsewhere.write_text(LOGIC.replace("Name: b", "Name: c"))
    assert startup.readLogic(folder, other, str(elsewhere), reader(read))[3]["Solutions"][1][
        "Name"] == "c"
    assert startup.readLogic(folder, other, str(logic), reader(read))[3]["Solutions"][1][
        "Name"] == "b"
    assert read == [str(logic), str(logic), str(elsewhere)]


class Marker:
    """What a crafted file could hold: its pickle calls os.mkdir("never") when loaded."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, ("never",))


@pytest.mark.parametrize("damage", ["flipped byte", "names code", "other stamp"])
def test_damaged_or_crafted_logic_data_is_never_trusted(tmp_path: Path, damage: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    startup = startup_module(tmp_path / "Tensile")
    folder = tmp_path / "resume"
    logic = tmp_path / "vega20.yaml"
    logic.write_text(LOGIC)
    stamp = startup.logicStamp("key")
    read: list[str] = []
    startup.readLogic(folder, stamp, str(logic), reader(read))
    kept = startup.logicDataPath(folder, str(logic))
    file_stamp = kept.read_bytes().split(b"\n")[1].decode()
    if damage == "flipped byte":  # "16" in the payload becomes "17": the sha256 tells
        blob = kept.read_bytes()
        at = blob.rindex(bytes([16]))
        kept.write_bytes(blob[:at] + bytes([17]) + blob[at + 1:])
    elif damage == "names code":  # whole and stamped, but it would call os.mkdir("never")
        startup.writeStamped(kept, file_stamp, pickle.dumps(Marker()))
    else:
        startup.writeStamped(kept, "another", pickle.dumps(yaml.safe_load(LOGIC)))
    monkeypatch.chdir(tmp_path)
    data = startup.readLogic(folder, stamp, str(logic), reader(read))
    assert data == yaml.safe_load(LOGIC)
    assert read == [str(logic)] * 2  # read from the YAML again
    assert not (tmp_path / "never").exists()
    startup.readLogic(folder, stamp, str(logic), reader(read))
    assert read == [str(logic)] * 2  # and kept again


def test_logic_data_that_needs_a_class_is_not_kept(tmp_path: Path) -> None:
    startup = startup_module(tmp_path / "Tensile")
    logic = tmp_path / "vega20.yaml"
    logic.write_text("- {Date: 2024-05-01}\n")  # YAML makes a datetime.date of it
    read: list[str] = []
    stamp = startup.logicStamp("key")
    for _ in range(2):
        data = startup.readLogic(tmp_path / "resume", stamp, str(logic), reader(read))
        assert data == [{"Date": datetime.date(2024, 5, 1)}]
    assert read == [str(logic)] * 2
    assert not startup.logicDataPath(tmp_path / "resume", str(logic)).exists()
