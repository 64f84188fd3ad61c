"""What a killed run leaves behind, cleared at the start of the next one.

Called while the run lock is held (build.BuildContext.ensure_ready), which proves no other
rocbuild uses the workdir, so every git lock file in the source cache and the checkouts is
stale (a kill during a fetch leaves ``shallow.lock``, ``config.lock``, ``HEAD.lock`` or a ref
lock, and every later git command there fails), an ``src/<c>.old`` or ``src/<c>.partial``
is a half-done ref switch (gigabytes for llvm-project), and a ``.<name>.<pid>.tmp`` in the
state folder is a stamp that was never renamed into place, and a ``src/.rocbuild-patchcheck-*``
the scratch index of a patch check.

The prefix gets the same treatment while the prefix lock is held (``clean_prefix``): no other
run installs there, so an unpack folder of a killed cache install (``.rocbuild-unpack-*``,
artifacts.py), a temp file of an atomic write that a kill stopped just before its rename
(``.env.sh.<pid>.tmp`` and the like, files.py) and a recipe extra's ``.<name>.rocbuild-tmp``
(prefix/install.py) are all left over for good unless this removes them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from rocbuild.model.paths import link_on_the_way
from rocbuild.model.workdir import CONFIGS_DIR, STATE, Workdir
from rocbuild.prefix import transaction
from rocbuild.prefix.install import EXTRA_TMP_SUFFIX
from rocbuild.prefix.transaction import STAGING_NAME
from rocbuild.run.engine import jobserver
from rocbuild.run.sources import patches
from rocbuild.run.state import trash

Say = Callable[[str], None]
_LOCK_FOLDERS = ("refs", "logs", "info")  # where git keeps per-ref lock files


def _git_dirs(root: Path) -> Iterator[Path]:
    """Bare caches (``cache/git/*.git``), checkouts' ``.git`` and their submodules' git dirs,
    none through a link (a checkout that is a link to the user's own clone: a lock there may
    be a live git of theirs, not a killed run's)."""
    yield from (p for p in sorted((root / "cache" / "git").glob("*.git"))
                if link_on_the_way(root, p / "x") is None)
    for dot_git in sorted((root / "src").glob("*/.git")):
        if dot_git.is_dir() and link_on_the_way(root, dot_git / "x") is None:
            yield dot_git
            yield from (m.parent for m in sorted((dot_git / "modules").rglob("HEAD"))
                        if m.is_file())


def stale_git_locks(workdir: Path) -> list[Path]:
    found: list[Path] = []
    for git_dir in _git_dirs(workdir):
        found += [p for p in git_dir.glob("*.lock") if p.is_file()]
        for folder in _LOCK_FOLDERS:
            found += [p for p in (git_dir / folder).rglob("*.lock") if p.is_file()]
    return found


_BARE_RE = re.compile(r"^\s*bare\s*=\s*true\s*$", re.IGNORECASE | re.MULTILINE)


def _is_whole_bare_repo(cache: Path) -> bool:
    """``git init --bare`` writes HEAD, then the config one key at a time: a kill in between
    leaves a folder git cannot open (no config, or one without core.bare)."""
    if not all((cache / part).exists() for part in ("HEAD", "objects", "refs")):
        return False
    try:
        return bool(_BARE_RE.search((cache / "config").read_text(errors="replace")))
    except OSError:
        return False


def _half_made_caches(workdir: Path) -> list[Path]:
    """Cache entries a kill cut short inside ``git init``; the next fetch makes them again
    (never one reached through a link: rmtree would empty where it leads)."""
    return [cache for cache in sorted(Workdir.shared(workdir).git_cache.glob("*.git"))
            if cache.is_dir() and not cache.is_symlink()
            and link_on_the_way(workdir, cache) is None and not _is_whole_bare_repo(cache)]


def clean(workdir: Path, say: Say) -> None:
    """Remove what a killed run left; say what was removed."""
    work = Workdir.shared(workdir)
    trash.finish(work.root, work.trash, say)  # a killed `clean`'s removals, finished
    for cache in _half_made_caches(workdir):
        shutil.rmtree(cache, ignore_errors=True)
        say(f"removed a source cache a killed run left half-made: {cache}")
    for lock in stale_git_locks(workdir):
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        say(f"removed a stale git lock left by a killed run: {lock}")
    for leftover in sorted(work.src.glob("*.old")) + sorted(work.src.glob("*.partial")):
        if _own_folder(work.root, leftover):
            shutil.rmtree(leftover, ignore_errors=True)
            say(f"removed the half-switched checkout left by a killed run: {leftover}")
    for scratch in sorted(work.src.glob(patches.PATCHCHECK_PREFIX + "*")):
        if _own_folder(work.root, scratch):
            shutil.rmtree(scratch, ignore_errors=True)
            say(f"removed the scratch folder of a patch check a killed run left: {scratch}")
    for pool in jobserver.stale_pools():
        shutil.rmtree(pool, ignore_errors=True)
        say(f"removed the job pool a killed run left: {pool}")
    push = work.push_staging  # `cache push` packs here and removes it when done
    if _own_folder(work.root, push):
        shutil.rmtree(push, ignore_errors=True)
        say(f"removed the packing folder of an interrupted `cache push`: {push}")
    # stamp temps of every configuration (model/workdir.py: the first one's are in state/)
    temps = [*work.state.rglob(".*.tmp"), *(work.root / CONFIGS_DIR).glob(f"*/{STATE}/**/.*.tmp")]
    for tmp in temps:
        if tmp.is_file() and link_on_the_way(work.root, tmp) is None:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _own_folder(root: Path, path: Path) -> bool:
    """``path`` is a folder of the workdir ``root`` reached through no link (nor a link
    itself): what a killed run left there is rocbuild's, where a link leads is not."""
    return path.is_dir() and not path.is_symlink() and link_on_the_way(root, path) is None


# files.write_text_atomic's temp name: ``.<name>.<pid>.tmp``
_ATOMIC_TMP_RE = re.compile(r"^\..+\.\d+\.tmp$")


def _own_folders(prefix: Path) -> Iterator[Path]:
    """The folders where rocbuild writes its own prefix files atomically: the top (env files),
    each modulefiles/<stack>/ folder, .rocbuild/ and everything below it."""
    yield prefix
    modulefiles = prefix / "modulefiles"  # never through a link: it leads out of the prefix
    if modulefiles.is_dir() and not modulefiles.is_symlink():
        yield from (p for p in sorted(modulefiles.glob("*")) if p.is_dir() and not p.is_symlink())
    info = prefix / ".rocbuild"
    if info.is_dir() and not info.is_symlink():
        yield info
        yield from (p for p in sorted(info.rglob("*")) if p.is_dir() and not p.is_symlink())


def _extra_temps(prefix: Path) -> Iterator[Path]:
    """Every ``.<name>.rocbuild-tmp`` below the prefix (the suffix is rocbuild's alone; an
    extra dropped from its recipe is never rewritten, so its temp file is found by name)."""
    for folder, dirs, files in os.walk(prefix):  # never follows links
        for name in files:
            if name.startswith(".") and name.endswith(EXTRA_TMP_SUFFIX):
                yield Path(folder) / name
        dirs[:] = [d for d in dirs if not d.startswith(STAGING_NAME)]


def clean_prefix(prefix: Path, say: Say) -> None:
    """Remove what a killed run left in the prefix (call with the prefix lock held)."""
    if not prefix.is_dir():
        return
    transaction.recover(prefix, say)  # a killed cache install's changes undone, in full
    temps = [entry for folder in _own_folders(prefix) for entry in sorted(folder.iterdir())
             if _ATOMIC_TMP_RE.match(entry.name)]
    temps += sorted(_extra_temps(prefix))
    for tmp in temps:
        if tmp.is_symlink() or tmp.is_file():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            say(f"removed a temp file a killed run left in the prefix: {tmp}")
