"""ccache on real code: ggml (CPU build) through rocbuild, in one session. First what ccache
costs: cold builds with ``--ccache on`` (an empty cache) and ``--ccache off``, alternating
(goal: on / off <= 1.05). Then what it saves, each against the cold build with ccache on:
a deleted build tree (goal <= 0.05), a deleted CMakeCache.txt (<= 0.05) and a changed -D
that every ggml object gets (GGML_SCHED_MAX_COPIES, <= 0.15), with ccache's hit rate.

    python -m perf.ccache --source /path/to/ggml.git [--ref COMMIT] [--jobs N] [--runs 1]

The source is a git repository of ggml (a clone, or a snapshot outside this repo, see
perf/ggml.py); nothing is fetched. Times are the configure + compile + install steps as
rocbuild's stamps record them. Each figure is printed with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from perf import ggml

COLD_GOAL = 1.05
# goals from issue 25 (measured then: 0.02, 0.013, 0.08)
REBUILD_GOALS = {"deleted build tree": 0.05, "deleted CMakeCache.txt": 0.05,
                 "changed -D (every object)": 0.15}


def cache_record(workdir: Path) -> dict[str, int]:
    return json.loads((workdir / "state" / "cache-stats" / "ggml.json").read_text())


def hit_text(workdir: Path) -> str:
    record = cache_record(workdir)
    total = record["hits"] + record["misses"]
    rate = record["hits"] / total if total else 0.0
    return f"{rate:.0%} hits ({record['hits']}/{total})"


def verdict(ratio: float, goal: float) -> str:
    return f"goal <= {goal}: {'met' if ratio <= goal else 'NOT met'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a git repository of ggml")
    parser.add_argument("--ref", default="HEAD", help="the commit to build (default: HEAD)")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--runs", type=int, default=1,
                        help="cold builds with and without ccache, alternating (default 1)")
    args = parser.parse_args()
    if shutil.which("ccache") is None:
        print("ccache is not installed: sudo apt-get install ccache", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="rocbuild-bench-ccache-") as tmp:
        base = Path(tmp)
        repos, recipes = base / "repos", base / "recipes"
        commit = ggml.serve(args.source, args.ref, repos)
        ggml.write_recipes(recipes)
        print(f"ggml {commit[:12]}, {args.jobs or len(os.sched_getaffinity(0))} jobs, "
              f"{ggml.load()}")

        def build(workdir: Path, mode: str) -> tuple[float, float]:
            """The build steps' seconds (stamps) and the CPU time of the whole run."""
            _, cpu = ggml.rocbuild_build([*ggml.flags(recipes, workdir,
                                                      base / f"prefix-{workdir.name}", repos),
                                          "--ccache", mode], args.jobs)
            return ggml.step_seconds(workdir), cpu

        cold: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
        workdir = base / "work"
        for run in range(args.runs):
            # alternate which goes first, so a drift in the machine's load hits both alike
            for mode in ("off", "on") if run % 2 == 0 else ("on", "off"):
                workdir = base / f"cold-{mode}-{run}"
                seconds, cpu = build(workdir, mode)
                cold[mode].append((seconds, cpu))
                extra = f"  {hit_text(workdir)}" if mode == "on" else ""
                print(f"run {run + 1} cold, --ccache {mode:>3}: {seconds:7.1f}s ({cpu:6.1f}s "
                      f"CPU){extra}  {ggml.load()}")
                if not (mode == "on" and run == args.runs - 1):
                    shutil.rmtree(workdir)
        on, off = (statistics.median(s for s, _ in cold[m]) for m in ("on", "off"))
        on_cpu, off_cpu = (statistics.median(c for _, c in cold[m]) for m in ("on", "off"))
        print(f"cold build, ccache on / off: {on:.1f}s / {off:.1f}s = {on / off:.3f} "
              f"({verdict(on / off, COLD_GOAL)}); CPU time {on_cpu:.1f}s / {off_cpu:.1f}s = "
              f"{on_cpu / off_cpu:.3f}")

        # the rebuilds, in the last cold ccache-on workdir: each against the cold build
        workdir = base / f"cold-on-{args.runs - 1}"
        results: dict[str, float] = {}
        for label in REBUILD_GOALS:
            if label == "deleted build tree":
                shutil.rmtree(workdir / "build" / "ggml")
            elif label == "deleted CMakeCache.txt":
                (workdir / "build" / "ggml" / "CMakeCache.txt").unlink()
            else:
                ggml.write_recipes(recipes, ["-DGGML_SCHED_MAX_COPIES=2"])
            seconds, _ = build(workdir, "on")
            results[label] = seconds / on
            print(f"{label + ':':<28}{seconds:7.1f}s  {hit_text(workdir)}  ratio "
                  f"{seconds / on:.3f} ({verdict(seconds / on, REBUILD_GOALS[label])})  "
                  f"{ggml.load()}")
        met = on / off <= COLD_GOAL and all(results[k] <= g for k, g in REBUILD_GOALS.items())
        print(f"all goals {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
