"""Peak memory of `verify` on a large sparse library: the streamed .hip_fatbin reader against
reading the section whole (what verify did before: 1.32 GB RSS on Debian's librocsparse),
each in its own child process, in the same run. The file is a few GiB of holes (no disk
used) with a few real bundles (plain, zlib, zstd when the zstandard module is installed).

    python -m perf.verify_memory [--section-gib 2] [--bundle-mib 16]

Prints each child's peak RSS, the increase over a child that only imports verify, and the
ratios: whole-read / streamed, and streamed / the largest bundle. The baseline reads the
section's bytes into memory as the old verify did, then walks them with the same parser.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.unit.test_verify_stream import sample_bundles, write_sparse_elf

REPO = Path(__file__).resolve().parents[1]

MIB = 1 << 20

# The child: import verify, run one mode, print its own peak RSS (ru_maxrss is in KiB).
CHILD = """
import json, resource, sys
from pathlib import Path
from rocbuild.model.bundles import Decoders, scan_fatbin, zstandard_decoder
from rocbuild.model.elf import open_source, parse_sections
from rocbuild.model.targets import parse_target
from rocbuild.checks.verify import verify_file
mode, path = sys.argv[1], Path(sys.argv[2])
decoders = Decoders(zstd=zstandard_decoder())
count = 0
if mode == "streamed":
    count = len(verify_file(path, (parse_target("gfx906"),), decoders).bundles)
elif mode == "whole":  # the old way: the section's bytes in memory, then the walk
    with open_source(path) as src:
        fatbin = parse_sections(src)[".hip_fatbin"]
    with path.open("rb") as f:  # read() loops where one pread stops at 2 GiB
        f.seek(fatbin.offset)
        blob = f.read(fatbin.size)
    count = len(scan_fatbin(blob, decoders))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"peak": peak, "bundles": count}))
"""


def measure(mode: str, path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], cwd=REPO,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} child failed:\n{done.stderr}")
    return json.loads(done.stdout)


def write_file(path: Path, section: int, bundle_mib: int) -> None:
    """Runs in its own child: a process's peak RSS survives fork and exec, so the parent
    stays small and never holds the bundles. Prints the bundle count and the largest."""
    bundles = sample_bundles(bundle_mib * MIB)
    spacing = section // (len(bundles) + 1)
    placed = [(i * spacing - (i * spacing) % 4096, b) for i, b in enumerate(bundles)]
    write_sparse_elf(path, section, placed)
    # a compressed bundle's size in memory is its uncompressed size (CCOB v3: u64 at 16)
    sizes = [struct.unpack_from("<Q", b, 16)[0] if b.startswith(b"CCOB") else len(b)
             for b in bundles]
    print(json.dumps({"bundles": len(bundles), "largest": max(sizes)}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section-gib", type=float, default=2.0)
    parser.add_argument("--bundle-mib", type=int, default=16,
                        help="code object size in each real bundle")
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    section = int(args.section_gib * 1024) * MIB
    if args.write:
        write_file(args.write, section, args.bundle_mib)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "libsparse.so"
        made = json.loads(subprocess.run(
            [sys.executable, __file__, "--write", str(path), "--section-gib",
             str(args.section_gib), "--bundle-mib", str(args.bundle_mib)],
            capture_output=True, text=True, check=True).stdout)
        bundles, largest = made["bundles"], made["largest"]
        idle = measure("idle", path)["peak"]
        streamed = measure("streamed", path)
        whole = measure("whole", path)
    assert streamed["bundles"] == whole["bundles"] == bundles, (streamed, whole)
    grow_streamed = max(streamed["peak"] - idle, 1)
    grow_whole = whole["peak"] - idle
    print(f"section {section / MIB:.0f} MiB (sparse), {bundles} bundles, largest "
          f"{largest / MIB:.1f} MiB (uncompressed)")
    print(f"peak RSS: imports only {idle / MIB:.1f} MiB; streamed {streamed['peak'] / MIB:.1f} "
          f"MiB (+{grow_streamed / MIB:.1f}); whole section {whole['peak'] / MIB:.1f} MiB "
          f"(+{grow_whole / MIB:.1f})")
    print(f"ratio whole/streamed (increase over imports): {grow_whole / grow_streamed:.1f}x")
    print(f"ratio streamed increase / largest bundle: {grow_streamed / largest:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
