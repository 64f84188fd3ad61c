"""One job pool for the whole run: rocbuild serves the GNU make jobserver protocol and every
concurrent CMake/ninja build is its client.

Why the protocol: ninja (>= 1.13), GNU make and CMake's Makefile generator already speak it,
so a compile that ends hands its slot at once to whichever build needs one, where a budget
split when each component starts left three components one job and the fourth sixteen.
ninja 1.13 is a client when its command line has no ``-j`` and ``MAKEFLAGS`` holds
``--jobserver-auth=fifo:PATH`` (ninja's doc/manual.asciidoc, "GNU Jobserver support"; the
pipe form ``--jobserver-auth=R,W`` it ignores with a warning; src/jobserver.cc). Each client
runs one job without a token (the implicit slot); rocbuild takes a token from the pool for it
before the client starts, as make does for a sub-make, so the jobs running never exceed the
pool's size however many clients run.

Which trees are clients is their build system's answer (BuildSystem.why_no_pool_client: a
CMake tree whose ninja is >= 1.13); a build that is none takes an explicit ``-j`` count of
tokens instead.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from rocbuild.errors import BuildFailed

TOKEN = b"+"
_POLL = 0.2  # seconds between looks at whether the pool was closed while waiting


POOL_PREFIX = "rocbuild-jobs-"


def stale_pools(folder: Path | None = None) -> list[Path]:
    """The job pool folders (``<TMPDIR>/rocbuild-jobs-<pid>-*``) of this user's runs that are
    gone: a SIGKILLed run cannot remove its own, and they piled up in $TMPDIR."""
    root = Path(folder or tempfile.gettempdir())
    out = []
    for path in sorted(root.glob(f"{POOL_PREFIX}*-*")):
        pid = path.name[len(POOL_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or path.is_symlink() or path.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)  # alive (ours or not): its pool may be in use
        except ProcessLookupError:
            out.append(path)
        except OSError:  # PermissionError: alive, another user's; or the folder went away
            continue
    return out


class JobPool:
    """``size`` job slots served as a GNU make jobserver FIFO (``makeflags``): clients take a
    token per job beyond their first and put it back when the job ends; ``hold`` takes tokens
    for rocbuild itself (a client's implicit slot, an explicit ``-j`` build, a Tensile pool).
    ``resize`` changes the size while clients run (poolsize.py): new tokens go in at once;
    tokens above a smaller size are taken out as they come back (``_excess``)."""

    def __init__(self, size: int, folder: Path | None = None) -> None:
        self.size = max(1, size)
        # the pid in the name: a run killed with SIGKILL leaves the folder, and the next run
        # (leftovers.clean) removes those whose run is gone (stale_pools)
        self._dir = Path(tempfile.mkdtemp(prefix=f"{POOL_PREFIX}{os.getpid()}-", dir=folder))
        self.path = self._dir / "fifo"
        os.mkfifo(self.path, 0o600)
        # read and write ends in one descriptor: the FIFO never reads end-of-file while the
        # run lives, and writing never blocks (a pipe holds far more than a pool's tokens)
        self._fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        os.write(self._fd, TOKEN * self.size)
        self._lock = threading.Lock()
        self._held = 0  # tokens rocbuild holds now
        self._clients = 0  # client builds running now
        self._excess = 0  # tokens out (in the FIFO or a client's hands) above ``size``
        self._closed = False

    def makeflags(self) -> str:
        """MAKEFLAGS for a client, in GNU make 4.4's form (a leading space: no flag letters)."""
        return f" -j{self.size} --jobserver-auth=fifo:{self.path}"

    def resize(self, size: int) -> None:
        """The pool holds ``size`` tokens from now on: more go into the FIFO at once; fewer are
        taken out of the FIFO now, and the rest as rocbuild's own come back or a client
        puts them back (no running job loses its slot)."""
        with self._lock:
            if self._closed:
                return
            size = max(1, size)
            grow = size - self.size
            self.size = size
            if grow >= 0:
                settled = min(self._excess, grow)  # tokens still out cover part of it
                self._excess -= settled
                if grow - settled:
                    os.write(self._fd, TOKEN * (grow - settled))
            else:
                self._excess -= grow
                self._drain_excess()

    def _drain_excess(self) -> None:
        """Take the tokens above the size out of the FIFO, as many as are in it now."""
        while self._excess > 0:
            try:
                if not os.read(self._fd, 1):
                    return
            except BlockingIOError:
                return
            self._excess -= 1

    def _take_one(self, stop: Callable[[], bool]) -> None:
        while True:
            if self._closed or stop():
                raise BuildFailed("the run ended while this step waited for a job slot")
            ready, _, _ = select.select([self._fd], [], [], _POLL)
            if not ready:
                continue
            with self._lock:  # counted as it is taken: a refill meanwhile must not recreate it
                self._drain_excess()
                try:
                    if os.read(self._fd, 1):
                        self._held += 1
                        return
                except BlockingIOError:  # a client took it first
                    continue

    @contextlib.contextmanager
    def hold(self, count: int, *, client: bool = False,
             stop: Callable[[], bool] = lambda: False) -> Iterator[int]:
        """Hold ``count`` tokens (at most the pool's size), waiting for them as they come
        back; given back on exit. ``client``: the holder starts a jobserver client, whose
        tokens are refilled when the last client ends (a client killed with tokens in hand
        would otherwise lose them for the rest of the run)."""
        count = max(1, min(count, self.size))
        taken, counted = 0, False
        try:
            for _ in range(count):
                self._take_one(stop)
                taken += 1
            with self._lock:
                self._clients += client
                counted = True
            yield count
        finally:
            with self._lock:
                self._held -= taken
                self._clients -= client and counted
                if not self._closed:
                    if self._clients == 0:
                        self._refill()
                    else:
                        back = taken - min(taken, self._excess)
                        self._excess -= taken - back
                        os.write(self._fd, TOKEN * back)

    def _refill(self) -> None:
        """No client runs: the FIFO holds exactly the tokens rocbuild does not hold."""
        while True:
            try:
                if not os.read(self._fd, 4096):
                    break
            except BlockingIOError:
                break
        free = self.size - self._held
        self._excess = max(0, -free)
        os.write(self._fd, TOKEN * max(0, free))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.close(self._fd)
        shutil.rmtree(self._dir, ignore_errors=True)
