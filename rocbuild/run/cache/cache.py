"""The binary cache's key on this machine and what is stored for a component: the files it
installed, packed with a manifest of the commit and ref kind it was built from.

The key is model/fingerprint.py's, with this machine's CPU. The manifest also records the
commit the artifact was built from; when this machine has fetched the component itself, a
different commit refuses the artifact (a moved tag). A branch names a different commit
every week, and an offline machine cannot ask which one: a key made of the branch name would
hand out whatever was pushed last. So `cache push` refuses components built from a branch,
and an artifact whose manifest says "branch" is never installed (choice.py): pin a tag or a
commit to use the cache.

The prefix is not in the key, so an artifact built for /opt/rocm-a can serve /opt/rocm-b,
but only when every file relocates safely (artifacts.relocation_problems): binaries holding
the old prefix (an absolute RUNPATH) refuse it, text files holding it are rewritten.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

from rocbuild import __version__
from rocbuild.errors import BuildFailed, ConfigError
from rocbuild.model import buildsystems, fingerprint
from rocbuild.model.fingerprint import artifact_key
from rocbuild.model.graph import Component, Stack
from rocbuild.model.paths import within
from rocbuild.prefix import records
from rocbuild.run.cache import artifacts
from rocbuild.run.cache.artifacts import ArtifactRefused, Manifest
from rocbuild.run.sources import sources
from rocbuild.run.state.state import StateDir

# ref kinds that name one commit for good (sources.py records tag/branch per fetched ref)
PINNED_KINDS = ("tag", "commit")


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
    # records.left_by_install): the artifact holds exactly what the prefix got
    record = records.read_record(prefix, comp.name)
    if record is not None and record is not records.DAMAGED:
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
