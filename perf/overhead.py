"""What rocbuild's orchestration costs on a real build: ggml (CPU build) through `rocbuild
build --ccache off` against the same git, cmake and ninja commands by hand, alternating runs
in one session; prints the ratio of the medians (goal: <= 1.02).

    python -m perf.overhead --source /path/to/ggml.git [--ref COMMIT] [--runs 2]
    python -m perf.overhead [--files 1500]   # without ggml: a generated C library

Like with like: neither side has a compiler cache. rocbuild runs with --ccache off, and
ggml's own GGML_CCACHE (ON by default: ggml puts an installed ccache in front of every
compile by itself) is OFF on both sides, as are its tests and examples (perf/ggml.py). Each
build starts from nothing (a fresh clone, build tree and prefix), so the difference is
rocbuild's start-up, preflight, source cache, option check, stamps and env files. Wall and
CPU time (user + system of every process) are printed with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

from perf import ggml
from tests.support.chain import make_repo

GOAL = 1.02


def generated(files: int) -> dict[str, str]:
    """A library of ``files`` C files, each with enough code to take real compile time."""
    sources = {f"src/f{i}.c": textwrap.dedent(f"""\
        static double work{i}(int n) {{ double s = 0; for (int k = 1; k < n; k++) s += 1.0 / k;
          return s; }}
        double f{i}(int n) {{ return work{i}(n) * {i}; }}
        """) for i in range(files)}
    listing = " ".join(sorted(sources))
    sources["CMakeLists.txt"] = textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.20)
        project(bench C)
        add_library(bench SHARED {listing})
        target_compile_options(bench PRIVATE -O2)
        install(TARGETS bench LIBRARY DESTINATION lib)
        """)
    return sources


def by_hand(served: Path, ref: str, args: Sequence[str], root: Path, jobs: int) -> None:
    src, build, prefix = root / "src", root / "build", root / "prefix"
    for argv in (["git", "init", "-q", str(src)],
                 ["git", "-C", str(src), "fetch", "-q", "--depth", "1", "--no-tags",
                  served.as_uri(), ref],
                 ["git", "-C", str(src), "checkout", "-q", "--detach", "FETCH_HEAD"],
                 ["cmake", "-G", "Ninja", "-S", str(src), "-B", str(build),
                  "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_INSTALL_PREFIX={prefix}", *args],
                 ["cmake", "--build", str(build), "--parallel", str(jobs)],
                 ["cmake", "--install", str(build)]):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL,
                       env={k: v for k, v in os.environ.items() if not k.startswith("CCACHE_")})


def through_rocbuild(recipes: Path, repos: Path, root: Path, jobs: int) -> None:
    argv = [sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify",
            "--ccache", "off", *ggml.flags(recipes, root / "work", root / "prefix", repos),
            "--jobs", str(jobs)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=ggml.rocbuild_env())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None,
                        help="a git repository of ggml (without it: a generated C library)")
    parser.add_argument("--ref", default="HEAD", help="the ggml commit to build")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--files", type=int, default=1500,
                        help="without --source: C files in the generated library")
    args = parser.parse_args()
    jobs = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="rocbuild-bench-") as tmp:
        base = Path(tmp)
        repos, recipes = base / "repos", base / "recipes"
        if args.source is not None:
            commit = ggml.serve(args.source, args.ref, repos)
            ggml.write_recipes(recipes)
            cmake_args: list[str] = list(ggml.BASE_ARGS)
            what = f"ggml {commit[:12]} (CPU; tests, examples and GGML_CCACHE off)"
        else:  # the generated library, served under the same name
            make_repo(repos, "ggml", generated(args.files), tag=ggml.TAG)
            recipes.mkdir()
            (recipes / "stack.toml").write_text('[stack]\nversion = "1.0"\ntargets = '
                                                '["gfx906"]\nprefix = "/opt/unused"\n')
            (recipes / "ggml.toml").write_text(f'[source]\ngit = "{ggml.FAKE}ggml.git"\n'
                                               f'ref = "{ggml.TAG}"\n[cmake]\n')
            cmake_args = []
            what = f"a generated library of {args.files} C files"
        print(f"{what}, {jobs} jobs, no compiler cache on either side, {ggml.load()}")
        served = repos / "ggml.git"
        times: dict[str, list[tuple[float, float]]] = {"hand": [], "rocbuild": []}
        for run in range(args.runs):  # alternate so drift in machine load hits both alike
            order = ("hand", "rocbuild") if run % 2 == 0 else ("rocbuild", "hand")
            for label in order:
                root = base / f"{label}-{run}"
                root.mkdir()
                if label == "hand":
                    result = ggml.measured(
                        lambda r=root: by_hand(served, ggml.TAG, cmake_args, r, jobs))
                else:
                    result = ggml.measured(
                        lambda r=root: through_rocbuild(recipes, repos, r, jobs))
                times[label].append(result)
                print(f"run {run + 1} {label:>8}: {result[0]:7.2f}s wall, {result[1]:7.2f}s "
                      f"CPU  {ggml.load()}")
                shutil.rmtree(root)
    hand = statistics.median(w for w, _ in times["hand"])
    tool = statistics.median(w for w, _ in times["rocbuild"])
    hand_cpu = statistics.median(c for _, c in times["hand"])
    tool_cpu = statistics.median(c for _, c in times["rocbuild"])
    ratio = tool / hand
    print(f"median by hand {hand:.2f}s, through rocbuild {tool:.2f}s: ratio {ratio:.3f} "
          f"(goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'})")
    print(f"CPU time by hand {hand_cpu:.2f}s, through rocbuild {tool_cpu:.2f}s: ratio "
          f"{tool_cpu / hand_cpu:.3f}; rocbuild's own cost {tool - hand:+.2f}s wall, "
          f"{tool_cpu - hand_cpu:+.2f}s CPU (start-up, preflight, source cache, option "
          "check, stamps, env files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
