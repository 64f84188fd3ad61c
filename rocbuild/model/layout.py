"""Where rocbuild keeps its own records inside a prefix: the model knows the layout, so the
checks (doctor finding a rocbuild prefix behind /opt/rocm) and the prefix layer agree."""

from __future__ import annotations

from pathlib import Path

INFO_DIR = ".rocbuild"
INFO_FILE = "build-info.json"


def info_path(prefix: Path) -> Path:
    return prefix / INFO_DIR / INFO_FILE


# what each component installed (prefix/records.py): ``<component>.json``
INSTALL_RECORDS = Path(INFO_DIR) / "installed"


def recorded_components(prefix: Path) -> list[str]:
    """The components with an install record in ``prefix``, sorted: what it holds, also
    while its first build runs (build-info is written when a run ends)."""
    folder = prefix / INSTALL_RECORDS
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


# --- rocbuild's own files in a prefix: no recipe, CMake install or artifact may claim them ----
ENV_FILES = ("env.sh", "env.fish")
MODULEFILES_DIR = "modulefiles"


def reserved_roots(stack_name: str) -> tuple[str, ...]:
    """The prefix-relative paths rocbuild writes itself: its records, the env files and the
    modulefiles folder of the stack (envfiles.py, buildinfo.py)."""
    return (INFO_DIR, *ENV_FILES, f"{MODULEFILES_DIR}/{stack_name}")


def reserved_by(rel: str, roots: tuple[str, ...]) -> str | None:
    """The reserved root that ``rel`` (normalised, prefix-relative) claims: the root itself,
    a path below it, or a folder or link above it (a link ``modulefiles`` would redirect the
    modulefiles rocbuild writes). None when ``rel`` is free."""
    return next((root for root in roots
                 if rel == root or rel.startswith(root + "/") or root.startswith(rel + "/")), None)
