"""The binary cache's rules: an artifact's key on this machine, what is stored for a
component, and whether an artifact may be installed instead of a build (and how: same
prefix, or relocated).

The key is model/fingerprint.py's, with this machine's CPU. The manifest also records the
commit the artifact was built from; when this machine has fetched the component itself, a
different commit refuses the artifact (a moved tag). A branch names a different commit
every week, and an offline machine cannot ask which one: a key made of the branch name would
hand out whatever was pushed last. So `cache push` refuses components built from a branch,
and an artifact whose manifest says "branch" is never installed: pin a tag or a commit to
use the cache.

The prefix is not in the key, so an artifact built for /opt/rocm-a can serve /opt/rocm-b,
but only when every file relocates safely (artifacts.relocation_problems): binaries holding
the old prefix (an absolute RUNPATH) refuse it, text files holding it are rewritten.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from rocbuild import __version__
from rocbuild.checks.trust import host_trust
from rocbuild.errors import BuildFailed, ConfigError, notice
from rocbuild.files import write_text_atomic
from rocbuild.model import buildsystems, fingerprint, layout, wording
from rocbuild.model.fingerprint import artifact_key
from rocbuild.model.graph import Component, Stack
from rocbuild.model.paths import within
from rocbuild.prefix import ownership
from rocbuild.prefix.transaction import Transaction
from rocbuild.run.cache import artifacts, signing
from rocbuild.run.cache.artifacts import ArtifactRefused, Manifest, Relocation
from rocbuild.run.cache.cache_store import (
    CacheUnavailable,
    FolderStore,
    HttpStore,
    Store,
    fmt_size,
    open_store,
    pull_archive,
)
from rocbuild.run.sources import sources
from rocbuild.run.state.state import StateDir

if TYPE_CHECKING:  # imported where an oci:// cache is opened: http.client and ssl otherwise
    from rocbuild.run.cache.cache_oci import OciStore

# ref kinds that name one commit for good (sources.py records tag/branch per fetched ref)
PINNED_KINDS = ("tag", "commit")

# plan/--json words for what the cache does with a component
FROM_CACHE, RELOCATE, NO_ARTIFACT, REFUSED = "from cache", "from cache, relocated", "", "refused"


def artifact_inputs(stack: Stack, comp: Component) -> dict[str, Any]:
    """The named inputs of ``comp``'s artifact key on this machine (model/fingerprint.py)."""
    return fingerprint.artifact_inputs(stack, comp, platform.machine())


def component_key(stack: Stack, comp: Component) -> str:
    return artifact_key(artifact_inputs(stack, comp))


# --- what a component installed -------------------------------------------------------------
def installed_paths(stack: Stack, comp: Component) -> list[str]:
    """The component's files, relative to the prefix: what its build system recorded (CMake's
    install_manifest.txt) plus the links and files rocbuild itself wrote ([install.links],
    [install.files]). A source-only component installs nothing: its artifact is the record of
    the commit it was fetched at, which lets its users come from the cache on a machine
    without its sources."""
    if not comp.builds:
        return []
    system = buildsystems.of(comp)
    installed = system.installed_files(comp)
    if installed is None:
        raise BuildFailed(f"{comp.name}: {system.installed_record(comp)} is missing, so what it "
                          "installed is unknown", tip=f"run `rocbuild build {comp.name}` first")
    prefix = stack.prefix
    out = []
    # what the install left beyond its manifest (an install(CODE) link or generated file,
    # ownership.left_by_install): the artifact holds exactly what the prefix got
    record = ownership.read_record(prefix, comp.name)
    if record is not None and record is not ownership.DAMAGED:
        listed = {os.path.normpath(p) for p in map(str, installed)}
        installed = [*installed, *(prefix / rel for rel in record["files"]
                                   if os.path.normpath(prefix / rel) not in listed)]
    for path in installed:
        path = Path(os.path.normpath(path))  # a manifest line may hold '..'
        if not within(path, prefix):
            raise BuildFailed(f"{comp.name} installed {path}, outside the prefix {prefix}; an "
                              "artifact holds only files inside the prefix")
        out.append(path.relative_to(prefix).as_posix())
    out.extend(rel for rel, _ in (*comp.install_links, *comp.install_files))
    return sorted(set(out))


def source_commit(state: StateDir, comp: Component) -> str | None:
    fetched = state.read_stamp(comp.checkout, "fetch") or {}
    commit = fetched.get("commit")
    return str(commit) if commit else None


def ref_kind(stack: Stack, state: StateDir, owner: Component) -> str:
    """tag, commit or branch: how the checkout's ref was resolved when it was fetched (or, for
    a component installed from the cache, what its artifact said)."""
    assert owner.fetch_url is not None and owner.ref is not None
    if sources._SHA_RE.match(owner.ref):
        return "commit"
    recorded = (state.read_stamp(owner.name, "fetch") or {}).get("ref_kind")
    if recorded:
        return str(recorded)
    # a fetch of an older rocbuild recorded no kind: the source cache still knows it, if the
    # URL leads to the same cache as in the build (the same --mirror)
    cache = sources.cache_dir(stack.work.git_cache, owner.fetch_url)
    if not (cache / "HEAD").is_file():
        raise ConfigError(
            f"{owner.name}: its fetch left no record of whether '{owner.ref}' is a tag or a "
            f"branch, and its source cache for {owner.fetch_url} is not in "
            f"{stack.work.git_cache} (was the build run with another --mirror?)",
            tip="run `rocbuild cache push` with the --mirror the build used, or build "
                f"{owner.name} again with this rocbuild (its fetch records the kind)")
    return sources.ref_kind(cache, owner.ref)


def make_artifact(stack: Stack, state: StateDir, comp: Component, folder: Path,
                  progress: artifacts.Progress | None = None) -> tuple[Manifest, Path]:
    """Pack the component's installed files into ``folder`` (a local staging folder)."""
    owner = stack.components[comp.checkout]
    commit = source_commit(state, comp)
    if commit is None:
        raise BuildFailed(f"{comp.name}: no fetch record for its source",
                          tip=f"run `rocbuild build {comp.name}` first")
    kind = ref_kind(stack, state, owner)
    if kind not in PINNED_KINDS:
        raise BuildFailed(f"{comp.name} was built from the branch '{owner.ref}' (commit "
                          f"{commit[:12]}); a branch moves, so its artifact could not be matched "
                          "safely", tip=f"pin a tag or a full commit in {owner.recipe.file} to "
                                        "use the cache for it")
    inputs = artifact_inputs(stack, comp)
    key = artifact_key(inputs)
    archive = folder / f"{key}{artifacts.ARCHIVE_SUFFIX}"
    try:
        files = artifacts.pack(stack.prefix, installed_paths(stack, comp), archive, progress)
    except ArtifactRefused as exc:
        raise BuildFailed(f"{comp.name}: cannot pack: {exc}") from None
    manifest = Manifest(component=comp.name, key=key, inputs=inputs,
                        targets=tuple(str(t) for t in stack.targets), prefix=str(stack.prefix),
                        commit=commit, ref_kind=kind, rocbuild=__version__, files=tuple(files),
                        archive_sha256=artifacts.sha256_file(archive),
                        archive_size=archive.stat().st_size, created=time.time())
    return manifest, archive


# --- may an artifact be installed -----------------------------------------------------------
@dataclass(frozen=True)
class Trust:
    """Whose signatures this user accepts (an OpenSSH allowed_signers file, signing.py) and
    whether an unsigned or untrusted artifact may be installed anyway (--allow-unsigned). A
    signature that does not verify is refused either way: it means the manifest changed."""

    allowed: Path
    allow_unsigned: bool = False
    refused: str = ""  # why ``allowed`` is not used: others could write it (model/trust.py)

    @classmethod
    def default(cls, allow_unsigned: bool = False) -> Trust:
        """This user's trust list, used only when nobody else could have written it: a
        signer list another user can change makes their artifacts install as this user
        (root, with a home folder's XDG_CONFIG_HOME of theirs)."""
        allowed = signing.signers_file()
        why = host_trust(os.environ).why_not(allowed)
        if why is None:
            return cls(allowed, allow_unsigned)
        refused = (f"{allowed} is not used: {why}; the keys you trust must be yours alone "
                   "(chown, chmod go-w)")
        _warn_once(refused)
        return cls(allowed, allow_unsigned, refused)

    @property
    def signers(self) -> Path | None:
        """The allowed_signers file to check against; None when it is not used."""
        return None if self.refused else self.allowed


@functools.cache
def _warn_once(text: str) -> None:
    notice(f"rocbuild: warning: {text}")


ALLOW_UNSIGNED_TIP = ("trust the signer's key with `rocbuild cache keys trust KEY.pub`, or "
                      "give --allow-unsigned")
# an artifact without a signature has no signer to trust: it is signed when pushed
UNSIGNED_TIP = ("push it signed (`rocbuild cache push --sign NAME`, with a key of `rocbuild "
                "cache keys new NAME` that this machine trusts), or give --allow-unsigned")


@dataclass(frozen=True)
class Choice:
    """What the cache offers for one component: ``use`` is FROM_CACHE or RELOCATE when the
    artifact may be installed, else NO_ARTIFACT or REFUSED with ``reason``."""

    component: str
    key: str
    use: str
    reason: str = ""
    manifest: Manifest | None = None
    source_only: bool = False  # then "fetched", not "built", without the cache
    location: str = ""  # the store's
    signed: str = ""  # "signed by NAME (SHA256:…)", or why it is installed unsigned

    @property
    def usable(self) -> bool:
        return self.use in (FROM_CACHE, RELOCATE)

    @property
    def download(self) -> int:
        return self.manifest.archive_size if self.manifest and self.usable else 0

    def describe(self) -> str:
        """One line for plan."""
        if self.usable:
            assert self.manifest is not None
            where = (f" ({self.location}, {self.signed}, "
                     f"{fmt_size(self.manifest.archive_size)})")
            if self.use == FROM_CACHE:
                return "from cache" + where
            return f"from cache, relocated from {self.manifest.prefix}" + where
        otherwise = "fetched" if self.source_only else "built"
        if self.use == REFUSED:
            return f"cache refused: {self.reason}; {otherwise} instead"
        return f"not in the cache: {otherwise}"


# the key's inputs (artifact_inputs) in plan's words
INPUT_WORDS = {"recipe": "another recipe", "command": "another configure command",
               "targets": "targets", "machine": "CPU", "format": "another artifact format"}


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _differences(have: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [f"{name} (artifact: {have.get(name)!r}, this build: {want.get(name)!r})"
            for name in sorted(set(have) | set(want)) if have.get(name) != want.get(name)]


def check_signature(store: Store, doc: dict[str, Any], component: str, key: str,
                    trust: Trust) -> tuple[str, str]:
    """(why the artifact is refused or "", how it is signed) for its manifest ``doc``: the
    check that comes before anything of the artifact is used."""
    verdict = signing.verify(doc, store.read_signature(component, key), trust.signers)
    if verdict.good:
        return "", f"signed by {verdict.who()}"
    if verdict.state == signing.BAD:
        return verdict.reason, ""
    if trust.allow_unsigned:
        return "", ("unsigned" if verdict.state == signing.UNSIGNED
                    else f"untrusted key {verdict.key}") + ", allowed by --allow-unsigned"
    tip = UNSIGNED_TIP if verdict.state == signing.UNSIGNED else ALLOW_UNSIGNED_TIP
    if trust.refused and verdict.state == signing.UNTRUSTED:
        return f"{verdict.reason} ({trust.refused})", ""
    return f"{verdict.reason}; {tip}", ""


def choose(store: Store, stack: Stack, state: StateDir, comp: Component,
           trust: Trust | None = None) -> Choice:
    """Whether the artifact for ``comp``'s key may be installed into this prefix. Reads only
    the manifest and its signature (checked first, against ``trust``); the archive itself is
    checked file by file against that manifest when it is installed."""
    trust = trust or Trust.default()
    inputs = artifact_inputs(stack, comp)
    key = artifact_key(inputs)

    def refuse(reason: str) -> Choice:
        return Choice(comp.name, key, REFUSED, reason, source_only=not comp.builds,
                      location=store.location)

    try:
        doc = store.read_manifest(comp.name, key)
    except ArtifactRefused as exc:  # one damaged manifest: only this component is built
        return refuse(str(exc))
    if doc is None:
        return Choice(comp.name, key, NO_ARTIFACT, source_only=not comp.builds)
    refused, signed = check_signature(store, doc, comp.name, key, trust)
    if refused:
        return refuse(refused)

    try:
        manifest = Manifest.from_json(doc)
        if manifest.component != comp.name or manifest.key != key:
            return refuse(f"its manifest names {manifest.component} {manifest.key[:12]}")
        if artifact_key(dict(manifest.inputs)) != key or manifest.inputs != inputs:
            differ = _differences(dict(manifest.inputs), inputs)
            return refuse("its inputs do not match this build's: " + ", ".join(differ or
                          ["the recorded inputs do not hash to the key"]))
        if manifest.ref_kind not in PINNED_KINDS:
            return refuse(f"it was built from a branch (ref kind '{manifest.ref_kind}')")
        fetched = source_commit(state, comp)
        if fetched is not None and fetched != manifest.commit:
            return refuse(f"it was built from commit {manifest.commit[:12]} but the source here "
                          f"is {fetched[:12]}")
        artifacts.check_entries(manifest.files, manifest.prefix)
        reserved = layout.reserved_roots(stack.recipes.stack.name)
        for entry in manifest.files:
            if layout.reserved_by(entry.path, reserved):
                return refuse(f"it holds {entry.path}, one of rocbuild's own files in the "
                              "prefix")
    except ArtifactRefused as exc:
        return refuse(str(exc))
    if manifest.prefix == str(stack.prefix):
        return Choice(comp.name, key, FROM_CACHE, manifest=manifest, location=store.location,
                      signed=signed)
    problems = artifacts.relocation_problems(manifest.files, manifest.prefix)
    if problems:
        return refuse(f"it was built for the prefix {manifest.prefix} and cannot be relocated "
                      f"to {stack.prefix}: {problems[0]}"
                      + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return Choice(comp.name, key, RELOCATE, manifest=manifest, location=store.location,
                  signed=signed)


def install(store: Store, stack: Stack, choice: Choice, txn: Transaction,
            log: Callable[[str], None], progress: artifacts.Progress | None = None,
            held: Collection[str] = (),
            before_place: Callable[[], None] = lambda: None) -> list[str]:
    """Pull the chosen artifact into the workdir's artifact folder, stage and check all of it
    in ``txn``'s folder (nothing onto ``held``, the real paths of other components' files,
    nor onto rocbuild's own), call ``before_place`` (the removal of the component's previous
    install: only once its artifact is known good), then place it in the prefix, each
    replaced entry saved in ``txn`` (the caller commits or rolls back), and write the
    component's record of installed files as its build system would (CMake's
    install_manifest.txt; so the install check, status and a later rebuild's removal of old
    files treat it like a build). Raises ArtifactRefused (the caller then builds it)."""
    manifest = choice.manifest
    assert manifest is not None and choice.usable
    comp = stack.components[choice.component]
    local = stack.work.artifacts / manifest.archive_name
    log(f"pull {manifest.archive_name} from {store.location}")
    pull_archive(store, manifest, local, progress)
    relocation = Relocation(manifest.prefix, str(stack.prefix))
    try:
        staged = artifacts.stage(local, list(manifest.files), stack.prefix, relocation,
                                 txn.folder, held,
                                 layout.reserved_roots(stack.recipes.stack.name))
    finally:  # staged or refused, the copy is not needed again (the stack is a few GiB)
        local.unlink(missing_ok=True)
    before_place()
    paths = artifacts.place(staged, txn, log)
    if not comp.builds:
        return paths
    comp.build_dir.mkdir(parents=True, exist_ok=True)
    extras = {rel for rel, _ in (*comp.install_links, *comp.install_files)}
    listed = [stack.prefix / p for p in sorted(paths) if p not in extras]
    system = buildsystems.of(comp)  # its record, in its own form (CMake's manifest)
    write_text_atomic(system.installed_record(comp), system.record_text(listed))
    return paths


AnyStore = Union[FolderStore, HttpStore, "OciStore"]


def open_cache(value: str | None) -> AnyStore | None:
    """The store of the `cache` setting (None: no cache)."""
    if not value:
        return None
    if value.startswith(("oci://", "oci+http://", "oci+https://")):
        from rocbuild.run.cache.cache_oci import OciStore

        return OciStore(value)
    store = open_store(value)
    if isinstance(store, FolderStore) and not store.root.is_dir():
        raise ConfigError(f"cache folder {store.root} does not exist",
                          tip="create it with `rocbuild cache push --to DIR`, or fix --cache")
    return store


def writable_store(text: str) -> FolderStore | OciStore:
    """Where `cache push --to` stores: a folder or an OCI repository (HTTP is read-only)."""
    if text.startswith(("oci://", "oci+http://", "oci+https://")):
        from rocbuild.run.cache.cache_oci import OciStore

        return OciStore(text)
    store = open_store(text)  # a folder is made by the first push
    if isinstance(store, FolderStore):
        return store
    raise ConfigError(f"cannot push to {text}: an HTTP cache is read-only",
                      tip="push to the folder the server serves (--to DIR), or to a "
                          "registry (--to oci://REGISTRY/NAMESPACE/NAME)")


class PlanLines:
    """For `rocbuild plan`: what the cache setting does with each component (one line), and
    the download those choices add up to."""

    def __init__(self, settings: Any, stack: Stack, state: StateDir,
                 trust: Trust | None = None) -> None:
        self.store = open_cache(settings.cache)
        self.stack, self.state, self.trust = stack, state, trust or Trust.default()
        self.downloads: dict[str, int] = {}  # component -> archive bytes, for those served
        self.unavailable = ""
        self._index: list[dict[str, Any]] | None = None  # read once, for "why not" lines

    def __call__(self, comp: Component) -> str:
        if self.store is None:
            return ""
        if self.unavailable:  # said once; the rest is built as without a cache
            return f"cache unavailable: {self.unavailable}"
        try:
            choice = choose(self.store, self.stack, self.state, comp, self.trust)
        except CacheUnavailable as exc:
            self.unavailable = str(exc)
            return f"cache unavailable: {exc}"
        if choice.usable:
            self.downloads[comp.name] = choice.download
        if choice.use == NO_ARTIFACT:
            other = self._other_build(comp)
            if other:
                return f"{choice.describe()} ({other})"
        return choice.describe()

    def _other_build(self, comp: Component) -> str:
        """Why the artifacts the cache does hold for ``comp`` are not this build's: the
        inputs of the newest one that differ from this build's ("" when it holds none). A
        stack built for other targets or another CPU is then told apart from an empty cache."""
        assert self.store is not None
        try:
            if self._index is None:
                self._index = self.store.index()
            held = sorted((e for e in self._index if e.get("component") == comp.name),
                          key=lambda e: float(e.get("created") or 0))
            if not held:
                return ""
            doc = self.store.read_manifest(comp.name, str(held[-1].get("key")))
            there = Manifest.from_json(doc).inputs if doc else {}
        except (CacheUnavailable, ArtifactRefused):
            return ""
        here = artifact_inputs(self.stack, comp)
        differ = [INPUT_WORDS.get(name, name) + (
                  f" {_shown(there.get(name))} there, {_shown(here.get(name))} here"
                  if name in ("targets", "machine") else "")
                  for name in sorted(set(there) | set(here)) if there.get(name) != here.get(name)]
        count = wording.count(len(held), "artifact")
        return (f"the cache holds {count} of {comp.name} for another build: "
                + (", ".join(differ) if differ else "other inputs"))

    def total(self, done: Collection[str] = ()) -> str:
        """The line under plan's cache lines ("" when nothing comes from the cache); the
        components in ``done`` are built here already and download nothing."""
        wanted = {n: size for n, size in self.downloads.items() if n not in done}
        if self.store is None or not wanted:
            return ""
        return (f"download from {self.store.location}: {fmt_size(sum(wanted.values()))} for "
                f"{wording.count(len(wanted), 'component')}")


def plan_lines(settings: Any, stack: Stack, state: StateDir,
               trust: Trust | None = None) -> PlanLines:
    return PlanLines(settings, stack, state, trust)
