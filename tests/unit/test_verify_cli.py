"""`rocbuild verify` through the real CLI on files built by the tests: exit codes, the
table, the JSON document, and the prefix walk (symlinks, lib64, bin)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rocbuild.cli.main import main
from tests.unit.test_verify_scan import elf_with_fatbin, make_elf, tu
from tests.unit.test_verify_smoke import host_tree


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """lib/ with a versioned library and its symlink chain, lib64 -> lib, bin/ with a program
    and a plain tool, and files that hold no GPU code."""
    root = tmp_path / "opt" / "rocm"
    lib, bin_dir = root / "lib", root / "bin"
    lib.mkdir(parents=True)
    bin_dir.mkdir()
    (lib / "libggml-hip.so.0.1").write_bytes(elf_with_fatbin(tu("gfx906", kernels=("k1",))
                                                             + tu("gfx906", kernels=("k2",))))
    os.symlink("libggml-hip.so.0.1", lib / "libggml-hip.so.0")
    os.symlink("libggml-hip.so.0", lib / "libggml-hip.so")
    os.symlink("lib", root / "lib64")
    (lib / "cmake").mkdir()
    (lib / "cmake" / "config.cmake").write_text("set(x 1)\n")
    (bin_dir / "llama-bench").write_bytes(elf_with_fatbin(tu("gfx906", "gfx1030")))
    (bin_dir / "tool").write_bytes(make_elf([(".text", 1, b"\x90", 0)]))
    return root


def gpu_free_host(tmp_path: Path) -> list[str]:
    return ["--gpu-root", str(host_tree(tmp_path / "host", 0, kfd=False))]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["verify", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_prefix_passes_and_walks_each_file_once(prefix: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--prefix", str(prefix), "--target", "gfx906",
                       *gpu_free_host(tmp_path))
    assert code == 0, out
    assert "bin/llama-bench" in out and "lib/libggml-hip.so.0.1" in out
    assert out.count("libggml-hip") == 1  # not via the symlinks, not again via lib64
    assert "2 other files hold no GPU code" in out
    assert "verify: PASS" in out
    assert "smoke tests skipped: no AMD GPU (no /dev/kfd)" in out


def test_prefix_json_document(prefix: Path, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--prefix", str(prefix), "--target", "gfx906", "--json",
                       *gpu_free_host(tmp_path))
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True and doc["schema"] == 2
    assert doc["targets"] == ["gfx906"] and doc["prefix"] == str(prefix)
    # lib/, lib64/ (the same folder here), then bin/
    assert [Path(f["path"]).name for f in doc["files"]] == ["libggml-hip.so.0.1", "llama-bench"]
    lib = doc["files"][0]
    assert lib["verdict"] == "pass" and lib["targets_found"] == ["gfx906"]
    assert [(b["kernels"], b["kernel_count"]) for b in lib["bundles"]] == [
        (["k1"], 1), (["k2"], 1)]
    assert lib["bundles"][0]["entries"][1] == {
        "id": "hipv4-amdgcn-amd-amdhsa--gfx906", "target": "gfx906",
        "size": lib["bundles"][0]["entries"][1]["size"]}
    assert doc["skipped_without_gpu_code"] == 2 and doc["tensile"] == []
    assert doc["smoke"] == {"ok": True, "skipped": "smoke tests skipped: no AMD GPU (no /dev/kfd)",
                            "results": []}


def test_prefix_fails_for_a_missing_target(prefix: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--prefix", str(prefix), "--target", "gfx1030", "--no-smoke")
    assert code == 4
    assert "lib/libggml-hip.so.0.1: no code object for gfx1030 (2 bundles, all for gfx906)" \
        in out
    assert "verify: FAIL — 1 of 2 files fail" in out
    assert "smoke tests skipped: --no-smoke" in out


def test_empty_prefix_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty" / "lib").mkdir(parents=True)
    code, out, _ = run(capsys, "--prefix", str(tmp_path / "empty"), "--target", "gfx906")
    assert code == 4 and "no library or program with GPU code under" in out
    assert "smoke tests not run: fix the problems above first" in out


def test_paths_each_named_file_gets_a_row(prefix: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hi")
    code, out, _ = run(capsys, "--target", "gfx906", str(prefix / "lib" / "libggml-hip.so"),
                       str(notes), "--json")
    doc = json.loads(out)
    assert code == 4  # a named file without GPU code does not carry gfx906
    assert [(Path(f["path"]).name, f["verdict"]) for f in doc["files"]] == [
        ("libggml-hip.so", "pass"), ("notes.txt", "not-elf")]
    assert doc["smoke"] is None


def test_paths_folder_scan(prefix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--target", "gfx906", str(prefix / "bin"))
    assert code == 0 and "llama-bench" in out and "1 other file holds no GPU code" in out
    assert "smoke" not in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--target", "gfx906", "--prefix", "/nonexistent/prefix"],
     "prefix /nonexistent/prefix does not exist"),
    (["--target", "gfx907", "/tmp"], "'gfx907' is not a GPU processor LLVM knows"),
    (["--target", "gfx906", "/nonexistent/lib.so"], "path /nonexistent/lib.so does not exist"),
    (["--target", "gfx906", "--model", "/nonexistent.gguf"], "--model /nonexistent.gguf"),
    (["--target", "gfx906", "--model", "/etc/hostname", "/tmp"], "cannot be combined"),
])
def test_bad_input_exits_2(argv: list[str], message: str,
                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err + out


def test_targets_default_to_the_recipes(prefix: Path, tmp_path: Path, write_recipes,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    recipes = write_recipes(stack="""
        [stack]
        version = "6.4.3"
        targets = ["gfx1030"]
        prefix = "/opt/rocm"
    """)
    code, out, _ = run(capsys, "--recipes", str(recipes), "--prefix", str(prefix), "--json",
                       "--no-smoke")
    assert code == 4 and json.loads(out)["targets"] == ["gfx1030"]
