"""The base audit's read of a library (model/codeaudit.py): bundle headers only, plain and
compressed (zlib, zstd), the targets each bundle lacks, and the memo by file identity."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocbuild.checks.verify import Verdict, verify_file
from rocbuild.model.codeaudit import CodeMemo, LibraryCode, identity, read_library
from rocbuild.model.targets import parse_target
from tests.unit.test_verify_scan import ccob, elf_with_fatbin, tu

GFX906 = (parse_target("gfx906"),)


def test_headers_of_plain_and_compressed_bundles(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    inner = tu("gfx906", "gfx90a")
    blob = (tu("gfx906") + ccob(tu("gfx908")) +
            ccob(inner, version=3, method=1, data=zstandard.ZstdCompressor().compress(inner)))
    library = tmp_path / "librocblas.so.4"
    library.write_bytes(elf_with_fatbin(blob))
    code = read_library(library)
    assert code.bundles == (("gfx906",), ("gfx908",), ("gfx906", "gfx90a"))
    assert [str(t) for t in code.lacking(GFX906)] == ["gfx906"]
    assert code.describe(GFX906) == "3 bundles, 1 without gfx906 (they have gfx908)"
    assert code.lacking((parse_target("gfx906:sramecc+"),)) != []  # the gfx908 bundle


def test_a_compressed_bundle_is_read_only_as_far_as_its_header(tmp_path: Path) -> None:
    """Its checksum (of the whole decompressed bundle) is wrong: a full read fails it, a
    headers-only read never gets that far; this is what keeps a 600 MB library cheap."""
    library = tmp_path / "lib.so"
    library.write_bytes(elf_with_fatbin(ccob(tu("gfx906"), digest=1)))
    assert read_library(library).bundles == (("gfx906",),)
    assert verify_file(library, GFX906).verdict is Verdict.CORRUPT


def test_files_without_code(tmp_path: Path) -> None:
    text = tmp_path / "librocblas.so.4"
    text.write_text("x")  # a placeholder, not ELF
    assert read_library(text) == LibraryCode()
    assert not read_library(text).has_code


def test_the_memo_is_keyed_by_file_identity(tmp_path: Path) -> None:
    library = tmp_path / "lib.so"
    library.write_bytes(elf_with_fatbin(tu("gfx908")))
    memo = CodeMemo()
    first = memo.code_of(library)
    record = tmp_path / "code-audit.json"
    record.write_text(__import__("json").dumps(memo.to_json()))
    again = CodeMemo.read(record)
    assert again.known == {identity(library): first} and again.fresh == {}
    assert again.code_of(library) == first and again.fresh == {}
    library.write_bytes(elf_with_fatbin(tu("gfx906") + b"\0" * 64))  # another size: read again
    assert again.code_of(library).bundles == (("gfx906",),)
    os.remove(library)
    assert again.to_json()["files"] == {}  # a removed file drops out
    assert CodeMemo.read(tmp_path / "missing.json").known == {}
    record.write_text("{garbage")
    assert CodeMemo.read(record).known == {}
