"""rocbuild's fixed cost per component on a cold build: a generated stack of trivial CMake
components (nothing to compile: each installs one file), built from nothing through
`rocbuild build` against the same git and cmake commands by hand, alternating runs in one
session; prints (rocbuild - by hand) / components (goal: <= 0.5 s per component, issue 34).

    python -m perf.fixedcost [--components 8] [--runs 3] [--profile out.prof]

--profile runs one more cold build under cProfile and prints where its time went (the
functions with the most cumulative time, then the most own time).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from perf.ggml import bytecode_env, load, measured, rocbuild_env
from tests.support.chain import FAKE_HOST, make_repo

GOAL = 0.5  # seconds per component


def stack(base: Path, count: int) -> tuple[Path, Path, list[str]]:
    repos, recipes = base / "repos", base / "recipes"
    recipes.mkdir(parents=True)
    names = [f"c{i:02d}" for i in range(count)]
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n'
        f"components = {names!r}\n".replace("'", '"'))
    for name in names:
        make_repo(repos, name, {"CMakeLists.txt": textwrap.dedent(f"""\
            cmake_minimum_required(VERSION 3.20)
            project({name} NONE)
            install(FILES CMakeLists.txt DESTINATION share/{name})
            """)})
        (recipes / f"{name}.toml").write_text(
            f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n[cmake]\n')
    return repos, recipes, names


def by_hand(repos: Path, names: list[str], root: Path) -> None:
    prefix = root / "prefix"
    for name in names:
        src, build = root / "src" / name, root / "build" / name
        for argv in (["git", "init", "-q", str(src)],
                     ["git", "-C", str(src), "fetch", "-q", "--depth", "1", "--no-tags",
                      (repos / f"{name}.git").as_uri(), "v1"],
                     ["git", "-C", str(src), "checkout", "-q", "--detach", "FETCH_HEAD"],
                     ["cmake", "-G", "Ninja", "-S", str(src), "-B", str(build),
                      "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_INSTALL_PREFIX={prefix}"],
                     ["cmake", "--build", str(build)],
                     ["cmake", "--install", str(build)]):
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def rocbuild_argv(recipes: Path, repos: Path, root: Path, parallel: str) -> list[str]:
    return ["build", "--quiet", "--no-verify", "--ccache", "off", "--parallel", parallel,
            "--recipes", str(recipes), "--workdir", str(root / "work"),
            "--prefix", str(root / "prefix"), "--mirror", f"{FAKE_HOST}={repos.as_uri()}/"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--components", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallel", default="1")
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rocbuild-fixed-") as tmp:
        base = Path(tmp)
        repos, recipes, names = stack(base, args.components)
        print(f"{len(names)} trivial components, cold, --parallel {args.parallel}, {load()}")
        env = bytecode_env(rocbuild_env(), base / "pycache")
        warm = base / "warm-up"  # writes the .pyc files, as an installed rocbuild has them
        subprocess.run([sys.executable, "-m", "rocbuild",
                        *rocbuild_argv(recipes, repos, warm, args.parallel)],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        shutil.rmtree(warm)
        times: dict[str, list[float]] = {"hand": [], "rocbuild": []}
        for run in range(args.runs):
            for label in (("hand", "rocbuild") if run % 2 == 0 else ("rocbuild", "hand")):
                root = base / f"{label}-{run}"
                root.mkdir()
                if label == "hand":
                    wall, _ = measured(lambda r=root: by_hand(repos, names, r))
                else:
                    argv = [sys.executable, "-m", "rocbuild",
                            *rocbuild_argv(recipes, repos, root, args.parallel)]
                    wall, _ = measured(lambda a=argv: subprocess.run(
                        a, check=True, stdout=subprocess.DEVNULL, env=env))
                times[label].append(wall)
                print(f"run {run + 1} {label:>8}: {wall:6.2f}s  {load()}")
                shutil.rmtree(root)
        hand, tool = statistics.median(times["hand"]), statistics.median(times["rocbuild"])
        each = (tool - hand) / len(names)
        print(f"median by hand {hand:.2f}s, rocbuild {tool:.2f}s: {each:+.3f}s per component "
              f"(goal <= {GOAL}s: {'met' if each <= GOAL else 'NOT met'})")
        if args.profile is not None:
            root = base / "profiled"
            root.mkdir()
            os.environ.update(env)
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout
            from rocbuild.cli.main import main as rocbuild_main

            profiler = cProfile.Profile()
            profiler.enable()
            try:
                rocbuild_main(rocbuild_argv(recipes, repos, root, args.parallel))
            finally:
                profiler.disable()
            profiler.dump_stats(str(args.profile))
            stats = pstats.Stats(str(args.profile))
            stats.sort_stats("cumulative").print_stats(45)
            stats.sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
