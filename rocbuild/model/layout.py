"""Where rocbuild keeps its own records inside a prefix: the model knows the layout, so the
checks (doctor finding a rocbuild prefix behind /opt/rocm) and the prefix layer agree."""

from __future__ import annotations

from pathlib import Path

INFO_DIR = ".rocbuild"
INFO_FILE = "build-info.json"


def info_path(prefix: Path) -> Path:
    return prefix / INFO_DIR / INFO_FILE
