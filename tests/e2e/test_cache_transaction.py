"""A cache install is all or nothing: an artifact signed by a trusted key that tries
to write where it must not (through its own links, onto another component's file, into
rocbuild's records, out of the prefix through a chain of links), or that inflates past what its
manifest says, is refused before a byte of the prefix changes, and a refusal or a kill in the
middle of placing it leaves the prefix identical to before: the sha256 of every file, every
link target, every mode and folder, rocbuild's own records included.

Machine A builds the alpha <- beta <- gamma chain (gamma with an [install.links] link) and
pushes it signed by alice. Each test copies the cache, changes gamma's artifact and signs the
changed manifest again with alice's key (a trusted signer gone wrong, or a stolen key). Machine
B installs alpha and beta from the cache, takes a snapshot of its prefix, then asks for gamma
with --cache and a mirror that leads nowhere: the artifact is refused, the source build that
would follow fails at its fetch, and the prefix must equal the snapshot.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, Chain, make_chain
from tests.support.trees import Entry, tree

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def full_tree(prefix: Path) -> dict[str, Entry]:
    """Everything under the prefix, rocbuild's records and folders included."""
    return tree(prefix)


@dataclasses.dataclass
class Signed:
    chain: Chain
    cache: Path
    env: dict[str, str]
    key: Path

    def flags(self, workdir: Path, cache: Path, online: bool = False) -> list[str]:
        mirror = self.chain.mirror if online else f"{FAKE_HOST}=file:///nonexistent/"
        return ["--recipes", str(self.chain.recipes), "--workdir", str(workdir), "--prefix",
                str(self.chain.prefix), "--mirror", mirror, "--cache", str(cache), "--quiet",
                "--no-verify"]


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Signed]:
    for tool in ("git", "cmake", "ninja", "cc", "ssh-keygen"):
        require_tool(tool)
    root = tmp_path_factory.mktemp("txn-a")
    chain = make_chain(root)
    with (chain.recipes / "gamma.toml").open("a") as f:
        f.write('[install.links]\n"bin/gamma-link" = "gamma"\n')
    home = root / "home"
    env = {"XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}
    run_cli("build", *chain.flags(), "--quiet", "--no-verify", env=env, expect=0)
    run_cli("cache", "keys", "new", "alice", env=env, expect=0)
    cache = root / "cache"
    run_cli("cache", "push", *chain.flags(), "--to", str(cache), "--sign", "alice", env=env,
            expect=0)
    from rocbuild.run.cache import signing

    yield Signed(chain, cache, env, signing.key_path("alice", env))


def _members(archive: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    data = zstandard.ZstdDecompressor().stream_reader(archive.read_bytes()).read()
    out = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for info in tar:
            body = tar.extractfile(info) if info.isfile() else None
            out.append((info, body.read() if body else b""))
    return out


def _write(archive: Path, members: list[tuple[tarfile.TarInfo, Any]]) -> None:
    """A .tar.zst of ``members`` (data as bytes, or a file object of ``info.size`` bytes)."""
    with archive.open("wb") as raw, zstandard.ZstdCompressor(level=1).stream_writer(raw) as z, \
            tarfile.open(fileobj=z, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for info, body in members:
            if isinstance(body, bytes):
                body = io.BytesIO(body) if info.isfile() else None
            tar.addfile(info, body)


def _file(path: str, data: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(path)
    info.size, info.mode = len(data), mode
    return info, data


def _link(path: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(path)
    info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
    return info, b""


def _entry(info: tarfile.TarInfo, data: bytes, size: int | None = None) -> dict[str, Any]:
    if info.issym():
        return {"path": info.name, "type": "link", "mode": 0o777, "link": info.linkname}
    return {"path": info.name, "type": "file", "mode": info.mode,
            "size": len(data) if size is None else size,
            "sha256": hashlib.sha256(data).hexdigest()}


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        n = min(len(buf), self.left)
        buf[:n] = bytes(n)
        self.left -= n
        return n


def resign(signed: Signed, cache: Path, component: str,
           change: Callable[[dict[str, Any], Path], None]) -> None:
    """Let ``change(manifest, archive)`` alter the component's artifact in ``cache``, then
    bring the archive's size and sha256 in the manifest up to date and sign it again with
    alice's trusted key."""
    from rocbuild.run.cache import signing

    (manifest_file,) = (cache / component).glob("*.json")
    doc = json.loads(manifest_file.read_text())
    archive = cache / component / doc["archive"]["name"]
    change(doc, archive)
    doc["archive"].update(size=archive.stat().st_size,
                          sha256=hashlib.sha256(archive.read_bytes()).hexdigest())
    manifest_file.write_text(json.dumps(doc))
    manifest_file.with_suffix(".sig").write_text(signing.sign(doc, signed.key))


def adding(*extra: tuple[tarfile.TarInfo, bytes], sizes: dict[str, int] | None = None
           ) -> Callable[[dict[str, Any], Path], None]:
    """A change that adds ``extra`` members (and their manifest entries) to the artifact."""
    def change(doc: dict[str, Any], archive: Path) -> None:
        members = _members(archive)
        _write(archive, [*members, *extra])
        doc["files"] += [_entry(i, d if isinstance(d, bytes) else b"", (sizes or {}).get(i.name))
                         for i, d in extra]
    return change


def bomb(doc: dict[str, Any], archive: Path) -> None:
    """A member of 256 MiB of zeros (a few hundred KiB packed) whose manifest entry says 5
    bytes: the issue's 3 GiB bomb, smaller."""
    big = tarfile.TarInfo("share/gamma/zeros")
    big.size, big.mode = 256 << 20, 0o644
    _write(archive, [*_members(archive), (big, _Zeros(big.size))])
    doc["files"].append({"path": big.name, "type": "file", "mode": 0o644, "size": 5,
                         "sha256": hashlib.sha256(b"zero\n").hexdigest()})


CASES: dict[str, tuple[Callable[[dict[str, Any], Path], None], str]] = {
    # a link of the artifact, then a file below it that is really alpha's header
    "link-then-file": (adding(_link("share/l", "../include"), _file("share/l/alpha.h", b"x\n")),
                       "'share/l/alpha.h' (= 'include/alpha.h' through a link) is a file "
                       "another component installed"),
    "other-components-file": (adding(_file("include/alpha.h", b"int evil;\n")),
                              "'include/alpha.h' is a file another component installed"),
    "rocbuild-records": (adding(_link("share/rb", "../.rocbuild"),
                                _file("share/rb/installed/alpha.json", b"{}")),
                         "leads to rocbuild's own files"),
    "link-chain-out": (adding(_link("share/up", ".."), _link("share/esc", "up/../..")),
                       "the link 'share/esc' -> 'up/../..' leads outside the prefix"),
    "bomb": (bomb, "'share/gamma/zeros' in the archive is 268435456 bytes, its manifest "
                   "says 5"),
    # a good artifact, placed, then the step fails (its build tree's install record cannot
    # be written): the install is undone after its files were moved into the prefix
    "fails-after-placing": (lambda doc, archive: None, "Is a directory"),
}


@pytest.mark.parametrize("how", sorted(CASES))
def test_a_refused_artifact_leaves_the_prefix_as_it_was(signed: Signed, tmp_path: Path,
                                                       how: str) -> None:
    shutil.rmtree(signed.chain.prefix, ignore_errors=True)
    cache = tmp_path / "cache"
    shutil.copytree(signed.cache, cache)
    change, expected = CASES[how]
    resign(signed, cache, "gamma", change)
    work = tmp_path / "work-b"
    run_cli("build", *signed.flags(work, cache), "beta", env=signed.env, expect=0)
    before = full_tree(signed.chain.prefix)
    alpha_h = before["include/alpha.h"]
    in_the_way = work / "build" / "gamma" / "install_manifest.txt"
    if how == "fails-after-placing":
        in_the_way.mkdir(parents=True)
    result = run_cli("build", *signed.flags(work, cache), "gamma", env=signed.env)
    if how == "fails-after-placing":
        logged = (work / "logs" / "gamma" / "cache.log").read_text()
        assert re.search(r"installed \d+ files from", logged), logged
        in_the_way.rmdir()
    assert "Traceback" not in result.stdout + result.stderr, result.explain()
    assert "gamma: the cached artifact is refused" in result.stdout, result.explain()
    assert expected in result.stdout, result.explain()
    # then the source build of gamma fails to fetch (the mirror leads nowhere)
    assert result.returncode != 0, result.explain()
    after = full_tree(signed.chain.prefix)
    assert after == before, {k: (before.get(k), after.get(k))
                             for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert full_tree(signed.chain.prefix)["include/alpha.h"] == alpha_h
    assert not (signed.chain.prefix.parent / "esc").exists()
    # and the source build, with the real mirror, goes on from there: alpha's header intact
    run_cli("build", *signed.flags(work, cache, online=True), env=signed.env, expect=0)
    assert signed.chain.run_gamma() == "gamma 11"
    assert full_tree(signed.chain.prefix)["include/alpha.h"] == alpha_h


OUTSIDE_THE_RUN = {
    "direct": adding(_file("include/beta.h", b"int evil;\n")),
    "through-its-own-link": adding(_link("share/al", "../include"),
                                   _file("share/al/beta.h", b"int evil;\n")),
}


@pytest.mark.parametrize("how", sorted(OUTSIDE_THE_RUN))
def test_an_artifact_carrying_the_file_of_a_component_outside_the_run_is_refused(
        signed: Signed, tmp_path: Path, how: str) -> None:
    """The prefix holds alpha and beta; alpha alone is installed again from an artifact
    (signed by the trusted key) that also carries beta's header. beta is not in this run's
    stack (alpha needs nothing), yet its file is its own: the artifact is refused and the
    prefix is byte for byte what it was."""
    shutil.rmtree(signed.chain.prefix, ignore_errors=True)
    cache = tmp_path / "cache"
    shutil.copytree(signed.cache, cache)
    resign(signed, cache, "alpha", OUTSIDE_THE_RUN[how])
    work = tmp_path / "work-b"
    run_cli("build", *signed.flags(work, signed.cache), "beta", env=signed.env, expect=0)
    run_cli("uninstall", *signed.flags(work, cache)[:-2], "--force", "alpha", env=signed.env,
            expect=0)
    before = full_tree(signed.chain.prefix)
    result = run_cli("build", *signed.flags(work, cache), "alpha", env=signed.env)
    assert "alpha: the cached artifact is refused" in result.stdout, result.explain()
    assert "is a file another component installed" in result.stdout, result.explain()
    assert result.returncode != 0, result.explain()  # its source build: the mirror leads nowhere
    after = full_tree(signed.chain.prefix)
    assert after == before, {k: (before.get(k), after.get(k))
                             for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


# rocbuild killed by SIGKILL at the Nth rename into the prefix of a cache install
KILL_AT_RENAME = """
import os, signal, sys
real, count, prefix = os.replace, [0], os.path.realpath(sys.argv[2])
def replace(src, dst, *args, **kwargs):
    if os.path.realpath(os.path.dirname(str(dst))).startswith(prefix + "/") or \\
            os.path.dirname(os.path.realpath(str(dst))) == prefix:
        count[0] += 1
        if count[0] == int(sys.argv[1]):
            os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *args, **kwargs)
os.replace = replace
from rocbuild.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


def test_a_cache_install_killed_at_any_rename_is_undone_by_the_next_run(
        signed: Signed, tmp_path: Path) -> None:
    """SIGKILL at each rename of gamma's cache install into the prefix (its files, the
    recipe's link, the ownership record, build-info), one run per point: the next run's first
    act (before it fetches anything) puts the prefix back to what it was before the killed
    install began, byte for byte; then a full run installs gamma as usual."""
    shutil.rmtree(signed.chain.prefix, ignore_errors=True)
    work = tmp_path / "work-b"
    run_cli("build", *signed.flags(work, signed.cache), "beta", env=signed.env, expect=0)
    before = full_tree(signed.chain.prefix)
    kills = 0
    for point in range(1, 40):
        argv = [sys.executable, "-c", KILL_AT_RENAME, str(point), str(signed.chain.prefix),
                "build", *signed.flags(work, signed.cache), "gamma"]
        done = subprocess.run(argv, env=child_env(signed.env), capture_output=True, text=True,
                              timeout=300)
        if done.returncode != -signal.SIGKILL:
            assert done.returncode == 0, done.stdout + done.stderr
            break  # fewer renames than ``point``: the install went through
        if not list(signed.chain.prefix.glob(".rocbuild-unpack-*")):
            assert kills, "no kill fell inside the install's transaction"
            break  # killed after the install was committed: later renames are the run's end
        kills += 1
        # the next run (no --cache, a mirror that leads nowhere: it fails at gamma's fetch)
        again = run_cli("build", *signed.flags(work, signed.cache)[:-4], "--quiet",
                        "--no-verify", "gamma", env=signed.env)
        assert "Traceback" not in again.stdout + again.stderr, again.explain()
        assert "removed an unpack folder a killed cache install left" in again.stdout, \
            (point, again.explain())
        after = full_tree(signed.chain.prefix)
        assert after == before, (point, {k: (before.get(k), after.get(k)) for k in
                                         before.keys() | after.keys()
                                         if before.get(k) != after.get(k)})
    assert kills >= 4, kills
    print(f"cache install of gamma: {kills} kill points, each undone to the same prefix")
    run_cli("build", *signed.flags(work, signed.cache), env=signed.env, expect=0)
    assert signed.chain.run_gamma() == "gamma 11"


def test_a_deeply_nested_manifest_in_a_folder_store_refuses_only_its_artifact(
        signed: Signed, tmp_path: Path) -> None:
    """Anyone who may write to a shared cache folder replaces beta's manifest with "[" *
    100000: beta is built, the others come from the cache, no RecursionError traceback."""
    shutil.rmtree(signed.chain.prefix, ignore_errors=True)
    cache = tmp_path / "cache"
    shutil.copytree(signed.cache, cache)
    (manifest_file,) = (cache / "beta").glob("*.json")
    manifest_file.write_text("[" * 100000)
    work = tmp_path / "work-b"
    built = run_cli("build", *signed.flags(work, cache, online=True), env=signed.env)
    assert "Traceback" not in built.stdout + built.stderr, built.explain()
    assert built.returncode == 0, built.explain()
    assert f"its manifest {manifest_file} is not a readable JSON document" in built.stdout
    assert [n for n in ("alpha", "beta", "gamma")
            if (work / "logs" / n / "compile.log").exists()] == ["beta"]


# `cache push` killed by SIGKILL when it renames the signature's temp file into the store
KILL_AT_SIG = """
import os, signal, sys
real = os.replace
def replace(src, dst, *args, **kwargs):
    if str(dst).endswith(".sig") and sys.argv[1] in str(dst):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *args, **kwargs)
os.replace = replace
from rocbuild.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def test_temp_files_of_a_killed_push_are_cleared_and_live_ones_kept(signed: Signed,
                                                                    tmp_path: Path) -> None:
    """A push killed between writing a signature and renaming it leaves its temp file in the
    shared folder; the next push removes it (this host's, a dead process's) and keeps the
    temp files of a live push and of another host."""
    import socket

    # machine A's prefix back (other tests share its path), so its build is current
    shutil.rmtree(signed.chain.prefix, ignore_errors=True)
    run_cli("build", *signed.chain.flags(), "--cache", str(signed.cache), "--quiet",
            "--no-verify", env=signed.env, expect=0)
    cache = tmp_path / "cache"
    shutil.copytree(signed.cache, cache)
    for sig in (cache / "gamma").glob("*.sig"):  # gamma is pushed again, signed
        sig.with_suffix(".json").unlink()
        sig.unlink()
    flags = [*signed.chain.flags(), "--to", str(cache), "--sign", "alice"]
    done = subprocess.run([sys.executable, "-c", KILL_AT_SIG, "gamma", "cache", "push", *flags],
                          env=child_env(signed.env), capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    (left,) = (cache / "gamma").glob(".*.sig.*.tmp")
    host = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())
    live = cache / "gamma" / f".x.sig.{host}-{os.getpid()}.tmp"  # this test's: alive
    other = cache / "gamma" / ".x.sig.otherhost-1.tmp"
    for keep in (live, other):
        keep.write_text("partial")
    pushed = run_cli("cache", "push", *flags, env=signed.env, expect=0)
    assert f"removed a temp file a killed push left in the cache: {left}" in pushed.stdout, \
        pushed.explain()
    assert not left.exists() and live.exists() and other.exists()
    assert "✔ gamma" in pushed.stdout, pushed.explain()


def test_a_deeply_nested_manifest_over_http_refuses_only_its_artifact(signed: Signed,
                                                                     tmp_path: Path) -> None:
    """The same over an HTTP cache (`python -m http.server` on loopback)."""
    shutil.rmtree(signed.chain.prefix, ignore_errors=True)
    cache = tmp_path / "cache"
    shutil.copytree(signed.cache, cache)
    (manifest_file,) = (cache / "beta").glob("*.json")
    manifest_file.write_text("[" * 100000)
    server = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
         "--directory", str(cache)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True)
    try:
        assert server.stdout is not None
        port = re.search(r"port (\d+)", server.stdout.readline())
        assert port
        work = tmp_path / "work-b"
        flags = signed.flags(work, cache, online=True)
        flags[flags.index(str(cache))] = f"http://127.0.0.1:{port[1]}/"
        built = run_cli("build", *flags, env=signed.env)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "Traceback" not in built.stdout + built.stderr, built.explain()
    assert built.returncode == 0, built.explain()
    assert f"{manifest_file.name} is not a readable JSON document" in built.stdout, \
        built.explain()
    assert [n for n in ("alpha", "beta", "gamma")
            if (work / "logs" / n / "compile.log").exists()] == ["beta"]
