"""Artifacts of the binary cache: pack, check and unpack (real files and real zstd tars in
tmp_path), and the folder store's push and resumable pull."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import tarfile
from pathlib import Path

import pytest
import zstandard

from rocbuild.run.cache.artifacts import (
    ArtifactRefused,
    FileEntry,
    Manifest,
    Relocation,
    check_entries,
    pack,
    relocation_problems,
    sha256_file,
    unpack,
)
from rocbuild.run.cache.cache_store import CacheUnavailable, FolderStore, pull_archive


def make_prefix(root: Path) -> Path:
    prefix = root / "opt" / "stack"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "lib" / "libx.so.1").write_bytes(b"\x7fELF\0\0 RUNPATH=$ORIGIN/../lib\0")
    (prefix / "lib" / "libx.so").symlink_to("libx.so.1")
    tool = prefix / "bin" / "tool"
    tool.write_text("#!/bin/sh\necho tool\n")
    tool.chmod(0o755)
    (prefix / "lib" / "x.pc").write_text(f"prefix={prefix}\nlibdir=${{prefix}}/lib\n"
                                         f"other={prefix}-old/lib\n")
    (prefix / "llvm").symlink_to(prefix / "lib")  # absolute, inside the prefix
    return prefix


FILES = ["bin/tool", "lib/libx.so", "lib/libx.so.1", "lib/x.pc", "llvm"]


def manifest_for(prefix: Path, entries: list[FileEntry], archive: Path) -> Manifest:
    return Manifest(component="x", key="k" * 64, inputs={"recipe": "r"}, targets=("gfx906",),
                    prefix=str(prefix), commit="c" * 40, ref_kind="tag", rocbuild="0",
                    files=tuple(entries), archive_sha256=sha256_file(archive),
                    archive_size=archive.stat().st_size)


def tree(prefix: Path) -> dict[str, tuple[str, int, str]]:
    out = {}
    for path in sorted(prefix.rglob("*")):
        rel = path.relative_to(prefix).as_posix()
        if path.is_symlink():
            out[rel] = ("link", 0, os.readlink(path))
        elif path.is_file():
            out[rel] = (oct(path.stat().st_mode & 0o777), path.stat().st_size,
                        sha256_file(path))
    return out


def test_pack_then_unpack_gives_the_same_tree(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path / "a")
    archive = tmp_path / "x.tar.zst"
    entries = pack(prefix, FILES, archive)
    assert {e.path: e.type for e in entries} == {
        "bin/tool": "file", "lib/libx.so": "link", "lib/libx.so.1": "file", "lib/x.pc": "file",
        "llvm": "link"}
    by = {e.path: e for e in entries}
    assert by["lib/x.pc"].holds_prefix == "text" and by["bin/tool"].holds_prefix == ""
    assert by["bin/tool"].mode == 0o755 and by["lib/libx.so"].link == "libx.so.1"
    before = tree(prefix)
    # the second machine: the same prefix path, empty
    for path in sorted(prefix.rglob("*"), reverse=True):
        path.unlink() if path.is_symlink() or path.is_file() else path.rmdir()
    installed = unpack(archive, entries, prefix, Relocation(str(prefix), str(prefix)))
    assert sorted(installed) == sorted(FILES)
    assert tree(prefix) == before
    assert not [p for p in prefix.iterdir() if p.name.startswith(".rocbuild-unpack")]


def test_manifest_round_trips_through_json(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path / "a")
    archive = tmp_path / "x.tar.zst"
    manifest = manifest_for(prefix, pack(prefix, FILES, archive), archive)
    assert Manifest.from_json(manifest.to_json()) == manifest
    with pytest.raises(ArtifactRefused, match="malformed"):
        Manifest.from_json({**manifest.to_json(), "files": [{"path": "a"}]})
    with pytest.raises(ArtifactRefused, match="not a rocbuild artifact"):
        Manifest.from_json({"files": []})


def test_relocation_rewrites_text_files_and_links_into_the_old_prefix(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path / "a")
    archive = tmp_path / "x.tar.zst"
    entries = pack(prefix, FILES, archive)
    assert relocation_problems(entries, str(prefix)) == []
    new = tmp_path / "b" / "other"
    unpack(archive, entries, new, Relocation(str(prefix), str(new)))
    assert (new / "lib" / "x.pc").read_text() == (f"prefix={new}\nlibdir=${{prefix}}/lib\n"
                                                  f"other={prefix}-old/lib\n")
    assert os.readlink(new / "llvm") == str(new / "lib")
    assert (new / "lib" / "libx.so.1").read_bytes() == (prefix / "lib/libx.so.1").read_bytes()


def test_a_binary_holding_the_prefix_is_not_relocated(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path / "a")
    (prefix / "lib" / "libx.so.1").write_bytes(b"\x7fELF\0RUNPATH=" + str(prefix).encode()
                                               + b"/lib\0")
    archive = tmp_path / "x.tar.zst"
    entries = pack(prefix, FILES, archive)
    problems = relocation_problems(entries, str(prefix))
    assert len(problems) == 1 and problems[0].startswith("lib/libx.so.1 holds the path")
    new = tmp_path / "b"
    with pytest.raises(ArtifactRefused, match="cannot relocate"):
        unpack(archive, entries, new, Relocation(str(prefix), str(new)))
    assert not (new / "lib").exists()


def test_a_tampered_archive_is_refused_and_nothing_is_installed(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path / "a")
    archive, other = tmp_path / "x.tar.zst", tmp_path / "y.tar.zst"
    entries = pack(prefix, FILES, archive)
    (prefix / "bin" / "tool").write_text("#!/bin/sh\necho evil\n")  # same size, other bytes
    pack(prefix, FILES, other)
    target = tmp_path / "target"
    with pytest.raises(ArtifactRefused, match="'bin/tool' in the archive does not match"):
        unpack(other, entries, target, Relocation(str(prefix), str(target)))
    assert [p.name for p in target.iterdir()] == []  # staged and checked before any move
    with pytest.raises(ArtifactRefused, match="damaged"):
        damaged = tmp_path / "z.tar.zst"
        damaged.write_bytes(archive.read_bytes()[:-20])
        unpack(damaged, entries, target, Relocation(str(prefix), str(target)))


def _tar_with(members: list[tuple[tarfile.TarInfo, bytes]], path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data else None)
    path.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))


@pytest.mark.parametrize("path", ["../evil", "/etc/evil", "lib/../../evil", "a//b", ""])
def test_a_path_leaving_the_prefix_is_refused(tmp_path: Path, path: str) -> None:
    entry = FileEntry(path, "file", size=1, sha256="0" * 64)
    with pytest.raises(ArtifactRefused, match="path"):
        check_entries([entry], "/opt/x")


def test_an_archive_member_the_manifest_does_not_list_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "x.tar.zst"
    info = tarfile.TarInfo("../outside")
    info.size = 1
    _tar_with([(info, b"x")], archive)
    target = tmp_path / "prefix"
    refused = re.escape("'../outside', which its manifest does not list")
    with pytest.raises(ArtifactRefused, match=refused):
        unpack(archive, [], target, Relocation(str(target), str(target)))
    assert not (tmp_path / "outside").exists()


@pytest.mark.parametrize("link", ["../../etc/passwd", "/etc/passwd", "/opt/xy/lib", "../.."])
def test_a_link_leaving_the_prefix_is_refused(link: str) -> None:
    with pytest.raises(ArtifactRefused, match="outside the prefix"):
        check_entries([FileEntry("lib/l", "link", link=link)], "/opt/x")


def test_links_inside_the_prefix_are_accepted() -> None:
    entries = [FileEntry("lib/l", "link", link="../bin/t"), FileEntry("llvm", "link",
               link="/opt/x/lib/llvm"), FileEntry("lib/m", "link", link="libm.so.1")]
    assert check_entries(entries, "/opt/x") == entries


def test_an_archive_link_other_than_the_manifest_is_refused(tmp_path: Path) -> None:
    info = tarfile.TarInfo("lib/l")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    archive = tmp_path / "x.tar.zst"
    _tar_with([(info, b"")], archive)
    target = tmp_path / "prefix"
    with pytest.raises(ArtifactRefused, match=re.escape("is not the link -> 'libl.so'")):
        unpack(archive, [FileEntry("lib/l", "link", link="libl.so")], target,
               Relocation(str(target), str(target)))
    assert not (target / "lib" / "l").is_symlink()


def test_folder_store_push_then_pull_and_a_pull_continues_a_partial_file(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path / "a")
    archive = tmp_path / "x.tar.zst"
    manifest = manifest_for(prefix, pack(prefix, FILES, archive), archive)
    store = FolderStore(tmp_path / "cache")
    seen: list[tuple[int, int]] = []
    store.push(manifest, archive, lambda done, total: seen.append((done, total)))
    assert seen[-1] == (manifest.archive_size, manifest.archive_size)
    assert store.read_manifest("x", manifest.key) == manifest.to_json()
    assert store.read_manifest("x", "0" * 64) is None
    assert [(e["component"], e["key"]) for e in store.index()] == [("x", manifest.key)]

    dest = tmp_path / "pulled" / manifest.archive_name
    partial = dest.with_name(dest.name + ".partial")
    partial.parent.mkdir()
    partial.write_bytes(archive.read_bytes()[:100])  # an interrupted pull
    steps: list[int] = []
    pull_archive(store, manifest, dest, lambda done, total: steps.append(done))
    assert steps[0] > 100 and sha256_file(dest) == manifest.archive_sha256
    assert not partial.exists()

    dest.unlink()
    partial.write_bytes(b"garbage" * 20)  # a partial file from another archive
    # continued, found not to be this archive, then pulled again from zero in the
    # same run
    pull_archive(store, manifest, dest)
    assert sha256_file(dest) == manifest.archive_sha256 and not partial.exists()
    (store.root / "x" / manifest.archive_name).write_bytes(b"not the archive")
    dest.unlink()
    with pytest.raises(CacheUnavailable, match="does not match its manifest"):
        pull_archive(store, manifest, dest)
    assert not partial.exists() and not dest.exists()


def test_pushing_again_replaces_the_index_entry(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path / "a")
    archive = tmp_path / "x.tar.zst"
    manifest = manifest_for(prefix, pack(prefix, FILES, archive), archive)
    store = FolderStore(tmp_path / "cache")
    store.push(manifest, archive)
    store.push(dataclasses.replace(manifest, created=5.0), archive)
    assert [e["created"] for e in store.index()] == [5.0]


def test_the_prefix_is_found_across_a_read_boundary_and_stale_staging_is_removed(
        tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path / "a")
    needle = str(prefix).encode()
    big = prefix / "lib" / "big.so"
    cut = (1 << 20) - len(needle) // 2  # the path straddles the first 1 MiB read
    big.write_bytes(b"\0" * cut + needle + b"\0" * 100)
    archive = tmp_path / "x.tar.zst"
    entries = pack(prefix, ["lib/big.so"], archive)
    assert entries[0].holds_prefix == "binary"
    stale = prefix / ".rocbuild-unpack-1-abc"  # left by a killed run (pid 1 is not us)
    stale.mkdir()
    unpack(archive, entries, prefix, Relocation(str(prefix), str(prefix)))
    assert not stale.exists()


def test_an_archive_that_unpacks_past_its_manifests_total_is_cut_off(tmp_path: Path) -> None:
    """A member of 5 bytes carrying a PAX header of 4 MiB: nothing in the manifest accounts
    for those bytes, so the stream is cut at the manifest's total (plus headers) and the
    artifact refused, before tarfile reads the rest (a bomb through a header)."""
    import hashlib

    archive = tmp_path / "x.tar.zst"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("share/a")
        info.size, info.pax_headers = 5, {"comment": "z" * (4 << 20)}
        tar.addfile(info, io.BytesIO(b"five\n"))
    archive.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))
    entry = FileEntry("share/a", "file", size=5, sha256=hashlib.sha256(b"five\n").hexdigest())
    prefix = tmp_path / "prefix"
    with pytest.raises(ArtifactRefused, match="holds more than its manifest says"):
        unpack(archive, [entry], prefix, Relocation(str(prefix), str(prefix)))
    assert sorted(p.name for p in prefix.iterdir()) == []  # no staging folder left either


def test_links_are_followed_together_as_the_system_will() -> None:
    from rocbuild.model.paths import resolve_links

    links = {"share/up": "..", "share/esc": "up/../..", "share/l": "../include",
             "loop": "loop", "abs": "/opt/p/lib"}.get
    assert resolve_links("share/l/x.h", links) == "include/x.h"
    assert resolve_links("share/up/lib/x", links) == "lib/x"
    assert resolve_links("share/esc/x", links) is None  # the prefix's parent
    assert resolve_links("share/esc", links, follow_last=True) is None
    assert resolve_links("share/esc", links) == "share/esc"  # the link itself, not followed
    assert resolve_links("loop/x", links) is None  # ELOOP
    assert resolve_links("abs/x", links, roots=("/opt/p",)) == "lib/x"
    assert resolve_links("abs/x", links, roots=("/opt/q",)) is None
