"""SIGKILL at many points of a build, rerun, and get the same prefix as a clean build.

The stack is the alpha <- beta <- gamma chain with a patch (alpha) and an installed link and
file (gamma). A clean build gives the reference tree and the order in which steps start and
finish. Then, in a fresh workdir, each run is killed (its whole process group and every
descendant, like an OOM kill of the build's cgroup) the moment the next kill point's file
appears: a step's log (the step has started), its stamp (it has just finished), a half-made
checkout or cache. Waiting for files, never for fixed times, keeps the points deterministic.
After the last kill a plain rerun finishes, and the prefix must equal the reference: same
paths, types, sizes, sha256 and link targets. Sequential, then with --parallel 2; each run
cuts every kind of step (a kill at its start or at its end) at least once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.cli import child_env
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PATCH = """\
--- a/alpha.h
+++ b/alpha.h
@@ -1 +1,2 @@
 int alpha_value(void);
+/* patched by rocbuild */
"""
# build-info holds the times of the run; everything else must be byte-identical
VOLATILE = {".rocbuild/build-info.json"}


def tree(prefix: Path) -> dict[str, tuple[str, int, str]]:
    """path -> (type, size, sha256 or link target) for everything under the prefix."""
    out: dict[str, tuple[str, int, str]] = {}
    for path in sorted(prefix.rglob("*")):
        rel = path.relative_to(prefix).as_posix()
        if rel in VOLATILE:
            continue
        if path.is_symlink():
            out[rel] = ("link", 0, os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir", 0, "")
        else:
            data = path.read_bytes()
            out[rel] = ("file", len(data), hashlib.sha256(data).hexdigest())
    return out


def _stack(chain: Chain) -> None:
    patches = chain.recipes.parent / "patches" / "alpha"
    patches.mkdir(parents=True)
    (patches / "0001-note.patch").write_text(PATCH)
    with (chain.recipes / "gamma.toml").open("a") as f:
        f.write('[install.links]\n"bin/gamma-link" = "gamma"\n'
                '[install.files]\n"share/chain/note.txt" = "built by {{ name }}\\n"\n')


def _argv(chain: Chain, parallel: int) -> list[str]:
    return [sys.executable, "-m", "rocbuild", "build", *chain.flags(), "--quiet", "--no-verify",
            "--parallel", str(parallel)]


def _kill_everything(proc: subprocess.Popen[str]) -> None:
    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        family = []
    os.killpg(proc.pid, signal.SIGKILL)  # rocbuild's own group (git runs in it)
    for child in family:  # build tools run in sessions of their own (proc.py)
        with contextlib.suppress(psutil.Error):
            child.kill()


def _points(stdout: str, workdir: Path) -> list[Path]:
    """Kill points in the order the clean build met them: each step's log (started) and
    stamp (finished), plus a half-made checkout and a half-made cache."""
    points: list[Path] = [workdir / "cache" / "git", workdir / "src" / "alpha.partial"]
    for line in stdout.splitlines():
        line = re.sub(r"^\d\d:\d\d:\d\d ", "", line)  # plain output carries the time
        mark, _, rest = line.partition(" ")
        if mark not in ("▶", "✔") or ":" not in rest:
            continue
        component, _, step = rest.partition(": ")
        step = step.split(" ")[0]
        if mark == "▶":
            points.append(workdir / "logs" / component / f"{step}.log")
        else:
            points.append(workdir / "state" / "stamps" / component / f"{step}.json")
    return points


def _run_until(argv: list[str], trigger: Path | None, cwd: Path) -> tuple[bool, int, str]:
    """Run rocbuild; SIGKILL it when ``trigger`` appears. (killed, exit code, output)."""
    log = cwd / "run.out"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=child_env(), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        killed = False
        while proc.poll() is None:
            if trigger is not None and trigger.exists():
                _kill_everything(proc)
                killed = True
                break
            time.sleep(0.002)
        rc = proc.wait(timeout=300)
    return killed, rc, log.read_text()


def _phase(point: Path, workdir: Path) -> str:
    """The kind of step a kill point cuts: the step's name (its log or stamp); the half-made
    checkout and cache are the fetch's."""
    if point.parent in (workdir / "cache", workdir / "src"):
        return "fetch"
    return point.stem


def _kill_sequence(chain: Chain, points: list[Path], parallel: int) -> tuple[list[Path], int]:
    """Kill at each point that has not happened yet; (the points killed at, reruns that
    failed)."""
    argv = _argv(chain, parallel)
    kills: list[Path] = []
    failures = 0
    for point in points:
        if point.exists():
            continue  # this run's order passed it already (parallel runs vary)
        killed, rc, output = _run_until(argv, point, chain.root)
        if killed:
            kills.append(point)
        elif rc != 0:
            failures += 1
            print(f"run aiming at {point} failed (exit {rc}):\n{output[-3000:]}")
    killed, rc, output = _run_until(argv, None, chain.root)
    assert rc == 0, output[-4000:]
    return kills, failures


def _fresh(chain: Chain) -> None:
    for folder in (chain.workdir, chain.prefix):
        shutil.rmtree(folder, ignore_errors=True)


def test_every_kill_point_resumes_to_the_clean_tree(chain: Chain) -> None:
    _stack(chain)
    _killed, rc, clean_out = _run_until(_argv(chain, 1), None, chain.root)
    assert rc == 0, clean_out[-4000:]
    reference = tree(chain.prefix)
    assert reference["bin/gamma-link"] == ("link", 0, "gamma")
    assert "/* patched by rocbuild */" in (chain.prefix / "include" / "alpha.h").read_text()
    points = _points(clean_out, chain.workdir)
    assert len(points) >= 30  # 3 components x 5 steps x (start, end) + 2
    summary = []
    for parallel in (1, 2):
        _fresh(chain)
        kills, failures = _kill_sequence(chain, points, parallel)
        same = tree(chain.prefix) == reference
        summary.append(f"--parallel {parallel}: {len(kills)} kills, {failures} failed reruns, "
                       f"tree {'identical' if same else 'DIFFERENT'}")
        assert failures == 0, summary
        assert same, (summary, set(tree(chain.prefix).items()) ^ set(reference.items()))
        # a run that passes several points within one poll (2 ms) is killed at the first and
        # the others are skipped, so how many kills land depends on speed; what must hold is
        # that every kind of step (3 components, a start and an end each) was cut at least once
        uncut = ({_phase(p, chain.workdir) for p in points}
                 - {_phase(p, chain.workdir) for p in kills})
        assert not uncut, (summary, uncut, kills)
        assert chain.run_gamma() == "gamma 11"
    print("kill points: " + "; ".join(summary))


def test_stale_git_locks_and_leftovers_do_not_block_the_rerun(tmp_path: Path) -> None:
    """What a kill in the middle of git leaves (lock files in the cache and the checkout, a
    half-switched ``.old`` checkout, a stamp temp file) is cleared by the next run, which
    fetches the branch again (its fetch stamp is gone, as after a kill mid-fetch)."""
    from tests.cli import run_cli
    from tests.support.chain import one_component_stack

    flags = one_component_stack(tmp_path, "a", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
                          "install(FILES a.txt DESTINATION share)\n", "a.txt": "a\n"})
    recipe = tmp_path / "recipes" / "a.toml"
    recipe.write_text(recipe.read_text().replace('ref = "v1"', 'ref = "main"'))
    run_cli("build", *flags, "--no-verify", expect=0)
    work = tmp_path / "work"
    (cache,) = (work / "cache" / "git").glob("*.git")
    locks = [cache / "shallow.lock", cache / "config.lock", cache / "HEAD.lock",
             cache / "refs" / "rocbuild" / "pinned" / "x.lock", work / "src" / "a" / ".git" /
             "index.lock", work / "src" / "a" / ".git" / "HEAD.lock"]
    for lock in locks:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text("")
    old = work / "src" / "a.old"
    (old / "big").mkdir(parents=True)
    temp = work / "state" / "stamps" / "a" / ".fetch.json.999.tmp"
    temp.write_text("{")
    (tmp_path / "repos" / "a.git.src" / "a.txt").write_text("b\n")  # a new commit on main
    for args in (["add", "-A"], ["commit", "-qm", "two"], ["push", "-q", str(tmp_path / "repos"
                                                                          / "a.git"), "main"]):
        subprocess.run(["git", "-C", str(tmp_path / "repos" / "a.git.src"), "-c",
                        "user.name=t", "-c", "user.email=t@t", *args], check=True)
    (work / "state" / "stamps" / "a" / "fetch.json").unlink()
    result = run_cli("build", *flags, "--no-verify", expect=0)
    assert "removed a stale git lock" in result.stdout
    assert not any(lock.exists() for lock in locks) and not old.exists() and not temp.exists()
    assert (tmp_path / "prefix" / "share" / "a.txt").read_text() == "b\n"


# rocbuild killed by SIGKILL at the moment it would rename a temp file into the prefix
KILL_BEFORE_RENAME = """
import os, signal, sys
real = os.replace
def replace(src, dst, *args, **kwargs):
    if os.path.basename(str(dst)) in sys.argv[1].split(","):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *args, **kwargs)
os.replace = replace
from rocbuild.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def test_temp_files_of_a_kill_before_a_rename_are_cleared(tmp_path: Path) -> None:
    """A kill between writing a temp file and renaming it (env.sh, an [install.files] extra)
    leaves `.env.sh.<pid>.tmp` and `.note.txt.rocbuild-tmp` in the prefix: the next run
    removes them and says so."""
    from tests.cli import run_cli
    from tests.support.chain import one_component_stack

    flags = one_component_stack(tmp_path, "a", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
                          "install(FILES a.txt DESTINATION share)\n", "a.txt": "a\n"},
        '[cmake]\n[install.files]\n"share/note.txt" = "n\\n"\n')
    prefix = tmp_path / "prefix"
    for name, left in (("note.txt", "share/.note.txt.rocbuild-tmp"), ("env.sh", ".env.sh.*.tmp")):
        argv = [sys.executable, "-c", KILL_BEFORE_RENAME, name, "build", *flags, "--no-verify"]
        done = subprocess.run(argv, env=child_env(), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
        assert list(prefix.glob(left)), sorted(prefix.rglob("*"))
        recipe = tmp_path / "recipes" / "a.toml"
        if name == "note.txt":  # the extra is gone from the recipe: nothing rewrites it
            recipe.write_text(recipe.read_text().replace('"share/note.txt" = "n\\n"\n', ""))
    result = run_cli("build", *flags, "--no-verify", expect=0)
    assert not [p for p in prefix.rglob("*") if p.name.endswith((".tmp", ".rocbuild-tmp"))], \
        sorted(prefix.rglob("*"))
    assert "removed a temp file a killed run left in the prefix" in result.stdout
