"""Time a no-op `rocbuild build` of a 15-component stack whose steps are all current, against
the bare interpreter start-up with rocbuild's imports, in the same session; prints both and
their ratio (goal: the no-op under 1 s on a 2-core machine).

    python -m perf.noop [--components 15] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from tests.support.chain import FAKE_HOST, make_repo

REPO = Path(__file__).resolve().parents[1]


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
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


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
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rocbuild-noop-") as tmp:
        base = Path(tmp)
        recipes = stack(base, args.components)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROCBUILD_")}
        env.update(PYTHONPATH=str(REPO), ROCBUILD_RECIPES=str(recipes),
                   ROCBUILD_WORKDIR=str(base / "work"), ROCBUILD_PREFIX=str(base / "prefix"),
                   ROCBUILD_MIRROR=f"{FAKE_HOST}={(base / 'repos').as_uri()}/")
        build = [sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify"]
        first = timed(build, env)
        print(f"first build of {args.components} components: {first:.2f}s")
        startup = [sys.executable, "-c", "import rocbuild.cli.main, rocbuild.run.engine"]
        noop, bare = [], []
        for _ in range(args.runs):
            noop.append(timed(build, env))
            bare.append(timed(startup, env))
        n, b = statistics.median(noop), statistics.median(bare)
        print(f"no-op rebuild: median {n:.3f}s over {args.runs} runs (goal < 1 s)")
        print(f"interpreter + imports alone: median {b:.3f}s")
        print(f"ratio no-op / start-up: {n / b:.2f} (the rest is loading recipes and checking "
              f"{args.components * 5} stamps)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
