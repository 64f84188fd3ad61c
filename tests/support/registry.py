"""Real OCI registries on loopback for the binary cache tests: Debian's ``docker-registry``
(the reference distribution registry) with a config written into the test's folder, with
no auth or with Bearer token auth served by a small token server (a child process that
checks a user's password and signs RS256 JWTs with ``openssl``, as the distribution token
protocol asks), and a TCP proxy that drops the connection partway through one blob.

Every process here is started by the test and stopped by it; nothing leaves loopback."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import require_tool

SERVICE = "rocbuild-test-registry"
ISSUER = "rocbuild-test-tokens"


def free_port() -> int:
    """A loopback port free now (the registry cannot listen on port 0 and report it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(url: str, proc: subprocess.Popen, log: Path, ok: tuple[int, ...]) -> None:
    for _ in range(200):  # bounded: 200 tries, 50 ms apart
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args} ended early: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status in ok:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code in ok:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} did not answer: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=20)


@dataclasses.dataclass
class Registry:
    host: str  # 127.0.0.1:PORT
    root: Path  # its storage folder
    user: str = ""
    password: str = ""

    def url(self, repo: str = "rocbuild/gfx906") -> str:
        return f"oci://{self.host}/{repo}"

    def blob_file(self, digest: str) -> Path:
        """Where the filesystem driver keeps a blob (for tests that damage one)."""
        hexdigest = digest.removeprefix("sha256:")
        return (self.root / "docker/registry/v2/blobs/sha256" / hexdigest[:2] / hexdigest
                / "data")


TOKEN_SERVER = textwrap.dedent("""\
    import base64, http.server, json, subprocess, sys, time, urllib.parse, uuid
    port, key, cert_der, user, password, issuer = sys.argv[1:7]
    x5c = base64.b64encode(open(cert_der, "rb").read()).decode()

    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            given = self.headers.get("Authorization", "")
            want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            if given != want:
                self.send_response(401)
                self.end_headers()
                return
            access = []
            for scope in query.get("scope", []):
                kind, name, actions = scope.split(":")
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
            now = int(time.time())
            claims = {"iss": issuer, "sub": user, "aud": query["service"][0],
                      "exp": now + 600, "nbf": now - 10, "iat": now, "jti": uuid.uuid4().hex,
                      "access": access}
            head = {"typ": "JWT", "alg": "RS256", "x5c": [x5c]}
            signed = b64(json.dumps(head).encode()) + "." + b64(json.dumps(claims).encode())
            sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key],
                                 input=signed.encode(), capture_output=True, check=True).stdout
            body = json.dumps({"token": signed + "." + b64(sig), "expires_in": 600}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Handler).serve_forever()
    """)


@contextlib.contextmanager
def registry(folder: Path, *, token_user: str = "", token_password: str = "",
             down: bool = False) -> Iterator[Registry]:
    """A reference registry on a free loopback port, storing under ``folder``; with
    ``token_user`` it requires Bearer tokens from a token server started beside it."""
    require_tool("docker-registry")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    auth = ""
    procs: list[subprocess.Popen] = []
    try:
        if token_user:
            require_tool("openssl")
            key, cert, der = folder / "token.key", folder / "token.pem", folder / "token.der"
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                            "-keyout", str(key), "-out", str(cert), "-days", "2",
                            "-subj", "/CN=rocbuild-test-tokens"], check=True,
                           capture_output=True)
            subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "DER",
                            "-out", str(der)], check=True, capture_output=True)
            token_port = free_port()
            token_log = folder / "token.log"
            with token_log.open("w") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", TOKEN_SERVER, str(token_port), str(key), str(der),
                     token_user, token_password, ISSUER], stdout=log, stderr=subprocess.STDOUT))
            _wait_for(f"http://127.0.0.1:{token_port}/token", procs[-1], token_log, (401,))
            auth = textwrap.dedent(f"""\
                auth:
                  token:
                    realm: http://127.0.0.1:{token_port}/token
                    service: {SERVICE}
                    issuer: {ISSUER}
                    rootcertbundle: {cert}
                """)
        config = folder / "config.yml"
        config.write_text(textwrap.dedent(f"""\
            version: 0.1
            log:
              level: warn
              accesslog:
                disabled: true
            storage:
              filesystem:
                rootdirectory: {folder / "data"}
              delete:
                enabled: true
            http:
              addr: 127.0.0.1:{port}
            """) + auth)
        reg = Registry(f"127.0.0.1:{port}", folder / "data", token_user, token_password)
        if down:  # nothing listens on the port
            yield reg
            return
        log_file = folder / "registry.log"
        with log_file.open("w") as log:
            procs.append(subprocess.Popen(["docker-registry", "serve", str(config)],
                                          stdout=log, stderr=subprocess.STDOUT))
        _wait_for(f"http://{reg.host}/v2/", procs[-1], log_file, (200, 401))
        yield reg
    finally:
        for proc in reversed(procs):
            _stop(proc)


DROPPING_PROXY = textwrap.dedent("""\
    # forwards loopback TCP to the registry; the first GET of the blob named on the command
    # line is cut off after CUT bytes of its response (or, with the method PATCH, the first
    # upload chunk after CUT bytes of its request); logs each request line and Range
    import socket, sys, threading
    upstream_port, digest, cut = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    log_path, method = sys.argv[4], sys.argv[5]
    dropped = threading.Event()
    lock = threading.Lock()
    patches = []

    def pump(src, dst, limit=None):
        sent = 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if limit is not None and sent + len(data) >= limit:
                    dst.sendall(data[:limit - sent])
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle(client):
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            data = client.recv(65536)
            if not data:
                client.close()
                return
            head += data
        lines = head.split(b"\\r\\n\\r\\n")[0].decode("latin-1").split("\\r\\n")
        ranged = [l for l in lines if l.lower().startswith("range:")]
        limit = None
        with lock:
            with open(log_path, "a") as log:
                log.write(lines[0] + " | " + (ranged[0] if ranged else "-") + "\\n")
            wanted = (lines[0].startswith("PATCH ") if method.startswith("PATCH") else
                      lines[0].startswith("GET ") and digest in lines[0])
            if wanted and not dropped.is_set() and method != "PATCH-503":
                dropped.set()
                limit = cut
        if method == "PATCH-503" and lines[0].startswith("PATCH "):
            with lock:
                patches.append(lines[0])
                refuse = len(patches) == cut  # the cut-th PATCH, never passed on
            if refuse:
                size = int(next(l.split(":", 1)[1] for l in lines
                                if l.lower().startswith("content-length:")))
                body = len(head.split(b"\\r\\n\\r\\n", 1)[1])
                while body < size:
                    data = client.recv(65536)
                    if not data:
                        break
                    body += len(data)
                client.sendall(b"HTTP/1.1 503 Service Unavailable\\r\\nContent-Length: 0\\r\\n"
                               b"Connection: close\\r\\n\\r\\n")
                client.close()
                return
        up = socket.create_connection(("127.0.0.1", upstream_port))
        if method == "PATCH" and limit is not None:  # the head and part of the body only
            up.sendall(head[:limit])
            pump(client, up, max(0, limit - len(head)))
            client.close()
            up.close()
            return
        up.sendall(head)
        threading.Thread(target=pump, args=(client, up), daemon=True).start()
        pump(up, client, limit)
        client.close()
        up.close()

    server = socket.create_server(("127.0.0.1", 0))
    print(server.getsockname()[1], flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()
    """)


@contextlib.contextmanager
def dropping_proxy(reg: Registry, digest: str, cut: int, log: Path,
                   method: str = "GET") -> Iterator[str]:
    """A proxy to ``reg`` that cuts the first download of ``digest`` after ``cut`` bytes of
    its response (``method`` PATCH: the first upload chunk after ``cut`` bytes of the
    request; PATCH-503: the ``cut``-th upload chunk is answered 503 and never reaches the
    registry); yields its host:port."""
    proc = subprocess.Popen([sys.executable, "-u", "-c", DROPPING_PROXY,
                             reg.host.rsplit(":", 1)[1], digest, str(cut), str(log), method],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield f"127.0.0.1:{proc.stdout.readline().strip()}"
    finally:
        _stop(proc)


def docker_config(folder: Path, reg: Registry) -> dict[str, str]:
    """A Docker credential file for ``reg`` (as `docker login` writes it); the env to use."""
    import base64
    folder.mkdir(parents=True, exist_ok=True)
    auth = base64.b64encode(f"{reg.user}:{reg.password}".encode()).decode()
    (folder / "config.json").write_text(json.dumps({"auths": {reg.host: {"auth": auth}}}))
    return {"DOCKER_CONFIG": str(folder)}
