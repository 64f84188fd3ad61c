"""verify on libraries compiled by real HIP compilers, without a GPU.

Debian's hipcc (HIP_PLATFORM=amd, since nvcc may be installed too) builds gfx906, gfx1030 and
gfx906:xnack+ code objects into libraries with several translation units, one offload bundle
each. Compressed bundles are made two ways: by wrapping the real bundles in CCOB headers here
(zlib, all three header versions; zstd when the zstandard module is installed), and, when
clang-19 with lld-19 is installed, by the compiler itself (``--offload-compress``, zstd), which
is also read through clang-offload-bundler-19 as the prefix's bundler.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from rocbuild.checks import smoke
from rocbuild.checks.verify import (
    BUNDLE_MAGIC,
    Decoders,
    Verdict,
    bundler_lister,
    default_decoders,
    verify_file,
)
from rocbuild.cli.main import main
from rocbuild.model.targets import parse_target_list
from tests.cli import run_cli
from tests.conftest import require_tool
from tests.unit.test_verify_scan import ccob, fatbin

pytestmark = pytest.mark.e2e

KERNEL = """#include <hip/hip_runtime.h>
__global__ void {name}(float* x) {{ x[threadIdx.x] += {value}.0f; }}
extern "C" void launch_{name}(float* x) {{ {name}<<<1, 64>>>(x); }}
"""
HIP_ENV = {**os.environ, "HIP_PLATFORM": "amd"}
CLANG19 = Path("/usr/bin/clang++-19")
BUNDLER19 = Path("/usr/lib/llvm-19/bin/clang-offload-bundler")
DEVICE_LIBS = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")


def targets(text: str) -> tuple:
    return parse_target_list([text])


def compile_all(folder: Path, commands: Sequence[Sequence[str]]) -> None:
    """Run independent compiles two at a time (the machine has two cores)."""
    pending = list(commands)
    while pending:
        batch, pending = pending[:2], pending[2:]
        procs = [subprocess.Popen(list(c), cwd=folder, env=HIP_ENV, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for c in batch]
        for command, proc in zip(batch, procs, strict=True):
            out, _ = proc.communicate(timeout=300)
            assert proc.returncode == 0, f"{' '.join(command)} failed:\n{out}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every library the tests read, compiled once for the module."""
    hipcc = require_tool("hipcc")
    folder = tmp_path_factory.mktemp("hip")
    for name, value in (("ka", 1), ("kb", 2), ("kc", 3)):
        (folder / f"{name}.hip").write_text(KERNEL.format(name=name, value=value))
    (folder / "hello.hip").write_text(smoke.HELLO_HIP)
    arch = "--offload-arch="
    shared = ["-fPIC", "-shared"]
    compile_all(folder, [
        [hipcc, f"{arch}gfx906", f"{arch}gfx1030", *shared, "ka.hip", "kb.hip", "kc.hip",
         "-o", "libmulti.so"],
        [hipcc, f"{arch}gfx1030", *shared, "ka.hip", "kb.hip", "-o", "lib1030.so"],
        [hipcc, f"{arch}gfx906:xnack+", *shared, "ka.hip", "-o", "libxnack.so"],
        # one library where the third translation unit was built for gfx1030 only
        [hipcc, f"{arch}gfx906", "-fPIC", "-c", "ka.hip", "-o", "ka.o"],
        [hipcc, f"{arch}gfx906", "-fPIC", "-c", "kb.hip", "-o", "kb.o"],
        [hipcc, f"{arch}gfx1030", "-fPIC", "-c", "kc.hip", "-o", "kc.o"],
        [hipcc, f"{arch}gfx906", "hello.hip", "-o", "hello"],
    ])
    compile_all(folder, [[hipcc, f"{arch}gfx906", "-shared", "ka.o", "kb.o", "kc.o",
                          "-o", "libmixed.so"]])
    return folder


def dump_fatbin(library: Path, out: Path) -> bytes:
    """The .hip_fatbin section as binutils extracts it."""
    objcopy = require_tool("objcopy")
    subprocess.run([objcopy, "--dump-section", f".hip_fatbin={out}", str(library), "/dev/null"],
                   check=True, capture_output=True)
    return out.read_bytes()


def real_bundles(library: Path, tmp_path: Path) -> list[bytes]:
    """The library's bundles (uncompressed, 4 KiB aligned), each cut where its last entry
    ends, as the header says: u64 count, then u64 offset, u64 size, u64 id length, id."""
    blob = dump_fatbin(library, tmp_path / "fatbin.bin")
    bundles = []
    for start in (i for i in range(0, len(blob), 4096) if blob.startswith(BUNDLE_MAGIC, i)):
        (count,) = struct.unpack_from("<Q", blob, start + 24)
        pos, end = start + 32, 0
        for _ in range(count):
            offset, size, id_len = struct.unpack_from("<QQQ", blob, pos)
            pos += 24 + id_len
            end = max(end, offset + size)
        bundles.append(blob[start:start + end])
    return bundles


def elf_around(blob: bytes, tmp_path: Path, name: str) -> Path:
    """A real ELF object (made by objcopy) whose .hip_fatbin holds ``blob``."""
    objcopy = require_tool("objcopy")
    raw = tmp_path / f"{name}.bin"
    raw.write_bytes(blob)
    out = tmp_path / name
    subprocess.run([objcopy, "-I", "binary", "-O", "elf64-x86-64",
                    "--rename-section", ".data=.hip_fatbin", raw.name, str(out)],
                   cwd=tmp_path, check=True, capture_output=True)
    return out


# --- verdicts on hipcc output -----------------------------------------------------------------
@pytest.mark.slow
def test_every_translation_unit_is_a_bundle(built: Path) -> None:
    result = verify_file(built / "libmulti.so", targets("gfx906"))
    assert result.verdict is Verdict.PASS, result.problems
    assert [b.kernels for b in result.bundles] == [("_Z2kaPf",), ("_Z2kbPf",), ("_Z2kcPf",)]
    assert result.targets_found == ("gfx1030", "gfx906")
    assert all(b.amdgcn[0].id.startswith("hipv4-amdgcn-amd-amdhsa--") for b in result.bundles)
    assert verify_file(built / "libmulti.so", targets("gfx1030,gfx906:xnack-")).verdict \
        is Verdict.PASS
    missing = verify_file(built / "libmulti.so", targets("gfx90a"))
    # one line for the file, not one per bundle
    assert missing.verdict is Verdict.FAIL and missing.problems == (
        "no code object for gfx90a (3 bundles, all for gfx1030, gfx906)",)


def test_gfx1030_only_library_fails(built: Path) -> None:
    result = verify_file(built / "lib1030.so", targets("gfx906"))
    assert result.verdict is Verdict.FAIL
    second = result.bundles[1].offset  # after the first bundle, padded to 4 KiB
    assert second % 4096 == 0 and second > 0
    assert result.problems == ("no code object for gfx906 (2 bundles, all for gfx1030)",)


def test_xnack_plus_only_fails_an_xnack_minus_request(built: Path) -> None:
    library = built / "libxnack.so"
    assert verify_file(library, targets("gfx906:xnack+")).verdict is Verdict.PASS
    for request in ("gfx906:xnack-", "gfx906"):
        result = verify_file(library, targets(request))
        assert result.verdict is Verdict.FAIL, request
        assert result.targets_found == ("gfx906:xnack+",)
        assert result.problems[0].endswith("(1 bundle, for gfx906:xnack+)")


def test_one_translation_unit_without_gfx906_is_named(built: Path) -> None:
    result = verify_file(built / "libmixed.so", targets("gfx906"))
    assert result.verdict is Verdict.FAIL
    assert len(result.bundles) == 3
    assert result.bundles[2].number == 3
    assert result.problems == ("no code object for gfx906 in 1 of 3 bundles: #3 (they have "
                               "gfx1030; #3 has kernels _Z2kcPf)",)


def test_hip_program_and_files_without_gpu_code(built: Path, tmp_path: Path) -> None:
    assert verify_file(built / "hello", targets("gfx906")).verdict is Verdict.PASS
    plain = tmp_path / "true"
    shutil.copy(shutil.which("true") or "/bin/true", plain)
    result = verify_file(plain, targets("gfx906"))
    assert (result.verdict, result.note) == (Verdict.NO_GPU_CODE, "no .hip_fatbin section")
    assert verify_file(built / "ka.hip", targets("gfx906")).verdict is Verdict.NOT_ELF


@pytest.mark.slow
def test_smoke_hello_world_compiles_with_hipcc(built: Path, tmp_path: Path) -> None:
    """The smoke test's compile command and source, with Debian's hipcc as the prefix's."""
    test = next(t for t in smoke.plan_smoke(Path("/usr"), "gfx906") if t.name == "hip-hello")
    for name, text in test.files.items():
        (tmp_path / name).write_text(text)
    subprocess.run(test.commands[0], cwd=tmp_path, env=smoke.smoke_env(Path("/usr")),
                   check=True, capture_output=True)
    assert verify_file(tmp_path / "hello", targets("gfx906")).verdict is Verdict.PASS


def test_smoke_runner_reports_exit_and_output(tmp_path: Path) -> None:
    """The runner on real child processes (no GPU needed): exit code and output tail."""
    test = smoke.SmokeTest("fails", (("sh", "-c", "echo one; echo two >&2; exit 3"),),
                           lambda out: (True, out))
    lines: list[str] = []
    result = smoke.run_test(test, tmp_path, {"PATH": "/usr/bin:/bin"}, lines.append)
    assert not result.ok and result.detail == "exit 3: one | two"
    assert lines == ["+ sh -c 'echo one; echo two >&2; exit 3'"]
    missing = smoke.SmokeTest("missing", (("/nonexistent/rocminfo",),), lambda out: (True, out))
    result = smoke.run_test(missing, tmp_path, {}, lines.append)
    assert not result.ok and result.detail.startswith("exit 127: cannot run /nonexistent/rocminfo")


# --- the CLI on an installed-looking prefix ---------------------------------------------------
def test_cli_prefix_table(built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = tmp_path / "rocm"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "bin").mkdir()
    shutil.copy(built / "libmulti.so", prefix / "lib" / "libmulti.so.1")
    os.symlink("libmulti.so.1", prefix / "lib" / "libmulti.so")
    shutil.copy(built / "libmixed.so", prefix / "lib" / "libggml-hip.so")
    shutil.copy(built / "hello", prefix / "bin" / "hello")
    result = run_cli("verify", "--prefix", str(prefix), "--target", "gfx906", "--no-smoke")
    code, out = result.returncode, result.stdout
    print(out)  # the table, for `pytest -s`
    assert code == 4
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") == 6}
    assert set(rows) == {"lib/libggml-hip.so", "lib/libmulti.so.1", "bin/hello"}
    assert "fail" in rows["lib/libggml-hip.so"] and "gfx1030, gfx906" in rows["lib/libggml-hip.so"]
    assert "pass" in rows["lib/libmulti.so.1"] and "pass" in rows["bin/hello"]
    assert re.search(r"lib/libggml-hip.so: no code object for gfx906 in 1 of 3 bundles: #3 "
                     r"\(they have gfx1030; #3 has kernels _Z2kcPf\)", out)
    assert "verify: FAIL — 1 of 3 files fail" in out
    (prefix / "lib" / "libggml-hip.so").unlink()
    assert main(["verify", "--prefix", str(prefix), "--target", "gfx906", "--no-smoke"]) == 0


# --- compressed bundles -----------------------------------------------------------------------
def test_zlib_ccob_around_real_bundles(built: Path, tmp_path: Path) -> None:
    bundles = real_bundles(built / "libmulti.so", tmp_path)
    assert len(bundles) == 3
    blob = fatbin(ccob(bundles[0], 1), ccob(bundles[1], 2), ccob(bundles[2], 3))
    result = verify_file(elf_around(blob, tmp_path, "libz.so"), targets("gfx906"))
    assert result.verdict is Verdict.PASS, result.problems
    assert [b.compression for b in result.bundles] == ["zlib"] * 3
    assert [b.kernels for b in result.bundles] == [("_Z2kaPf",), ("_Z2kbPf",), ("_Z2kcPf",)]
    # a mix of compressed and plain bundles, back to back
    mixed = fatbin(bundles[0], ccob(bundles[1], 2), align=1)
    assert verify_file(elf_around(mixed, tmp_path, "libmix.so"), targets("gfx906")).verdict \
        is Verdict.PASS


def test_zstd_ccob_with_zstandard(built: Path, tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard", reason="the zstandard module is not installed")
    bundles = real_bundles(built / "lib1030.so", tmp_path)
    blob = fatbin(*(ccob(b, 2, method=1, data=zstandard.ZstdCompressor().compress(b))
                    for b in bundles))
    library = elf_around(blob, tmp_path, "libzstd.so")
    result = verify_file(library, targets("gfx906"), default_decoders(None))
    assert result.verdict is Verdict.FAIL and result.targets_found == ("gfx1030",)
    assert [b.compression for b in result.bundles] == ["zstd", "zstd"]


def test_corrupt_compressed_payload_of_a_real_bundle(built: Path, tmp_path: Path) -> None:
    bundle = real_bundles(built / "libmulti.so", tmp_path)[0]
    data = bytearray(zlib.compress(bundle))
    data[len(data) // 2] ^= 0xFF
    result = verify_file(elf_around(ccob(bundle, 2, data=bytes(data)), tmp_path, "bad.so"),
                         targets("gfx906"))
    assert result.verdict is Verdict.CORRUPT
    assert result.problems[0].startswith("corrupt: compressed bundle #1 at 0x0: ")


@pytest.fixture(scope="module")
def clang19_compressed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library compiled with ``--offload-compress`` by clang-19 (zstd, CCOB version 2)."""
    if not (CLANG19.exists() and shutil.which("ld.lld-19") and DEVICE_LIBS.is_dir()):
        pytest.skip("clang-19 with lld-19 (Debian clang-19, lld-19) is not installed; "
                    "Debian's hipcc (clang 15) cannot compress bundles")
    folder = tmp_path_factory.mktemp("clang19")
    for name, value in (("ka", 1), ("kb", 2)):
        (folder / f"{name}.hip").write_text(KERNEL.format(name=name, value=value))
    compile_all(folder, [[str(CLANG19), "-x", "hip", "--offload-arch=gfx906",
                          "--offload-arch=gfx1030", "--offload-compress", "-fPIC", "-shared",
                          "--rocm-path=/usr", f"--rocm-device-lib-path={DEVICE_LIBS}",
                          "ka.hip", "kb.hip", "-o", "libcompressed.so"]])
    return folder / "libcompressed.so"


@pytest.mark.slow
def test_compiler_compressed_library_with_zstandard(clang19_compressed: Path) -> None:
    pytest.importorskip("zstandard", reason="the zstandard module is not installed")
    result = verify_file(clang19_compressed, targets("gfx906"), default_decoders(None))
    assert result.verdict is Verdict.PASS, result.problems
    assert [(b.compression, b.kernels) for b in result.bundles] == [
        ("zstd", ("_Z2kaPf",)), ("zstd", ("_Z2kbPf",))]


def test_compiler_compressed_library_through_the_prefix_bundler(
        clang19_compressed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    if not BUNDLER19.exists():
        pytest.skip("clang-offload-bundler-19 (Debian clang-tools-19) is not installed")
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if it were not installed
    decoders = Decoders(lister=bundler_lister(BUNDLER19))
    result = verify_file(clang19_compressed, targets("gfx906"), decoders)
    assert result.verdict is Verdict.PASS and result.targets_found == ("gfx1030", "gfx906")
    assert verify_file(clang19_compressed, targets("gfx90a"), decoders).verdict is Verdict.FAIL
    # the CLI finds <prefix>/lib/llvm/bin/clang-offload-bundler by itself
    prefix = tmp_path / "rocm"
    (prefix / "lib" / "llvm" / "bin").mkdir(parents=True)
    os.symlink(BUNDLER19, prefix / "lib" / "llvm" / "bin" / "clang-offload-bundler")
    # the bundler runs the llvm-objcopy beside it, as in a real prefix (a fresh Debian 12 has
    # no unversioned llvm-objcopy on PATH to fall back on)
    os.symlink(BUNDLER19.with_name("llvm-objcopy"),
               prefix / "lib" / "llvm" / "bin" / "llvm-objcopy")
    argv = ["verify", "--target", "gfx906", "--prefix", str(prefix), str(clang19_compressed)]
    assert main(argv) == 0, capsys.readouterr().out
    assert "2 (zstd)" in capsys.readouterr().out
    # and without any zstd reader: unknown, exit 4, the reason in one line per bundle
    (prefix / "lib" / "llvm" / "bin" / "clang-offload-bundler").unlink()
    assert main(argv) == 4
    out = capsys.readouterr().out
    assert "unknown" in out and "compressed with zstd; cannot read without zstandard or " \
        "clang-offload-bundler" in out.replace("\n", " ")


# --- broken files, cut from real ones -----------------------------------------------------------
def fatbin_offset(library: Path) -> int:
    """The file offset of .hip_fatbin, as readelf reports it."""
    readelf = require_tool("readelf")
    out = subprocess.run([readelf, "-S", "-W", str(library)], check=True, capture_output=True,
                         text=True).stdout
    line = next(ln for ln in out.splitlines() if " .hip_fatbin " in ln)
    fields = line.split("]", 1)[1].split()
    return int(fields[3], 16)  # name, type, address, offset


def test_truncated_and_corrupt_real_files(built: Path, tmp_path: Path) -> None:
    data = (built / "libmulti.so").read_bytes()
    cases: dict[str, bytes] = {
        "half.so": data[: len(data) // 2],
        "head.so": data[:10],
    }
    start = fatbin_offset(built / "libmulti.so")
    second = verify_file(built / "libmulti.so", targets("gfx906")).bundles[1].offset
    broken_count = bytearray(data)  # entry count of the second bundle
    broken_count[start + second + 24:start + second + 32] = b"\xff" * 8
    cases["count.so"] = bytes(broken_count)
    zeroed = bytearray(data)
    size = len(dump_fatbin(built / "libmulti.so", tmp_path / "fb.bin"))
    zeroed[start:start + size] = bytes(size)
    cases["zeroed.so"] = bytes(zeroed)
    expected = {
        "half.so": "runs past the end of the file",
        "head.so": "ELF header is cut short",
        "count.so": f"bundle #2 at {second:#x}: entry count",
        "zeroed.so": "no offload bundle in .hip_fatbin",
    }
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
        result = verify_file(tmp_path / name, targets("gfx906"))
        assert result.verdict is Verdict.CORRUPT, name
        assert expected[name] in " ".join(result.problems), (name, result.problems)
