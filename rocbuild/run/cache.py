"""The binary cache's rules: an artifact's key, what is stored for a component, and whether an
artifact may be installed instead of a build (and how: same prefix, or relocated).

The key. A component's key is the hash of named inputs: its portable recipe fingerprint
(graph.Component.portable_fingerprint: the rendered url, ref, cmake args, env, install links
and files, patch contents and, recursively, the same fingerprint of every dependency, with
the prefix and workdir paths taken out), the configure command rocbuild runs (the same way),
the GPU targets, the CPU architecture and the manifest format. All of them are known from
the recipes alone, so a second machine that is --offline with an empty source cache can look
its artifacts up before fetching anything.

Why that is sound: for a ref that is a tag or a full commit, url + ref name one source tree,
and the rest of what shapes the output (options, patches, dependencies built the same way,
targets) is in the fingerprint; two builds with equal keys are the same build, as far as
rocbuild's own stamps can tell (the host's compilers are outside both, as they are for a
rebuild). The manifest also records the commit the artifact was built from; when this
machine has fetched the component itself, a different commit refuses the artifact (a moved
tag). A branch names a different commit every week, and an offline machine cannot ask which
one: a key made of the branch name would hand out whatever was pushed last. So `cache push`
refuses components built from a branch, and an artifact whose manifest says "branch" is
never installed: pin a tag or a commit to use the cache.

The prefix is not in the key, so an artifact built for /opt/rocm-a can serve /opt/rocm-b,
but only when every file relocates safely (artifacts.relocation_problems): binaries holding
the old prefix (an absolute RUNPATH) refuse it, text files holding it are rewritten.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild import __version__
from rocbuild.errors import BuildFailed, ConfigError
from rocbuild.model import launchers, layout
from rocbuild.model.graph import Component, Stack, portable_text, sha256_text
from rocbuild.model.steps import configure_argv
from rocbuild.run import artifacts, sources
from rocbuild.run.artifacts import ArtifactRefused, Manifest, Relocation
from rocbuild.run.cache_store import (
    CacheUnavailable,
    FolderStore,
    HttpStore,
    Store,
    open_store,
    pull_archive,
)
from rocbuild.run.state import StateDir

# ref kinds that name one commit for good (sources.py records tag/branch per fetched ref)
PINNED_KINDS = ("tag", "commit")

# plan/--json words for what the cache does with a component
FROM_CACHE, RELOCATE, NO_ARTIFACT, REFUSED = "from cache", "from cache, relocated", "", "refused"


def artifact_inputs(stack: Stack, comp: Component) -> dict[str, Any]:
    """The named inputs the key hashes (see the module's doc for why these). ``command`` is
    the configure command without job counts and compiler launchers, so what rocbuild itself
    adds (generator, RUNPATH) counts as it does for a rebuild (uptodate.command_key) while
    the speed settings (--jobs, --ccache, --distcc) never change the key: an artifact built
    with ccache is the same build as one without."""
    argv = launchers.without_launchers(configure_argv(stack, comp, None))
    command = sha256_text(portable_text(stack, json.dumps(argv))) if comp.builds else None
    return {"recipe": comp.portable_fingerprint, "command": command,
            "targets": [str(t) for t in stack.targets], "machine": platform.machine(),
            "format": artifacts.MANIFEST_FORMAT}


def artifact_key(inputs: dict[str, Any]) -> str:
    return sha256_text(json.dumps(inputs, sort_keys=True))


def component_key(stack: Stack, comp: Component) -> str:
    return artifact_key(artifact_inputs(stack, comp))


# --- what a component installed -------------------------------------------------------------
def installed_paths(stack: Stack, comp: Component) -> list[str]:
    """The component's files, relative to the prefix: CMake's install_manifest.txt plus the
    links and files rocbuild itself wrote ([install.links], [install.files]). A source-only
    component installs nothing: its artifact is the record of the commit it was fetched at,
    which lets its users come from the cache on a machine without its sources."""
    if not comp.builds:
        return []
    manifest = comp.build_dir / "install_manifest.txt"
    if not manifest.is_file():
        raise BuildFailed(f"{comp.name}: {manifest} is missing, so what it installed is unknown",
                          tip=f"run `rocbuild build {comp.name}` first")
    prefix = stack.prefix
    out = []
    for line in manifest.read_text().splitlines():
        if not line:
            continue
        path = Path(line)
        if not path.is_relative_to(prefix):
            raise BuildFailed(f"{comp.name} installed {path}, outside the prefix {prefix}; an "
                              "artifact holds only files inside the prefix")
        out.append(path.relative_to(prefix).as_posix())
    out.extend(rel for rel, _ in (*comp.install_links, *comp.install_files))
    return out


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
    cache = sources.cache_dir(stack.workdir / "cache" / "git", owner.fetch_url)
    if not (cache / "HEAD").is_file():
        raise ConfigError(
            f"{owner.name}: its fetch left no record of whether '{owner.ref}' is a tag or a "
            f"branch, and its source cache for {owner.fetch_url} is not in "
            f"{stack.workdir / 'cache' / 'git'} (was the build run with another --mirror?)",
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
class Choice:
    """What the cache offers for one component: ``use`` is FROM_CACHE or RELOCATE when the
    artifact may be installed, else NO_ARTIFACT or REFUSED with ``reason``."""

    component: str
    key: str
    use: str
    reason: str = ""
    manifest: Manifest | None = None
    source_only: bool = False  # then "fetched", not "built", without the cache

    @property
    def usable(self) -> bool:
        return self.use in (FROM_CACHE, RELOCATE)

    def describe(self) -> str:
        """One line for plan."""
        if self.use == FROM_CACHE:
            return "from cache (same prefix)"
        if self.use == RELOCATE:
            assert self.manifest is not None
            return f"from cache, relocated from {self.manifest.prefix}"
        otherwise = "fetched" if self.source_only else "built"
        if self.use == REFUSED:
            return f"cache refused: {self.reason}; {otherwise} instead"
        return f"not in the cache: {otherwise}"


def _differences(have: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [f"{name} (artifact: {have.get(name)!r}, this build: {want.get(name)!r})"
            for name in sorted(set(have) | set(want)) if have.get(name) != want.get(name)]


def choose(store: Store, stack: Stack, state: StateDir, comp: Component) -> Choice:
    """Whether the artifact for ``comp``'s key may be installed into this prefix. Reads only
    the manifest; the archive itself is checked file by file when it is installed."""
    inputs = artifact_inputs(stack, comp)
    key = artifact_key(inputs)

    def refuse(reason: str) -> Choice:
        return Choice(comp.name, key, REFUSED, reason, source_only=not comp.builds)

    try:
        doc = store.read_manifest(comp.name, key)
    except ArtifactRefused as exc:  # one damaged manifest: only this component is built
        return refuse(str(exc))
    if doc is None:
        return Choice(comp.name, key, NO_ARTIFACT, source_only=not comp.builds)

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
        return Choice(comp.name, key, FROM_CACHE, manifest=manifest)
    problems = artifacts.relocation_problems(manifest.files, manifest.prefix)
    if problems:
        return refuse(f"it was built for the prefix {manifest.prefix} and cannot be relocated "
                      f"to {stack.prefix}: {problems[0]}"
                      + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return Choice(comp.name, key, RELOCATE, manifest=manifest)


def install(store: Store, stack: Stack, choice: Choice, log: Callable[[str], None],
            progress: artifacts.Progress | None = None) -> list[str]:
    """Pull the chosen artifact into the workdir's artifact folder, check and unpack it into
    the prefix and write the component's install_manifest.txt as CMake would (so the install
    check, status and a later rebuild's removal of old files treat it like a build). Raises
    ArtifactRefused (the caller then builds the component)."""
    manifest = choice.manifest
    assert manifest is not None and choice.usable
    comp = stack.components[choice.component]
    local = stack.workdir / "cache" / "artifacts" / manifest.archive_name
    log(f"pull {manifest.archive_name} from {store.location}")
    pull_archive(store, manifest, local, progress)
    relocation = Relocation(manifest.prefix, str(stack.prefix))
    try:
        paths = artifacts.unpack(local, list(manifest.files), stack.prefix, relocation, log)
    finally:  # installed or refused, the copy is not needed again (the stack is a few GiB)
        local.unlink(missing_ok=True)
    if not comp.builds:
        return paths
    comp.build_dir.mkdir(parents=True, exist_ok=True)
    extras = {rel for rel, _ in (*comp.install_links, *comp.install_files)}
    listed = [str(stack.prefix / p) for p in sorted(paths) if p not in extras]
    tmp = comp.build_dir / ".install_manifest.txt.tmp"
    tmp.write_text("".join(line + "\n" for line in listed))
    tmp.replace(comp.build_dir / "install_manifest.txt")
    return paths


def open_cache(value: str | None) -> FolderStore | HttpStore | None:
    """The store of the `cache` setting (None: no cache)."""
    if not value:
        return None
    store = open_store(value)
    if isinstance(store, FolderStore) and not store.root.is_dir():
        raise ConfigError(f"cache folder {store.root} does not exist",
                          tip="create it with `rocbuild cache push --to DIR`, or fix --cache")
    return store


def plan_lines(settings: Any, stack: Stack, state: StateDir) -> Callable[[Component], str]:
    """For `rocbuild plan`: what the cache setting does with each component (one line)."""
    store = open_cache(settings.cache)
    if store is None:
        return lambda comp: ""

    def line(comp: Component) -> str:
        try:
            return choose(store, stack, state, comp).describe()
        except CacheUnavailable as exc:
            return f"cache unavailable: {exc}"

    return line
