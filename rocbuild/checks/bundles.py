"""How verify opens zstd offload bundles on this host: the ``zstandard`` module, else the
prefix's clang-offload-bundler (a process, hence here and not in model/bundles.py, which
parses bundles and runs nothing)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from rocbuild import proc
from rocbuild.model.bundles import BundleLister, DecodeError, Decoders, zstandard_decoder


def find_bundler(prefix: Path | None) -> Path | None:
    """The prefix's clang-offload-bundler (ROCm keeps LLVM in lib/llvm, older in llvm)."""
    if prefix is None:
        return None
    return next((candidate for candidate in (prefix / "lib/llvm/bin/clang-offload-bundler",
                                             prefix / "llvm/bin/clang-offload-bundler")
                 if candidate.is_file() and os.access(candidate, os.X_OK)), None)


def bundler_lister(bundler: Path) -> BundleLister:
    """List a compressed bundle's entry IDs with ``clang-offload-bundler --list``; it reads
    one bundle, which is why each bundle is handed to it alone."""

    def list_ids(blob: bytes) -> list[str]:
        with tempfile.NamedTemporaryFile(suffix=".bundle") as tmp:
            tmp.write(blob)
            tmp.flush()
            argv = [str(bundler), "--list", "--type=o", f"--input={tmp.name}"]
            done = proc.run_capture(argv, timeout=300)
            if not done.answered:
                why = "it cannot start" if not done.started else "it timed out after 300 s"
                raise DecodeError(f"{bundler} could not run: {why}")
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise DecodeError(f"{bundler.name} cannot list this bundle: {why}")
        return [line.strip() for line in done.stdout.splitlines() if line.strip()]

    return list_ids


def default_decoders(prefix: Path | None) -> Decoders:
    zstd = zstandard_decoder()
    bundler = None if zstd else find_bundler(prefix)
    return Decoders(zstd=zstd, lister=bundler_lister(bundler) if bundler else None)
