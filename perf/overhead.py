"""Wall time of one real CMake project built through rocbuild versus the same git, cmake and
ninja commands by hand, alternating runs in one session; prints the ratio (goal: <= 1.03).

    python -m perf.overhead [--runs 3] [--files 120]
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
import time
from pathlib import Path

from tests.support.chain import FAKE_HOST, make_repo

REPO = Path(__file__).resolve().parents[1]


def project(files: int) -> dict[str, str]:
    """A library of ``files`` C files, each with enough code to take real compile time."""
    sources = {f"src/f{i}.c": textwrap.dedent(f"""\
        static double work{i}(int n) {{ double s = 0; for (int k = 1; k < n; k++) s += 1.0 / k;
          return s; }}
        double f{i}(int n) {{ return work{i}(n) * {i}; }}
        """) * 1 for i in range(files)}
    listing = " ".join(sorted(sources))
    sources["CMakeLists.txt"] = textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.20)
        project(bench C)
        add_library(bench SHARED {listing})
        target_compile_options(bench PRIVATE -O2)
        install(TARGETS bench LIBRARY DESTINATION lib)
        """)
    return sources


def by_hand(repos: Path, root: Path, jobs: int) -> float:
    src, build, prefix = root / "src", root / "build", root / "prefix"
    started = time.perf_counter()
    for argv in (["git", "init", "-q", str(src)],
                 ["git", "-C", str(src), "fetch", "-q", "--depth", "1",
                  (repos / "bench.git").as_uri(), "v1"],
                 ["git", "-C", str(src), "checkout", "-q", "--detach", "FETCH_HEAD"],
                 ["cmake", "-G", "Ninja", "-S", str(src), "-B", str(build),
                  "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_INSTALL_PREFIX={prefix}"],
                 ["cmake", "--build", str(build), "--parallel", str(jobs)],
                 ["cmake", "--install", str(build)]):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def through_rocbuild(recipes: Path, repos: Path, root: Path, jobs: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCBUILD_")}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify",
            "--recipes", str(recipes), "--workdir", str(root / "work"),
            "--prefix", str(root / "prefix"), "--mirror", f"{FAKE_HOST}={repos.as_uri()}/",
            "--jobs", str(jobs)]
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=1500,
                        help="C files in the project (1500: about half a minute by hand "
                             "here, the scale of a small ROCm component)")
    args = parser.parse_args()
    jobs = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="rocbuild-bench-") as tmp:
        base = Path(tmp)
        repos = base / "repos"
        make_repo(repos, "bench", project(args.files))
        recipes = base / "recipes"
        recipes.mkdir()
        (recipes / "stack.toml").write_text('[stack]\nversion = "1.0"\ntargets = ["gfx906"]\n'
                                            'prefix = "/opt/unused"\n')
        (recipes / "bench.toml").write_text(f'[source]\ngit = "{FAKE_HOST}bench.git"\n'
                                            'ref = "v1"\n[cmake]\n')
        hand, tool = [], []
        for run in range(args.runs):  # alternate so drift in machine load hits both alike
            for label, fn, out in (("hand", by_hand, hand), ("rocbuild", None, tool)):
                root = base / f"{label}-{run}"
                root.mkdir()
                seconds = (by_hand(repos, root, jobs) if fn else
                           through_rocbuild(recipes, repos, root, jobs))
                out.append(seconds)
                print(f"run {run + 1} {label:>8}: {seconds:6.2f}s")
                shutil.rmtree(root)
    ratio = statistics.median(tool) / statistics.median(hand)
    print(f"median by hand {statistics.median(hand):.2f}s, through rocbuild "
          f"{statistics.median(tool):.2f}s, ratio {ratio:.3f} (goal <= 1.03)")
    print(f"fixed cost of rocbuild: {statistics.median(tool) - statistics.median(hand):.2f}s "
          "(start-up, preflight, source cache, stamps, env files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
