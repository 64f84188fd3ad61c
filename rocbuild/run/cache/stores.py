"""Where artifacts are kept: the kinds of store, each found by the scheme of its location.

A store is read through ReadStore (a manifest, its signature, the index, the archive's
bytes) and written through WriteStore (push, sign, remove); a read-only kind (HTTP) has no
writer. Each kind is registered here by its URL schemes (a location without one is a
folder), so neither the settings nor the commands name a kind: a new kind (an S3 bucket) is
one module with a class of these methods and one `register` call. The folder and HTTP stores
are cache_store's, the OCI registry's cache_oci's (imported when an oci:// location is opened:
its client loads ssl).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rocbuild.errors import ConfigError
from rocbuild.run.cache.cache_store import FolderStore, HttpStore

if TYPE_CHECKING:
    from rocbuild.run.cache.artifacts import Manifest, Progress


class ReadStore(Protocol):
    location: str

    def read_manifest(self, component: str, key: str) -> dict[str, Any] | None:
        """The manifest document for ``key``, or None when the cache has no such artifact."""

    def read_signature(self, component: str, key: str) -> str | None:
        """The signature over the manifest of ``key``, or None when it is not signed."""

    def index(self) -> list[dict[str, Any]]:
        """The index entries (one per artifact)."""

    def open_archive(self, component: str, key: str, offset: int
                      ) -> tuple[Iterator[bytes], int]:
        """Chunks of the archive from ``offset`` and the offset they really start at (0 when
        the source cannot seek)."""


class WriteStore(ReadStore, Protocol):
    def push(self, manifest: Manifest, archive: Path, progress: Progress | None = None,
             signature: str | None = None) -> None:
        """Store an artifact: its manifest last, so no reader finds it without its archive."""

    def write_signature(self, manifest: Manifest, signature: str) -> None:
        """Sign an artifact that is in the store already."""

    def remove(self, entries: list[dict[str, Any]]) -> list[str]:
        """Delete these index entries' artifacts; the problems (empty: all gone)."""

    def clear_temps(self) -> list[str]:
        """Remove what a killed push left in the store; what was removed."""


@dataclass(frozen=True)
class Kind:
    schemes: tuple[str, ...]  # "" a location without a scheme
    form: str  # how a location of this kind is written, for messages
    read: Callable[[str], ReadStore]
    write: Callable[[str], WriteStore] | None = None  # None: read-only
    read_only: str = ""  # why it cannot be written, and what to give instead


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Open locations of ``kind.schemes`` with ``kind``."""
    _KINDS.update(dict.fromkeys(kind.schemes, kind))
    return kind


def kind_of(location: str) -> Kind:
    scheme, sep, _ = location.partition("://")
    kind = _KINDS.get(scheme if sep else "")
    if kind is None:
        forms = ", ".join(dict.fromkeys(k.form for k in _KINDS.values()))
        raise ConfigError(f"cache '{location}': no kind of cache is reached by {scheme}://; a "
                          f"cache is one of: {forms}", tip="give one of those as --cache")
    return kind


def open_reader(location: str) -> ReadStore:
    """The store of the `cache` setting, to install from or list."""
    return kind_of(location).read(location)


def open_writer(location: str, verb: str) -> WriteStore:
    """The store at ``location`` for `cache push` or `cache prune` (``verb``)."""
    kind = kind_of(location)
    if kind.write is None:
        forms = ", ".join(dict.fromkeys(k.form for k in _KINDS.values() if k.write))
        raise ConfigError(f"cannot {verb} {location}: {kind.read_only}",
                          tip=f"give a store that takes writes: {forms}")
    return kind.write(location)


def _folder(location: str) -> Path:
    if location.startswith("file://"):
        return Path(urllib.parse.unquote(urllib.parse.urlparse(location).path))
    return Path(os.path.expanduser(location)).absolute()


def _read_folder(location: str) -> ReadStore:
    root = _folder(location)
    if not root.is_dir():
        raise ConfigError(f"cache folder {root} does not exist",
                          tip="create it with `rocbuild cache push --to DIR`, or fix --cache")
    return FolderStore(root)


def _write_folder(location: str) -> WriteStore:
    return FolderStore(_folder(location))  # made by the first push


def _oci(location: str) -> WriteStore:
    from rocbuild.run.cache.cache_oci import OciStore

    return OciStore(location)


register(Kind(("", "file"), "a folder", _read_folder, _write_folder))
register(Kind(("http", "https"), "an http(s):// URL serving one", HttpStore,
              read_only="an HTTP cache is read-only (give the folder the server serves)"))
register(Kind(("oci", "oci+http", "oci+https"), "oci://REGISTRY/NAMESPACE/NAME", _oci, _oci))
