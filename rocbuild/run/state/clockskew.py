"""Files dated in the future (a clock that was wrong, a tree copied from a machine whose clock
is ahead, an NFS server's clock): found before CMake and ninja run, said, and repaired.

Why it matters: ninja decides by modification times. A CMake package file in the prefix
(``lib/cmake/beta/betaConfig.cmake``) dated two days ahead is an input of every dependent's
``build.ninja``; ninja re-runs CMake, the new ``build.ninja`` is still older than the input, and
after 100 tries it stops ("manifest 'build.ninja' still dirty after 100 tries") on every run
after. An object file dated ahead is worse: it looks newer than any edit of its source, so
the edit is never compiled.

The repair follows what each tree is to a build:

- the build tree holds outputs: a file from the future is dated back to 2000-01-01, so ninja
  makes it again (an output older than its inputs), and the configure step runs afresh
  (uptodate.py sees the skew in the tree's top files; configure clears CMakeCache.txt);
- the source checkout and the prefix hold inputs: a file from the future is dated now, so
  everything built from it is built once more, and never again.

Only files more than ``MARGIN`` seconds ahead count: a few seconds of drift heal themselves.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MARGIN = 5.0  # seconds ahead of the clock that count as "in the future"
OLD = 946684800.0  # 2000-01-01: older than any input, and not 0 (ninja reads 0 as missing)
# the build tree's own files that decide whether ninja must re-run CMake
TOP_FILES = ("CMakeCache.txt", "build.ninja", "rules.ninja", "CMakeFiles/rules.ninja",
             "CMakeFiles/cmake.check_cache", ".ninja_log", ".ninja_deps")


def _walk(root: Path) -> Iterator[os.DirEntry[str]]:
    """Every entry below ``root``, links not followed, .git folders left out (git's own)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        yield entry
        if entry.is_dir(follow_symlinks=False) and entry.name != ".git":
            yield from _walk(Path(entry.path))


def future_files(root: Path, now: float | None = None) -> list[Path]:
    """The files and folders below ``root`` dated more than MARGIN seconds after ``now``."""
    limit = (time.time() if now is None else now) + MARGIN
    found = []
    for entry in _walk(root):
        try:
            if entry.stat(follow_symlinks=False).st_mtime > limit:
                found.append(Path(entry.path))
        except OSError:
            continue
    return found


def top_files_in_future(build_dir: Path, now: float | None = None) -> list[Path]:
    """The build tree's top files (TOP_FILES) dated in the future: cheap enough for the
    up-to-date rule, which then runs the configure again."""
    limit = (time.time() if now is None else now) + MARGIN
    found = []
    for rel in TOP_FILES:
        try:
            if (build_dir / rel).stat().st_mtime > limit:
                found.append(build_dir / rel)
        except OSError:
            continue
    return found


@dataclass
class Repair:
    """What ``repair`` changed, per tree, for the step log and the summary's warning."""

    dated_back: list[Path] = field(default_factory=list)  # build tree: made again
    dated_now: list[Path] = field(default_factory=list)  # sources and prefix: inputs

    def warning(self) -> str | None:
        changed = self.dated_back + self.dated_now
        if not changed:
            return None
        return (f"{len(changed)} file(s) were dated in the future (clock skew), e.g. "
                f"{changed[0]}: the build tree's were dated back (ninja makes them again), "
                "the sources' and the prefix's set to now; check the system clock (timedatectl)")


def _set(paths: Iterable[Path], when: float) -> list[Path]:
    done = []
    for path in paths:
        try:
            os.utime(path, (when, when), follow_symlinks=False)
            done.append(path)
        except OSError:
            continue
    return done


def repair(build_dir: Path, inputs: Iterable[Path], log: Callable[[str], None]) -> Repair:
    """Date back the future files of ``build_dir`` and date now those of ``inputs`` (the
    source folder, the prefix). Logs each tree's count and an example."""
    now = time.time()
    result = Repair()
    if build_dir.is_dir():
        result.dated_back = _set(future_files(build_dir, now), OLD)
        if result.dated_back:
            log(f"clock skew: {len(result.dated_back)} file(s) of {build_dir} were dated in "
                f"the future (e.g. {result.dated_back[0]}); dated back so they are made again")
    for tree in inputs:
        if tree.is_dir():
            changed = _set(future_files(tree, now), now)
            result.dated_now += changed
            if changed:
                log(f"clock skew: {len(changed)} file(s) of {tree} were dated in the future "
                    f"(e.g. {changed[0]}); dated now")
    return result
