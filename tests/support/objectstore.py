"""A kind of binary-cache store only the tests use: an S3-like object store. Objects are kept
by key in a bucket, read with GET (and a Range), written with PUT, deleted with DELETE and
listed by a GET of the bucket; a store is named ``s3like://HOST:PORT/BUCKET``. It shows that
a kind of store is one module: nothing in rocbuild names it; a process registers it
(``register()``, which calls ``stores.register``) and ``--cache s3like://…`` or ``cache push
--to s3like://…`` then reads and writes through it. ObjectServer is the loopback server a
test starts to keep the objects.

The objects are the folder store's layout (``<component>/<key>.json``, ``.tar.zst``,
``.sig``) without an index file: the index is made from a listing of the manifests, as a
bucket lists its keys."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rocbuild.errors import CacheUnavailable
from rocbuild.run.cache import stores
from rocbuild.run.cache.artifacts import ArtifactRefused, Manifest, Progress
from rocbuild.run.cache.cache_store import (
    archive_path,
    index_entry,
    manifest_path,
    signature_path,
)

SCHEME = "s3like"


class ObjectStore:
    """The read and write interfaces of stores.py over the object server's HTTP."""

    def __init__(self, location: str) -> None:
        parsed = urllib.parse.urlparse(location)
        self.location = location
        self.base = f"http://{parsed.netloc}/{parsed.path.strip('/')}/"

    def _request(self, method: str, key: str = "", data: bytes | None = None,
                 offset: int = 0) -> Any:
        """The response (to read and close), or None for 404."""
        request = urllib.request.Request(self.base + urllib.parse.quote(key), data=data,
                                         method=method)
        if offset:
            request.add_header("Range", f"bytes={offset}-")
        try:
            return urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise CacheUnavailable(f"{self.location}: {method} {key}: HTTP {exc.code}") from None
        except OSError as exc:
            raise CacheUnavailable(f"cannot reach {self.location}: {exc}") from None

    def _get(self, key: str) -> bytes | None:
        response = self._request("GET", key)
        if response is None:
            return None
        with response:
            return bytes(response.read())

    # reading
    def read_manifest(self, component: str, key: str) -> dict[str, Any] | None:
        body = self._get(manifest_path(component, key))
        if body is None:
            return None
        try:
            doc = json.loads(body)
        except ValueError:
            raise ArtifactRefused(f"its manifest in {self.location} is not JSON") from None
        return doc if isinstance(doc, dict) else None

    def read_signature(self, component: str, key: str) -> str | None:
        body = self._get(signature_path(component, key))
        return None if body is None else body.decode()

    def index(self) -> list[dict[str, Any]]:
        names = json.loads(self._get("") or b"[]")  # the bucket's listing
        entries = []
        for name in names:
            component, _, file = str(name).partition("/")
            if not file.endswith(".json"):
                continue
            key = file.removesuffix(".json")
            doc = self.read_manifest(component, key)
            if doc is not None:
                entries.append(index_entry(Manifest.from_json(doc),
                                           self.read_signature(component, key)))
        return entries

    def open_archive(self, component: str, key: str, offset: int
                     ) -> tuple[Iterator[bytes], int]:
        response = self._request("GET", archive_path(component, key), offset=offset)
        if response is None:
            raise CacheUnavailable(f"{self.location}: the archive of {component} is missing")
        start = offset if response.status == 206 else 0

        def chunks() -> Iterator[bytes]:
            with response:
                yield from iter(lambda: response.read(1 << 16), b"")

        return chunks(), start

    # writing
    def _put(self, key: str, data: bytes) -> None:
        self._request("PUT", key, data).close()

    def push(self, manifest: Manifest, archive: Path, progress: Progress | None = None,
             signature: str | None = None) -> None:
        component, key = manifest.component, manifest.key
        self._put(archive_path(component, key), archive.read_bytes())
        if progress:
            progress(manifest.archive_size, manifest.archive_size)
        if signature:
            self._put(signature_path(component, key), signature.encode())
        self._put(manifest_path(component, key), json.dumps(manifest.to_json()).encode())

    def write_signature(self, manifest: Manifest, signature: str) -> None:
        self._put(signature_path(manifest.component, manifest.key), signature.encode())

    def remove(self, entries: list[dict[str, Any]]) -> list[str]:
        for entry in entries:
            component, key = str(entry.get("component")), str(entry.get("key"))
            for path in (manifest_path(component, key), signature_path(component, key),
                         archive_path(component, key)):
                response = self._request("DELETE", path)
                if response is not None:
                    response.close()
        return []

    def clear_temps(self) -> list[str]:
        return []  # a PUT stores a whole object or none


def register() -> None:
    stores.register(stores.Kind((SCHEME,), f"{SCHEME}://HOST:PORT/BUCKET", ObjectStore,
                                ObjectStore))


class ObjectServer:
    """Buckets of objects in memory, served on 127.0.0.1 (a context manager); ``requests``
    counts the requests by method."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}  # "bucket/key" -> bytes
        self.requests: dict[str, int] = {}
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _name(self) -> str:
                with lock:
                    server.requests[self.command] = server.requests.get(self.command, 0) + 1
                return urllib.parse.unquote(self.path.lstrip("/"))

            def _send(self, status: int, body: bytes = b"", **headers: str) -> None:
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name.replace("_", "-"), value)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                name = self._name()
                if name.endswith("/"):  # the bucket: a listing of its keys
                    listed = [k.removeprefix(name) for k in server.objects if k.startswith(name)]
                    self._send(200, json.dumps(sorted(listed)).encode())
                    return
                body = server.objects.get(name)
                if body is None:
                    self._send(404)
                    return
                first = int(self.headers.get("Range", "bytes=0-")[6:].split("-")[0] or 0)
                if first:
                    self._send(206, body[first:],
                               Content_Range=f"bytes {first}-{len(body) - 1}/{len(body)}")
                else:
                    self._send(200, body)

            def do_PUT(self) -> None:
                name = self._name()
                server.objects[name] = self.rfile.read(int(self.headers["Content-Length"]))
                self._send(200)

            def do_DELETE(self) -> None:
                found = server.objects.pop(self._name(), None)
                self._send(204 if found is not None else 404)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def url(self, bucket: str) -> str:
        return f"{SCHEME}://127.0.0.1:{self.http.server_address[1]}/{bucket}"

    def __enter__(self) -> ObjectServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()
