"""A small client for the OCI distribution API (what GHCR, Docker Hub, Harbor, Quay and the
reference registry speak), enough for the binary cache: manifests by tag or digest, blobs up
(in chunks, resumable) and down (streamed, with Range), tags, deletes, and the token dance.

Why our own and not the ``oras`` Python SDK (oras-py 0.2.x, read at e51bc87): its default
blob upload reads the whole file into memory (``put_upload``: ``data=fd.read()``), a 1 GiB
rocBLAS layer would cost 1 GiB of RSS; its chunked upload retries a failed PATCH as is
instead of asking the registry how much arrived; a download that breaks off mid-layer is not
continued (no Range); every failed request is retried five times with sleeps of 3 to 83 s,
so a registry that is down costs two minutes before a build can go on; and it brings
jsonschema (with its compiled rpds-py) and requests. The part of the API the cache needs is
a few hundred lines on http.client, whose bodies stream from files and to files, so memory
stays at one chunk whatever the layer size.

Credentials, first match wins: ``ROCBUILD_REGISTRY_AUTH=user:secret`` (a token or password,
for CI), then the Docker credential file (``$DOCKER_CONFIG/config.json`` or
``~/.docker/config.json``: ``auths.<host>.auth``, ``identitytoken``, or a credential helper
named by ``credHelpers``/``credsStore``). A registry that asks for Basic auth gets them as
is; one that asks for a Bearer token (the distribution token protocol) gets them sent to its
token realm, and the token is kept for the scope it was issued for.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.client
import os
import re
import shutil
import socket
import ssl
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from rocbuild import proc
from rocbuild.errors import CacheUnavailable, ConfigError
from rocbuild.files import parse_json

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
UPLOAD_CHUNK = 32 << 20  # one PATCH: what a failed upload sends again at most
READ_CHUNK = 1 << 20
TIMEOUT = 60.0
RETRIES = 3  # a broken transfer is continued this many times (then the caller gives up)
RETRY_PAUSE = 0.5
AUTH_ENV = "ROCBUILD_REGISTRY_AUTH"
_REPO_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)"
                      r"[a-z0-9]+)*)*$")
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")


class RegistryError(CacheUnavailable):
    """A registry answered with an error the cache cannot work around."""


class BlobDamaged(RegistryError):
    """One blob came back other than its digest says, or broke off: that artifact's
    trouble (a changed config blob in a shared repository), not the whole registry's."""


@dataclass(frozen=True)
class Reference:
    """``oci://host[:port]/repository`` (https; plain http for a loopback host) or
    ``oci+http://host[:port]/repository`` (a lab registry without TLS)."""

    scheme: str  # "https" or "http"
    host: str  # host[:port], as the credential file names it
    repository: str
    text: str

    @classmethod
    def parse(cls, text: str) -> Reference:
        scheme, sep, rest = text.partition("://")
        if not sep or scheme not in ("oci", "oci+http", "oci+https"):
            raise ConfigError(f"'{text}' is not an oci:// reference",
                              tip="write oci://REGISTRY/NAMESPACE/NAME, e.g. "
                                  "oci://ghcr.io/me/rocm-gfx906")
        host, _, repo = rest.partition("/")
        repo = repo.strip("/")
        if not host or not repo or not _REPO_RE.match(repo):
            raise ConfigError(f"'{text}': the repository '{repo}' is not a valid OCI name",
                              tip="lower-case letters, digits and . _ - in /-separated parts, "
                                  "e.g. oci://ghcr.io/me/rocm-gfx906")
        hostname = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if scheme == "oci+http" or (scheme == "oci" and hostname in _LOOPBACK):
            web = "http"
        else:
            web = "https"
        return cls(web, host, repo, text)


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- credentials ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Credentials:
    username: str = ""
    secret: str = ""
    identity_token: str = ""  # an OAuth refresh token (docker login to some registries)

    def basic(self) -> str:
        raw = f"{self.username}:{self.secret}".encode()
        return "Basic " + base64.b64encode(raw).decode()


def docker_config_path(env: Mapping[str, str]) -> Path:
    folder = env.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    return Path(folder) / "config.json"


def _host_keys(host: str) -> list[str]:
    keys = [host, f"https://{host}", f"http://{host}", f"https://{host}/v1/",
            f"https://{host}/v2/"]
    if host in ("docker.io", "registry-1.docker.io"):
        keys.append("https://index.docker.io/v1/")
    return keys


def credentials_for(host: str, env: Mapping[str, str] | None = None) -> Credentials | None:
    env = os.environ if env is None else env
    override = env.get(AUTH_ENV)
    if override:
        user, sep, secret = override.partition(":")
        if not sep:
            raise ConfigError(f"{AUTH_ENV} must be USER:SECRET (a password or a token)",
                              tip=f"export {AUTH_ENV}=me:ghp_…")
        return Credentials(user, secret)
    path = docker_config_path(env)
    if not path.is_file():
        return None
    try:
        config = parse_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable Docker config ({exc})",
                          tip=f"fix {path}, or set {AUTH_ENV}=USER:SECRET") from None
    auths = config.get("auths") or {}
    for key in _host_keys(host):
        entry = auths.get(key)
        if not isinstance(entry, dict):
            continue
        if entry.get("identitytoken"):
            return Credentials(identity_token=str(entry["identitytoken"]))
        if entry.get("auth"):
            try:
                user, _, secret = base64.b64decode(entry["auth"]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                raise ConfigError(f"{path}: auths.{key}.auth is not base64 of USER:SECRET",
                                  tip="run `docker login` again") from None
            return Credentials(user, secret)
    helper = (config.get("credHelpers") or {}).get(host) or config.get("credsStore")
    return _from_helper(str(helper), host) if helper else None


def _from_helper(helper: str, host: str) -> Credentials | None:
    """docker-credential-<helper> get (the Docker credential helper protocol)."""
    program = shutil.which(f"docker-credential-{helper}")
    if program is None:
        return None
    done = proc.run_capture([program, "get"], input=host, timeout=30.0)
    try:
        doc = parse_json(done.stdout) if done.ok else {}
    except ValueError:
        return None
    if not isinstance(doc, dict) or not doc.get("Secret"):
        return None
    if doc.get("Username") == "<token>":
        return Credentials(identity_token=str(doc["Secret"]))
    return Credentials(str(doc.get("Username", "")), str(doc["Secret"]))


class Body(Protocol):
    """A request body http.client streams: read in blocks, rewound for a second try."""

    def read(self, size: int = -1, /) -> bytes: ...

    def tell(self) -> int: ...

    def seek(self, at: int, /) -> Any: ...


# --- the client ----------------------------------------------------------------------------
def _challenge(header: str) -> tuple[str, dict[str, str]]:
    """The scheme and parameters of a WWW-Authenticate header."""
    scheme, _, rest = header.strip().partition(" ")
    params = dict(re.findall(r'(\w+)="([^"]*)"', rest))
    return scheme.lower(), params


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: http.client.HTTPResponse = field(repr=False)
    conn: http.client.HTTPConnection = field(repr=False)

    def read(self) -> bytes:
        try:
            return self.body.read()
        finally:
            self.close()

    def close(self) -> None:
        self.body.close()
        self.conn.close()

    def header(self, name: str) -> str:
        return self.headers.get(name) or ""


class Client:
    """One repository of one registry."""

    def __init__(self, ref: Reference, credentials: Credentials | None = None,
                 timeout: float = TIMEOUT) -> None:
        self.ref = ref
        self.credentials = credentials
        self.timeout = timeout
        self._auth: str | None = None  # the Authorization header that worked last

    @property
    def base(self) -> str:
        return f"{self.ref.scheme}://{self.ref.host}/v2/{self.ref.repository}"

    # transport
    def _connect(self, url: str) -> tuple[http.client.HTTPConnection, str]:
        parts = urllib.parse.urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.netloc, timeout=self.timeout,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(parts.netloc, timeout=self.timeout)
        return conn, path

    def _send(self, method: str, url: str, headers: Mapping[str, str],
              body: bytes | Body | None) -> Response:
        conn, path = self._connect(url)
        try:
            conn.request(method, path, body=body, headers=dict(headers))
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise CacheUnavailable(f"cannot reach the registry {self.ref.host}: "
                                   f"{_reason(exc)}",
                                   tip="check the address and that the registry runs; a "
                                       "build goes on without the cache") from None
        return Response(resp.status, resp.headers, resp, conn)

    def request(self, method: str, url: str, headers: Mapping[str, str] | None = None,
                body: bytes | Body | None = None, scope: str = "pull",
                redirects: int = 5) -> Response:
        """One request with the registry's auth: on a 401 the challenge is answered once and
        the request sent again (a body that is a file is rewound for it). Redirects (blob
        storage on another host) are followed without the registry's Authorization."""
        sent = dict(headers or {})
        if self._auth:
            sent["Authorization"] = self._auth
        start = body.tell() if body is not None and not isinstance(body, bytes) else 0
        resp = self._send(method, url, sent, body)
        if resp.status == 401:
            challenge = resp.header("WWW-Authenticate")
            resp.read()
            self._auth = self._answer(challenge, scope)
            sent["Authorization"] = self._auth
            if body is not None and not isinstance(body, bytes):
                body.seek(start)
            resp = self._send(method, url, sent, body)
            if resp.status == 401:
                resp.read()
                raise RegistryError(f"the registry {self.ref.host} refused the credentials "
                                    f"for {self.ref.repository} ({scope})",
                                    tip=_login_tip(self.ref.host))
        while resp.status in (301, 302, 303, 307, 308) and redirects > 0 and \
                method in ("GET", "HEAD"):
            target = urllib.parse.urljoin(url, resp.header("Location"))
            resp.read()
            plain = {k: v for k, v in sent.items() if k != "Authorization"}
            same = urllib.parse.urlsplit(target).netloc == urllib.parse.urlsplit(url).netloc
            resp = self._send(method, target, sent if same else plain, None)
            url, redirects = target, redirects - 1
        return resp

    def _answer(self, challenge: str, scope: str) -> str:
        kind, params = _challenge(challenge)
        creds = self.credentials
        if kind == "basic":
            if creds is None or not creds.username:
                raise RegistryError(f"the registry {self.ref.host} needs a login",
                                    tip=_login_tip(self.ref.host))
            return creds.basic()
        if kind != "bearer" or "realm" not in params:
            raise RegistryError(f"the registry {self.ref.host} asks for '{challenge}', an "
                                "authentication rocbuild does not speak")
        actions = "pull" if scope == "pull" else "pull,push" if scope == "push" else scope
        query = {"service": params.get("service", ""),
                 "scope": params.get("scope") or f"repository:{self.ref.repository}:{actions}"}
        if scope != "pull" and "scope" in params:  # ask for what the request needs
            query["scope"] = f"repository:{self.ref.repository}:{actions}"
        headers: dict[str, str] = {}
        if creds is not None and creds.identity_token:
            body = urllib.parse.urlencode({**query, "grant_type": "refresh_token",
                                           "refresh_token": creds.identity_token,
                                           "client_id": "rocbuild"}).encode()
            resp = self._send("POST", params["realm"],
                              {"Content-Type": "application/x-www-form-urlencoded"}, body)
        else:
            if creds is not None and creds.username:
                headers["Authorization"] = creds.basic()
            url = params["realm"] + ("&" if "?" in params["realm"] else "?") + \
                urllib.parse.urlencode(query)
            resp = self._send("GET", url, headers, None)
        data = resp.read()
        if resp.status != 200:
            raise RegistryError(f"the token service of {self.ref.host} said HTTP "
                                f"{resp.status} for {query['scope']}",
                                tip=_login_tip(self.ref.host))
        try:
            doc = parse_json(data)
            token = doc.get("token") or doc.get("access_token")
        except (ValueError, AttributeError, RecursionError):
            token = None
        if not token:
            raise RegistryError(f"the token service of {self.ref.host} sent no token")
        return f"Bearer {token}"

    def _expect(self, resp: Response, ok: tuple[int, ...], what: str) -> Response:
        if resp.status in ok:
            return resp
        detail = _error_text(resp.read())
        raise RegistryError(f"{self.ref.host}: {what}: HTTP {resp.status}{detail}")

    # manifests
    def get_manifest(self, reference: str) -> tuple[bytes, str] | None:
        """The manifest (bytes and media type) a tag or digest names; None when absent."""
        resp = self.request("GET", f"{self.base}/manifests/{reference}",
                            {"Accept": f"{MANIFEST_TYPE}, {INDEX_TYPE}"})
        if resp.status == 404:
            resp.read()
            return None
        self._expect(resp, (200,), f"reading the manifest {reference}")
        data = resp.read()
        said = resp.header("Docker-Content-Digest")
        if reference.startswith("sha256:") and digest_of(data) != reference:
            raise RegistryError(f"{self.ref.host}: the manifest {reference} does not match "
                                "its digest")
        if said and said.startswith("sha256:") and said != digest_of(data):
            raise RegistryError(f"{self.ref.host}: the manifest {reference} does not match "
                                f"the digest the registry gives ({said})")
        return data, resp.header("Content-Type").split(";")[0]

    def put_manifest(self, reference: str, data: bytes, media_type: str) -> str:
        resp = self.request("PUT", f"{self.base}/manifests/{reference}",
                            {"Content-Type": media_type}, data, scope="push")
        self._expect(resp, (201, 200), f"storing the manifest {reference}")
        resp.read()
        return digest_of(data)

    def delete_manifest(self, digest: str) -> bool:
        """False when the registry does not allow deletes (the reference registry's
        ``storage.delete.enabled: false``, a registry that forbids it)."""
        resp = self.request("DELETE", f"{self.base}/manifests/{digest}", scope="delete")
        resp.read()
        if resp.status in (202, 200, 404):
            return True
        if resp.status in (405, 403, 400):
            return False
        raise RegistryError(f"{self.ref.host}: deleting {digest}: HTTP {resp.status}")

    def tags(self) -> list[str]:
        out: list[str] = []
        url: str | None = f"{self.base}/tags/list?n=1000"
        while url:
            resp = self.request("GET", url)
            if resp.status == 404:
                resp.read()
                return out
            self._expect(resp, (200,), "listing the tags")
            link = resp.header("Link")
            try:
                tags = (parse_json(resp.read()) or {}).get("tags") or []
            except (ValueError, AttributeError, TypeError):
                raise RegistryError(f"{self.ref.host}: the tag list is not the JSON object "
                                    "a registry sends") from None
            out.extend(t for t in tags if isinstance(t, str))
            found = re.match(r"\s*<([^>]+)>", link) if link else None
            url = urllib.parse.urljoin(url, found[1]) if found else None
        return out

    # blobs
    def blob_exists(self, digest: str) -> bool:
        resp = self.request("HEAD", f"{self.base}/blobs/{digest}")
        resp.close()
        return resp.status == 200

    def get_blob(self, digest: str) -> bytes:
        """A small blob (a config), checked against its digest."""
        resp = self._expect(self.request("GET", f"{self.base}/blobs/{digest}"), (200,),
                            f"reading the blob {digest[:19]}")
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as exc:  # IncompleteRead: a dropped line
            raise BlobDamaged(f"{self.ref.host}: the connection broke off while reading the "
                              f"blob {digest[:19]}… ({type(exc).__name__})") from None
        if digest_of(data) != digest:
            raise BlobDamaged(f"{self.ref.host}: the blob {digest[:19]}… does not match its "
                              "digest")
        return data

    def open_blob(self, digest: str, offset: int) -> tuple[Iterator[bytes], int]:
        """A large blob from ``offset``, streamed; returns the chunks and the offset they
        really start at. A connection that breaks off is opened again with a Range request
        from the bytes received so far (RETRIES times), so a registry or a proxy that drops
        the stream mid-layer costs a reconnect, not the layer."""
        first = self._blob_from(digest, offset)

        def chunks() -> Iterator[bytes]:
            resp, at, end = first
            tries = 0
            while True:
                try:
                    for chunk in iter(functools.partial(resp.body.read, READ_CHUNK), b""):
                        at += len(chunk)
                        yield chunk
                    resp.close()
                    if end is None or at >= end:
                        return
                    # http.client returns b"" when the peer closes early: not the end
                    raise http.client.IncompleteRead(b"", end - at)
                except (OSError, http.client.HTTPException) as exc:
                    resp.close()
                    tries += 1
                    if tries > RETRIES:
                        raise CacheUnavailable(
                            f"the download of {digest[:19]}… from {self.ref.host} broke off "
                            f"{RETRIES + 1} times ({_reason(exc)})",
                            tip="run the build again: the download continues") from None
                    time.sleep(RETRY_PAUSE * tries)
                    resp, begun, end = self._blob_from(digest, at)
                    if begun != at:  # no Range support: the caller starts over cleanly
                        resp.close()
                        raise CacheUnavailable(
                            f"the download of {digest[:19]}… broke off and {self.ref.host} "
                            "cannot continue it (no Range)",
                            tip="run the build again") from None

        return chunks(), first[1]

    def _blob_from(self, digest: str, offset: int) -> tuple[Response, int, int | None]:
        """The blob's response from ``offset`` (or from 0 when the registry ignores Range),
        where it starts, and where it should end (None: unknown length)."""
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        resp = self.request("GET", f"{self.base}/blobs/{digest}", headers)
        if resp.status == 416 and offset:
            resp.read()
            return self._blob_from(digest, 0)
        self._expect(resp, (200, 206), f"downloading the blob {digest[:19]}…")
        begun = offset if resp.status == 206 else 0
        length = resp.header("Content-Length")
        return resp, begun, begun + int(length) if length.isdigit() else None

    def push_blob(self, path: Path, digest: str, size: int,
                  progress: Any = None) -> None:
        """Upload a file as a blob unless the registry has it: POST a session, PATCH chunks of
        UPLOAD_CHUNK read from the file (never more in memory), PUT with the digest. When a
        PATCH fails, the session's own record (GET → Range) says how much arrived and the
        upload goes on from there; a registry that cannot continue the session gets a clean
        new upload from 0 (RETRIES times in all). The registry checks the digest on the PUT,
        so a wrong resume cannot store a wrong blob."""
        if self.blob_exists(digest):
            if progress:
                progress(size, size)
            return
        location = self._start_upload()
        done, tries = 0, 0
        with path.open("rb") as f:
            while done < size:
                n = min(UPLOAD_CHUNK, size - done)
                f.seek(done)
                try:
                    resp = self.request("PATCH", location, {
                        "Content-Type": "application/octet-stream",
                        "Content-Length": str(n),
                        "Content-Range": f"{done}-{done + n - 1}"}, _Slice(f, n), scope="push")
                    self._expect(resp, (202,), "uploading a chunk")
                    resp.read()
                    location = self._location(resp)
                    done += n
                    tries = 0
                    if progress:
                        progress(done, size)
                except CacheUnavailable:
                    tries += 1
                    if tries > RETRIES:
                        raise
                    time.sleep(RETRY_PAUSE * tries)
                    found = self._uploaded(location)
                    if found is None:  # the session cannot go on: a clean new one from 0
                        location, done = self._start_upload(), 0
                    else:
                        done = found
        sep = "&" if "?" in location else "?"
        resp = self.request("PUT", f"{location}{sep}digest={urllib.parse.quote(digest)}",
                            {"Content-Length": "0"}, b"", scope="push")
        self._expect(resp, (201,), f"finishing the upload of {digest[:19]}…")
        resp.read()

    def _start_upload(self) -> str:
        resp = self.request("POST", f"{self.base}/blobs/uploads/",
                            {"Content-Length": "0"}, b"", scope="push")
        self._expect(resp, (202,), "starting an upload")
        resp.read()
        return self._location(resp)

    def push_bytes(self, data: bytes) -> str:
        digest = digest_of(data)
        if self.blob_exists(digest):
            return digest
        url = f"{self.base}/blobs/uploads/?digest={urllib.parse.quote(digest)}"
        resp = self.request("POST", url, {"Content-Type": "application/octet-stream",
                                          "Content-Length": str(len(data))}, data,
                            scope="push")
        if resp.status == 202:  # no monolithic POST here: PUT to the session
            resp.read()
            location = self._location(resp)
            sep = "&" if "?" in location else "?"
            resp = self.request("PUT", f"{location}{sep}digest={urllib.parse.quote(digest)}",
                                {"Content-Type": "application/octet-stream",
                                 "Content-Length": str(len(data))}, data, scope="push")
        self._expect(resp, (201,), f"storing the blob {digest[:19]}…")
        resp.read()
        return digest

    def _location(self, resp: Response) -> str:
        where = resp.header("Location")
        if not where:
            raise RegistryError(f"{self.ref.host}: an upload answer without a Location")
        return urllib.parse.urljoin(self.base + "/", where)

    def _uploaded(self, location: str) -> int | None:
        """How many bytes an upload session holds (its Range header, '0-<last>'), or None
        when the session cannot be continued (the reference registry refuses a session whose
        state token no longer matches what it stored, as after a PATCH cut off midway)."""
        resp = self.request("GET", location, scope="push")
        resp.read()
        found = re.match(r"^(?:bytes=)?0-(\d+)$", resp.header("Range"))
        return int(found[1]) + 1 if resp.status == 204 and found else None


class _Slice:
    """The next ``n`` bytes of a file, as a body http.client streams (it calls read)."""

    def __init__(self, f: IO[bytes], n: int) -> None:
        self.f, self.left, self.start = f, n, f.tell()

    def read(self, size: int = -1, /) -> bytes:
        want = self.left if size < 0 else min(size, self.left)
        data = self.f.read(min(want, READ_CHUNK))
        self.left -= len(data)
        return data

    def tell(self) -> int:
        return self.f.tell()

    def seek(self, at: int, /) -> None:
        self.left += self.f.tell() - at
        self.f.seek(at)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return str(exc) or type(exc).__name__


def _error_text(body: bytes) -> str:
    try:
        errors = parse_json(body).get("errors") or []
        text = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors)
    except (ValueError, AttributeError, TypeError, RecursionError):
        text = ""
    return f" ({text})" if text else ""


def _login_tip(host: str) -> str:
    return (f"`docker login {host}` (rocbuild reads ~/.docker/config.json), or set "
            f"{AUTH_ENV}=USER:TOKEN")
