"""The binary cache's key (cache.py) and its choice of artifact (choice.py), and the `cache`
setting with the store its scheme opens (stores.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rocbuild.errors import ConfigError
from rocbuild.model.graph import Stack, load_stack
from rocbuild.model.settings import resolve
from rocbuild.run.cache import cache, stores
from rocbuild.run.cache.artifacts import FileEntry, Manifest
from rocbuild.run.cache.cache_store import FolderStore
from rocbuild.run.cache.choice import FROM_CACHE, NO_ARTIFACT, REFUSED, RELOCATE, Trust, choose
from rocbuild.run.state.state import StateDir

SRC = '[source]\ngit = "https://example.com/{{ name }}.git"\nref = "v1"\n'


def stack_of(folder: Path, **flags: object) -> Stack:
    return load_stack(resolve({"recipes": str(folder), **flags}, env={}, cwd=folder))


def recipes(write_recipes, lib_args: str = "[]") -> Path:
    return write_recipes(
        lib=SRC + f"[cmake]\nargs = {lib_args}\n",
        app='depends = ["lib"]\n' + SRC
        + '[cmake]\nargs = ["-DLIBDIR={{ prefix }}/lib", "-DSRC={{ src.lib }}"]\n')


def keys(stack: Stack) -> dict[str, str]:
    return {c.name: cache.component_key(stack, c) for c in stack.selected()}


def test_the_key_ignores_prefix_and_workdir_but_not_what_shapes_the_build(
        write_recipes, tmp_path: Path) -> None:
    folder = recipes(write_recipes)
    here = stack_of(folder, prefix="/opt/a", workdir=str(tmp_path / "w1"))
    there = stack_of(folder, prefix="/opt/b", workdir=str(tmp_path / "w2"))
    assert here.components["app"].fingerprint != there.components["app"].fingerprint
    assert keys(here) == keys(there)  # two machines, two folders: the same artifacts
    other_target = stack_of(folder, prefix="/opt/a", workdir=str(tmp_path / "w1"),
                            target="gfx90a")
    assert keys(other_target)["lib"] != keys(here)["lib"]
    changed_dep = stack_of(recipes(write_recipes, '["-DX=1"]'), prefix="/opt/a",
                           workdir=str(tmp_path / "w1"))
    assert keys(changed_dep)["app"] != keys(here)["app"]  # dependencies count, recursively
    inputs = cache.artifact_inputs(here, here.components["lib"])
    assert set(inputs) == {"recipe", "command", "targets", "machine", "format"}
    assert inputs["targets"] == ["gfx906"]


def test_cache_setting_from_flag_env_and_bad_values(tmp_path: Path) -> None:
    assert resolve({"cache": "rel/dir"}, env={}, cwd=tmp_path).cache == str(
        Path("rel/dir").absolute())
    env = resolve({}, env={"ROCBUILD_CACHE": "https://cache.lan/rocm/"}, cwd=tmp_path)
    assert env.cache == "https://cache.lan/rocm/" and env.source("cache") == "env ROCBUILD_CACHE"
    assert resolve({}, env={}, cwd=tmp_path).cache is None
    # a URL is kept as text; its scheme finds its store when it is opened
    assert resolve({"cache": "ftp://x"}, env={}, cwd=tmp_path).cache == "ftp://x"
    with pytest.raises(ConfigError, match="cache 'ftp://x': no kind of cache is reached by "
                       "ftp://; a cache is one of: a folder, an http"):
        stores.open_reader("ftp://x")
    with pytest.raises(ConfigError, match=r"cannot push to https://c\.lan/x: an HTTP cache "
                       "is read-only") as refused:
        stores.open_writer("https://c.lan/x", "push to")
    assert refused.value.tip == ("give a store that takes writes: a folder, "
                                 "oci://REGISTRY/NAMESPACE/NAME")
    assert isinstance(stores.open_writer(f"file://{tmp_path}/new", "push to"), FolderStore)


def manifest_for(stack: Stack, name: str, **changes: object) -> Manifest:
    comp = stack.components[name]
    inputs = cache.artifact_inputs(stack, comp)
    manifest = Manifest(
        component=name, key=cache.artifact_key(inputs), inputs=inputs, targets=("gfx906",),
        prefix=str(stack.prefix), commit="a" * 40, ref_kind="tag", rocbuild="0",
        files=(FileEntry("lib/libx.so", "file", size=1, sha256="0" * 64),),
        archive_sha256="0" * 64, archive_size=1)
    return dataclasses.replace(manifest, **changes)  # type: ignore[arg-type]


def store_with(tmp_path: Path, manifest: Manifest) -> FolderStore:
    store = FolderStore(tmp_path / "cache")
    path = store.root / manifest.component / f"{manifest.key}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(manifest.to_json()))
    return store


@pytest.mark.parametrize(("changes", "reason"), [
    ({}, ""),
    ({"ref_kind": "branch"}, "it was built from a branch"),
    ({"prefix": "/opt/elsewhere"}, ""),
    ({"files": (FileEntry("lib/libx.so", "file", size=1, sha256="0" * 64,
                          holds_prefix="binary"),), "prefix": "/opt/elsewhere"},
     "it was built for the prefix /opt/elsewhere and cannot be relocated"),
])
def test_choose_accepts_relocates_or_refuses(write_recipes, tmp_path: Path,
                                             changes: dict[str, object], reason: str) -> None:
    stack = stack_of(recipes(write_recipes), prefix="/opt/a", workdir=str(tmp_path / "w"))
    store = store_with(tmp_path, manifest_for(stack, "lib", **changes))
    # these rules come after the signature check (e2e tests sign): unsigned is allowed here
    trust = Trust(tmp_path / "allowed_signers", allow_unsigned=True)
    choice = choose(store, stack, StateDir.of(stack), stack.components["lib"], trust)
    if reason:
        assert choice.use == REFUSED and choice.reason.startswith(reason)
    elif "prefix" in changes:
        assert choice.use == RELOCATE
        assert choice.describe() == (f"from cache, relocated from /opt/elsewhere ({store.root}, "
                                     "unsigned, allowed by --allow-unsigned, 0 KiB)")
    else:
        assert choice.use == FROM_CACHE
    other = choose(store, stack, StateDir.of(stack), stack.components["app"], trust)
    assert other.use == NO_ARTIFACT and not other.usable
    strict = choose(store, stack, StateDir.of(stack), stack.components["lib"],
                          Trust(tmp_path / "allowed_signers"))
    assert strict.use == REFUSED and strict.reason == (
        "it is not signed; push it signed (`rocbuild cache push --sign NAME`, with a key of "
        "`rocbuild cache keys new NAME` that this machine trusts), or give --allow-unsigned")


def test_choose_refuses_an_artifact_of_another_commit_than_the_fetched_one(
        write_recipes, tmp_path: Path) -> None:
    stack = stack_of(recipes(write_recipes), prefix="/opt/a", workdir=str(tmp_path / "w"))
    store = store_with(tmp_path, manifest_for(stack, "lib"))
    state = StateDir.of(stack)
    state.write_stamp("lib", "fetch", "f", commit="b" * 40)
    choice = choose(store, stack, state, stack.components["lib"],
                          Trust(tmp_path / "allowed_signers", allow_unsigned=True))
    assert choice.use == REFUSED
    assert choice.reason == (f"it was built from commit {'a' * 12} but the source here is "
                             f"{'b' * 12}")
