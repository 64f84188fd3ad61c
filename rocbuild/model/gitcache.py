"""Where rocbuild keeps a repository's source cache and how mirror rules reach git: pure
rules that the fetch step (run/sources/sources.py) follows and `plan --commands` prints."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path


def insteadof_args(mirror: tuple[tuple[str, str], ...]) -> list[str]:
    """Mirror rules as git config, so submodule URLs are rewritten the same way."""
    args: list[str] = []
    for source, dest in mirror:
        args += ["-c", f"url.{dest}.insteadOf={source}"]
    if mirror:  # git >= 2.38.1 refuses file:// submodules unless told; mirrors are often local
        args += ["-c", "protocol.file.allow=always"]
    return args


def cache_dir(cache_root: Path, url: str) -> Path:
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", url.rstrip("/").rsplit("/", 1)[-1])[:40]
    return cache_root / f"{tail}-{hashlib.sha256(url.encode()).hexdigest()[:12]}.git"


def cache_lock(cache: Path) -> Path:
    """The lock file beside a repository's cache (``<cache>.lock``): components of one
    upstream repository (llama.cpp and llama.cpp-vulkan) share the cache, and with
    --parallel their fetches would create and update it at once."""
    return cache.with_name(cache.name + ".lock")


def cache_ref(ref: str) -> str:
    """Where the cache keeps the commit a recipe's ref named (a tag or branch may move)."""
    return f"refs/rocbuild/pinned/{hashlib.sha256(ref.encode()).hexdigest()[:16]}"


def is_local(url: str) -> bool:
    """A repository on this machine (``file://`` or a plain path): fetching from it needs no
    network, so --offline allows it (a local mirror is what --offline builds use)."""
    return url.startswith(("file://", "/"))
