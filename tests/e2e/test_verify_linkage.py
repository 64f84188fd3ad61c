"""verify's linkage check on real ELF files built here with cc: a shared library and a
program in a fake prefix, with and without an ``$ORIGIN`` RUNPATH, and a copy of the library
in a fake system directory (``--system-root``) for the case seen in a real prefix: its
rocminfo loaded Debian's libhsa-runtime64.so.1 instead of the one the stack installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rocbuild.checks import linkage
from rocbuild.checks.verify import to_json, verify_prefix
from rocbuild.model.elf import dynamic_info, open_source
from rocbuild.model.targets import parse_target
from tests.cli import run_cli
from tests.conftest import require_tool
from tests.unit.test_verify_scan import elf_with_fatbin, tu

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MULTIARCH = "usr/lib/x86_64-linux-gnu"


def cc(*args: str | Path) -> None:
    subprocess.run([require_tool("cc"), *map(str, args)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libfoo.so.1 (soname libfoo.so.1), and the program linked to it three ways."""
    out = tmp_path_factory.mktemp("cc")
    (out / "foo.c").write_text("int foo(void) { return 42; }\n")
    (out / "main.c").write_text("int foo(void);\nint main(void) { return foo() == 42 ? 0 : 1; }\n")
    cc("-shared", "-fPIC", "-Wl,-soname,libfoo.so.1", out / "foo.c", "-o", out / "libfoo.so.1")
    os.symlink("libfoo.so.1", out / "libfoo.so")
    cc(out / "main.c", f"-L{out}", "-lfoo", "-o", out / "app-bare")
    cc(out / "main.c", f"-L{out}", "-lfoo", "-Wl,-rpath,$ORIGIN/../lib",
       "-Wl,--enable-new-dtags", "-o", out / "app-origin")
    cc(out / "main.c", f"-L{out}", "-lfoo", "-Wl,-rpath,$ORIGIN/../lib",
       "-Wl,--disable-new-dtags", "-o", out / "app-rpath")
    return out


def system_root(root: Path, program: Path) -> Path:
    """A fake / holding the real C library (symlinked) in the multiarch folder, found
    through an ld.so.conf include, so only what the test puts there differs."""
    (root / MULTIARCH).mkdir(parents=True)
    (root / "etc/ld.so.conf.d").mkdir(parents=True)
    (root / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (root / "etc/ld.so.conf.d/multiarch.conf").write_text(f"# multiarch\n/{MULTIARCH}\n")
    with open_source(program) as src:
        dynamic = dynamic_info(src)
    assert dynamic is not None
    real = linkage.System()
    for name in dynamic.needed:
        found, _ = linkage.resolve(name, program, dynamic, linkage.host_abi(), real)
        if found is not None and name != "libfoo.so.1":
            os.symlink(os.path.realpath(found), root / MULTIARCH / name)
    return root


def prefix_with(tmp_path: Path, objects: Path, program: str) -> Path:
    """A prefix: lib/libfoo.so.1, bin/app, and a library with gfx906 code (no linkage)."""
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "bin").mkdir()
    shutil.copy(objects / "libfoo.so.1", prefix / "lib")
    os.symlink("libfoo.so.1", prefix / "lib" / "libfoo.so")
    shutil.copy(objects / program, prefix / "bin" / "app")
    (prefix / "lib" / "libgpu.so").write_bytes(elf_with_fatbin(tu("gfx906")))
    return prefix


def verify(prefix: Path, root: Path, *flags: str, expect: int) -> tuple[str, dict]:
    args = ("verify", "--prefix", str(prefix), "--target", "gfx906", "--no-smoke",
            "--system-root", str(root))
    # wide enough that no table cell wraps inside a path
    text = run_cli(*args, *flags, expect=expect, env={"COLUMNS": "400"}).stdout
    doc = json.loads(run_cli(*args, "--json", *flags, expect=expect).stdout)
    return text, doc


def flatten(text: str) -> str:
    """The table's text without its box lines and wrapping."""
    return " ".join(text.replace("│", " ").split())


def linkage_of(doc: dict, name: str) -> dict:
    return next(f for f in doc["linkage"]["files"] if f["path"].endswith(name))


def test_program_without_runpath_does_not_find_the_prefix_library(
        tmp_path: Path, objects: Path) -> None:
    prefix = prefix_with(tmp_path, objects, "app-bare")
    root = system_root(tmp_path / "root", prefix / "bin" / "app")
    text, doc = verify(prefix, root, expect=4)
    app = linkage_of(doc, "bin/app")
    assert app["needed"]["libfoo.so.1"] == "not found" and not app["ok"]
    assert app["runpath"] is None and app["rpath"] is None
    assert doc["ok"] is False and doc["linkage"]["ok"] is False
    # everything else the program needs came from the fake system's folder
    assert all(v.startswith(str(root / MULTIARCH)) for k, v in app["needed"].items()
               if k != "libfoo.so.1")
    assert "bin/app" in text and "libfoo.so.1" in text and "no RPATH/RUNPATH" in text
    assert "not found (the prefix has lib/libfoo.so.1: a RUNPATH such as $ORIGIN/../lib " \
        "finds it)" in flatten(text)
    assert "verify: FAIL — 1 file with broken linkage" in text


def test_origin_runpath_finds_the_prefix_library(tmp_path: Path, objects: Path) -> None:
    for program in ("app-origin", "app-rpath"):  # DT_RUNPATH, then the old DT_RPATH
        prefix = prefix_with(tmp_path / program, objects, program)
        root = system_root(tmp_path / program / "root", prefix / "bin" / "app")
        # a system copy must not win over the prefix's own (RUNPATH comes first)
        shutil.copy(objects / "libfoo.so.1", root / MULTIARCH)
        text, doc = verify(prefix, root, expect=0)
        app = linkage_of(doc, "bin/app")
        assert app["needed"]["libfoo.so.1"] == str(prefix / "bin/../lib/libfoo.so.1"), program
        via = {d["name"]: d["via"] for d in app["details"]}
        assert via["libfoo.so.1"] == ("RUNPATH" if program == "app-origin" else "RPATH")
        assert doc["ok"] is True and doc["linkage"]["checked"] == 2  # app and libfoo
        assert "all resolve without LD_LIBRARY_PATH" in text


def test_library_of_the_stack_taken_from_outside_the_prefix_fails(
        tmp_path: Path, objects: Path) -> None:
    """The rocminfo case: the name exists in the prefix, the loader finds the system's."""
    prefix = prefix_with(tmp_path, objects, "app-bare")
    root = system_root(tmp_path / "root", prefix / "bin" / "app")
    shutil.copy(objects / "libfoo.so.1", root / MULTIARCH)
    text, doc = verify(prefix, root, expect=4)
    app = linkage_of(doc, "bin/app")
    assert app["needed"]["libfoo.so.1"] == "outside the prefix, the prefix has its own copy"
    detail = next(d for d in app["details"] if d["name"] == "libfoo.so.1")
    assert detail["resolved"] == str(root / MULTIARCH / "libfoo.so.1")
    assert detail["own_copy"] == str(prefix / "lib/libfoo.so.1")
    assert detail["via"] == "ld.so.conf"
    flat = flatten(text)
    assert "outside the prefix, the prefix has its own copy (lib/libfoo.so.1)" in flat
    # a named file outside the prefix may take the system's copy: the rule is the stack's
    named = run_cli("verify", "--target", "gfx906", "--prefix", str(prefix), "--system-root",
                    str(root), "--json", str(objects / "app-bare"), expect=4).stdout
    outside = linkage_of(json.loads(named), "app-bare")
    assert outside["ok"] and outside["needed"]["libfoo.so.1"] == str(root / MULTIARCH /
                                                                     "libfoo.so.1")


def test_recipe_opt_out_is_shown_not_failed(tmp_path: Path, objects: Path) -> None:
    """install.runpath = false (with a reason): its files are resolved and shown, not failed
    (finish passes them from the install manifests)."""
    prefix = prefix_with(tmp_path, objects, "app-bare")
    root = system_root(tmp_path / "root", prefix / "bin" / "app")
    targets = (parse_target("gfx906"),)
    system = linkage.System(root)
    assert not verify_prefix(prefix, targets, system=system).ok
    report = verify_prefix(prefix, targets, system=system,
                           linkage_exempt={prefix / "bin" / "app": "loaded by the ICD loader"})
    assert report.ok and report.linkage is not None
    app = linkage_of(to_json(report), "bin/app")
    assert app["exempt"] == "loaded by the ICD loader" and app["needed"]["libfoo.so.1"] == \
        "not found"
