"""What the real-code benches share: a ggml repository served to rocbuild through --mirror,
its recipe (CPU build, no tests or examples) and the machine's load next to each figure.

ggml is not part of this repository: pass a clone or a snapshot with ``--source`` (any git
repository of ggml-org/ggml or ggml-org/llama.cpp's ggml). It is cloned bare into a
temporary folder and tagged, so nothing is fetched from the network.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKE = "https://example.invalid/"
TAG = "bench"
# GGML_BUILD_TESTS / GGML_BUILD_EXAMPLES: on when ggml is built standalone; off keeps a cold
# build at a few minutes on 2 cores. GGML_CCACHE defaults ON: ggml then puts the user's
# ccache in front of every compile by itself, so a build "without ccache" would still use one.
# Every bench passes it OFF, so the only compiler cache is the one it measures.
BASE_ARGS = ("-DGGML_BUILD_TESTS=OFF", "-DGGML_BUILD_EXAMPLES=OFF", "-DGGML_CCACHE=OFF")
BUILD_STEPS = ("configure", "compile", "install")


def load() -> str:
    """The 1, 5 and 15 minute load averages, printed next to every figure (timings on a
    shared machine mean little without them)."""
    try:
        return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load ?"


def serve(source: Path, ref: str, repos: Path) -> str:
    """Clone ``source`` bare into ``repos/ggml.git`` with ``ref`` tagged as the bench's ref;
    returns the commit."""
    served = repos / "ggml.git"
    repos.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", "--bare", "--no-tags", str(source), str(served)],
                   check=True)
    commit = subprocess.run(["git", "-C", str(source), "rev-parse", f"{ref}^{{commit}}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "-C", str(served), "tag", TAG, commit], check=True)
    return commit


def recipe(extra_args: Sequence[str] = ()) -> str:
    return textwrap.dedent(f"""\
        summary = "ggml, CPU backend (benchmark)"
        [source]
        git = "{FAKE}ggml.git"
        ref = "{TAG}"
        [cmake]
        args = {json.dumps([*BASE_ARGS, *extra_args])}
        """)


def write_recipes(recipes: Path, extra_args: Sequence[str] = ()) -> None:
    recipes.mkdir(parents=True, exist_ok=True)
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n')
    (recipes / "ggml.toml").write_text(recipe(extra_args))


def flags(recipes: Path, workdir: Path, prefix: Path, repos: Path) -> list[str]:
    return ["--recipes", str(recipes), "--workdir", str(workdir), "--prefix", str(prefix),
            "--mirror", f"{FAKE}={repos.as_uri()}/"]


def rocbuild_env() -> dict[str, str]:
    """The caller's environment without rocbuild's or ccache's settings (a CCACHE_DIR of the
    user's would share a cache between the cold builds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCBUILD_", "CCACHE_"))}
    # this checkout first; what the caller's PYTHONPATH holds after it (perf/bigmachine.sh
    # puts rocbuild's dependencies there where it cannot make a venv)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def bytecode_env(env: dict[str, str], pycache: Path) -> dict[str, str]:
    """``env`` with rocbuild's .pyc files written to and read from ``pycache``, as an
    installed rocbuild has them: in a PYTHONDONTWRITEBYTECODE environment every run would
    compile its modules again (1.4 s of a cold one-component build on a loaded 2-core
    machine, more than its steps)."""
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def rocbuild_build(argv: Sequence[str], jobs: int | None = None) -> tuple[float, float]:
    """``rocbuild build ARGV``; its wall time and CPU time (``measured``)."""
    cmd = [sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify", *argv]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    return measured(lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                                           env=rocbuild_env()))


def step_seconds(workdir: Path, component: str = "ggml") -> float:
    """configure + compile + install as the stamps record them (the fetch is not a
    rebuild's concern)."""
    total = 0.0
    for step in BUILD_STEPS:
        stamp = json.loads((workdir / "state" / "stamps" / component / f"{step}.json")
                           .read_text())
        total += float(stamp["seconds"])
    return total


def measured(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall time of ``fn`` and the CPU time (user + system) of every process it waited for,
    compilers included (each parent waits for its children). The CPU time moves much less
    with the machine's load: on a shared machine its ratio is the steadier figure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    fn()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
