"""Where artifacts live: a folder (local or a shared mount, read-write) or an HTTP(S) URL that
serves such a folder (any static file server; read-only).

Layout, the same for both::

    <cache>/index.json                     what `rocbuild cache list` shows
    <cache>/<component>/<key>.json         the manifest (artifacts.Manifest)
    <cache>/<component>/<key>.tar.zst      the files
    <cache>/<component>/<key>.sig          the SSH signature over the manifest (signing.py)

A lookup reads only the small manifest; the archive is copied to a local ``.partial`` file
that a later pull continues (an HTTP Range request; a server that ignores Range sends it
whole and the copy restarts from zero) and is renamed only once its size and sha256 match the
manifest, so an interrupted pull never leaves a file that looks complete.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocbuild import faults, files, proc
from rocbuild.errors import CacheUnavailable, ConfigError
from rocbuild.files import parse_json, read_json
from rocbuild.model.paths import resolves_within
from rocbuild.model.resources import format_bytes
from rocbuild.run.cache.artifacts import ArtifactRefused, Manifest, Progress, sha256_file
from rocbuild.run.cache.signing import key_of

if TYPE_CHECKING:  # stores.py opens the stores of this module
    from rocbuild.run.cache.stores import ReadStore

INDEX = "index.json"
INDEX_FORMAT = 1
_CHUNK = 1 << 20
_NET_CHUNK = 1 << 16  # read what has arrived (read1), so every byte reaches the disk at once
HTTP_TIMEOUT = 60.0
PULL_ATTEMPTS = 5  # transfers in a row that may break off without bringing a byte more


def manifest_path(component: str, key: str) -> str:
    return f"{component}/{key}.json"


def archive_path(component: str, key: str) -> str:
    return f"{component}/{key}.tar.zst"


def signature_path(component: str, key: str) -> str:
    return f"{component}/{key}.sig"


def pull_archive(store: ReadStore, manifest: Manifest, dest: Path,
                 progress: Progress | None = None, attempts: int = PULL_ATTEMPTS) -> Path:
    """Copy the archive of ``manifest`` to ``dest``, continuing ``dest.partial`` when an
    earlier pull was interrupted; checked against the manifest's size and sha256 before it is
    renamed. A file already at ``dest`` with the right sha256 is reused.

    A transfer that breaks off (an error, or the server closing before the length it
    announced) is continued from the bytes that arrived, up to ``attempts`` times in a row
    without progress. A whole transfer of the wrong size or sha256 is not this archive; when
    it was a continued one, the bytes may be another file's (the file on the server changed,
    or the server answered the Range request with something else): the copy is removed and
    pulled once more from zero before the archive is given up."""
    total = manifest.archive_size
    if dest.is_file() and sha256_file(dest) == manifest.archive_sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    idle, restarted = 0, False
    while True:
        have = partial.stat().st_size if partial.is_file() else 0
        if have >= total:  # nothing left to ask for: a whole copy that failed its check
            partial.unlink()
            have = 0
        try:
            start, done = _copy_from(store, manifest, partial, have, progress)
        except CacheUnavailable:
            grown = partial.is_file() and partial.stat().st_size > have
            idle = 0 if grown else idle + 1
            if idle >= attempts:
                raise
            continue  # what arrived is kept: ask for the rest
        if done == total and sha256_file(partial) == manifest.archive_sha256:
            os.replace(partial, dest)
            return dest
        partial.unlink()
        if start > 0 and not restarted:  # continued with bytes that are not this archive's
            restarted = True
            continue
        raise CacheUnavailable(f"{store.location}: the archive of {manifest.component} does not "
                               "match its manifest (size or sha256); it was removed locally",
                               tip="run the build again; if it repeats, push the component "
                                   "to the cache again")


def _copy_from(store: ReadStore, manifest: Manifest, partial: Path, have: int,
               progress: Progress | None) -> tuple[int, int]:
    """One transfer into ``partial`` from byte ``have`` (or from 0 when the store sends the
    whole file): (where it really started, the size now). Every chunk is written as it
    arrives, unbuffered, so a SIGKILL keeps what came (the page cache has it). More bytes than
    the manifest's size stop the transfer: that is not this archive."""
    total = manifest.archive_size
    chunks, start = store.open_archive(manifest.component, manifest.key, have)
    fd = files.open_own(partial, os.O_WRONLY)  # a link put in its place is not followed
    with os.fdopen(fd, "wb", buffering=0) as out:
        out.seek(start)
        out.truncate()
        done = start
        for chunk in chunks:
            out.write(chunk)
            done += len(chunk)
            if progress:
                progress(min(done, total), total)
            if done > total:
                break
    return start, done


class FolderStore:
    """A cache in a folder; push writes the archive first and the manifest last (each by
    rename), so a reader never sees a manifest whose archive is not complete."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def read_manifest(self, component: str, key: str) -> dict[str, Any] | None:
        path = self.root / manifest_path(component, key)
        if not path.is_file():
            return None
        doc = read_json(path)
        if doc is None:  # this artifact's fault, not the cache's: the others may still serve
            raise ArtifactRefused(f"its manifest {path} is not a readable JSON document")
        return doc

    def read_signature(self, component: str, key: str) -> str | None:
        path = self.root / signature_path(component, key)
        return path.read_text() if path.is_file() else None

    def write_signature(self, manifest: Manifest, signature: str) -> None:
        """Sign an artifact that is in the folder already (and show the key in the index)."""
        self._write(self.root / signature_path(manifest.component, manifest.key),
                    signature.encode())
        self._add_to_index(manifest, signature)

    def index(self) -> list[dict[str, Any]]:
        doc = read_json(self.root / INDEX) or {}
        entries = doc.get("artifacts", [])
        return entries if isinstance(entries, list) else []

    def open_archive(self, component: str, key: str, offset: int
                      ) -> tuple[Iterator[bytes], int]:
        path = self.root / archive_path(component, key)
        if not path.is_file():
            raise CacheUnavailable(f"{path} is missing (its manifest is there)",
                                   tip=f"push {component} to the cache again")

        def chunks() -> Iterator[bytes]:
            with path.open("rb") as f:
                f.seek(offset)
                yield from iter(lambda: f.read(_CHUNK), b"")

        return chunks(), offset

    def clear_temps(self) -> list[str]:
        """Remove the temp files a killed push left in the folder (``.<name>.<host>-<pid>.tmp``,
        or ``.<name>.<pid>.tmp`` of an older rocbuild): only this host's, only of a process that
        is gone. Another push's temp file (alive, or another host's: a shared folder) stays."""
        removed = []
        here = _host()
        for path in sorted([*self.root.glob(".*.tmp"), *self.root.glob("*/.*.tmp")]):
            found = _TMP_RE.match(path.name)
            if found is None or path.is_dir():
                continue
            host, pid = found.group("host"), int(found.group("pid"))
            if host is not None and host != here:
                continue
            if host is None:  # an older name without the host: only when long untouched
                with contextlib.suppress(OSError):
                    if time.time() - path.lstat().st_mtime < LEGACY_TEMP_AGE:
                        continue
            if pid == os.getpid() or proc.pid_exists(pid):
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(str(path))
        return removed

    def _write(self, path: Path, data: bytes) -> None:
        """Atomically, with a temp name that says which host and process wrote it (a shared
        folder: clear_temps must tell a dead push's leftovers from a live one's)."""
        tmp = _temp_name(path)
        with faults.writing(path):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with tmp.open("wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink()

    def _write_json(self, path: Path, doc: Any) -> None:
        self._write(path, (json.dumps(doc, indent=1) + "\n").encode())

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Two pushes to one shared folder update the index one after the other."""
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            fd = files.open_lock(self.root / ".lock")  # never through a link
        except files.NotRegularFile:
            raise ConfigError(f"{self.root / '.lock'} is not a regular file (a link, a FIFO or "
                              "a folder is in the place of the cache's lock); rocbuild never "
                              "writes through it",
                              tip=f"remove {self.root / '.lock'}, then push again") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def push(self, manifest: Manifest, archive: Path, progress: Progress | None = None,
             signature: str | None = None) -> None:
        folder = self.root / manifest.component
        folder.mkdir(parents=True, exist_ok=True)
        final = self.root / archive_path(manifest.component, manifest.key)
        tmp = _temp_name(final)
        total, done = manifest.archive_size, 0
        with archive.open("rb") as src, tmp.open("wb") as out:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, final)
        sig = self.root / signature_path(manifest.component, manifest.key)
        if signature:  # before the manifest, which is what makes the artifact visible
            self._write(sig, signature.encode())
        else:
            sig.unlink(missing_ok=True)
        self._write_json(self.root / manifest_path(manifest.component, manifest.key),
                         manifest.to_json())
        self._add_to_index(manifest, signature)

    def _add_to_index(self, manifest: Manifest, signature: str | None) -> None:
        with self._locked():
            entries = [e for e in self.index()
                       if (e.get("component"), e.get("key")) != (manifest.component,
                                                                  manifest.key)]
            entries.append(index_entry(manifest, signature))
            entries.sort(key=lambda e: (str(e.get("component")), -float(e.get("created", 0))))
            self._write_index(entries)

    def _write_index(self, entries: list[dict[str, Any]]) -> None:
        self._write_json(self.root / INDEX, {"rocbuild_cache": INDEX_FORMAT, "artifacts": entries})

    def remove(self, entries: list[dict[str, Any]]) -> list[str]:
        """Delete these index entries' artifacts (manifest first: the artifact is gone
        for readers before its archive is); returns the problems (empty: all gone)."""
        gone = set()
        problems = []
        for entry in entries:
            component, key = str(entry.get("component")), str(entry.get("key"))
            gone.add((component, key))
            if not (_plain_name(component) and _plain_name(key)):
                # the index is anyone's who can write the store: its names are never paths
                problems.append(f"an index entry names a path outside {self.root} "
                                f"({component!r}, {key!r}); only the entry was dropped")
                continue
            for rel in (manifest_path(component, key), signature_path(component, key),
                        archive_path(component, key)):
                path = self.root / rel
                if resolves_within(path.parent, self.root):  # never through a link out
                    path.unlink(missing_ok=True)
        with self._locked():
            self._write_index([e for e in self.index()
                               if (str(e.get("component")), str(e.get("key"))) not in gone])
        return problems


def _plain_name(name: str) -> bool:
    """``name`` is one file name of the store (a component or a key), not a path."""
    return bool(name) and "/" not in name and "\0" not in name and name not in (".", "..")


# ``.<name>.<host>-<pid>.tmp`` (this rocbuild) or ``.<name>.<pid>.tmp`` (an older one)
_TMP_RE = re.compile(r"^\.(?P<name>.+?)\.(?:(?P<host>[A-Za-z0-9_-]+)-)?(?P<pid>\d+)\.tmp$")
LEGACY_TEMP_AGE = 3600.0  # seconds: a live push keeps writing its temp file


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "_"


def _temp_name(final: Path) -> Path:
    return final.with_name(f".{final.name}.{_host()}-{os.getpid()}.tmp")


def index_entry(manifest: Manifest, signature: str | None = None) -> dict[str, Any]:
    return {"signer": key_of(signature), "component": manifest.component, "key": manifest.key,
            "targets": list(manifest.targets), "prefix": manifest.prefix,
            "commit": manifest.commit, "size": manifest.size,
            "archive_size": manifest.archive_size, "files": len(manifest.files),
            "created": manifest.created, "rocbuild": manifest.rocbuild}


class _NotJson(Exception):
    """A document of the HTTP cache that is not JSON (its URL is the message)."""


class HttpStore:
    """A read-only cache served over HTTP(S) by any static file server."""

    def __init__(self, url: str) -> None:
        self.base = url.rstrip("/") + "/"
        self.location = url

    def _url(self, rel: str) -> str:
        return urllib.parse.urljoin(self.base, urllib.parse.quote(rel))

    def _get_json(self, rel: str) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(self._url(rel), timeout=HTTP_TIMEOUT) as resp:
                doc = parse_json(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise CacheUnavailable(f"{self._url(rel)}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CacheUnavailable(f"cannot reach the cache {self.location}: {reason}",
                                   tip="check the URL and the server, or build without "
                                       "--cache") from None
        except (ValueError, RecursionError):  # RecursionError: "[" * 100000
            raise _NotJson(self._url(rel)) from None
        except http.client.HTTPException as exc:  # IncompleteRead: the line dropped mid-way
            raise _NotJson(f"{self._url(rel)} (the connection broke off: "
                           f"{type(exc).__name__})") from None
        return doc if isinstance(doc, dict) else None

    def read_manifest(self, component: str, key: str) -> dict[str, Any] | None:
        try:
            return self._get_json(manifest_path(component, key))
        except _NotJson as exc:  # this artifact's fault: the others may still serve
            raise ArtifactRefused(f"its manifest {exc} is not a readable JSON document") \
                from None

    def read_signature(self, component: str, key: str) -> str | None:
        url = self._url(signature_path(component, key))
        try:
            with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as resp:
                return str(resp.read(1 << 16).decode("utf-8", "replace"))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise CacheUnavailable(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise CacheUnavailable(f"cannot reach the cache {self.location}: "
                                   f"{getattr(exc, 'reason', exc)!r}") from None

    def index(self) -> list[dict[str, Any]]:
        try:
            doc = self._get_json(INDEX) or {}
        except _NotJson as exc:
            raise CacheUnavailable(f"{exc}: not a JSON document") from None
        entries = doc.get("artifacts", [])
        return entries if isinstance(entries, list) else []

    def open_archive(self, component: str, key: str, offset: int
                      ) -> tuple[Iterator[bytes], int]:
        url = self._url(archive_path(component, key))
        request = urllib.request.Request(url)
        if offset:
            request.add_header("Range", f"bytes={offset}-")
        try:
            resp = urllib.request.urlopen(request, timeout=HTTP_TIMEOUT)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and offset:  # the server has no such range: send it whole
                return self.open_archive(component, key, 0)
            raise CacheUnavailable(f"cannot download {url}: HTTP {exc.code} {exc.reason}",
                                   tip="check the cache server, or build without --cache"
                                   ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CacheUnavailable(f"cannot download {url}: {reason}",
                                   tip="run the build again: the download continues") from None
        start = offset if resp.status == 206 else 0  # 200: the server sent the whole file
        if resp.status == 206 and not _range_starts_at(resp.headers.get("Content-Range"),
                                                       offset):
            resp.close()  # another range than the one asked for: take the whole file
            return self.open_archive(component, key, 0)

        def chunks() -> Iterator[bytes]:
            with resp:
                try:
                    yield from iter(lambda: resp.read1(_NET_CHUNK), b"")
                except (OSError, http.client.HTTPException) as exc:
                    raise CacheUnavailable(
                        f"the download of {url} broke off: {exc}",
                        tip="run the build again: the download continues") from None
                if resp.length:  # the server closed before the Content-Length it announced
                    raise CacheUnavailable(f"the download of {url} broke off ({resp.length} "
                                           "bytes missing)",
                                           tip="run the build again: the download continues")

        return chunks(), start


def _range_starts_at(content_range: str | None, offset: int) -> bool:
    """A 206 answer's ``Content-Range: bytes <first>-<last>/<size>`` starts at ``offset``."""
    found = re.match(r"\s*bytes\s+(\d+)-", content_range or "")
    return found is not None and int(found[1]) == offset


class ProgressLine:
    """Progress of one transfer as a line every few seconds (and at the end): a few GiB move
    through here, and the user should see that it moves."""

    def __init__(self, say: Any, what: str, every: float = 2.0) -> None:
        self.say, self.what, self.every = say, what, every
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < self.every:
            return
        self._last = now
        share = f" ({100 * done // total}%)" if total else ""
        self.say(f"  {self.what}: {format_bytes(done)} of {format_bytes(total)}{share}")

