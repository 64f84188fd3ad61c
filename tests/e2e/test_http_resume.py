"""The HTTP cache store against servers that misbehave: a real loopback server that
drops the connection in the middle of the archive (the pull continues with a Range request),
one that answers the Range request with a different file (detected, and the pull restarts
cleanly from zero), and one that stalls half way while rocbuild is SIGKILLed (the ``.partial``
keeps every byte that arrived, and the next run asks only for the rest).

The servers are python's http.server in a thread of the test, on 127.0.0.1 and a free port;
each request is logged (its Range header) so the tests see what the client asked for.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rocbuild.errors import CacheUnavailable
from rocbuild.run.cache.artifacts import Manifest, pack, sha256_file
from rocbuild.run.cache.cache_store import FolderStore, HttpStore, pull_archive
from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.e2e.test_cache_robust import UNSIGNED
from tests.support.chain import one_component_stack

pytestmark = pytest.mark.e2e

SIZE = 3 << 20  # incompressible bytes in the archive


@dataclass
class Behaviour:
    """How the server treats archive requests (``*.tar.zst``); everything else is served as
    it is. ``drop_after``: the first whole-file answer stops after these many bytes and the
    connection is closed. ``wrong_range``: a Range request is answered with this file's
    bytes instead. ``stall_after``: the whole-file answer sends these many bytes, then waits
    until ``release`` is set (and then closes)."""

    drop_after: int | None = None
    wrong_range: Path | None = None
    stall_after: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    requests: list[str] = field(default_factory=list)  # "GET <path> <range or ->"


class Handler(http.server.SimpleHTTPRequestHandler):
    behaviour: Behaviour

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        wanted = self.headers.get("Range")
        self.behaviour.requests.append(f"GET {self.path} {wanted or '-'}")
        path = Path(self.translate_path(self.path))
        if not self.path.endswith(".tar.zst") or not path.is_file():
            super().do_GET()
            return
        data = path.read_bytes()
        if wanted:
            start = int(re.fullmatch(r"bytes=(\d+)-", wanted)[1])  # type: ignore[index]
            if self.behaviour.wrong_range is not None:
                data = self.behaviour.wrong_range.read_bytes()
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            self.wfile.write(data[start:])
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        cut = self.behaviour.drop_after
        if cut is not None:
            self.behaviour.drop_after = None  # only the first answer breaks off
            self.wfile.write(data[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        stall = self.behaviour.stall_after
        if stall is not None:
            self.wfile.write(data[:stall])
            self.wfile.flush()
            self.behaviour.release.wait()
            self.close_connection = True
            return
        self.wfile.write(data)


@contextlib.contextmanager
def serve(folder: Path, behaviour: Behaviour) -> Iterator[str]:
    handler = type("H", (Handler,), {"behaviour": behaviour})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        behaviour.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


@pytest.fixture
def artifact(tmp_path: Path) -> tuple[Manifest, Path]:
    """A 3 MiB artifact in a cache folder; returns its manifest and the folder."""
    prefix = tmp_path / "built"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "big.bin").write_bytes(random.Random(1).randbytes(SIZE))
    archive = tmp_path / "x.tar.zst"
    files = pack(prefix, ["lib/big.bin"], archive)
    manifest = Manifest(component="x", key="k" * 64, inputs={}, targets=("gfx906",),
                        prefix=str(prefix), commit="c" * 40, ref_kind="tag", rocbuild="0",
                        files=tuple(files), archive_sha256=sha256_file(archive),
                        archive_size=archive.stat().st_size)
    cache = tmp_path / "cache"
    FolderStore(cache).push(manifest, archive)
    return manifest, cache


def _ranges(behaviour: Behaviour) -> list[str]:
    return [r.split()[-1] for r in behaviour.requests if r.split()[1].endswith(".tar.zst")]


def test_a_connection_dropped_mid_transfer_is_resumed_with_a_range_request(
        artifact: tuple[Manifest, Path], tmp_path: Path) -> None:
    manifest, cache = artifact
    cut = manifest.archive_size // 3
    behaviour = Behaviour(drop_after=cut)
    dest = tmp_path / "pulled" / manifest.archive_name
    with serve(cache, behaviour) as url:
        pull_archive(HttpStore(url), manifest, dest)
    assert sha256_file(dest) == manifest.archive_sha256
    assert _ranges(behaviour) == ["-", f"bytes={cut}-"], behaviour.requests


def test_a_range_answered_with_another_file_is_detected_and_restarted_cleanly(
        artifact: tuple[Manifest, Path], tmp_path: Path) -> None:
    manifest, cache = artifact
    other = tmp_path / "other.bin"
    other.write_bytes(random.Random(2).randbytes(manifest.archive_size))  # same size
    cut = manifest.archive_size // 2
    behaviour = Behaviour(drop_after=cut, wrong_range=other)
    dest = tmp_path / "pulled" / manifest.archive_name
    with serve(cache, behaviour) as url:
        pull_archive(HttpStore(url), manifest, dest)
    assert sha256_file(dest) == manifest.archive_sha256
    # dropped, resumed (with the wrong file's bytes), found wrong, pulled again from zero
    assert _ranges(behaviour) == ["-", f"bytes={cut}-", "-"], behaviour.requests
    assert not dest.with_name(dest.name + ".partial").exists()


def test_a_server_that_keeps_sending_the_wrong_file_is_one_message(
        artifact: tuple[Manifest, Path], tmp_path: Path) -> None:
    manifest, cache = artifact
    (cache / "x" / manifest.archive_name).write_bytes(b"not the archive" * 1000)
    dest = tmp_path / "pulled" / manifest.archive_name
    with serve(cache, Behaviour()) as url, pytest.raises(CacheUnavailable) as refused:
        pull_archive(HttpStore(url), manifest, dest)
    assert "does not match its manifest" in str(refused.value)
    assert not dest.exists() and not dest.with_name(dest.name + ".partial").exists()


STACK_FILES = {
    "CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(big NONE)
        install(FILES big.bin DESTINATION share/big)
        """),
}


@pytest.mark.slow
def test_sigkill_during_a_pull_keeps_the_bytes_and_the_rerun_asks_for_the_rest(
        tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "big", {**STACK_FILES, "big.bin": ""})
    src = tmp_path / "repos" / "big.git.src"  # the real content: incompressible bytes
    (src / "big.bin").write_bytes(random.Random(3).randbytes(SIZE))
    for args in (["add", "-A"], ["commit", "-qm", "data"], ["tag", "-f", "v1"],
                 ["push", "-qf", str(tmp_path / "repos" / "big.git"), "v1"]):
        subprocess.run(["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t",
                        *args], check=True, capture_output=True)
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    cache = tmp_path / "cache"
    run_cli("cache", "push", *flags, "--to", str(cache), expect=0)
    shutil.rmtree(tmp_path / "prefix")
    (manifest_file,) = (cache / "big").glob("*.json")
    archive = manifest_file.with_suffix("").with_suffix(".tar.zst")
    size = archive.stat().st_size
    half = size // 2
    second = [*flags[:2], "--workdir", str(tmp_path / "work-b"), *flags[4:]]
    partial = tmp_path / "work-b" / "cache" / "artifacts" / (archive.name + ".partial")
    behaviour = Behaviour(stall_after=half)
    with serve(cache, behaviour) as url:
        argv = [sys.executable, "-m", "rocbuild", "build", *second, "--cache", url,
                *UNSIGNED, "--quiet", "--no-verify"]
        proc = subprocess.Popen(argv, env=child_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            give_up = time.monotonic() + 120  # a safety net, not a measured time
            while time.monotonic() < give_up and proc.poll() is None:
                if partial.is_file() and partial.stat().st_size >= half:
                    break
                time.sleep(0.01)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    assert partial.is_file() and partial.stat().st_size == half, (
        partial.stat().st_size if partial.exists() else None, half)
    normal = Behaviour()
    with serve(cache, normal) as url:
        built = run_cli("build", *second, "--cache", url, *UNSIGNED, "--quiet", "--no-verify",
                        expect=0)
    assert _ranges(normal) == [f"bytes={half}-"], normal.requests
    assert "✔ big: cache" in built.stdout, built.explain()  # installed from the cache
    assert sha256_file(tmp_path / "prefix" / "share" / "big" / "big.bin") == sha256_file(
        src / "big.bin")
