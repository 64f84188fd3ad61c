"""Generic processors: a code object for gfx9-generic (LLVM 19 and later, code object v6) runs
on every member of its family, gfx906 among them, and the ROCm 6.4 runtime loads it on a
device whose own processor has no code object in the bundle (clr rocm-6.4.3
hip_comgr_helper.cpp GenericTargetMapping; ROCr 6.4.3 isa.cpp). Debian builds its largest
library that way: librocsolver0 carries gfx9-generic, not gfx906. So verify and the base audit
accept a generic code object that covers the asked target, say so on the line ("gfx906 via
gfx9-generic"), and refuse one that covers it only in LLVM's table (gfx1152 under
gfx11-generic: 6.4's HIP runtime does not map it). Real code objects from clang-19 (Debian's
hipcc, clang 15, knows no generic processor); skipped without clang-19 and lld-19.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.cli import run_cli, run_flags
from tests.e2e.test_base import amd_flags, debian_tree, plan_json
from tests.support import gpulibs

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

WIDE = {"COLUMNS": "250"}


def verify(library: Path, target: str, expect: int) -> tuple[dict, str]:
    doc = json.loads(run_cli("verify", "--json", "--target", target, str(library),
                             expect=expect).stdout)
    text = run_cli("verify", "--target", target, str(library), expect=expect, env=WIDE).stdout
    return doc, text


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "zstd"])
def test_a_generic_code_object_serves_the_members_the_64_runtime_maps(compress: bool) -> None:
    if compress:
        pytest.importorskip("zstandard", reason="the zstandard module is not installed")
    library = gpulibs.generic(("gfx9-generic", "gfx11-generic", "gfx908"), compress)
    doc, text = verify(library, "gfx906", expect=0)
    (result,) = doc["files"]
    assert result["verdict"] == "pass"
    assert result["targets_found"] == ["gfx11-generic", "gfx9-generic", "gfx908"]
    assert result["via_generic"] == [{"target": "gfx906", "generic": "gfx9-generic",
                                      "bundles": 1}]
    assert (f"✓ {library}: gfx906 via gfx9-generic in 1 of 1 bundle (the ROCm 6.4 runtime "
            "loads a gfx9-generic code object on a gfx906 that has none of its own)") in text
    assert "verify: PASS" in text
    # a processor of its own code object: no generic involved
    doc, text = verify(library, "gfx908", expect=0)
    assert doc["files"][0]["via_generic"] == [] and " via " not in text
    # gfx1100 through gfx11-generic; gfx1152 is in LLVM's table, not in 6.4's HIP runtime's
    # (clang-19 has no gfx9-4-generic, whose gfx940 is the same case)
    assert verify(library, "gfx1100", expect=0)[0]["files"][0]["via_generic"][0]["generic"] \
        == "gfx11-generic"
    doc, text = verify(library, "gfx1152", expect=4)
    assert ("no code object for gfx1152 (1 bundle, for gfx11-generic, gfx9-generic, gfx908)"
            in text), text
    # another family is not covered
    doc, text = verify(library, "gfx1030", expect=4)
    assert doc["files"][0]["verdict"] == "fail" and "no code object for gfx1030" in text


def test_a_generic_code_object_pinned_to_xnack_on_does_not_serve_a_gfx906() -> None:
    """The features hold for a generic as for a processor: an MI50 runs with xnack off."""
    library = gpulibs.generic(("gfx9-generic:xnack+",))
    doc, text = verify(library, "gfx906", expect=4)
    assert doc["files"][0]["targets_found"] == ["gfx9-generic:xnack+"]
    assert "no code object for gfx906" in text
    verify(library, "gfx906:xnack+", expect=0)


def test_embedded_generic_code_objects_and_one_without_a_generic_version() -> None:
    """ROCr's way (whole code objects in .rodata): the e_flags name the generic processor
    (0x51) and its generic version (the top byte, 1); with the version cleared, neither ROCr
    nor the HIP runtime takes it for a generic, so it loads on no device."""
    code = gpulibs.generic_code_object("gfx9-generic")
    (e_flags,) = struct.unpack_from("<I", code, 48)
    assert (code[8], e_flags & 0xFF, e_flags >> 24) == (4, 0x51, 1)  # v6, gfx9-generic, 1
    good = gpulibs.embedding("embedded-generic", (code,))
    doc, text = verify(good, "gfx906", expect=0)
    assert doc["files"][0]["via_generic"][0]["generic"] == "gfx9-generic"
    assert "gfx906 via gfx9-generic in its embedded code objects" in text
    cleared = bytearray(code)
    struct.pack_into("<I", cleared, 48, e_flags & 0x00FFFFFF)
    bad = gpulibs.embedding("embedded-generic-v0", (bytes(cleared),))
    doc, text = verify(bad, "gfx906", expect=4)
    assert doc["files"][0]["targets_found"] == [
        "gfx9-generic (without a generic version: loads on no device)"]


def test_the_base_audit_takes_a_compressed_generic_rocsolver(tmp_path: Path) -> None:
    """Debian's layout with its rocSOLVER as a zstd bundle (headers only, as plan reads a
    base): taken for gfx906 through gfx9-generic; asked for gfx1100 as well, the line names
    what it lacks and that gfx906 came through the generic."""
    pytest.importorskip("zstandard", reason="the zstandard module is not installed")
    base = debian_tree(tmp_path)
    gpulibs.place(base, {"lib/x86_64-linux-gnu/librocsolver.so.0": gpulibs.generic(
        ("gfx9-generic", "gfx10-3-generic", "gfx908"), True)})
    flags = amd_flags(tmp_path, base)
    plan = plan_json(flags, "--profile", "pytorch")
    assert "rocsolver" in plan["base"]["taken"]
    audit = {a["library"]: a for a in plan["base"]["audit"]}
    rocsolver = audit["lib/x86_64-linux-gnu/librocsolver.so.0"]
    assert (rocsolver["carries"], rocsolver["via"]) == (
        "1 bundle, all with gfx906 via gfx9-generic", {"gfx906": "gfx9-generic"})
    wide = [*flags[:2], "--target", "gfx906,gfx1030", *flags[4:]]
    text = run_flags(wide, "plan", "--profile", "pytorch", expect=0, env=WIDE).stdout
    assert ("✓ lib/x86_64-linux-gnu/librocsolver.so.0 (rocsolver): 1 bundle, all with gfx906 "
            "via gfx9-generic, gfx1030 via gfx10-3-generic") in text, text
