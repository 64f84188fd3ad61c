"""The binary cache in a real OCI registry (Debian's docker-registry on loopback, started
and stopped by each test): the first machine builds the chain and pushes it, signed, through
Bearer token auth; a second machine with its own config trusts that key and installs from
the registry --offline with zero compiler runs. Tampered layers, re-signed or swapped
signatures, unsigned artifacts, a connection dropped mid-layer and a registry that is down
are each met the way the docs say."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocbuild.run.cache import signing
from rocbuild.run.cache.artifacts import Manifest, pack, sha256_file
from rocbuild.run.cache.cache_oci import OciStore
from rocbuild.run.cache.cache_store import pull_archive
from tests.cli import run_cli
from tests.e2e import test_cache
from tests.e2e.test_cache import COMPONENTS, FirstMachine, compiled, counting_cc, prefix_tree
from tests.support.registry import Registry, docker_config, dropping_proxy, free_port, registry

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = "rocbuild/gfx906"
first = test_cache.first  # the module fixture that builds the chain (its own build here)


@dataclasses.dataclass
class Pushed:
    machine: FirstMachine
    data: Path  # the registry's storage after the push (each test serves a copy)
    alice_pub: Path
    user: str
    password: str


@pytest.fixture(scope="module")
def pushed(first: FirstMachine, tmp_path_factory: pytest.TempPathFactory) -> Pushed:
    """The chain pushed to a registry that wants a token, with credentials from a Docker
    config file as `docker login` writes it."""
    folder = tmp_path_factory.mktemp("registry-a")
    with registry(folder, token_user="builder", token_password="s3cret") as reg:
        env = {**first.env, **docker_config(folder / "docker", reg)}
        url = reg.url(REPO)
        denied = run_cli("cache", "push", *first.chain.flags(), "--to", url, "--sign", "alice",
                         env={**first.env, "DOCKER_CONFIG": str(folder / "nobody")}, expect=1)
        assert f"the token service of {reg.host} said HTTP 401" in denied.stdout, denied.stdout
        out = run_cli("cache", "push", *first.chain.flags(), "--to", url, "--sign", "alice",
                      env=env, expect=0).stdout
        for name in COMPONENTS:
            assert re.search(rf"✔ {name}: \d+ files?.*signed by \S+ \(SHA256:", out), out
        assert re.search(r"✔ notes: source only, no files: .*signed by \S+ \(SHA256:", out), out
        again = run_cli("cache", "push", *first.chain.flags(), "--to", url, env=env,
                        expect=0).stdout
        assert again.count("already in") == 4, again
    alice = Path(first.env["XDG_CONFIG_HOME"]) / "rocbuild" / "keys" / "alice.pub"
    return Pushed(first, folder / "data", alice, "builder", "s3cret")


@pytest.fixture
def machine(pushed: Pushed) -> FirstMachine:
    """As test_cache's: the first machine's prefix is gone, the path is the second's."""
    shutil.rmtree(pushed.machine.chain.prefix, ignore_errors=True)
    return pushed.machine


@pytest.fixture
def second_env(pushed: Pushed, tmp_path: Path) -> dict[str, str]:
    """The second machine's own config, trusting alice's public key."""
    home = tmp_path / "home-b"
    env = {"XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"),
           "DOCKER_CONFIG": str(home / "docker")}
    trusted = run_cli("cache", "keys", "trust", str(pushed.alice_pub), env=env, expect=0)
    assert "trusted alice (SHA256:" in trusted.stdout
    return env


@pytest.fixture
def reg(pushed: Pushed, tmp_path: Path) -> Iterator[Registry]:
    """A registry without auth serving a copy of what was pushed."""
    shutil.copytree(pushed.data, tmp_path / "registry" / "data")
    with registry(tmp_path / "registry") as served:
        yield served


def beta_store(reg: Registry) -> tuple[OciStore, Manifest, dict]:
    store = OciStore(reg.url(REPO))
    (entry,) = [e for e in store.index() if e["component"] == "beta"]
    doc = store.read_manifest("beta", entry["key"])
    assert doc is not None
    return store, Manifest.from_json(doc), doc


def plan_cache(flags: list[str], env: dict[str, str], *extra: str) -> dict[str, str]:
    plan = json.loads(run_cli("plan", *flags, *extra, "--json", env=env, expect=0).stdout)
    return {c["name"]: c["cache"] for c in plan["components"]}


def test_second_machine_installs_the_stack_from_a_registry_without_compiling(
        machine: FirstMachine, reg: Registry, second_env: dict[str, str],
        tmp_path: Path) -> None:
    url = reg.url(REPO)
    work = tmp_path / "work-b"
    flags = machine.second(work, "--cache", url)
    for name, line in plan_cache(flags, second_env).items():
        assert re.fullmatch(rf"from cache \({re.escape(url)}, signed by alice \(SHA256:\S+\), "
                            r"[\d.]+ KiB\)", line), (name, line)
    listed = run_cli("cache", "list", "--cache", url, env=second_env, expect=0).stdout
    rows = [line for line in listed.splitlines() if " gfx906 " in line]
    assert "4 artifacts" in listed and len(rows) == 4, listed
    assert all(" alice " in row for row in rows), listed
    assert listed.count("alice (SHA256:") == 1, listed  # the fingerprint once, whole
    wrapper, count = counting_cc(tmp_path / "cc-b")
    built = run_cli("build", *flags, "--offline", "--quiet", "--no-verify",
                    env={**second_env, "CC": str(wrapper)}, expect=0)
    test_cache.assert_served_in_dependency_order(built.stdout)
    assert not count.exists() and compiled(work) == []  # zero compiler runs
    assert not (work / "src").exists()
    assert prefix_tree(machine.chain.prefix) == machine.tree
    assert machine.chain.run_gamma() == "gamma 11"
    assert run_cli("verify", *flags, "--json", env=second_env).stdout == machine.verified


def test_a_registry_with_token_auth_serves_a_logged_in_machine_only(
        machine: FirstMachine, pushed: Pushed, second_env: dict[str, str],
        tmp_path: Path) -> None:
    shutil.copytree(pushed.data, tmp_path / "registry" / "data")
    with registry(tmp_path / "registry", token_user=pushed.user,
                  token_password=pushed.password) as reg:
        flags = machine.second(tmp_path / "work-b", "--cache", reg.url(REPO))
        anonymous = plan_cache(flags, second_env)
        assert all(line.startswith(f"cache unavailable: the token service of {reg.host} said "
                                   "HTTP 401") for line in anonymous.values()), anonymous
        wrong = plan_cache(flags, {**second_env, "ROCBUILD_REGISTRY_AUTH": "builder:nope"})
        assert "token service" in wrong["alpha"]
        env = {**second_env, **docker_config(tmp_path / "docker-b", reg)}
        assert all(line.startswith("from cache (") for line in plan_cache(flags, env).values())
        env_only = {**second_env, "ROCBUILD_REGISTRY_AUTH": f"{pushed.user}:{pushed.password}"}
        wrapper, count = counting_cc(tmp_path / "cc-b")
        run_cli("build", *flags, "--offline", "--quiet", "--no-verify",
                env={**env_only, "CC": str(wrapper)}, expect=0)
        assert not count.exists() and machine.chain.run_gamma() == "gamma 11"


@pytest.mark.parametrize("how", ["resigned-by-mallory", "signature-of-alpha", "unsigned"])
def test_a_signature_that_is_not_a_trusted_one_for_this_manifest_is_refused(
        machine: FirstMachine, reg: Registry, second_env: dict[str, str], tmp_path: Path,
        how: str) -> None:
    store, manifest, doc = beta_store(reg)
    if how == "resigned-by-mallory":  # changed, and signed again by a key nobody trusts
        mallory = signing.new_key("mallory", {"XDG_CONFIG_HOME": str(tmp_path / "mallory")})
        changed = Manifest.from_json({**doc, "rocbuild": "evil"})
        store.write_signature(changed, signing.sign(changed.to_json(), mallory))
        expected = "it is signed by the ssh-ed25519 key SHA256:"
    elif how == "signature-of-alpha":  # a real signature by alice, made for another manifest
        (alpha,) = [e for e in store.index() if e["component"] == "alpha"]
        signature = store.read_signature("alpha", alpha["key"])
        assert signature
        store.write_signature(manifest, signature)
        expected = "its signature by alice's key does not match its manifest"
    else:
        store._tag(doc, None)
        expected = "it is not signed"
    cache = plan_cache(machine.second(tmp_path / "work-b", "--cache", reg.url(REPO)),
                       second_env)
    assert cache["beta"].startswith(f"cache refused: {expected}"), cache["beta"]
    assert cache["beta"].endswith("built instead")
    assert all(cache[n].startswith("from cache (") for n in ("alpha", "gamma", "notes"))
    allowed = plan_cache(machine.second(tmp_path / "work-b", "--cache", reg.url(REPO)),
                         second_env, "--allow-unsigned")
    if how == "signature-of-alpha":  # a signature that does not match is refused anyway
        assert allowed["beta"].startswith(f"cache refused: {expected}")
    else:
        assert ", allowed by --allow-unsigned, " in allowed["beta"], allowed["beta"]


def test_a_tampered_layer_is_refused_and_the_component_is_built(
        machine: FirstMachine, reg: Registry, second_env: dict[str, str],
        tmp_path: Path) -> None:
    _, manifest, _ = beta_store(reg)
    blob = reg.blob_file("sha256:" + manifest.archive_sha256)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes, in the registry's own storage
    blob.write_bytes(bytes(data))
    work = tmp_path / "work-b"
    built = run_cli("build", *machine.second(work, "--cache", reg.url(REPO), online=True),
                    "--quiet", "--no-verify", env=second_env, expect=0)
    assert "✘ beta: the cached artifact is refused" in built.stdout, built.stdout
    assert "the archive of beta does not match its manifest" in built.stdout
    assert compiled(work) == ["beta"]
    assert prefix_tree(machine.chain.prefix) == machine.tree
    assert machine.chain.run_gamma() == "gamma 11"


def test_a_connection_dropped_mid_layer_is_continued_with_a_range_request(
        machine: FirstMachine, reg: Registry, second_env: dict[str, str],
        tmp_path: Path) -> None:
    _, manifest, _ = beta_store(reg)
    digest = "sha256:" + manifest.archive_sha256
    log = tmp_path / "proxy.log"
    cut = manifest.archive_size // 2
    with dropping_proxy(reg, digest, cut + 400, log) as proxy:  # + the response's headers
        work = tmp_path / "work-b"
        wrapper, count = counting_cc(tmp_path / "cc-b")
        run_cli("build", *machine.second(work, "--cache", f"oci://{proxy}/{REPO}"),
                "--offline", "--quiet", "--no-verify", env={**second_env, "CC": str(wrapper)},
                expect=0)
    gets = [line for line in log.read_text().splitlines() if f"blobs/{digest}" in line]
    assert len(gets) == 2, log.read_text()
    start = re.search(r"Range: bytes=(\d+)-", gets[1], re.I)
    assert gets[0].endswith("| -") and start and 0 < int(start[1]) < manifest.archive_size, gets
    assert not count.exists() and compiled(work) == []
    assert prefix_tree(machine.chain.prefix) == machine.tree


def test_an_upload_cut_off_mid_chunk_asks_the_registry_then_uploads_anew(
        tmp_path: Path) -> None:
    """The push asks the registry what it kept of the cut session, and (the reference
    registry cannot go on with it) starts a clean new upload: the restart path."""
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "big.bin").write_bytes(os.urandom(3 << 20))  # incompressible
    archive = tmp_path / "x.tar.zst"
    files = pack(prefix, ["lib/big.bin"], archive)
    manifest = Manifest(component="x", key="k" * 64, inputs={}, targets=("gfx906",),
                        prefix=str(prefix), commit="c" * 40, ref_kind="tag", rocbuild="0",
                        files=tuple(files), archive_sha256=sha256_file(archive),
                        archive_size=archive.stat().st_size)
    log = tmp_path / "proxy.log"
    with registry(tmp_path / "registry") as reg, \
            dropping_proxy(reg, "", 1 << 20, log, method="PATCH") as proxy:
        OciStore(f"oci://{proxy}/{REPO}").push(manifest, archive)  # the PUT checks the digest
        store = OciStore(reg.url(REPO))
        assert store.read_manifest("x", "k" * 64) == manifest.to_json()
        pulled = tmp_path / "pulled" / manifest.archive_name
        pull_archive(store, manifest, pulled)
    lines = [line.split(" ", 1)[0] for line in log.read_text().splitlines()
             if "/blobs/uploads/" in line]
    # the cut PATCH; the session's state asked for (the reference registry cannot go on
    # with it); a clean new upload; its PATCH and PUT (the registry checked the digest)
    assert lines[:6] == ["POST", "PATCH", "GET", "POST", "PATCH", "PUT"], log.read_text()
    assert sha256_file(pulled) == manifest.archive_sha256


def _beta_config(reg: Registry) -> tuple[OciStore, str, dict]:
    """beta's tag, its OCI manifest, and the digest of its config blob (the rocbuild
    manifest)."""
    from rocbuild.run.cache.cache_oci import tag_for

    store, manifest, _ = beta_store(reg)
    tag = tag_for("beta", manifest.key)
    found = store.client.get_manifest(tag)
    assert found is not None
    return store, tag, json.loads(found[0])


@pytest.mark.parametrize("how", ["changed-bytes", "deeply-nested", "dropped-connection"])
def test_an_unsigned_writer_breaks_one_config_blob_and_only_that_artifact_is_refused(
        machine: FirstMachine, reg: Registry, second_env: dict[str, str], tmp_path: Path,
        how: str) -> None:
    """Anyone who may push to the repository (no signing key needed) changes beta's config
    blob in place, or points beta's tag at a config of "[" * 100000, or the connection drops
    in the middle of reading it: beta is refused and built, alpha and gamma still come from
    the registry, and no traceback (no RecursionError, no IncompleteRead, and never the whole
    cache given up for a changed blob)."""
    import contextlib

    from rocbuild.run.cache import oci

    store, tag, outer = _beta_config(reg)
    digest = outer["config"]["digest"]
    url = reg.url(REPO)
    proxy: contextlib.AbstractContextManager[str] = contextlib.nullcontext(reg.host)
    if how == "changed-bytes":
        blob = reg.blob_file(digest)
        blob.write_bytes(blob.read_bytes().replace(b'"beta"', b'"bEta"', 1))
        expected = "does not match its digest"
    elif how == "deeply-nested":
        outer["config"]["digest"] = store.client.push_bytes(b"[" * 100000)
        outer["config"]["size"] = 100000
        store.client.put_manifest(tag, json.dumps(outer).encode(), oci.MANIFEST_TYPE)
        expected = "is not a readable JSON document"
    else:
        proxy = dropping_proxy(reg, digest, 300, tmp_path / "proxy.log")  # headers + a bit
        expected = "the connection broke off while reading the blob"
    with proxy as host:
        if how == "dropped-connection":
            url = f"oci://{host}/{REPO}"
        work = tmp_path / "work-b"
        built = run_cli("build", *machine.second(work, "--cache", url, online=True),
                        "--quiet", "--no-verify", env=second_env)
    assert "Traceback" not in built.stdout + built.stderr, built.explain()
    assert built.returncode == 0, built.explain()
    assert "beta: cache refused: its manifest" in built.stdout, built.explain()
    assert expected in built.stdout, built.explain()
    assert compiled(work) == ["beta"]
    assert machine.chain.run_gamma() == "gamma 11"


def test_an_upload_whose_chunk_failed_continues_the_same_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk answered 503 by a proxy (the registry never saw it): the session's own record
    (GET -> Range) says how much the registry holds, and the upload goes on in the same
    session from there: no new POST, the first chunk not sent again (this path, against the
    reference registry)."""
    from rocbuild.run.cache import oci

    monkeypatch.setattr(oci, "UPLOAD_CHUNK", 1 << 20)
    monkeypatch.setattr(oci, "RETRY_PAUSE", 0.0)
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "big.bin").write_bytes(os.urandom(3 << 20))  # 3 chunks and a bit
    archive = tmp_path / "x.tar.zst"
    files = pack(prefix, ["lib/big.bin"], archive, level=1)
    manifest = Manifest(component="x", key="k" * 64, inputs={}, targets=("gfx906",),
                        prefix=str(prefix), commit="c" * 40, ref_kind="tag", rocbuild="0",
                        files=tuple(files), archive_sha256=sha256_file(archive),
                        archive_size=archive.stat().st_size)
    log = tmp_path / "proxy.log"
    with registry(tmp_path / "registry") as reg, \
            dropping_proxy(reg, "", 2, log, method="PATCH-503") as proxy:
        OciStore(f"oci://{proxy}/{REPO}").push(manifest, archive)
        pulled = tmp_path / "pulled" / manifest.archive_name
        pull_archive(OciStore(reg.url(REPO)), manifest, pulled)
    lines = [line.split(" ", 1)[0] for line in log.read_text().splitlines()
             if "/blobs/uploads/" in line]
    # one session: chunk 1, chunk 2 refused, its state asked for, chunk 2 again, 3, 4, PUT
    assert lines[:8] == ["POST", "PATCH", "PATCH", "GET", "PATCH", "PATCH", "PATCH", "PUT"], \
        log.read_text()
    assert sha256_file(pulled) == manifest.archive_sha256


def test_a_registry_that_is_down_means_building_and_saying_so(
        machine: FirstMachine, second_env: dict[str, str], tmp_path: Path) -> None:
    url = f"oci://127.0.0.1:{free_port()}/{REPO}"  # nothing listens there
    flags = machine.second(tmp_path / "work-b", "--cache", url, online=True)
    cache = plan_cache(flags, second_env)
    assert all(line.startswith("cache unavailable: cannot reach the registry 127.0.0.1:")
               and "connection refused" in line for line in cache.values()), cache
    built = run_cli("build", *flags, "--quiet", "--no-verify", env=second_env, expect=0)
    assert re.search(r"cache: cannot reach the registry 127\.0\.0\.1:\d+: connection refused"
                     r".*; building what is not built", built.stdout), built.stdout
    assert compiled(tmp_path / "work-b") == list(COMPONENTS)
    assert machine.chain.run_gamma() == "gamma 11"


def test_prune_removes_what_the_current_recipes_cannot_use(
        machine: FirstMachine, reg: Registry, second_env: dict[str, str],
        tmp_path: Path) -> None:
    url = reg.url(REPO)
    flags = machine.second(tmp_path / "work-b", "--cache", url)
    same = run_cli("cache", "prune", *flags, "--unused", env=second_env, expect=0).stdout
    assert "0 artifact(s)" in same and "nothing to remove" in same, same
    other = [*flags, "--target", "gfx90a"]  # another target: no key of these artifacts
    dry = run_cli("cache", "prune", *other, "--unused", "--dry-run", env=second_env,
                  expect=0).stdout
    assert dry.count("would remove") == 4 and "dry run: nothing removed" in dry, dry
    before = OciStore(url).index()
    assert len(before) == 4
    done = run_cli("cache", "prune", *other, "--unused", env=second_env, expect=0).stdout
    assert "removed 4 artifact(s)" in done, done
    store = OciStore(url)
    assert store.index() == [] and store.client.tags() == ["rocbuild-index"]
    assert all(store.read_manifest(e["component"], e["key"]) is None for e in before)
    listed = json.loads(run_cli("cache", "list", "--cache", url, "--json", env=second_env,
                                expect=0).stdout)
    assert listed["artifacts"] == []


def test_bad_cache_input_is_one_clear_message(tmp_path: Path) -> None:
    flags = ["--workdir", str(tmp_path / "w")]
    cases = [
        (["cache", "keys", "trust", str(tmp_path / "nope.pub")], "nope.pub: no such public key"),
        (["cache", "keys", "trust", "ssh-ed25519 !!!"], "the key is not valid base64"),
        (["cache", "keys", "new", "two words"], "'two words' is not a usable key name"),
        (["cache", "push", "--to", str(tmp_path / "c"), "--sign", "nosuch"],
         "--sign nosuch: no such key"),
        (["cache", "prune", "--cache", str(tmp_path)], "cache prune needs a rule"),
        (["cache", "prune", "--cache", "http://127.0.0.1:9/", "--keep", "1"],
         "an HTTP cache is read-only"),
        (["cache", "list", "--cache", "oci://127.0.0.1:9/Upper/Case"],
         "the repository 'Upper/Case' is not a valid OCI name"),
        (["cache", "list", "--cache", "s3://bucket/x"], "oci://REGISTRY/NAMESPACE/NAME"),
    ]
    for argv, message in cases:
        result = run_cli(*argv, *flags, expect=2)
        assert message in result.stderr, (argv, result.stderr)
    run_cli("cache", "keys", "new", "alice", *flags, expect=0)
    again = run_cli("cache", "keys", "new", "alice", *flags, expect=2)
    assert "exists already" in again.stderr
    listed = run_cli("cache", "keys", "list", *flags, expect=0).stdout
    assert re.search(r"alice\s+SHA256:\S+", listed) and "trusted signers" in listed
