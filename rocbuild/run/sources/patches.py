"""Patch series: checked as a whole before any long step, applied idempotently.

The check applies the series, in name order, to a throw-away index built from the pinned
commit (``git apply --cached`` with its own GIT_INDEX_FILE), so a patch that depends on the
one before it is checked correctly and the work tree is not touched. Applying always starts
from the pristine commit, so a rerun after a kill mid-series, or after a patch was edited,
gives the same tree.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rocbuild import proc
from rocbuild.errors import BuildFailed

Logger = Callable[[str], None]
# A local git command (no network) in a checkout or a source cache: a reset or status of
# llvm-project's 150,000 files takes a minute on a slow disk, so the bound is generous; one
# that hangs (a stale lock on a network file system) is ended rather than waited for all
# night. sources.py's local commands use it too.
LOCAL_GIT_TIMEOUT = 1800.0
PATCHCHECK_PREFIX = ".rocbuild-patchcheck-"  # check_series's scratch folder, in src/


def _git(checkout: Path, args: Sequence[str], env: dict[str, str] | None = None, *,
         input: str | None = None, registry: proc.ChildRegistry | None = None
         ) -> proc.Captured:
    """A local git command through rocbuild.proc, with LOCAL_GIT_TIMEOUT; interrupted, it is
    killed with its group like every child (registered with the run where one is given)."""
    done = proc.run_capture(["git", "-C", str(checkout), *args], timeout=LOCAL_GIT_TIMEOUT,
                            env=env, input=input, registry=registry)
    if done.timed_out:  # callers read a non-zero code; say why in git's own words' place
        return proc.Captured(124, done.stdout, f"{done.stderr}\ngit {args[0]} in {checkout} "
                             f"was ended after {LOCAL_GIT_TIMEOUT:.0f} s")
    return done


def check_series(component: str, checkout: Path, commit: str, patches: Sequence[Path],
                 registry: proc.ChildRegistry | None = None) -> None:
    """Raise BuildFailed naming the first patch of the series that does not apply to
    ``commit``; the work tree and the real index are left alone."""
    if not patches:
        return
    # the scratch index sits beside the checkout, under the workdir: a kill here leaves it
    # where the next run's leftovers.clean finds it (in /tmp it stayed for good)
    with tempfile.TemporaryDirectory(prefix=PATCHCHECK_PREFIX, dir=checkout.parent) as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=str(Path(tmp) / "index"))
        read = _git(checkout, ["read-tree", commit], env, registry=registry)
        if read.returncode != 0:
            raise BuildFailed(f"{component}: cannot read commit {commit} to check patches: "
                              f"{read.stderr.strip()}")
        for patch in patches:
            result = _git(checkout, ["apply", "--cached", "--check", "--", str(patch)], env,
                          registry=registry)
            if result.returncode == 0:
                result = _git(checkout, ["apply", "--cached", "--", str(patch)], env,
                              registry=registry)
            if result.returncode != 0:
                detail = result.stderr.strip().splitlines()
                raise BuildFailed(
                    f"{component}: patch {patch} does not apply to {commit[:12]}: "
                    + (detail[0] if detail else "git apply failed"),
                    tip=f"refresh or remove {patch}; nothing has been built yet")


Applied = dict[str, Any]  # {"changed": {path: blob or None}, "created": {path: blob}}
PRISTINE = "pristine"  # a tracked file that is as the commit has it


def _blobs(checkout: Path, paths: Sequence[str]) -> dict[str, str | None]:
    """The git blob id of each file as it is now in the work tree; None when it is gone."""
    present = [p for p in paths if (checkout / p).is_file() or (checkout / p).is_symlink()]
    found: dict[str, str | None] = dict.fromkeys(paths)
    if present:
        out = _git(checkout, ["hash-object", "--no-filters", "--stdin-paths"],
                   input="\n".join(present) + "\n")
        if out.returncode == 0:
            found.update(zip(present, out.stdout.split(), strict=False))
    return found


def _head(checkout: Path) -> str | None:
    done = _git(checkout, ["rev-parse", "--verify", "-q", "HEAD^{commit}"])
    return done.stdout.strip() if done.returncode == 0 else None


def tracked_changes(checkout: Path) -> dict[str, str | None]:
    """Tracked files that differ from the index (the pinned commit after our reset), with
    their blob ids now. Untracked files are left out: builds leave some in source trees (egg
    info, caches) and they are not the user's edits of the sources."""
    if not (checkout / ".git").exists():
        return {}
    out = _git(checkout, ["status", "--porcelain=v1", "-z", "--untracked-files=no",
                          "--no-renames", "--ignore-submodules=all"])
    if out.returncode != 0:
        return {}
    paths = [entry[3:] for entry in out.stdout.split("\0") if len(entry) > 3]
    return _blobs(checkout, paths)


def applied_state(checkout: Path, patches: Sequence[Path]) -> Applied:
    """What the patch series made of the checkout: every changed tracked file and every file
    the series created, by content, so later edits by the user can be told apart."""
    created = sorted({path for patch in patches for path in _created_by(checkout, patch)})
    return {"changed": tracked_changes(checkout), "created": _blobs(checkout, created)}


def _created_by(checkout: Path, patch: Path) -> list[str]:
    out = _git(checkout, ["apply", "--summary", "--", str(patch)])
    return [line.split()[-1] for line in out.stdout.splitlines()
            if line.strip().startswith("create mode")]


def user_edits(checkout: Path, applied: Applied | None) -> dict[str, str | None]:
    """The user's own changes: files whose content differs from what the patch series left
    (``applied``; empty for a checkout without patches). path -> blob id now (None: deleted)."""
    applied = applied or {}
    changed: dict[str, Any] = dict(applied.get("changed") or {})
    created: dict[str, Any] = dict(applied.get("created") or {})
    now = tracked_changes(checkout)
    edits = {p: blob for p, blob in now.items() if changed.get(p, PRISTINE) != blob}
    edits.update({p: PRISTINE for p in changed if p not in now})  # a patched file reverted
    for path, blob in _blobs(checkout, sorted(created)).items():
        if blob != created[path]:
            edits[path] = blob
    return edits


def save_edits(checkout: Path, edits: Mapping[str, str | None], save_root: Path) -> Path:
    """Keep the user's edited files before the checkout is reset: a copy of each file as it
    is now, and ``changes.patch`` (``git diff`` against the pinned commit, so it also holds
    the patch series' hunks of those files). Returns the folder."""
    dest = save_root / time.strftime("%Y%m%d-%H%M%S")
    while dest.exists():
        dest = dest.with_name(dest.name + "-1")
    (dest / "files").mkdir(parents=True)
    for rel in edits:
        src = checkout / rel
        if src.is_file():
            target = dest / "files" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    diff = _git(checkout, ["diff", "--binary", "HEAD", "--", *edits])
    (dest / "changes.patch").write_text(diff.stdout)
    (dest / "README").write_text(
        f"Edits found in {checkout} before rocbuild reset it to the pinned commit.\n"
        "files/: your files as they were; changes.patch: git diff against the pinned commit.\n"
        "To keep an edit for good, put it in patches/<component>/NNNN-name.patch.\n")
    return dest


def apply_series(component: str, checkout: Path, commit: str, patches: Sequence[Path],
                 log: Logger, *, applied_before: Applied | None = None,
                 save_root: Path | None = None, registry: proc.ChildRegistry | None = None,
                 fresh: bool = False) -> tuple[Applied, Path | None]:
    """Reset the checkout to ``commit`` and apply the series; returns what the series made
    (for the stamp) and the folder the user's edits were saved to, if there were any.
    ``git reset --hard`` rewrites only files that differ, so unpatched sources keep their
    times and ninja stays incremental. Nothing the user wrote is lost: edits beyond
    ``applied_before`` are saved under ``save_root`` first, and instead of ``git clean``
    only files that a patch series creates are removed. ``fresh``: the fetch of this run
    has just checked ``commit`` out here, so there is nothing of the user's to look for."""
    check_series(component, checkout, commit, patches, registry)
    saved = None
    if fresh and not patches:
        log(f"{checkout} was just checked out at {commit} and has no patches: nothing to do")
        return {"changed": {}, "created": {}}, saved
    edits = {} if fresh else user_edits(checkout, applied_before)
    if edits:
        if save_root is None:
            raise BuildFailed(f"{component}: {checkout} has edits of yours "
                              f"({', '.join(sorted(edits)[:5])}) and no place to save them",
                              tip="commit or copy them away, then run the build again")
        saved = save_edits(checkout, edits, save_root)
        log(f"saved your edits of {', '.join(sorted(edits))} to {saved}")
    created = set((applied_before or {}).get("created") or {})
    if not patches and not created and not edits and not (applied_before or {}).get("changed") \
            and _head(checkout) == commit:
        # nothing to apply to a tree that is the commit already (a rerun of the step):
        # status showed the work tree and index equal to HEAD, so the reset would change
        # nothing; it takes a quarter of a second on ggml, seconds on llvm-project (perf/noop.py)
        log(f"{checkout} is {commit} with no edits and no patches: nothing to reset")
        return {"changed": {}, "created": {}}, saved
    created |= {path for patch in patches for path in _created_by(checkout, patch)}
    for rel in sorted(created):
        path = checkout / rel
        if path.is_file() or path.is_symlink():
            log(f"remove {rel} (created by a patch)")
            path.unlink()
    args = ["reset", "-q", "--hard", commit]
    if not fresh:  # a fresh checkout is the commit already
        log(f"$ git -C {checkout} {' '.join(args)}")
        result = _git(checkout, args, registry=registry)
        if result.returncode != 0:
            raise BuildFailed(f"{component}: git reset failed: {result.stderr.strip()}")
    for patch in patches:
        log(f"$ git -C {checkout} apply {patch}")
        result = _git(checkout, ["apply", "--", str(patch)], registry=registry)
        if result.returncode != 0:
            raise BuildFailed(f"{component}: patch {patch} failed: {result.stderr.strip()}")
    return applied_state(checkout, patches), saved
