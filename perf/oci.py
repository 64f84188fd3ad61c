"""The binary cache through an OCI registry (Debian's docker-registry on loopback, started
here), in one run:

1. a 1 GiB incompressible artifact pushed and pulled through OciStore, each in a child
   process of its own: MB/s and the child's peak RSS (beside that of a child that only
   imports rocbuild), which shows whether the layer is streamed (bounded memory) or read
   whole;
2. the generated alpha <- beta <- gamma chain built from source, then installed on a
   "second machine" (another workdir, the same prefix path, --offline) from the registry,
   signed and checked: both times and their ratio.

    python -m perf.oci [--size-mib 1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from perf.noop import assert_nothing_compiled, timed
from rocbuild.run.cache.artifacts import FileEntry, Manifest, sha256_file
from tests.support.chain import FAKE_HOST, make_chain
from tests.support.registry import registry

REPO = Path(__file__).resolve().parents[1]

# a child: push or pull one artifact, then print seconds and peak RSS (KiB, Linux ru_maxrss)
CHILD = textwrap.dedent("""\
    import json, resource, sys, time
    from pathlib import Path
    from rocbuild.run.cache.artifacts import Manifest
    from rocbuild.run.cache.cache_oci import OciStore
    from rocbuild.run.cache.cache_store import pull_archive
    what, url, manifest_file, path = sys.argv[1:5]
    started = time.perf_counter()
    if what != "import":
        manifest = Manifest.from_json(json.loads(Path(manifest_file).read_text()))
        store = OciStore(url)
        if what == "push":
            store.push(manifest, Path(path))
        else:
            store.read_manifest(manifest.component, manifest.key)
            pull_archive(store, manifest, Path(path))
    seconds = time.perf_counter() - started
    print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """)


def child(what: str, url: str, manifest: Path, path: Path, env: dict[str, str]
          ) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, what, url, str(manifest), str(path)],
                         check=True, capture_output=True, text=True, env=env).stdout.split()
    return float(out[0]), int(out[1]) / 1024  # seconds, MiB


def big_artifact(base: Path, size_mib: int) -> tuple[Path, Path]:
    """An incompressible file standing for a packed layer, and its manifest."""
    archive = base / "big.tar.zst"
    with archive.open("wb") as f:
        for _ in range(size_mib):
            f.write(os.urandom(1 << 20))
    manifest = Manifest(component="big", key="b" * 64, inputs={}, targets=("gfx906",),
                        prefix="/opt/rocm", commit="c" * 40, ref_kind="tag", rocbuild="bench",
                        files=(FileEntry("lib/big", "file", size=archive.stat().st_size,
                                         sha256="0" * 64),),
                        archive_sha256=sha256_file(archive),
                        archive_size=archive.stat().st_size, created=time.time())
    doc = base / "big.json"
    doc.write_text(json.dumps(manifest.to_json()))
    return archive, doc


def layer_throughput(base: Path, size_mib: int, env: dict[str, str]) -> None:
    archive, manifest = big_artifact(base, size_mib)
    with registry(base / "registry") as reg:
        url = reg.url("bench/big")
        _, idle = child("import", url, manifest, archive, env)
        push_s, push_rss = child("push", url, manifest, archive, env)
        pulled = base / "pulled" / archive.name
        pull_s, pull_rss = child("pull", url, manifest, pulled, env)
    mb = archive.stat().st_size / 1e6
    print(f"{size_mib} MiB layer: push {mb / push_s:.0f} MB/s ({push_s:.1f}s), peak RSS "
          f"{push_rss:.0f} MiB; pull {mb / pull_s:.0f} MB/s ({pull_s:.1f}s, sha256 check "
          f"included), peak RSS {pull_rss:.0f} MiB; a child that only imports rocbuild: "
          f"{idle:.0f} MiB")


def stack_ratio(base: Path, rounds: int, env: dict[str, str]) -> None:
    rocbuild = [sys.executable, "-m", "rocbuild"]
    home = {"XDG_CONFIG_HOME": str(base / "config"), "XDG_CACHE_HOME": str(base / "xdg")}
    env = {**env, **home}
    chain = make_chain(base / "chain")
    subprocess.run([*rocbuild, "cache", "keys", "new", "bench"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    builds, installs = [], []
    with registry(base / "stack-registry") as reg:
        for i in range(rounds):
            url = reg.url(f"bench/chain{i}")
            shutil.rmtree(chain.workdir, ignore_errors=True)
            shutil.rmtree(chain.prefix, ignore_errors=True)
            builds.append(timed([*rocbuild, "build", *chain.flags(), "--quiet", "--no-verify"],
                                env))
            subprocess.run([*rocbuild, "cache", "push", *chain.flags(), "--to", url, "--sign",
                            "bench"], check=True, stdout=subprocess.DEVNULL, env=env)
            shutil.rmtree(chain.prefix)
            second = ["--recipes", str(chain.recipes), "--workdir", str(base / f"work-b{i}"),
                      "--prefix", str(chain.prefix), "--mirror", f"{FAKE_HOST}=file:///none/",
                      "--cache", url]
            installs.append(timed([*rocbuild, "build", *second, "--offline", "--quiet",
                                   "--no-verify"], env))
            assert_nothing_compiled(base / f"work-b{i}")
    b, c = statistics.median(builds), statistics.median(installs)
    print(f"chain build from source: median {b:.2f}s over {rounds} rounds")
    print(f"chain install from the registry, signed, offline: median {c:.2f}s")
    print(f"ratio registry install / build: {c / b:.2f} (both include rocbuild's start-up "
          "and writing the env files)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-layer", action="store_true", help="only the stack ratio")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCBUILD_")}
    env["PYTHONPATH"] = str(REPO)
    with tempfile.TemporaryDirectory(prefix="rocbuild-oci-bench-") as tmp:
        if not args.skip_layer:
            layer_throughput(Path(tmp), args.size_mib, env)
        stack_ratio(Path(tmp), args.rounds, env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
