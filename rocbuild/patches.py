"""Patch series: checked as a whole before any long step, applied idempotently.

The check applies the series, in name order, to a throw-away index built from the pinned
commit (``git apply --cached`` with its own GIT_INDEX_FILE), so a patch that depends on the
one before it is checked correctly and the work tree is not touched. Applying always starts
from the pristine commit, so a rerun after a kill mid-series, or after a patch was edited,
gives the same tree.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from rocbuild.errors import BuildFailed

Logger = Callable[[str], None]


def _git(checkout: Path, args: Sequence[str], env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL)


def check_series(component: str, checkout: Path, commit: str, patches: Sequence[Path]) -> None:
    """Raise BuildFailed naming the first patch of the series that does not apply to
    ``commit``; the work tree and the real index are left alone."""
    if not patches:
        return
    with tempfile.TemporaryDirectory(prefix="rocbuild-patchcheck-") as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=str(Path(tmp) / "index"))
        read = _git(checkout, ["read-tree", commit], env)
        if read.returncode != 0:
            raise BuildFailed(f"{component}: cannot read commit {commit} to check patches: "
                              f"{read.stderr.strip()}")
        for patch in patches:
            result = _git(checkout, ["apply", "--cached", "--check", "--", str(patch)], env)
            if result.returncode == 0:
                result = _git(checkout, ["apply", "--cached", "--", str(patch)], env)
            if result.returncode != 0:
                detail = result.stderr.strip().splitlines()
                raise BuildFailed(
                    f"{component}: patch {patch} does not apply to {commit[:12]}: "
                    + (detail[0] if detail else "git apply failed"),
                    tip=f"refresh or remove {patch}; nothing has been built yet")


def apply_series(component: str, checkout: Path, commit: str, patches: Sequence[Path],
                 log: Logger) -> None:
    """Reset the checkout to ``commit`` and apply the series. ``git reset --hard`` rewrites
    only files that differ, so unpatched sources keep their times and ninja stays incremental."""
    check_series(component, checkout, commit, patches)
    for args in (["reset", "-q", "--hard", commit], ["clean", "-q", "-fd"]):
        result = _git(checkout, args)
        log(f"$ git -C {checkout} {' '.join(args)}")
        if result.returncode != 0:
            raise BuildFailed(f"{component}: git {args[0]} failed: {result.stderr.strip()}")
    for patch in patches:
        log(f"$ git -C {checkout} apply {patch}")
        result = _git(checkout, ["apply", "--", str(patch)])
        if result.returncode != 0:
            raise BuildFailed(f"{component}: patch {patch} failed: {result.stderr.strip()}")
