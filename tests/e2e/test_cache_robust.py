"""The binary cache under attack: components served from the cache are first-class in
every later run (a rerun, status, a later source build after a recipe change), a SIGKILL at any
point of a cache install resumes to the same prefix and leaves no unpack folder behind,
setuid/setgid bits never come back from an artifact, the speed settings (ccache, distcc, jobs)
never change the key, and `cache push` without the build's --mirror is one message.

Machine A builds the alpha <- beta <- gamma chain (alpha carries a patch, so preflight has a
series to check) plus ``blob``, a component with a 12 MiB incompressible file (an unpack that
takes long enough to be killed in the middle) and a setuid+setgid program, and pushes it all to
a cache folder. Each test is machine B: its own workdir, the same prefix path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.e2e.test_cache import prefix_tree
from tests.support.chain import FAKE_HOST, Chain, make_chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ALPHA_PATCH = """\
--- a/alpha.h
+++ b/alpha.h
@@ -1 +1,2 @@
 int alpha_value(void);
+/* patched by rocbuild */
"""
BLOB = {
    "CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(blob NONE)
        install(FILES data.bin DESTINATION share/blob)
        install(PROGRAMS tool.sh DESTINATION bin PERMISSIONS OWNER_READ OWNER_WRITE
                OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE SETUID SETGID)
        """),
    "tool.sh": "#!/bin/sh\necho blob\n",
}
COMPONENTS = ("alpha", "beta", "blob", "gamma")


def _unsigned_flag() -> tuple[str, ...]:
    """``--allow-unsigned`` where this rocbuild refuses unsigned artifacts: these tests push
    without signing, since what they check lies behind that."""
    shown = subprocess.run([sys.executable, "-m", "rocbuild", "plan", "--help"],
                           env=child_env(), capture_output=True, text=True).stdout
    return ("--allow-unsigned",) if "--allow-unsigned" in shown else ()


UNSIGNED = _unsigned_flag()


def _binary_repo(root: Path, name: str, files: dict[str, str | bytes]) -> None:
    """``make_repo`` for files that may be bytes: ``<root>/<name>.git``, tagged v1."""
    src = root / f"{name}.git.src"
    src.mkdir(parents=True)
    for rel, body in files.items():
        (src / rel).write_bytes(body if isinstance(body, bytes) else body.encode())
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "initial"],
                 ["tag", "v1"]):
        subprocess.run(["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t",
                        *args], check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(root / f"{name}.git")],
                   check=True)


@dataclasses.dataclass
class Machine:
    chain: Chain
    cache: Path
    tree: dict[str, tuple[str, int, str]]
    env: dict[str, str]

    def flags(self, workdir: Path, *extra: str) -> list[str]:
        unsigned = UNSIGNED if "--cache" in extra else ()
        return ["--recipes", str(self.chain.recipes), "--workdir", str(workdir),
                "--prefix", str(self.chain.prefix), "--mirror", self.chain.mirror, *extra,
                *unsigned]


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Machine]:
    for tool in ("git", "cmake", "ninja", "cc"):
        require_tool(tool)
    root = tmp_path_factory.mktemp("cache-a")
    chain = make_chain(root)
    patches = chain.recipes.parent / "patches" / "alpha"
    patches.mkdir(parents=True)
    (patches / "0001-note.patch").write_text(ALPHA_PATCH)
    data = random.Random(22).randbytes(12 << 20)  # incompressible: the unpack takes a while
    _binary_repo(chain.repos, "blob", {**BLOB, "data.bin": data})
    chain.write_recipe("blob", f'[source]\ngit = "{FAKE_HOST}blob.git"\nref = "v1"\n[cmake]\n')
    stack = chain.recipes / "stack.toml"
    stack.write_text(stack.read_text().replace('"gamma"]', '"gamma", "blob"]'))
    home = root / "home"
    env = {"XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}
    run_cli("build", *chain.flags(), "--quiet", "--no-verify", env=env, expect=0)
    mode = (chain.prefix / "bin" / "tool.sh").stat().st_mode
    assert mode & (stat.S_ISUID | stat.S_ISGID), oct(mode)  # the source build installs them
    cache = root / "cache"
    run_cli("cache", "push", *chain.flags(), "--to", str(cache), env=env, expect=0)
    tree = prefix_tree(chain.prefix)
    yield Machine(chain, cache, tree, env)


@pytest.fixture
def machine(first: Machine) -> Machine:
    """Machine A's results with its prefix gone (the tests share the path, one at a time)."""
    shutil.rmtree(first.chain.prefix, ignore_errors=True)
    return first


def test_a_rerun_after_installing_a_patched_component_from_the_cache_is_current(
        machine: Machine, tmp_path: Path) -> None:
    work = tmp_path / "work-b"
    flags = machine.flags(work, "--cache", str(machine.cache))
    built = run_cli("build", *flags, "--quiet", "--no-verify", env=machine.env, expect=0)
    assert "▶ alpha: cache" in built.stdout and not (work / "src").exists()
    # the same command again, then without --cache, then --offline: every one a no-op
    for extra in (("--cache", str(machine.cache)), (), ("--offline",)):
        again = run_cli("build", *machine.flags(work, *extra), "--quiet", "--no-verify",
                        env=machine.env, expect=0)
        assert "all 20 steps are current; nothing to do" in again.stdout, again.explain()
    status = json.loads(run_cli("status", *machine.flags(work), "--json", env=machine.env,
                                expect=0).stdout)
    assert {c["name"]: c["state"] for c in status["components"]} == dict.fromkeys(
        COMPONENTS, "done")
    assert prefix_tree(machine.chain.prefix) == machine.tree


def test_a_recipe_change_after_a_cache_install_fetches_and_builds_from_source(
        machine: Machine, tmp_path: Path) -> None:
    work = tmp_path / "work-b"
    shutil.copytree(machine.chain.recipes.parent, tmp_path / "project")
    recipes = tmp_path / "project" / "recipes"
    flags = ["--recipes", str(recipes), "--workdir", str(work), "--prefix",
             str(machine.chain.prefix), "--mirror", machine.chain.mirror]
    run_cli("build", *flags, "--cache", str(machine.cache), *UNSIGNED, "--quiet",
            "--no-verify", env=machine.env, expect=0)
    alpha = recipes / "alpha.toml"
    alpha.write_text(alpha.read_text().replace("args = []", 'args = ["-DALPHA_FACTOR=2"]'))
    status = json.loads(run_cli("status", *flags, "--json", env=machine.env).stdout)
    steps = {c["name"]: [s["step"] for s in c["steps"] if s["state"] != "done"]
             for c in status["components"]}
    assert steps["alpha"] == ["fetch", "patch", "configure", "compile", "install"], steps
    built = run_cli("build", *flags, "--quiet", "--no-verify", env=machine.env, expect=0)
    started = re.findall(r"^(?:[\d:]+ )?▶ (\S+): (\w+)$", built.stdout, re.M)
    for name in ("alpha", "beta", "gamma"):  # alpha changed, the two above it follow
        assert (name, "fetch") in started and (name, "compile") in started, started
    assert ("blob", "fetch") not in started  # untouched: still the cached install
    assert "/* patched by rocbuild */" in (machine.chain.prefix / "include" / "alpha.h") \
        .read_text()
    assert machine.chain.run_gamma() == "gamma 12"


# --- SIGKILL during a cache install ---------------------------------------------------------
def _kill_everything(proc: subprocess.Popen[str]) -> None:
    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        family = []
    os.killpg(proc.pid, signal.SIGKILL)
    for child in family:
        with contextlib.suppress(psutil.Error):
            child.kill()


def _run_until(argv: list[str], trigger: Callable[[], bool] | None, cwd: Path,
               env: dict[str, str]) -> tuple[bool, int, str]:
    """Run rocbuild; SIGKILL it (and everything it started) once ``trigger()`` holds."""
    log = cwd / "run.out"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=child_env(env), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        killed = False
        while proc.poll() is None:
            if trigger is not None and trigger():
                _kill_everything(proc)
                killed = True
                break
            time.sleep(0.001)
        rc = proc.wait(timeout=300)
    return killed, rc, log.read_text()


def _staging(prefix: Path) -> list[Path]:
    return list(prefix.glob(".rocbuild-unpack-*"))


def _cache_points(work: Path, prefix: Path, names: tuple[str, ...]
                  ) -> list[tuple[str, Callable[[], bool]]]:
    """Kill points of a cache install of ``names`` (a chain: one after another), in the order
    one meets them: the step's log, the artifact's download, the unpack folder in the prefix,
    the ownership record, each stamp."""
    points: list[tuple[str, Callable[[], bool]]] = []
    for name in names:
        def exists(path: Path) -> Callable[[], bool]:
            return path.exists
        points.append((f"{name}: cache log", exists(work / "logs" / name / "cache.log")))
        if name == "blob":
            points.append(("blob: download", lambda: any(
                (work / "cache" / "artifacts").glob("*.partial"))))
            # the transaction's folder is made before the download; its staged files after
            points.append(("blob: unpack folder", lambda: any(
                prefix.glob(".rocbuild-unpack-*/staged/*"))))
        points.append((f"{name}: ownership record",
                       exists(prefix / ".rocbuild" / "installed" / f"{name}.json")))
        for step in ("fetch", "patch", "configure", "compile", "install"):
            points.append((f"{name}: {step} stamp",
                           exists(work / "state" / "stamps" / name / f"{step}.json")))
    return points


def test_sigkill_at_every_point_of_a_cache_install_resumes_to_the_same_prefix(
        machine: Machine, tmp_path: Path) -> None:
    work = tmp_path / "work-b"
    argv = [sys.executable, "-m", "rocbuild", "build",
            *machine.flags(work, "--cache", str(machine.cache)), "--quiet", "--no-verify"]
    kills, failed = [], []
    # blob needs nothing and nothing needs it, so in a run of the whole stack its steps run
    # beside the chain's and its points come in no fixed order among theirs: its own runs
    # first (`build blob`), then the chain's
    for names, only in ((("blob",), ["blob"]), (("alpha", "beta", "gamma"), [])):
        for what, point in _cache_points(work, machine.chain.prefix, names):
            if point():
                continue  # passed already by the run killed at the point before
            killed, rc, output = _run_until(argv + only, point, tmp_path, machine.env)
            if killed:
                kills.append(what)
            elif rc != 0:
                failed.append(f"{what}: exit {rc}: {output[-1500:]}")
    assert not failed, failed
    # the stamps are written within milliseconds, so a run often passes several points; the
    # 12 MiB unpack is slow enough to be cut in the middle
    assert len(kills) >= 5 and "blob: unpack folder" in kills, kills
    every = len(_cache_points(work, work, COMPONENTS))
    print(f"cache install kill points: {len(kills)} kills of {every} "
          f"points, 0 failed reruns: {', '.join(kills)}")
    _killed, rc, output = _run_until(argv, None, tmp_path, machine.env)
    assert rc == 0, output[-3000:]
    _killed, rc, output = _run_until(argv, None, tmp_path, machine.env)
    assert rc == 0 and "all 20 steps are current; nothing to do" in output, output[-3000:]
    assert not _staging(machine.chain.prefix)
    assert prefix_tree(machine.chain.prefix) == machine.tree
    assert machine.chain.run_gamma() == "gamma 11"
    assert not (work / "src").exists()  # every component came from the cache in the end


def test_an_unpack_folder_left_by_a_kill_is_removed_by_a_source_build(
        machine: Machine, tmp_path: Path) -> None:
    """A run killed while blob is unpacked leaves `.rocbuild-unpack-<pid>-*` in the prefix; the
    next run builds from source (no --cache) and never unpacks, yet it clears the folder."""
    work = tmp_path / "work-b"
    argv = [sys.executable, "-m", "rocbuild", "build",
            *machine.flags(work, "--cache", str(machine.cache)), "--quiet", "--no-verify",
            "blob"]
    killed, _rc, output = _run_until(argv, lambda: any(
        machine.chain.prefix.glob(".rocbuild-unpack-*/staged/*")), tmp_path, machine.env)
    assert killed and _staging(machine.chain.prefix), output
    again = run_cli("build", *machine.flags(work), "--quiet", "--no-verify", "blob",
                    env=machine.env, expect=0)
    assert not _staging(machine.chain.prefix), again.explain()
    assert "removed" in again.stdout and ".rocbuild-unpack-" in again.stdout, again.explain()


# --- what an artifact may carry ------------------------------------------------------------
def test_setuid_and_setgid_bits_are_stripped_when_installing_from_the_cache(
        machine: Machine, tmp_path: Path) -> None:
    work = tmp_path / "work-b"
    run_cli("build", *machine.flags(work, "--cache", str(machine.cache)), "--quiet",
            "--no-verify", "blob", env=machine.env, expect=0)
    tool = machine.chain.prefix / "bin" / "tool.sh"
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755, oct(tool.stat().st_mode)
    log = (work / "logs" / "blob" / "cache.log").read_text()
    assert "bin/tool.sh: setuid/setgid bits removed" in log, log


# --- the key -----------------------------------------------------------------------------------
def test_speed_settings_do_not_change_the_cache_key(machine: Machine, tmp_path: Path) -> None:
    require_tool("ccache")
    work = tmp_path / "work-b"
    run_cli("build", *machine.flags(work, "--cache", str(machine.cache)), "--quiet",
            "--no-verify", env=machine.env, expect=0)  # the prefix back: A's build is current
    base = machine.flags(work, "--cache", str(machine.cache), "--json")
    for speed in (("--ccache", "off"), ("--ccache", "on"), ("--jobs", "1"),
                  ("--distcc", "127.0.0.1/2")):
        plan = json.loads(run_cli("plan", *base, *speed, env=machine.env, expect=0).stdout)
        served = [c["cache"] for c in plan["components"]]
        assert all(line.startswith("from cache") for line in served) and len(served) == 4, \
            (speed, served)
    # and a push under another setting finds the artifacts it would write already there
    pushed = run_cli("cache", "push", *machine.chain.flags(), "--ccache", "off", "--to",
                     str(machine.cache), env=machine.env)
    assert pushed.stdout.count("already in") == 4, pushed.explain()


def test_cache_push_without_the_builds_mirror_works_or_is_one_message(
        machine: Machine, tmp_path: Path) -> None:
    """The fetch records whether its ref is a tag, so `cache push` needs neither the source
    cache nor the build's --mirror; a fetch stamp without that record (an older rocbuild's)
    and no source cache under this URL is one message naming the component and --mirror."""
    chain = machine.chain  # the prefix back in place (from the cache), so A's build is current
    run_cli("build", *machine.flags(tmp_path / "work-b", "--cache", str(machine.cache)),
            "--quiet", "--no-verify", env=machine.env, expect=0)
    flags = ["--recipes", str(chain.recipes), "--workdir", str(chain.workdir),
             "--prefix", str(chain.prefix)]
    pushed = run_cli("cache", "push", *flags, "--to", str(tmp_path / "cache-1"),
                     env=machine.env, expect=0)
    assert pushed.stdout.count("✔") == 4, pushed.explain()
    stamp = chain.workdir / "state" / "stamps" / "alpha" / "fetch.json"
    kept = stamp.read_text()
    doc = json.loads(kept)
    assert doc.pop("ref_kind") == "tag"
    stamp.write_text(json.dumps(doc))
    try:
        result = run_cli("cache", "push", *flags, "alpha", "--to", str(tmp_path / "cache-2"),
                         env=machine.env, expect=2)
    finally:
        stamp.write_text(kept)
    assert result.stderr.startswith("rocbuild: error: alpha: its fetch left no record"), \
        result.explain()
    assert "--mirror" in result.stderr, result.explain()


def test_one_damaged_manifest_refuses_only_its_component(machine: Machine,
                                                        tmp_path: Path) -> None:
    """beta's manifest is not JSON: beta is built, the others still come from the cache (never
    the whole cache given up, every component after beta built), and a push replaces the
    damaged manifest."""
    cache = tmp_path / "cache"
    shutil.copytree(machine.cache, cache)
    (manifest_file,) = (cache / "beta").glob("*.json")
    manifest_file.write_text("{ not json")
    work = tmp_path / "work-b"
    built = run_cli("build", *machine.flags(work, "--cache", str(cache)), "--quiet",
                    "--no-verify", env=machine.env, expect=0)
    assert f"its manifest {manifest_file} is not a readable JSON document" in built.stdout, \
        built.explain()
    assert [n for n in COMPONENTS if (work / "logs" / n / "compile.log").exists()] == ["beta"]
    assert machine.chain.run_gamma() == "gamma 11"
    pushed = run_cli("cache", "push", *machine.flags(work), "beta", "--to", str(cache),
                     env=machine.env, expect=0)
    assert "✔ beta" in pushed.stdout, pushed.explain()
    assert json.loads(manifest_file.read_text())["component"] == "beta"


def test_counts_of_one_and_short_times_read_as_words(tmp_path: Path) -> None:
    """A component of one installed file: the run says "1 component" and "under a minute"
    (not "1 components", "about 0 min"), its reinstall and its install from the cache say
    "1 file", not "1 files" (on the terminal and in the step logs)."""
    from tests.support.chain import one_component_stack

    flags = one_component_stack(tmp_path, "a", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
                          "install(FILES a.txt DESTINATION share)\n", "a.txt": "a\n"})
    run_cli("build", *flags, "--no-verify", expect=0)
    recipe = tmp_path / "recipes" / "a.toml"
    recipe.write_text(recipe.read_text() + 'args = ["-DCMAKE_INSTALL_MESSAGE=NEVER"]\n')  # again
    again = run_cli("build", *flags, "--no-verify", expect=0).stdout
    assert "rocbuild: 1 component for gfx906 into" in again, again
    assert re.search(r"expected: 3 steps, under a minute from this host's history", again), again
    install_log = (tmp_path / "work" / "logs" / "a" / "install.log").read_text()
    assert "removed 1 file of the previous install of a" in install_log, install_log
    cache = tmp_path / "cache"
    run_cli("cache", "push", *flags, "--to", str(cache), expect=0)
    shutil.rmtree(tmp_path / "prefix")
    second = [*flags, "--workdir", str(tmp_path / "work-b"), "--cache", str(cache)]
    run_cli("build", *second, *_unsigned_flag(), "--no-verify", expect=0)
    logged = "".join(p.read_text() for p in (tmp_path / "work-b" / "logs").rglob("*.log"))
    assert re.search(r"installed 1 file from \w+\.tar\.zst", logged), logged
