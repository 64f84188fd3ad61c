"""What `rocbuild verify` tells the user, run as a real child process (tests/cli.py): a
named file without GPU code says so, a missing target is one line per file, and the bundle
numbers in the text are the ones in --json. (An e2e test: it starts rocbuild.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.e2e.test_bad_input import _run_in_mount, needs_mount
from tests.unit.test_verify_scan import elf_with_fatbin, fatbin, make_elf, tu, write

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def problem_lines(text: str) -> list[str]:
    """The ✗ lines: each problem is one line, never wrapped."""
    return [line.strip() for line in text.splitlines() if line.strip().startswith("✗")]


def test_named_file_without_gpu_code_says_so(tmp_path: Path) -> None:
    plain = write(tmp_path, "libplain.so", make_elf([(".text", 1, b"\x90", 0)]))
    notes = write(tmp_path, "notes.txt", b"hello")
    result = run_cli("verify", "--target", "gfx906", str(plain), str(notes), expect=4)
    assert problem_lines(result.stdout) == [
        f"✗ {plain}: no GPU code: this file has no .hip_fatbin/offload bundle "
        "(no .hip_fatbin section)",
        f"✗ {notes}: no GPU code: this file has no .hip_fatbin/offload bundle (not an ELF file)"]
    doc = json.loads(run_cli("verify", "--target", "gfx906", str(plain), "--json",
                             expect=4).stdout)
    assert doc["files"][0]["verdict"] == "no-gpu-code"
    assert doc["files"][0]["problems"] == [
        "no GPU code: this file has no .hip_fatbin/offload bundle (no .hip_fatbin section)"]


def test_missing_target_is_one_line_per_file(tmp_path: Path) -> None:
    lib = write(tmp_path, "libfoo.so", elf_with_fatbin(fatbin(
        *(tu("gfx90a", kernels=(f"_Z1k{i}v",)) for i in range(47)), align=64)))
    result = run_cli("verify", "--target", "gfx906", str(lib), expect=4)
    assert problem_lines(result.stdout) == [
        f"✗ {lib}: no code object for gfx906 (47 bundles, all for gfx90a)"]
    assert "verify: FAIL — 1 of 1 files fail" in result.stdout


def test_some_bundles_missing_are_named_by_their_json_number(tmp_path: Path) -> None:
    lacking = {2, 5, 9}  # bundle numbers (1 is the first)
    bundles = [tu("gfx1030" if n in lacking else "gfx906", kernels=(f"_Z1k{n}v",))
               for n in range(1, 21)]
    lib = write(tmp_path, "libmixed.so", elf_with_fatbin(fatbin(*bundles, align=64)))
    text = run_cli("verify", "--target", "gfx906", str(lib), expect=4).stdout
    assert problem_lines(text) == [
        f"✗ {lib}: no code object for gfx906 in 3 of 20 bundles: #2, #5, #9 (they have "
        "gfx1030; #2 has kernels _Z1k2v)"]
    doc = json.loads(run_cli("verify", "--target", "gfx906", str(lib), "--json",
                             expect=4).stdout)
    by_number = {b["number"]: b for b in doc["files"][0]["bundles"]}
    assert {n for n, b in by_number.items() if b["missing"]} == lacking
    assert by_number[2]["kernels"] == ["_Z1k2v"] and by_number[2]["index"] == 1


@needs_mount
def test_verify_of_a_read_only_prefix_verifies_and_warns_it_is_not_recorded(
        small: list[str], tmp_path: Path) -> None:
    """A prefix on a read-only file system (an NFS export) is verified; that its result could
    not be recorded is a warning, not the verify's failure (it was one: exit 1)."""
    run_cli("build", *small, expect=0)
    prefix = tmp_path / "prefix"
    record = prefix / ".rocbuild" / "build-info.json"
    doc = json.loads(record.read_text())
    doc["verify"]["when"] = "2000-01-01T00:00:00+00:00"  # so this verify has news to record
    record.write_text(json.dumps(doc))
    info = record.read_bytes()
    result = _run_in_mount(f"mount --bind '{prefix}' '{prefix}'\n"
                           f"mount -o remount,bind,ro '{prefix}'",
                           ["verify", "--prefix", str(prefix), "--workdir",
                            str(tmp_path / "work")], tmp_path)
    assert result.returncode == 0, result.explain()
    assert "this verify is not recorded" in result.stderr and "read-only" in result.stderr
    assert record.read_bytes() == info
