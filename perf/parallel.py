"""Many components at once, against the same commands by hand, in one session (issue 34):

1. four independent ggml components, cold, through `rocbuild build` (``--parallel auto``,
   the default) against the same git and cmake commands by hand, one component after
   another, each `cmake --build` with ninja's own default jobs (goal on 16 cores: <= 0.6x;
   the floor, the four builds' CPU time over the cores, is about 0.33x);
2. one ggml, cold, `rocbuild build --jobs N` against by hand with `cmake --build --parallel N`,
   N = this host's CPUs (goal: <= 1.03x).

Every figure is printed with the machine's load. The four components are four checkouts of
one repository (as llama.cpp and llama.cpp-vulkan are), so their fetches also share one
source cache.

    python -m perf.parallel --source ggml.git            # a git repository of ggml
    python -m perf.parallel --source-tar ggml-src.tar.gz # a tarball of a ggml folder
    python -m perf.parallel ... [--runs 1] [--parallel auto] [--skip-one]

perf/bigmachine.sh runs it on a machine without network from the wheels in perf/wheels/.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from perf import fixedcost, ggml

NAMES = ("ggml-a", "ggml-b", "ggml-c", "ggml-d")
GOALS = {"four": 0.6, "one": 1.03}


def repo_from_tar(tar: Path, into: Path) -> Path:
    """A git repository of the ggml folder inside ``tar`` (one commit)."""
    into.mkdir(parents=True)
    with tarfile.open(tar) as archive:
        if sys.version_info >= (3, 12):
            archive.extractall(into, filter="data")
        else:  # our own tarball
            archive.extractall(into)
    top = next(p for p in into.iterdir() if p.is_dir())
    ident = ["-c", "user.name=perf", "-c", "user.email=perf@localhost"]
    for argv in (["init", "-q", "-b", "main"], [*ident, "add", "-A"],
                 [*ident, "commit", "-qm", "ggml"]):
        subprocess.run(["git", "-C", str(top), *argv], check=True)
    return top


def write_recipes(recipes: Path, names: Sequence[str]) -> None:
    recipes.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f'"{n}"' for n in names)
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n'
        f"components = [{listed}]\n")
    for name in names:  # the same repository for every one: one source cache, four checkouts
        (recipes / f"{name}.toml").write_text(ggml.recipe(own_folders(name)))


def own_folders(name: str) -> list[str]:
    """Install folders of the component's own (as llama.cpp-vulkan's recipe does): the four
    would otherwise install the same files into one prefix, which rocbuild refuses."""
    return [f"-DCMAKE_INSTALL_{kind}DIR={name}/{kind.lower()}"
            for kind in ("BIN", "LIB", "INCLUDE")]


def by_hand(served: Path, names: Sequence[str], root: Path, jobs: int | None) -> str | None:
    """git, cmake, ninja and cmake --install for each component, one after another."""
    prefix = root / "prefix"
    parallel = ["--parallel", str(jobs)] if jobs else []
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CCACHE_") and k not in ("MAKEFLAGS", "CMAKE_BUILD_PARALLEL_LEVEL")}
    for name in names:
        src, build = root / "src" / name, root / "build" / name
        for argv in (["git", "init", "-q", str(src)],
                     ["git", "-C", str(src), "fetch", "-q", "--depth", "1", "--no-tags",
                      served.as_uri(), ggml.TAG],
                     ["git", "-C", str(src), "checkout", "-q", "--detach", "FETCH_HEAD"],
                     ["cmake", "-G", "Ninja", "-S", str(src), "-B", str(build),
                      "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_INSTALL_PREFIX={prefix}",
                      *ggml.BASE_ARGS, *own_folders(name)],
                     ["cmake", "--build", str(build), *parallel],
                     ["cmake", "--install", str(build)]):
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    return None


def through_rocbuild(recipes: Path, repos: Path, root: Path, names: Sequence[str],
                     extra: Sequence[str], pycache: Path) -> str:
    """``rocbuild build NAMES``; the lines that say how it ran them (parallel, job pool)."""
    argv = [sys.executable, "-m", "rocbuild", "build", "--no-verify", "--ccache", "off",
            *names, *ggml.flags(recipes, root / "work", root / "prefix", repos), *extra]
    done = subprocess.run(argv, capture_output=True, text=True,
                          env=ggml.bytecode_env(ggml.rocbuild_env(), pycache))
    if done.returncode != 0:
        raise SystemExit(f"rocbuild failed ({done.returncode}):\n{done.stdout[-3000:]}"
                         f"\n{done.stderr[-2000:]}")
    said = [line.split(" ", 1)[-1] for line in done.stdout.splitlines()
            if re.search(r"--parallel auto:|job pool:|: \d+ jobs?:", line)]
    # where rocbuild's time went, step by step (its summary line and the steps' end lines)
    steps = re.findall(r"✔ \S+: (\w+) \((\d+\.\d+)s\)", done.stdout)
    total = re.search(r"rocbuild: \d+ steps run.*", done.stdout)
    if steps and len(names) == 1:
        said.append("steps: " + ", ".join(f"{s} {t}s" for s, t in steps)
                    + (f"; {total.group(0)}" if total else ""))
    return "\n      ".join(said[:4])


Side = Callable[[Path], "str | None"]


def compare(label: str, runs: int, base: Path, hand: Side, tool: Side) -> float:
    """Alternating runs of ``hand`` and ``tool`` (callables of a fresh root); the ratio of
    the medians of their wall times."""
    times: dict[str, list[float]] = {"hand": [], "rocbuild": []}
    for run in range(runs):
        for side in (("hand", "rocbuild") if run % 2 == 0 else ("rocbuild", "hand")):
            root = base / f"{label}-{side}-{run}"
            root.mkdir()
            said: list[str] = []
            fn = hand if side == "hand" else tool
            wall, cpu = ggml.measured(lambda r=root, f=fn, s=said: s.append(f(r) or ""))
            times[side].append(wall)
            print(f"  {label} run {run + 1} {side:>8}: {wall:7.2f}s wall {cpu:8.2f}s CPU  "
                  f"{ggml.load()}" + (f"\n      {said[0]}" if said and said[0] else ""),
                  flush=True)
            shutil.rmtree(root)
    hand_s, tool_s = statistics.median(times["hand"]), statistics.median(times["rocbuild"])
    ratio = tool_s / hand_s
    goal = GOALS[label]
    print(f"{label}: by hand {hand_s:.2f}s, rocbuild {tool_s:.2f}s: ratio {ratio:.3f} "
          f"(goal <= {goal}: {'met' if ratio <= goal else 'NOT met'})", flush=True)
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="a git repository of ggml")
    parser.add_argument("--source-tar", type=Path, help="a .tar.gz holding a ggml folder")
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--parallel", default="auto", help="rocbuild's --parallel for the four")
    parser.add_argument("--skip-one", action="store_true", help="only the four components")
    parser.add_argument("--skip-four", action="store_true", help="only the one component")
    args = parser.parse_args()
    if (args.source is None) == (args.source_tar is None):
        parser.error("give --source or --source-tar")
    cpus = len(os.sched_getaffinity(0))
    ninja = subprocess.run(["ninja", "--version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="rocbuild-parallel-") as tmp:
        base = Path(tmp)
        source = args.source or repo_from_tar(args.source_tar, base / "unpacked")
        repos, recipes = base / "repos", base / "recipes"
        commit = ggml.serve(source, args.ref, repos)
        served = repos / "ggml.git"
        write_recipes(recipes, NAMES)
        pycache = base / "pycache"  # .pyc files, as an installed rocbuild has them
        warm_repos, warm_recipes, _ = fixedcost.stack(base / "warm", 1)  # writes them
        subprocess.run([sys.executable, "-m", "rocbuild", *fixedcost.rocbuild_argv(
                           warm_recipes, warm_repos, base / "warm", args.parallel)],
                       check=True, stdout=subprocess.DEVNULL,
                       env=ggml.bytecode_env(ggml.rocbuild_env(), pycache))
        print(f"ggml {commit[:12]} (CPU; tests, examples and GGML_CCACHE off), {cpus} CPUs, "
              f"ninja {ninja} on PATH, Python {sys.version.split()[0]}, {ggml.load()}",
              flush=True)
        four = None if args.skip_four else compare(
            "four", args.runs, base, lambda r: by_hand(served, NAMES, r, None),
            lambda r: through_rocbuild(recipes, repos, r, NAMES, ["--parallel", args.parallel],
                                       pycache))
        one = None
        if not args.skip_one:
            one = compare("one", args.runs, base,
                          lambda r: by_hand(served, NAMES[:1], r, cpus),
                          lambda r: through_rocbuild(recipes, repos, r, NAMES[:1],
                                                     ["--jobs", str(cpus)], pycache))
        print("RATIOS"
              + (f" four-parallel-vs-sequential-by-hand {four:.3f}" if four is not None else "")
              + (f"  one-vs-by-hand-at-{cpus}-jobs {one:.3f}" if one is not None else "")
              + f"  {ggml.load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
