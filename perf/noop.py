"""The everyday loop against the dependency-import floor, in one session: a no-op `rocbuild
build` of a generated 15-component stack whose steps are all current (goal <= 2.0x the
floor), and `rocbuild status` and `rocbuild plan` of the shipped 18-component stack
(recipes/, a fresh workdir; goal <= 1.5x each). The floor is the same interpreter importing
rocbuild's dependencies (doit, rich, jinja2, GitPython, psutil) and nothing else. Runs
alternate, so a drift in the machine's load hits all of them alike; medians are compared.

    python -m perf.noop [--components 15] [--runs 7]

Bytecode: each child writes and reads its .pyc files in a temporary PYTHONPYCACHEPREFIX
(warmed first), as an installed rocbuild has them; without that, a PYTHONDONTWRITEBYTECODE
environment would time the compiler instead.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from perf.ggml import load
from tests.support.chain import FAKE_HOST, make_repo

REPO = Path(__file__).resolve().parents[1]
FLOOR = "import doit, rich, jinja2, git, psutil"
GOALS = {"no-op build (15 components)": 2.0, "status (shipped stack)": 1.5,
         "plan (shipped stack)": 1.5}


def stack(base: Path, count: int) -> Path:
    repos, recipes = base / "repos", base / "recipes"
    recipes.mkdir(parents=True)
    names = [f"c{i:02d}" for i in range(count)]
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n'
        f"components = {names!r}\n".replace("'", '"'))
    for i, name in enumerate(names):
        make_repo(repos, name, {"CMakeLists.txt": textwrap.dedent(f"""\
            cmake_minimum_required(VERSION 3.20)
            project({name} NONE)
            install(FILES CMakeLists.txt DESTINATION share/{name})
            """)})
        deps = names[max(0, i - 2):i]  # a chain with some fan-in, like the real stack
        (recipes / f"{name}.toml").write_text(
            f"depends = {deps!r}\n".replace("'", '"')
            + f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n[cmake]\n'
            '[resources]\ncompile_mem = "1GiB"\n')
    return recipes


def timed(argv: list[str], env: dict[str, str]) -> float:
    return measured(argv, env)[0]


def measured(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system, with the children it waited for: git status)
    of one run. The CPU time barely moves with the machine's load, so on a shared machine its
    ratio is the steadier one; the goals are wall-time ratios on an idle machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def assert_nothing_compiled(workdir: Path) -> None:
    """A timing of an install from the binary cache means nothing if a refused artifact
    made it a build: no step of ``workdir`` may have compiled."""
    built = sorted(p.parent.name for p in workdir.glob("logs/*/compile.log"))
    if built:
        raise SystemExit(f"the install from the cache compiled {', '.join(built)}: an "
                         "artifact was refused, the timing would be a build's")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--components", type=int, default=15)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rocbuild-noop-") as tmp:
        base = Path(tmp)
        recipes = stack(base, args.components)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("ROCBUILD_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(REPO), PYTHONPYCACHEPREFIX=str(base / "pycache"))
        generated = [f"--recipes={recipes}", f"--workdir={base / 'work'}",
                     f"--prefix={base / 'prefix'}",
                     f"--mirror={FAKE_HOST}={(base / 'repos').as_uri()}/"]
        shipped = [f"--recipes={REPO / 'recipes'}", f"--workdir={base / 'shipped-work'}"]
        rocbuild = [sys.executable, "-m", "rocbuild"]
        commands = {
            "floor": [sys.executable, "-c", FLOOR],
            "no-op build (15 components)": [*rocbuild, "build", "--quiet", "--no-verify",
                                            *generated],
            "status (shipped stack)": [*rocbuild, "status", *shipped],
            "plan (shipped stack)": [*rocbuild, "plan", *shipped],
            f"status ({args.components} built components)": [*rocbuild, "status", *generated],
        }
        first = timed(commands["no-op build (15 components)"], env)
        print(f"first build of {args.components} components: {first:.2f}s  {load()}")
        for argv in commands.values():  # warm the bytecode cache and the probe cache
            timed(argv, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        loads = [load()]
        for _ in range(args.runs):
            for name, argv in commands.items():
                wall, used = measured(argv, env)
                times[name].append(wall)
                cpu[name].append(used)
        loads.append(load())
        floor, floor_cpu = statistics.median(times["floor"]), statistics.median(cpu["floor"])
        print(f"{args.runs} runs each, alternating; {loads[0]} at the start, {loads[1]} "
              "at the end; medians, wall time (CPU time)")
        print(f"{'floor (' + FLOOR + ')':<44} {floor:.3f}s ({floor_cpu:.3f}s)")
        met = True
        for name in commands:
            if name == "floor":
                continue
            median, used = statistics.median(times[name]), statistics.median(cpu[name])
            goal = GOALS.get(name)
            verdict = ""
            if goal is not None:
                met = met and median / floor <= goal
                verdict = f"  goal <= {goal}: {'met' if median / floor <= goal else 'NOT met'}"
            print(f"{name:<44} {median:.3f}s ({used:.3f}s)  {median / floor:.2f}x floor "
                  f"({used / floor_cpu:.2f}x){verdict}")
        print(f"all goals {'met' if met else 'NOT met'} (by wall time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
