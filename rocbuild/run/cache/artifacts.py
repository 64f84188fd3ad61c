"""Artifacts of the binary cache: pack a component's installed files into one zstd-compressed
tar with a JSON manifest, check a manifest, and unpack an archive into a prefix.

Pure file work: no doit, no network (cache_store.py moves archives, cache.py decides when one
is used). The manifest is the contract between the machine that built and the one that
installs: every file's path relative to the prefix, type, mode, size, sha256 and link
target, and which files hold the prefix path (so a different prefix is either relocated
safely or refused). Unpacking trusts nothing in the archive: every member must be a manifest
entry with the right type and sha256, no path or link may leave the prefix, and the files are
staged and checked in full before the first one is moved into place, so a refused archive
leaves the prefix as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import re
import tarfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import zstandard

from rocbuild.model import layout, wording
from rocbuild.model.fingerprint import ARTIFACT_FORMAT
from rocbuild.model.paths import resolve_links, within
from rocbuild.prefix import transaction
from rocbuild.prefix.transaction import Transaction

MANIFEST_FORMAT = ARTIFACT_FORMAT  # in every artifact key (model/fingerprint.py)
ARCHIVE_SUFFIX = ".tar.zst"
_CHUNK = 1 << 20
# setuid, setgid, sticky: an artifact is data from another machine, its programs never get
# their owner's rights here (GNU tar drops these bits too when a non-root user extracts)
_PRIVILEGE_BITS = 0o7000

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


class ArtifactRefused(Exception):
    """An artifact that must not be installed; the message says why (shown to the user, and
    the component is then built from source)."""


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the prefix, '/'-separated
    type: str  # "file" or "link"
    mode: int = 0o644
    size: int = 0
    sha256: str = ""
    link: str = ""  # a link's target, as written
    holds_prefix: str = ""  # "", "text" (rewritten on relocation) or "binary" (cannot be)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"path": self.path, "type": self.type, "mode": self.mode}
        if self.type == "file":
            doc.update(size=self.size, sha256=self.sha256)
            if self.holds_prefix:
                doc["holds_prefix"] = self.holds_prefix
        else:
            doc["link"] = self.link
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> FileEntry:
        try:
            return cls(path=str(doc["path"]), type=str(doc["type"]), mode=int(doc["mode"]),
                       size=int(doc.get("size", 0)), sha256=str(doc.get("sha256", "")),
                       link=str(doc.get("link", "")),
                       holds_prefix=str(doc.get("holds_prefix", "")))
        except (KeyError, TypeError, ValueError) as exc:
            message = f"the manifest has a malformed file entry {doc!r}: {exc}"
            raise ArtifactRefused(message) from None


@dataclass(frozen=True)
class Manifest:
    """What an artifact is (the key and the named inputs it hashes, what it was built from)
    and what it holds (every file), stored as ``<key>.json`` beside ``<key>.tar.zst``."""

    component: str
    key: str
    inputs: Mapping[str, Any]  # the named inputs the key is the hash of (cache.py)
    targets: tuple[str, ...]
    prefix: str  # where the files were installed on the machine that built them
    commit: str  # the source commit they were built from
    ref_kind: str  # "tag" or "commit" (branch builds are never pushed, see cache.py)
    rocbuild: str  # rocbuild's version on the machine that built them
    files: tuple[FileEntry, ...]
    archive_sha256: str
    archive_size: int
    created: float = 0.0

    @property
    def archive_name(self) -> str:
        return self.key + ARCHIVE_SUFFIX

    def to_json(self) -> dict[str, Any]:
        return {"rocbuild_artifact": MANIFEST_FORMAT, "component": self.component,
                "key": self.key, "inputs": dict(self.inputs), "targets": list(self.targets),
                "prefix": self.prefix, "commit": self.commit, "ref_kind": self.ref_kind,
                "rocbuild": self.rocbuild, "created": self.created,
                "archive": {"name": self.archive_name, "sha256": self.archive_sha256,
                            "size": self.archive_size},
                "files": [f.to_json() for f in self.files]}

    @classmethod
    def from_json(cls, doc: Any) -> Manifest:
        if not isinstance(doc, dict) or doc.get("rocbuild_artifact") != MANIFEST_FORMAT:
            raise ArtifactRefused("not a rocbuild artifact manifest of format "
                                  f"{MANIFEST_FORMAT}")
        try:
            archive = doc["archive"]
            return cls(component=str(doc["component"]), key=str(doc["key"]),
                       inputs=dict(doc["inputs"]), targets=tuple(map(str, doc["targets"])),
                       prefix=str(doc["prefix"]), commit=str(doc["commit"]),
                       ref_kind=str(doc["ref_kind"]), rocbuild=str(doc["rocbuild"]),
                       files=tuple(FileEntry.from_json(f) for f in doc["files"]),
                       archive_sha256=str(archive["sha256"]), archive_size=int(archive["size"]),
                       created=float(doc.get("created", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactRefused(f"the manifest is malformed ({exc!r})") from None

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- paths: what may be written where ----------------------------------------------------
def safe_relpath(path: str) -> str:
    """``path`` as a normalised path inside the prefix, or ArtifactRefused: no absolute path,
    no ``..`` component, nothing empty."""
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        raise ArtifactRefused(f"the manifest names the path '{path}', which is not a plain "
                              "path inside the prefix")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ArtifactRefused(f"the manifest names the path '{path}', which would leave the "
                              "prefix or is not normalised ('..', '.' or '//')")
    return path


def link_stays_inside(path: str, target: str, prefix: str) -> bool:
    """A link at ``path`` (relative to the prefix) pointing at ``target`` resolves inside the
    prefix (``prefix`` as written in the manifest, for absolute targets)."""
    # an absolute target replaces what it is joined to
    return within(posixpath.join(prefix, posixpath.dirname(path), target), prefix)


def check_entries(entries: Iterable[FileEntry], prefix: str) -> list[FileEntry]:
    """Every entry safe to write into a prefix: known type, plain relative path, a link that
    stays inside, no path given twice. Raises ArtifactRefused naming the first bad one."""
    seen: set[str] = set()
    out = []
    for entry in entries:
        safe_relpath(entry.path)
        if entry.path in seen:
            raise ArtifactRefused(f"the manifest lists '{entry.path}' twice")
        seen.add(entry.path)
        if entry.type == "link":
            if not entry.link or not link_stays_inside(entry.path, entry.link, prefix):
                raise ArtifactRefused(f"the link '{entry.path}' -> '{entry.link}' would point "
                                      "outside the prefix")
        elif entry.type == "file":
            if len(entry.sha256) != 64 or entry.size < 0:
                raise ArtifactRefused(f"the manifest has no valid sha256/size for "
                                      f"'{entry.path}'")
        else:
            raise ArtifactRefused(f"the manifest gives '{entry.path}' the type "
                                  f"'{entry.type}' (only file and link are installed)")
        out.append(entry)
    return out


# --- pack ------------------------------------------------------------------------------------
def describe(prefix: Path, rel: str) -> FileEntry:
    """One installed file as a manifest entry (lstat: a link is recorded, not followed).
    Files are read in chunks (libLLVM is hundreds of MiB): sha256, and whether the prefix
    path occurs in it, in text (no NUL byte) or binary data."""
    path = prefix / rel
    st = path.lstat()
    if path.is_symlink():
        return FileEntry(rel, "link", mode=0o777, link=os.readlink(path))
    if not path.is_file():
        raise ArtifactRefused(f"{path} is neither a file nor a link")
    needle = str(prefix).encode()
    digest, size, found, binary, tail = hashlib.sha256(), 0, False, False, b""
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
            binary = binary or b"\0" in chunk
            window = tail + chunk
            found = found or needle in window
            tail = window[-(len(needle) - 1):] if len(needle) > 1 else b""
    holds = ("binary" if binary else "text") if found else ""
    return FileEntry(rel, "file", mode=st.st_mode & 0o7777, size=size,
                     sha256=digest.hexdigest(), holds_prefix=holds)


def pack(prefix: Path, rel_paths: Iterable[str], archive: Path,
         progress: Progress | None = None, level: int = 10) -> list[FileEntry]:
    """Write the files ``rel_paths`` (relative to ``prefix``) into ``archive`` (.tar.zst,
    written to a temp name and renamed). Returns their manifest entries, in archive order."""
    entries = check_entries([describe(prefix, rel) for rel in sorted(set(rel_paths))],
                            str(prefix))
    total = sum(e.size for e in entries)
    done = 0
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(f".{archive.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as raw, zstandard.ZstdCompressor(level=level, threads=-1) \
            .stream_writer(raw, closefd=False) as packed, \
            tarfile.open(fileobj=packed, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.path)
            info.mode, info.mtime = entry.mode, 0
            if entry.type == "link":
                info.type, info.linkname = tarfile.SYMTYPE, entry.link
                tar.addfile(info)
                continue
            info.size = entry.size
            with (prefix / entry.path).open("rb") as f:
                tar.addfile(info, f)
            done += entry.size
            if progress:
                progress(done, total)
    os.replace(tmp, archive)
    return entries


# --- unpack ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Relocation:
    """Where the artifact was installed and where it goes now."""

    old: str
    new: str

    @property
    def needed(self) -> bool:
        return self.old != self.new

    def rewrite(self, data: bytes) -> bytes:
        """The old prefix replaced where it is a whole path or leads one (``/opt/a/lib``),
        not where it begins a longer name (``/opt/a-old``)."""
        pattern = re.escape(self.old.rstrip("/").encode()) + rb"(?![A-Za-z0-9_.+-])"
        new = self.new.rstrip("/").encode()
        return re.sub(pattern, lambda _: new, data)


def relocation_problems(entries: Iterable[FileEntry], old_prefix: str) -> list[str]:
    """Why the files cannot move to another prefix (empty: they can). A binary holding the
    old prefix (an absolute RUNPATH, a path compiled in) cannot be rewritten safely; text
    files holding it are rewritten, links into it re-pointed."""
    return [f"{e.path} holds the path {old_prefix} in binary data (an absolute RUNPATH or a "
            "compiled-in path; $ORIGIN would relocate)"
            for e in entries if e.holds_prefix == "binary"]


@contextlib.contextmanager
def _open_tar(f: IO[bytes], limit: int) -> Iterator[tarfile.TarFile]:
    """The tar reader over a zstd stream (read once, front to back, at most ``limit``
    bytes unpacked)."""
    reader = _Bounded(zstandard.ZstdDecompressor().stream_reader(f), limit)
    with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
        yield tar


class _Bounded:
    """The decompressed stream, cut at ``limit`` bytes: a tar never holds more than its
    manifest's files plus their headers, so a small archive that inflates to gigabytes (a
    decompression bomb) is refused once it passes what the signed manifest says, not after
    it filled the disk."""

    def __init__(self, raw: Any, limit: int) -> None:
        self.raw, self.limit, self.read_so_far = raw, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size if size >= 0 else self.limit + 1)
        self.read_so_far += len(data)
        if self.read_so_far > self.limit:
            raise ArtifactRefused(f"the archive holds more than its manifest says (over "
                                  f"{self.limit} bytes unpacked): nothing more is read")
        return bytes(data)


def _tar_limit(entries: Iterable[FileEntry]) -> int:
    """The most bytes a tar of ``entries`` can take: each file's data in 512-byte blocks, a
    header (and a PAX header naming a long path or link) per entry, and the end blocks."""
    return (64 << 10) + sum(-(-e.size // 512) * 512 + 2048 + 2 * (len(e.path) + len(e.link))
                            for e in entries)


@dataclass(frozen=True)
class Staged:
    """An artifact unpacked into a transaction's folder and checked in full: the real
    prefix-relative path each entry lands on (every link on the way followed, those of the
    prefix and those of the artifact), nothing of the prefix touched yet."""

    destinations: Mapping[str, str]  # manifest path -> real prefix-relative path
    entries: Mapping[str, FileEntry]
    folder: Path
    relocation: Relocation
    archive_name: str


def destinations(by_path: Mapping[str, FileEntry], prefix: Path, relocation: Relocation,
                 held: Collection[str] = (), reserved: tuple[str, ...] = ()) -> dict[str, str]:
    """Where each entry of an artifact really lands in ``prefix``, with the artifact's own
    links counted as placed: a link ``share/l -> ../include`` makes ``share/l/x.h`` the file
    ``include/x.h``. Raises ArtifactRefused for an entry (or a link's target) that leads out
    of the prefix, into rocbuild's own files (``reserved``), onto a file of another component
    (``held``, real paths), onto a folder, below a file, or onto what another entry writes."""
    def links(rel: str) -> str | None:
        if rel in by_path:  # the artifact's entry replaces what is there now
            entry = by_path[rel]
            return entry.link if entry.type == "link" else None
        path = prefix / rel
        return os.readlink(path) if path.is_symlink() else None

    roots = tuple(dict.fromkeys((relocation.old, relocation.new, os.path.realpath(prefix))))
    out: dict[str, str] = {}
    taken: dict[str, str] = {}
    for path, entry in sorted(by_path.items()):
        real = resolve_links(path, links, roots)
        if not real:
            raise ArtifactRefused(f"'{path}' would be written outside the prefix through a "
                                  "link (of the prefix or of the artifact)")
        where = f"'{path}'" if real == path else f"'{path}' (= '{real}' through a link)"
        if layout.reserved_by(real, reserved):
            raise ArtifactRefused(f"{where} is one of rocbuild's own files in the prefix")
        if real in held:
            raise ArtifactRefused(f"{where} is a file another component installed")
        if real in taken:
            raise ArtifactRefused(f"{where} and '{taken[real]}' are one file")
        if entry.type == "link":
            target = entry.link if entry.link.startswith("/") else \
                posixpath.join(posixpath.dirname(real), entry.link)
            lands = resolve_links(target, links, roots, follow_last=True)
            if lands is None:
                raise ArtifactRefused(f"the link {where} -> '{entry.link}' leads outside the "
                                      "prefix (through the links of the prefix and the "
                                      "artifact)")
            if lands == "" or layout.reserved_by(lands, reserved):
                raise ArtifactRefused(f"the link {where} -> '{entry.link}' leads to rocbuild's "
                                      "own files or the prefix's top folder")
        taken[real] = path
        out[path] = real
    for path, real in out.items():
        disk = prefix / real
        if disk.is_dir() and not disk.is_symlink():
            raise ArtifactRefused(f"cannot install '{path}': a folder is in the way ({real})")
        parent = posixpath.dirname(real)
        while parent:
            if parent in taken or ((prefix / parent).exists() and
                                   not (prefix / parent).is_dir()):
                raise ArtifactRefused(f"cannot install '{path}': '{parent}' on its way is a "
                                      "file")
            parent = posixpath.dirname(parent)
    return out


def stage(archive: Path, entries: list[FileEntry], prefix: Path, relocation: Relocation,
          folder: Path, held: Collection[str] = (), reserved: tuple[str, ...] = ()) -> Staged:
    """Unpack ``archive`` into ``folder`` (inside the prefix's file system) and check all of
    it before a byte of the prefix changes: the manifest's paths (``destinations``), each
    member's type, size (from its header, before its data is read) and sha256, and no more
    bytes than the manifest adds up to. Raises ArtifactRefused."""
    by_path = {e.path: e for e in check_entries(entries, relocation.old)}
    if relocation.needed and (problems := relocation_problems(entries, relocation.old)):
        raise ArtifactRefused(f"cannot relocate from {relocation.old} to {relocation.new}: "
                              + "; ".join(problems[:3]))
    where = destinations(by_path, prefix, relocation, held, reserved)
    staged = folder / "staged"
    staged.mkdir(exist_ok=True)
    seen = _stage(archive, by_path, staged, _tar_limit(by_path.values()))
    missing = sorted(set(by_path) - seen)
    if missing:
        raise ArtifactRefused(f"the archive lacks {len(missing)} file(s) of its manifest, "
                              f"e.g. '{missing[0]}'")
    return Staged(where, by_path, staged, relocation, archive.name)


def place(staged: Staged, txn: Transaction, log: Callable[[str], None]) -> list[str]:
    """Move a staged artifact into the prefix, each entry saved in ``txn`` before it is
    replaced (a rename per file: the staging folder is on the prefix's file system). Returns
    the installed paths as the manifest names them."""
    relocation = staged.relocation
    for path in sorted(staged.entries):
        entry, real = staged.entries[path], staged.destinations[path]
        dest = txn.prefix / real
        txn.save(real)
        dest.parent.mkdir(parents=True, exist_ok=True)  # real folders: every link followed
        stand_in = staged.folder / _staged_name(entry)
        if entry.type == "link":
            target = entry.link
            if relocation.needed:
                target = relocation.rewrite(target.encode()).decode()
            stand_in = stand_in.with_name(stand_in.name + ".link")
            os.symlink(target, stand_in)
        else:
            if relocation.needed and entry.holds_prefix == "text":
                stand_in.write_bytes(relocation.rewrite(stand_in.read_bytes()))
            os.chmod(stand_in, entry.mode & 0o777)  # never setuid, setgid or sticky
            if entry.mode & _PRIVILEGE_BITS:
                log(f"{entry.path}: setuid/setgid bits removed (mode {entry.mode:04o} in the "
                    f"artifact, {entry.mode & 0o777:04o} installed): a program from a cache "
                    "never runs with its owner's rights, as tar does it for a non-root user")
        os.replace(stand_in, dest)  # replaces a file or link there, never writes through it
    log(f"installed {wording.count(len(staged.entries), 'file')} from {staged.archive_name}")
    return sorted(staged.entries)


def unpack(archive: Path, entries: list[FileEntry], prefix: Path, relocation: Relocation,
           log: Callable[[str], None] = lambda _: None, held: Collection[str] = (),
           reserved: tuple[str, ...] = ()) -> list[str]:
    """Install ``archive`` into ``prefix`` as one transaction: ``stage`` (everything checked),
    then ``place``; any error undoes every change. Text files holding the old prefix are
    rewritten when relocating. Returns the installed paths (relative). Raises
    ArtifactRefused."""
    transaction.recover(prefix, log, keep_pid=os.getpid())  # a killed run's, undone first
    txn = Transaction.begin(prefix)
    try:
        paths = place(stage(archive, entries, prefix, relocation, txn.folder, held, reserved),
                      txn, log)
    except BaseException:
        txn.rollback()
        raise
    txn.commit()
    return paths


def _stage(archive: Path, by_path: Mapping[str, FileEntry], staging: Path,
           limit: int) -> set[str]:
    seen: set[str] = set()
    try:
        with archive.open("rb") as f, _open_tar(f, limit) as tar:
            for member in tar:
                entry = by_path.get(member.name)
                if entry is None or member.name in seen:
                    raise ArtifactRefused(f"the archive holds '{member.name}', which its "
                                          "manifest does not list (once)")
                seen.add(member.name)
                if entry.type == "link":
                    if not member.issym() or member.linkname != entry.link:
                        raise ArtifactRefused(f"'{member.name}' in the archive is not the "
                                              f"link -> '{entry.link}' its manifest names")
                    continue
                if not member.isfile():
                    raise ArtifactRefused(f"'{member.name}' in the archive is not a "
                                          "regular file")
                if member.size != entry.size:  # before a byte of it is unpacked
                    raise ArtifactRefused(f"'{member.name}' in the archive is {member.size} "
                                          f"bytes, its manifest says {entry.size}: the archive "
                                          "was changed or damaged; nothing of it is unpacked")
                _stage_file(tar, member, entry, staging)
    except (tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
        raise ArtifactRefused(f"the archive {archive.name} is damaged: {exc}") from None
    return seen


def _stage_file(tar: tarfile.TarFile, member: tarfile.TarInfo, entry: FileEntry,
                staging: Path) -> None:
    source = tar.extractfile(member)
    assert source is not None
    digest = hashlib.sha256()
    size = 0
    with (staging / _staged_name(entry)).open("wb") as out:
        for chunk in iter(lambda: source.read(_CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    if size != entry.size or digest.hexdigest() != entry.sha256:
        raise ArtifactRefused(f"'{entry.path}' in the archive does not match its manifest "
                              f"(sha256 {digest.hexdigest()[:12]}…, expected "
                              f"{entry.sha256[:12]}…): the archive was changed or damaged")


def _staged_name(entry: FileEntry) -> str:
    return hashlib.sha256(entry.path.encode()).hexdigest()
