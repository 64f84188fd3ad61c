"""A jobserver client in a test's hands: tokens read from and written to a job pool's FIFO
as ninja reads and writes them (one byte per job beyond its first), so a test drives the
pool (run/engine/jobserver.py) without a build."""

from __future__ import annotations

import os

from rocbuild.run.engine.jobserver import JobPool


def drain(pool: JobPool) -> int:
    """Every token in the FIFO, read as a client reads them (taken out)."""
    fd = os.open(pool.path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        got = 0
        while True:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                return got
            if not chunk:
                return got
            got += len(chunk)
    finally:
        os.close(fd)


def take(pool: JobPool, count: int) -> None:
    """A client takes ``count`` tokens (and may die with them)."""
    fd = os.open(pool.path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert len(os.read(fd, count)) == count
    finally:
        os.close(fd)


def put_back(pool: JobPool, count: int) -> None:
    """A client's jobs end: their tokens go back."""
    fd = os.open(pool.path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, b"+" * count)
    finally:
        os.close(fd)
