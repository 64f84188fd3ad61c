"""Time installing a stack from the binary cache against building it, in the same session:
machine A builds the generated alpha <- beta <- gamma chain (real git, cmake, ninja, cc) and
pushes it; machine B (another workdir, the same prefix path, --offline) installs it from the
cache. Prints both times and their ratio (cached install / build). Each round uses fresh
workdirs, so every build is a full one.

    python -m perf.cache [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from perf.noop import assert_nothing_compiled, timed
from tests.support.chain import FAKE_HOST, make_chain

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCBUILD_")}
    env["PYTHONPATH"] = str(REPO)
    rocbuild = [sys.executable, "-m", "rocbuild"]
    builds, installs = [], []
    with tempfile.TemporaryDirectory(prefix="rocbuild-cache-bench-") as tmp:
        # a key of its own, trusted in this config only: an unsigned artifact is refused
        # (issue 27), and the "install" would then quietly be a second build
        env.update(XDG_CONFIG_HOME=f"{tmp}/config", XDG_CACHE_HOME=f"{tmp}/xdg")
        subprocess.run([*rocbuild, "cache", "keys", "new", "bench"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        chain = make_chain(Path(tmp))
        cache = Path(tmp) / "cache"
        for i in range(args.rounds):
            shutil.rmtree(chain.workdir, ignore_errors=True)
            shutil.rmtree(chain.prefix, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            builds.append(timed([*rocbuild, "build", *chain.flags(), "--quiet", "--no-verify"],
                                env))
            subprocess.run([*rocbuild, "cache", "push", *chain.flags(), "--to", str(cache),
                            "--sign", "bench"], check=True, stdout=subprocess.DEVNULL, env=env)
            shutil.rmtree(chain.prefix)
            second = ["--recipes", str(chain.recipes), "--workdir", f"{tmp}/work-b{i}",
                      "--prefix", str(chain.prefix), "--mirror", f"{FAKE_HOST}=file:///none/",
                      "--cache", str(cache)]
            installs.append(timed([*rocbuild, "build", *second, "--offline", "--quiet",
                                   "--no-verify"], env))
            assert_nothing_compiled(Path(f"{tmp}/work-b{i}"))
    b, c = statistics.median(builds), statistics.median(installs)
    print(f"build from source (3 components): median {b:.2f}s over {args.rounds} rounds")
    print(f"install from the cache, offline:  median {c:.2f}s over {args.rounds} rounds")
    print(f"ratio cached install / build: {c / b:.2f} (both include rocbuild's start-up and "
          "writing the env files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
