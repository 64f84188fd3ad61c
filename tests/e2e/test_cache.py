"""The binary cache end to end: two workdirs stand for two machines. The first builds the
alpha <- beta <- gamma chain with real git, cmake and ninja and pushes it; the second, --offline
with an empty source cache and a mirror that leads nowhere, installs the same stack from the
cache (a folder, then a real `python -m http.server`) with zero compiler runs, counted by a
compiler wrapper. The first machine signs what it pushes (`cache keys new`, `push --sign`);
damaged, mismatched or unsigned artifacts are refused and the component is built."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from rocbuild.run.cache.artifacts import Manifest, pack, sha256_file
from rocbuild.run.cache.cache_store import FolderStore, HttpStore, pull_archive
from tests.cli import run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, Chain, make_chain, make_repo, one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COMPONENTS = ("alpha", "beta", "gamma")


def counting_cc(folder: Path) -> tuple[Path, Path]:
    """A C compiler wrapper that appends one line per run to a count file."""
    folder.mkdir(parents=True, exist_ok=True)
    count = folder / "cc-runs"
    wrapper = folder / "cc"
    wrapper.write_text(f"#!/bin/sh\necho run >> {count}\nexec cc \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper, count


def prefix_tree(prefix: Path) -> dict[str, tuple[str, int, str]]:
    """path -> (type, size, sha256 or link target) of what the components installed; rocbuild's
    own records (build-info with its times, env files naming the workdir) are left out."""
    tree = {}
    for path in sorted(prefix.rglob("*")):
        rel = path.relative_to(prefix).as_posix()
        if rel.startswith(".rocbuild") or rel.startswith(("env.", "modulefiles")):
            continue
        if path.is_symlink():
            tree[rel] = ("link", 0, os.readlink(path))
        elif path.is_file():
            tree[rel] = ("file", path.stat().st_size,
                         hashlib.sha256(path.read_bytes()).hexdigest())
    return tree


@dataclasses.dataclass
class FirstMachine:
    chain: Chain
    cache: Path
    tree: dict[str, tuple[str, int, str]]
    env: dict[str, str]
    verified: str  # `rocbuild verify --json` of the first machine's prefix

    def second(self, workdir: Path, *extra: str, online: bool = False) -> list[str]:
        """Flags for the second machine: its own workdir, the same prefix path, and a mirror
        that leads nowhere unless ``online`` (builds add --offline too)."""
        mirror = self.chain.mirror if online else f"{FAKE_HOST}=file:///nonexistent/"
        return ["--recipes", str(self.chain.recipes), "--workdir", str(workdir),
                "--prefix", str(self.chain.prefix), "--mirror", mirror, *extra]


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FirstMachine]:
    for tool in ("git", "cmake", "ninja", "cc"):
        require_tool(tool)
    root = tmp_path_factory.mktemp("machine-a")
    chain = make_chain(root)
    # a source-only dependency (like HIP's headers): the second machine has no source of it
    make_repo(chain.repos, "notes", {"README": "notes\n"})
    chain.write_recipe("notes", f'kind = "source-only"\n[source]\ngit = "{FAKE_HOST}notes.git"\n'
                                'ref = "v1"\n')
    beta = chain.recipes / "beta.toml"
    beta.write_text(beta.read_text().replace('depends = ["alpha"]', 'depends = ["alpha", "notes"]'))
    home = root / "home"
    env = {"XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}
    wrapper, count = counting_cc(root / "cc-a")
    run_cli("build", *chain.flags(), "--quiet", "--no-verify", env={**env, "CC": str(wrapper)},
            expect=0)
    assert count.read_text().count("run") > 0  # the wrapper does count compiler runs
    cache = root / "cache"
    # the key is trusted in this config, which the second machine of these tests shares
    run_cli("cache", "keys", "new", "alice", env=env, expect=0)
    pushed = run_cli("cache", "push", *chain.flags(), "--to", str(cache), "--sign", "alice",
                     env=env, expect=0)
    for name in COMPONENTS:
        # the key by its name, not a bare fingerprint
        assert re.search(rf"^(?:[\d:]+ )?✔ {name}: \d+ files?.*, signed by alice \(SHA256:",
                         pushed.stdout, re.M), pushed.stdout
    # a source-only component stores no files: said as the commit record it is, not as
    # "0 files, 0 B packed to ..." (an "empty artifact", as rocBLAS's Tensile looked)
    assert re.search(r"^(?:[\d:]+ )?✔ notes: source only, no files: the record of commit "
                     r"[0-9a-f]{12} that lets what reads it be installed without its source "
                     r"\([0-9a-f]{12}, signed by alice \(SHA256:", pushed.stdout, re.M), \
        pushed.stdout
    assert "notes: 0 files" not in pushed.stdout
    assert len(list(cache.glob("*/*.sig"))) == 4
    again = run_cli("cache", "push", *chain.flags(), "--to", str(cache), env=env, expect=0)
    assert again.stdout.count("already in") == 4 and again.stdout.count("signed by") == 4
    tree = prefix_tree(chain.prefix)
    assert "bin/gamma" in tree and "lib/libalpha.so" in tree
    verified = run_cli("verify", *chain.flags(), "--json", env=env).stdout
    yield FirstMachine(chain, cache, tree, env, verified)


@pytest.fixture
def machine(first: FirstMachine) -> FirstMachine:
    """The first machine's results, with its prefix gone: the same path is free for the second
    machine (the tests share it, one after the other)."""
    shutil.rmtree(first.chain.prefix, ignore_errors=True)
    return first


def assert_served_in_dependency_order(stdout: str) -> None:
    """Every component of the stack came from the cache (one cache step each, nothing else
    ran), each after what it depends on: alpha and notes need nothing, so with steps at once
    they come in either order; beta needs both, gamma needs beta."""
    steps = re.findall(r"^(?:[\d:]+ )?▶ (\S+): (\w+)$", stdout, re.M)
    assert sorted(steps) == sorted((n, "cache") for n in ("alpha", "notes", "beta", "gamma")), \
        steps
    order = [name for name, _ in steps]
    assert max(order.index("alpha"), order.index("notes")) < order.index("beta") \
        < order.index("gamma"), steps


def compiled(workdir: Path) -> list[str]:
    return [n for n in COMPONENTS if (workdir / "logs" / n / "compile.log").exists()]


def test_second_machine_installs_the_stack_from_a_cache_folder_without_compiling(
        machine: FirstMachine, tmp_path: Path) -> None:
    work = tmp_path / "work-b"
    flags = machine.second(work, "--cache", str(machine.cache))
    plan = json.loads(run_cli("plan", *flags, "--json", env=machine.env, expect=0).stdout)
    for line in [c["cache"] for c in plan["components"]]:
        assert re.fullmatch(rf"from cache \({re.escape(str(machine.cache))}, signed by alice "
                            r"\(SHA256:\S+\), [\d.]+ (KiB|B)\)", line), line
    table = run_cli("plan", *flags, env=machine.env, expect=0).stdout
    assert re.search(rf"download from {re.escape(str(machine.cache))}: [\d.]+ KiB for 4 "
                     r"components", " ".join(table.split())), table  # wrapped at spaces
    assert plan["settings"]["cache"] == {"value": str(machine.cache), "source": "flag --cache"}
    wrapper, count = counting_cc(tmp_path / "cc-b")
    env = {**machine.env, "CC": str(wrapper)}
    built = run_cli("build", *flags, "--offline", "--quiet", "--no-verify", env=env, expect=0)
    assert_served_in_dependency_order(built.stdout)
    assert not count.exists() and compiled(work) == []  # zero compiler runs
    assert not (work / "src").exists()  # nothing was fetched
    assert prefix_tree(machine.chain.prefix) == machine.tree
    assert machine.chain.run_gamma() == "gamma 11"
    assert run_cli("verify", *flags, "--json", env=env).stdout == machine.verified

    status = json.loads(run_cli("status", *flags, "--json", env=env, expect=0).stdout)
    assert {c["name"]: c["state"] for c in status["components"]} == dict.fromkeys(
        (*COMPONENTS, "notes"), "done")
    # `rocbuild list` says each came from the cache, with its artifact
    (listed,) = json.loads(run_cli("list", *flags, "--json", env=env,
                                   expect=0).stdout)["prefixes"]
    origins = {c["name"]: (c["origin"], bool(c["cache_key"])) for c in listed["components"]}
    assert origins == dict.fromkeys((*COMPONENTS, "notes"), ("cache", True)), origins
    assert " cache " in run_cli("list", *flags, env=env, expect=0).stdout
    again = run_cli("build", *flags, "--offline", "--quiet", "--no-verify", env=env, expect=0)
    assert "▶" not in again.stdout and "all 17 steps are current; nothing to do" in again.stdout
    without_cache = machine.second(work)  # a rerun without --cache sees a built stack too
    again = run_cli("build", *without_cache, "--offline", "--quiet", "--no-verify", env=env,
                    expect=0)
    assert "all 17 steps are current; nothing to do" in again.stdout
    assert not count.exists()

    elsewhere = machine.second(tmp_path / "work-c", "--cache", str(machine.cache), "--json")
    plan = json.loads(run_cli("plan", *elsewhere, "--prefix", str(tmp_path / "other"),
                              env=machine.env, expect=0).stdout)
    alpha = plan["components"][0]["cache"]  # the chain's RUNPATHs are absolute
    assert alpha.startswith("cache refused: it was built for the prefix") and (
        "lib/libalpha.so holds the path" in alpha and alpha.endswith("built instead"))


@pytest.fixture
def http_cache(first: FirstMachine) -> Iterator[str]:
    """`python -m http.server` on 127.0.0.1 and an ephemeral port, serving the cache folder."""
    server = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
         "--directory", str(first.cache)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        port = re.search(r"port (\d+)", line)
        assert port, line
        yield f"http://127.0.0.1:{port[1]}/"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_second_machine_installs_from_an_http_cache_and_restarts_a_broken_download(
        machine: FirstMachine, http_cache: str, tmp_path: Path) -> None:
    listed = json.loads(run_cli("cache", "list", "--cache", http_cache, "--json",
                                env=machine.env, expect=0).stdout)
    assert sorted(a["component"] for a in listed["artifacts"]) == [*COMPONENTS, "notes"]
    work = tmp_path / "work-b"
    alpha = next(a for a in listed["artifacts"] if a["component"] == "alpha")
    partial = work / "cache" / "artifacts" / f"{alpha['key']}.tar.zst.partial"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"left over from an interrupted pull" * 10)
    wrapper, count = counting_cc(tmp_path / "cc-b")
    built = run_cli("build", *machine.second(work, "--cache", http_cache), "--offline",
                    "--quiet", "--no-verify", env={**machine.env, "CC": str(wrapper)}, expect=0)
    assert "alpha: pulling:" in built.stdout
    assert not count.exists() and compiled(work) == []
    assert not partial.exists()
    assert prefix_tree(machine.chain.prefix) == machine.tree
    assert machine.chain.run_gamma() == "gamma 11"


def _rewrite_archive(archive: Path, member: str) -> None:
    """Change one byte of ``member`` inside a .tar.zst (same size, other content)."""
    data = zstandard.ZstdDecompressor().stream_reader(archive.read_bytes()).read()
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as src, \
            tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for info in src:
            body = src.extractfile(info) if info.isfile() else None
            content = body.read() if body else b""
            if info.name == member:
                content = content[:-2] + b"X\n"
            dst.addfile(info, io.BytesIO(content) if body else None)
    archive.write_bytes(zstandard.ZstdCompressor().compress(out.getvalue()))


def tamper(cache: Path, how: str) -> tuple[str, list[str]]:
    """Damage beta's artifact in ``cache``; returns the message the refusal must show and
    the flags the build needs to get that far: the file checks run behind the signature
    check, so those cases remove the signature and allow unsigned artifacts."""
    (manifest_file,) = (cache / "beta").glob("*.json")
    manifest = json.loads(manifest_file.read_text())
    signature = manifest_file.with_suffix(".sig")
    if how == "signed-then-changed":  # a signed manifest edited afterwards
        manifest["commit"] = "0" * 40
        manifest_file.write_text(json.dumps(manifest))
        return "its signature by alice's key does not match its manifest", []
    if how == "unsigned":
        signature.unlink()
        # no signer to trust: say how to sign it
        return ("cache: beta: cache refused: it is not signed; push it signed (`rocbuild "
                "cache push --sign NAME`, with a key of `rocbuild cache keys new NAME` that "
                "this machine trusts), or give --allow-unsigned"), []
    signature.unlink()
    if how == "archive":  # one file changed, and the archive's own checksum updated to match
        archive = cache / "beta" / manifest["archive"]["name"]
        _rewrite_archive(archive, "include/beta.h")
        manifest["archive"].update(size=archive.stat().st_size,
                                   sha256=hashlib.sha256(archive.read_bytes()).hexdigest())
        expected = "'include/beta.h' in the archive does not match its manifest"
    elif how == "dotdot":
        manifest["files"].append({"path": "../evil", "type": "file", "mode": 420, "size": 1,
                                  "sha256": "0" * 64})
        expected = "the manifest names the path '../evil'"
    elif how == "link":
        manifest["files"].append({"path": "lib/evil", "type": "link", "mode": 511,
                                  "link": "/etc/passwd"})
        expected = "the link 'lib/evil' -> '/etc/passwd' would point outside the prefix"
    else:
        manifest["inputs"]["targets"] = ["gfx90a"]
        expected = "its inputs do not match this build's: targets (artifact: ['gfx90a']"
    manifest_file.write_text(json.dumps(manifest))
    return expected, ["--allow-unsigned"]


@pytest.mark.parametrize("how", ["archive", "dotdot", "link", "inputs", "signed-then-changed",
                                 "unsigned"])
def test_a_bad_artifact_is_refused_and_the_component_is_built(
        machine: FirstMachine, tmp_path: Path, how: str) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(machine.cache, cache)
    expected, extra = tamper(cache, how)
    work = tmp_path / "work-b"
    flags = machine.second(work, "--cache", str(cache), online=True)
    built = run_cli("build", *flags, *extra, "--quiet", "--no-verify", env=machine.env,
                    expect=0)
    assert expected in built.stdout, built.stdout
    assert compiled(work) == ["beta"]  # alpha and gamma came from the cache
    assert machine.chain.run_gamma() == "gamma 11"
    assert not (machine.chain.prefix.parent / "evil").exists()
    assert not (machine.chain.prefix / "lib" / "evil").is_symlink()
    tree = prefix_tree(machine.chain.prefix)
    assert tree.keys() == machine.tree.keys()
    assert tree["include/beta.h"] == machine.tree["include/beta.h"]


RELOCATABLE = {
    "CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(reloc C)
        set(CMAKE_INSTALL_RPATH "$ORIGIN/../lib")
        add_library(rel SHARED rel.c)
        add_executable(relapp app.c)
        target_link_libraries(relapp PRIVATE rel)
        configure_file(rel.pc.in rel.pc @ONLY)
        install(TARGETS rel relapp LIBRARY DESTINATION lib RUNTIME DESTINATION bin)
        install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rel.pc DESTINATION lib/pkgconfig)
        """),
    "rel.c": "int rel_value(void) { return 42; }\n",
    "app.c": textwrap.dedent("""\
        #include <stdio.h>
        int rel_value(void);
        int main(void) { printf("rel %d\\n", rel_value()); return 0; }
        """),
    "rel.pc.in": "prefix=@CMAKE_INSTALL_PREFIX@\nlibdir=${prefix}/lib\n",
}


def test_an_artifact_with_origin_runpaths_is_relocated_to_another_prefix(
        tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja", "cc"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "reloc", RELOCATABLE)
    cache = tmp_path / "cache"
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    run_cli("cache", "push", *flags, "--to", str(cache), expect=0)
    old = tmp_path / "prefix"
    new = tmp_path / "elsewhere" / "prefix"
    second = [*flags[:2], "--workdir", str(tmp_path / "work-b"), "--prefix", str(new),
              "--mirror", f"{FAKE_HOST}=file:///nonexistent/", "--cache", str(cache)]
    plan = json.loads(run_cli("plan", *second, "--json", expect=0).stdout)
    assert plan["components"][0]["cache"].startswith("cache refused: it is not signed")
    plan = json.loads(run_cli("plan", *second, "--allow-unsigned", "--json", expect=0).stdout)
    assert plan["components"][0]["cache"].startswith(
        f"from cache, relocated from {old} ({cache}, unsigned, allowed by --allow-unsigned, ")
    run_cli("build", *second, "--allow-unsigned", "--offline", "--quiet", "--no-verify",
            expect=0)
    shutil.rmtree(old)  # nothing may still lead to the first prefix
    assert subprocess.run([str(new / "bin/relapp")], capture_output=True, text=True,
                          check=True, env={}).stdout == "rel 42\n"
    assert (new / "lib/pkgconfig/rel.pc").read_text().startswith(f"prefix={new}\n")
    assert not (tmp_path / "work-b" / "logs" / "reloc" / "compile.log").exists()


def test_push_refuses_a_component_built_from_a_branch(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "onbranch", {"CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(onbranch NONE)
        install(FILES CMakeLists.txt DESTINATION share/onbranch)
        """)})
    recipe = tmp_path / "recipes" / "onbranch.toml"
    recipe.write_text(recipe.read_text().replace('ref = "v1"', 'ref = "main"'))
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    pushed = run_cli("cache", "push", *flags, "--to", str(tmp_path / "cache"), expect=1)
    assert "onbranch was built from the branch 'main'" in pushed.stdout
    assert "pin a tag or a full commit" in pushed.stdout
    assert not list((tmp_path / "cache").rglob("*.tar.zst"))


def test_a_missing_cache_folder_is_bad_input(machine: FirstMachine, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-cache"
    for command in (["build", "--offline"], ["plan"], ["cache", "list"]):
        result = run_cli(*command, *machine.second(tmp_path / "w", "--cache", str(missing)),
                         env=machine.env, expect=2)
        assert f"cache folder {missing} does not exist" in result.stderr


# http.server with Range support (python's own sends whole files): logs each range's start
RANGE_SERVER = textwrap.dedent("""\
    import functools, http.server, os, re, sys
    class Handler(http.server.SimpleHTTPRequestHandler):
        def send_head(self):
            path, wanted = self.translate_path(self.path), self.headers.get("Range")
            if not wanted or not os.path.isfile(path):
                return super().send_head()
            start = int(re.match(r"bytes=(\\d+)-", wanted)[1])
            f = open(path, "rb")
            size = os.fstat(f.fileno()).st_size
            f.seek(start)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.send_header("Content-Length", str(size - start))
            self.end_headers()
            with open(sys.argv[2], "a") as log:
                log.write(f"{start}\\n")
            return f
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=sys.argv[1]))
    print("port", server.server_address[1], flush=True)
    server.serve_forever()
    """)


def test_an_interrupted_http_pull_continues_with_a_range_request(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "big.bin").write_bytes(os.urandom(3 << 20))  # incompressible, 3 MiB
    archive = tmp_path / "x.tar.zst"
    files = pack(prefix, ["lib/big.bin"], archive)
    manifest = Manifest(component="x", key="k" * 64, inputs={}, targets=("gfx906",),
                        prefix=str(prefix), commit="c" * 40, ref_kind="tag", rocbuild="0",
                        files=tuple(files), archive_sha256=sha256_file(archive),
                        archive_size=archive.stat().st_size)
    FolderStore(tmp_path / "cache").push(manifest, archive)
    ranges = tmp_path / "ranges.log"
    server = subprocess.Popen([sys.executable, "-u", "-c", RANGE_SERVER, str(tmp_path / "cache"),
                               str(ranges)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = server.stdout.readline().split()[1]
        dest = tmp_path / "pulled" / manifest.archive_name
        dest.parent.mkdir()
        half = manifest.archive_size // 2
        dest.with_name(dest.name + ".partial").write_bytes(archive.read_bytes()[:half])
        seen: list[int] = []
        pull_archive(HttpStore(f"http://127.0.0.1:{port}/"), manifest, dest,
                     lambda done, total: seen.append(done))
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert ranges.read_text().split() == [str(half)]  # only the missing half was sent
    assert seen[0] > half and seen[-1] == manifest.archive_size
    assert sha256_file(dest) == manifest.archive_sha256


def test_sources_still_come_first_when_only_some_components_are_cached(
        machine: FirstMachine, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(machine.cache, cache)
    for name in ("alpha", "gamma"):  # only beta (and notes) come from the cache
        shutil.rmtree(cache / name)
    work = tmp_path / "work-b"
    built = run_cli("build", *machine.second(work, "--cache", str(cache), online=True),
                    "--quiet", "--no-verify", env=machine.env, expect=0)
    steps = [f"{c}:{s}" for c, s in re.findall(r"^(?:[\d:]+ )?▶ (\S+): (\w+)$", built.stdout, re.M)]
    # a cached component waits for its dependencies' builds, but it must not pull them into
    # the sources-first phase: gamma is fetched before alpha's compiler runs
    assert steps.index("gamma:patch") < steps.index("alpha:configure") < steps.index(
        "beta:cache") < steps.index("gamma:configure")
    assert compiled(work) == ["alpha", "gamma"]
    assert prefix_tree(machine.chain.prefix) == machine.tree


def test_prune_of_a_cache_folder_by_rule_with_a_dry_run(machine: FirstMachine,
                                                        tmp_path: Path) -> None:
    """cache prune on a folder store (the registry has its own test): each rule, the dry
    run, and what is left for list and for an install."""
    cache = tmp_path / "cache"
    shutil.copytree(machine.cache, cache)
    flags = machine.second(tmp_path / "work-b", "--cache", str(cache))
    for rule in (["--keep", "1"], ["--older-than", "1"], ["--unused"]):
        kept = run_cli("cache", "prune", *flags, *rule, env=machine.env, expect=0).stdout
        assert "nothing to remove" in kept, (rule, kept)
    other = [*flags, "--target", "gfx90a"]  # another target: no key of these artifacts
    dry = run_cli("cache", "prune", *other, "--unused", "--dry-run", env=machine.env,
                  expect=0).stdout
    assert dry.count("would remove") == 4 and "dry run: nothing removed" in dry, dry
    assert len(list(cache.glob("*/*.tar.zst"))) == 4
    done = run_cli("cache", "prune", *other, "--unused", env=machine.env, expect=0).stdout
    assert "removed 4 artifact(s)" in done, done
    assert not list(cache.glob("*/*.tar.zst")) and not list(cache.glob("*/*.sig"))
    listed = json.loads(run_cli("cache", "list", "--cache", str(cache), "--json",
                                env=machine.env, expect=0).stdout)
    assert listed["artifacts"] == []
    plan = json.loads(run_cli("plan", *flags, "--json", env=machine.env, expect=0).stdout)
    assert all(c["cache"] == "not in the cache: " + ("fetched" if c["name"] == "notes" else
                                                     "built") for c in plan["components"])


def test_plan_says_why_the_artifacts_a_cache_holds_are_not_this_builds(
        machine: FirstMachine, tmp_path: Path) -> None:
    """A cache that holds the stack for other targets or another CPU is not an empty one:
    plan names what differs ("or why not ... other CPU variant"), not just "not in
    the cache"."""
    cache = tmp_path / "cache"
    shutil.copytree(machine.cache, cache)
    flags = machine.second(tmp_path / "work-b", "--cache", str(cache))
    plan = json.loads(run_cli("plan", *flags, "--target", "gfx90a", "--json", env=machine.env,
                              expect=0).stdout)
    lines = {c["name"]: c["cache"] for c in plan["components"]}
    assert lines["alpha"] == ("not in the cache: built (the cache holds 1 artifact of alpha for "
                              "another build: targets gfx906 there, gfx90a here)"), lines
    # alpha built on another CPU: its own key, beside this machine's
    (doc_file,) = (cache / "alpha").glob("*.json")
    doc = json.loads(doc_file.read_text())
    doc["inputs"]["machine"] = "aarch64"
    other_key = hashlib.sha256(json.dumps(doc["inputs"], sort_keys=True).encode()).hexdigest()
    doc["key"] = other_key
    (cache / "alpha" / f"{other_key}.json").write_text(json.dumps(doc))
    index = json.loads((cache / "index.json").read_text())
    (entry,) = [e for e in index["artifacts"] if e["component"] == "alpha"]
    index["artifacts"] = [e for e in index["artifacts"] if e is not entry] + [
        {**entry, "key": other_key, "created": entry["created"] + 1}]
    for suffix in (".json", ".tar.zst", ".sig"):
        (cache / "alpha" / f"{entry['key']}{suffix}").unlink()
    (cache / "index.json").write_text(json.dumps(index))
    plan = json.loads(run_cli("plan", *flags, "--json", env=machine.env, expect=0).stdout)
    lines = {c["name"]: c["cache"] for c in plan["components"]}
    assert lines["alpha"] == ("not in the cache: built (the cache holds 1 artifact of alpha for "
                              f"another build: CPU aarch64 there, {os.uname().machine} here)"), \
        lines
    assert lines["gamma"].startswith("from cache ("), lines


def test_push_with_nothing_built_names_one_build_command(tmp_path: Path) -> None:
    """Issue 32: a push before the build suggested `rocbuild build X` per component, the
    source-only ones too (which the build of their users fetches) and without the run's
    flags. Now each is named once and one pasteable command builds what is missing."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    chain = make_chain(tmp_path)
    make_repo(chain.repos, "notes", {"README": "notes\n"})
    chain.write_recipe("notes", f'kind = "source-only"\n[source]\ngit = "{FAKE_HOST}notes.git"\n'
                                'ref = "v1"\n')
    beta = chain.recipes / "beta.toml"
    beta.write_text(beta.read_text().replace('depends = ["alpha"]', 'depends = ["alpha", "notes"]'))
    pushed = run_cli("cache", "push", *chain.flags(), "--to", str(tmp_path / "c"), expect=1)
    assert "✘ notes: not fetched" in pushed.stdout and "✘ beta: not built" in pushed.stdout
    (tip,) = [line for line in pushed.stdout.splitlines() if "TIP: " in line]
    command = shlex.split(tip.split("then push again: ", 1)[1])
    assert command[:5] == ["rocbuild", "build", "alpha", "beta", "gamma"], tip
    assert "notes" not in command and "--workdir" in command and "--recipes" in command, tip


def test_push_by_default_stores_the_built_ones_of_a_partly_built_stack(tmp_path: Path) -> None:
    """`cache push` with no names stores "every built one of the stack" (its help): after
    `build alpha` it stored alpha but failed (exit 1) with a ✘ per component never built and a
    TIP to build the rest of the stack first (seen on real ROCm: rocr and rocminfo pushed, 14
    ✘ lines and `rocbuild build ... llvm ... llama.cpp`). The ones never built are named on
    one line and the push succeeds."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    chain = make_chain(tmp_path)
    run_cli("build", *chain.flags(), "alpha", "--quiet", "--no-verify", expect=0)
    cache = tmp_path / "c"
    pushed = run_cli("cache", "push", *chain.flags(), "--to", str(cache), expect=0)
    assert "✔ alpha:" in pushed.stdout
    assert "✘" not in pushed.stdout and "TIP" not in pushed.stdout, pushed.stdout
    assert "not built, so not stored: beta, gamma" in pushed.stdout, pushed.stdout
    assert {p.parent.name for p in cache.glob("*/*.tar.zst")} == {"alpha"}
    # a component named on the command line and not built still fails the push
    named = run_cli("cache", "push", *chain.flags(), "beta", "--to", str(cache), expect=1)
    assert "✘ beta: not built" in named.stdout


def test_cache_list_and_prune_take_the_cache_as_their_argument(small: list[str],
                                                                tmp_path: Path) -> None:
    """`cache list DIR` was refused ("'DIR' is an unexpected argument"): the cache is its
    argument, the same as --cache; both naming different caches is refused."""
    cache = tmp_path / "cache"
    run_cli("build", *small, "--no-verify", expect=0)
    run_cli("cache", "push", *small, "--to", str(cache), expect=0)
    listed = json.loads(run_cli("cache", "list", str(cache), "--json", expect=0).stdout)
    assert [a["component"] for a in listed["artifacts"]] == ["a"], listed
    assert listed == json.loads(run_cli("cache", "list", "--cache", str(cache), "--json",
                                        expect=0).stdout)
    kept = run_cli("cache", "prune", str(cache), "--keep", "1", expect=0).stdout
    assert "nothing to remove" in kept, kept
    both = run_cli("cache", "list", str(cache), "--cache", str(tmp_path / "other"), expect=2)
    assert "two different places" in both.stderr, both.explain()
