"""Rebuilds served by ccache on a real project: ggml (CPU build) through rocbuild, in one
session: a cold build (empty cache), a rebuild after a recipe change that configures again and
recompiles every object (GGML_SCHED_MAX_COPIES, a define every ggml target gets and one file
uses), and a build from a deleted build tree. Prints each rebuild's time against the cold
build's (goal: <= 0.25) and ccache's hit rate.

    python -m perf.ccache --source /path/to/ggml.git [--ref COMMIT] [--jobs N]

The source is a git repository of ggml (a clone, or a snapshot outside this repo); it is
cloned into a temporary folder and served to rocbuild through --mirror, so nothing is fetched.
Times are the configure + compile + install steps as rocbuild records them (the fetch is not
a rebuild's concern).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKE = "https://example.invalid/"
BUILD_STEPS = ("configure", "compile", "install")


def recipe(extra_args: list[str]) -> str:
    # GGML_BUILD_TESTS / GGML_BUILD_EXAMPLES: ggml CMakeLists.txt:279-280 (on when standalone);
    # GGML_SCHED_MAX_COPIES: CMakeLists.txt:188, added to every target by src/CMakeLists.txt:4
    args = ["-DGGML_BUILD_TESTS=OFF", "-DGGML_BUILD_EXAMPLES=OFF", *extra_args]
    return textwrap.dedent(f"""\
        summary = "ggml, CPU backend (benchmark)"
        [source]
        git = "{FAKE}ggml.git"
        ref = "bench"
        [cmake]
        args = {json.dumps(args)}
        """)


def rocbuild(flags: list[str], jobs: int | None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCBUILD_", "CCACHE_"))}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify", *flags]
    if jobs:
        argv += ["--jobs", str(jobs)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)


def step_seconds(workdir: Path) -> float:
    total = 0.0
    for step in BUILD_STEPS:
        stamp = json.loads((workdir / "state" / "stamps" / "ggml" / f"{step}.json").read_text())
        total += float(stamp["seconds"])
    return total


def cache_record(workdir: Path) -> dict[str, int]:
    return json.loads((workdir / "state" / "cache-stats" / "ggml.json").read_text())


def hit_text(record: dict[str, int]) -> str:
    total = record["hits"] + record["misses"]
    rate = record["hits"] / total if total else 0.0
    return f"{rate:.0%} hits ({record['hits']}/{total})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a git repository of ggml")
    parser.add_argument("--ref", default="HEAD", help="the commit to build (default: HEAD)")
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args()
    if shutil.which("ccache") is None:
        print("ccache is not installed: sudo apt-get install ccache", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rocbuild-bench-ccache-") as tmp:
        base = Path(tmp)
        repos, recipes, workdir = base / "repos", base / "recipes", base / "work"
        repos.mkdir()
        recipes.mkdir()
        served = repos / "ggml.git"
        subprocess.run(["git", "clone", "-q", "--bare", "--no-tags", str(args.source),
                        str(served)], check=True)
        commit = subprocess.run(["git", "-C", str(args.source), "rev-parse", args.ref],
                                check=True, capture_output=True, text=True).stdout.strip()
        subprocess.run(["git", "-C", str(served), "tag", "bench", commit], check=True)
        (recipes / "stack.toml").write_text(
            '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n')
        flags = ["--recipes", str(recipes), "--workdir", str(workdir),
                 "--prefix", str(base / "prefix"), "--mirror", f"{FAKE}={repos.as_uri()}/"]
        print(f"ggml {commit[:12]}, {args.jobs or len(os.sched_getaffinity(0))} jobs")

        (recipes / "ggml.toml").write_text(recipe([]))
        rocbuild(flags, args.jobs)
        cold = step_seconds(workdir)
        print(f"cold build (empty cache):       {cold:7.1f}s  {hit_text(cache_record(workdir))}")

        (recipes / "ggml.toml").write_text(recipe(["-DGGML_SCHED_MAX_COPIES=2"]))
        rocbuild(flags, args.jobs)
        changed = step_seconds(workdir)
        print(f"after a recipe change:          {changed:7.1f}s  "
              f"{hit_text(cache_record(workdir))}  ratio {changed / cold:.2f}")

        shutil.rmtree(workdir / "build" / "ggml")
        rocbuild(flags, args.jobs)
        fresh = step_seconds(workdir)
        print(f"from a deleted build tree:      {fresh:7.1f}s  "
              f"{hit_text(cache_record(workdir))}  ratio {fresh / cold:.2f}")
        worst = max(changed, fresh) / cold
        print(f"worst rebuild / cold: {worst:.2f} (goal <= 0.25: "
              f"{'met' if worst <= 0.25 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
