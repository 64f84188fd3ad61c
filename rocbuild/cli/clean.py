"""What `rocbuild clean` may remove, how much each frees, and removing it under the run lock.

Kinds of things, each opt-in except build trees:
- ``build``: the build trees of the prefix's configuration (with ``--all``: of every
  configuration) (``build/<component>`` in the
  workdir, or in its ``configs/<hash>`` folder: model/workdir.py). The configure stamp is
  checked against the build tree (uptodate.py: its build id and CMakeCache.txt), and compile
  and install chain on the configure run, so a removed tree makes all three not current.
- ``sources``: checkouts ``<workdir>/src/<name>`` (and ``.partial``/``.old`` leftovers of a
  killed fetch); the next build checks out again from the git cache.
- ``caches``: the bare git caches (``<workdir>/cache/git``), and for the whole workdir the
  build venv, the wheelhouse and rocbuild's compiler cache (``<workdir>/cache/ccache``; a
  CCACHE_DIR of the user's is never touched); the next build downloads or compiles again.
- ``prefix``: only rocbuild's own files in the prefix (build-info, env files, modulefiles),
  never anything a component installed; only when asked (``--prefix-files``).

``find`` lists what is there without touching it (``--dry-run`` prints exactly that);
``remove`` runs inside ``locked`` (the workdir's run lock), so it refuses (BusyError) while a
build runs.

A deletion touches only what rocbuild made (docs/robustness.md): a folder that is no
rocbuild workdir is refused (``model/workdir.py`` ``made_by_rocbuild``), nothing is removed
through a link on its way (``<workdir>/build`` or ``<prefix>/modulefiles/<stack>`` a link:
the item is listed as kept, saying why), a link in an item's place is removed, never
followed, and a folder is renamed into the workdir's trash before it is removed
(run/state/trash.py), so a kill leaves it whole or gone and the next command finishes it.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rocbuild import proc
from rocbuild.errors import ConfigError, notice
from rocbuild.files import remove_empty_folders, remove_in_place
from rocbuild.model import gitcache, launchers
from rocbuild.model.graph import Component, Stack
from rocbuild.model.layout import info_path
from rocbuild.model.paths import link_on_the_way, within
from rocbuild.model.workdir import CONFIGS_DIR, Workdir, made_by_rocbuild, read_registry
from rocbuild.prefix import registry
from rocbuild.prefix.envfiles import SHELLS, relative_path, spec_for
from rocbuild.run.sources import sources
from rocbuild.run.state import trash, view, workdirs
from rocbuild.run.state.state import StateDir


@dataclass(frozen=True)
class Item:
    kind: str
    path: Path
    size: int  # bytes on disk, symlinks not followed
    note: str = ""
    removable: bool = True  # False: listed to say why it stays


def tree_size(path: Path) -> int:
    """Bytes used by a file or folder, counting each inode once and never following links."""
    if not path.exists() and not path.is_symlink():
        return 0
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(root, name))
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512 if st.st_blocks else st.st_size
    return total


def _present(kind: str, paths: Iterable[Path], note: str = "", *, root: Path) -> list[Item]:
    """The ``paths`` that are there, each removable only when it is inside ``root`` (the
    workdir, or the prefix for rocbuild's own files) through no link on the way."""
    items = []
    for path in paths:
        if not (path.exists() or path.is_symlink()):
            continue
        why = _kept_because(path, root)
        items.append(Item(kind, path, 0, why, removable=False) if why else
                     Item(kind, path, tree_size(path), note))
    return items


def _kept_because(path: Path, root: Path) -> str:
    """Why ``path`` is not removed ("" when it may be): outside ``root``, or below a link
    rocbuild did not make (it would be deleted where the link leads)."""
    if not within(os.path.normpath(path), root) or os.path.normpath(path) == os.path.normpath(
            root):
        return f"kept: outside {root}"
    link = link_on_the_way(root, path)
    if link is not None:
        return (f"kept: {link} is a link (to {os.readlink(link)}) that rocbuild did not "
                "make, and clean never deletes through a link; remove it yourself if you "
                "mean it")
    return ""


def _checkout_paths(checkout: Path) -> list[Path]:
    return [checkout, checkout.with_name(checkout.name + ".partial"),
            checkout.with_name(checkout.name + ".old")]


def prefix_files(stack: Stack) -> list[Path]:
    """rocbuild's own files in the prefix: build-info and the env files / modulefiles."""
    spec = spec_for(stack)
    return [info_path(stack.prefix),
            *sorted({stack.prefix / relative_path(spec, shell) for shell in SHELLS})]


def find(stack: Stack, components: list[Component] | None, kinds: set[str]) -> list[Item]:
    """What cleaning ``components`` (None: the whole workdir) of ``kinds`` would remove."""
    work = stack.work
    items: list[Item] = []
    if components is None:
        if "build" in kinds:  # every configuration's build trees (model/workdir.py)
            items += _present("build", [work.builds], f"the configuration of {stack.prefix}",
                              root=work.root)
            items += _other_configurations(stack)
        if "sources" in kinds:
            items += _present("sources", [work.src], root=work.root)
        if "caches" in kinds:
            items += _present("caches", [work.git_cache, work.venv, work.wheels,
                                         launchers.cache_dir_of(work.root)], root=work.root)
    else:
        for comp in components:
            if "build" in kinds and comp.builds:
                items += _present("build", [comp.build_dir], root=work.root)
            if "sources" in kinds:
                if comp.owns_checkout:
                    items += _present("sources", _checkout_paths(comp.checkout_dir),
                                      root=work.root)
                else:
                    items.append(Item("sources", comp.checkout_dir, 0,
                                      f"kept: {comp.name} uses the checkout of {comp.checkout}; "
                                      f"clean {comp.checkout} to remove it", removable=False))
            if "caches" in kinds and comp.owns_checkout and comp.fetch_url:
                for cache in git_caches(stack, comp):
                    items += _present("caches", [cache, gitcache.cache_lock(cache)],
                                      root=work.root)
    if "prefix" in kinds:
        items += _present("prefix", prefix_files(stack), root=stack.prefix)
    return items


def git_caches(stack: Stack, comp: Component) -> list[Path]:
    """The git caches of ``comp``'s repository: the one this run's URL names (after its
    --mirror rules) and the one its last fetch used, which its stamp records (a build with
    --mirror fetched into another). A stamp of an earlier rocbuild records none: then each
    cache named after the repository
    (``<name>.git-<hash>``: a mirror keeps the repository's name)."""
    work = stack.work
    assert comp.fetch_url is not None
    found = [sources.cache_dir(work.git_cache, comp.fetch_url)]
    stamp = view.stamp(stack, comp.name, "fetch") or {}
    recorded = stamp.get("cache")
    if isinstance(recorded, str):
        found.append(Path(recorded))
    elif stamp and comp.url:
        prefix = sources.cache_dir(work.git_cache, comp.url).name.rsplit("-", 1)[0]
        found += sorted(work.git_cache.glob(f"{glob.escape(prefix)}-*.git"))
    # only caches inside this workdir's git cache: a stamp is state, never a path to follow
    return [p for p in dict.fromkeys(found) if p.parent == work.git_cache]


def _other_configurations(stack: Stack) -> list[Item]:
    """The build trees of the workdir's other configurations (``--all`` is the whole
    workdir): each recorded one, named by its prefix, and a ``configs/*/build`` no record
    names any more."""
    work = stack.work
    seen = {work.builds}
    items: list[Item] = []
    for prefix, entry in sorted(read_registry(work.root).items()):
        tree = Workdir(work.root, work.root / entry["dir"]).builds  # "." is the root's
        if tree not in seen:
            seen.add(tree)
            items += _present("build", [tree], f"the configuration of {prefix}",
                              root=work.root)
    configs = work.root / CONFIGS_DIR
    if configs.is_dir():
        for folder in sorted(configs.iterdir()):
            tree = folder / "build"
            if tree not in seen and folder.is_dir():
                seen.add(tree)
                items += _present("build", [tree], "a configuration no longer recorded",
                                  root=work.root)
    return items


def refuse_other_folders(stack: Stack) -> None:
    """A ConfigError (exit 2) when the workdir exists but no build ever used it: `clean
    --all --sources --workdir DIR` must not remove ``src/`` and ``build/`` of a user's own
    project."""
    root = stack.work.root
    if root.exists() and not made_by_rocbuild(root):
        raise ConfigError(
            f"{root} is not a rocbuild workdir (no state of rocbuild's in it: "
            f"{root / 'state' / 'configs.json'} or stamps), so clean removes nothing there; "
            "its src/ and build/ are someone's own",
            tip="name the workdir your builds use (`rocbuild config` shows it), or remove the "
                "files yourself if you mean it")


def _remove(item: Item, work: Workdir) -> None:
    """Remove one removable item: a folder of the workdir through its trash (a kill leaves
    it whole or gone), anything else unlinked, a link never followed."""
    if item.kind != "prefix":
        trash.discard(item.path, work.trash)
    else:  # rocbuild's own file of the prefix, or a folder or link in its place
        remove_in_place(item.path)


@contextlib.contextmanager
def locked(stack: Stack, say: Callable[[str], None]) -> Iterator[None]:
    """The workdir's run lock: cleaning while a build runs would pull its trees from under it,
    so this raises BusyError (exit 3) when a build holds it. A killed run's processes (its
    watchdog gone too: proc.ChildRegistry) are ended first, each said through ``say``, so no
    ninja of theirs writes into a tree being removed."""
    with StateDir.of(stack).lock():
        for command in proc.ChildRegistry(stack.work.running).reap_leftovers():
            say(f"ended a leftover process of an earlier run: {command}")
        trash.finish(stack.work.root, stack.work.trash, say)  # what a killed clean began
        yield


def remove(stack: Stack, items: list[Item]) -> int:
    """Remove what ``find`` listed; call it inside ``locked``. Returns the bytes freed. The
    stamps stay: uptodate.py checks each against what its step made (the build tree's id,
    the checkout's token), so status names why a removed output's steps run again."""
    freed = 0
    for item in items:
        if not item.removable:
            continue
        _remove(item, stack.work)
        freed += item.size
        if item.kind == "prefix":
            remove_empty_folders(item.path.parent, stack.prefix)  # modulefiles/rocm/
    return freed


def release_prefix(stack: Stack) -> None:
    """The prefix no longer says this workdir filled it: another workdir may build there,
    and it is no longer a rocbuild prefix to list. Done whenever --prefix-files is asked,
    also with nothing left to remove (a kill after the last file went and before this)."""
    workdirs.release(stack.workdir, stack.prefix)
    problem = registry.forget(stack.prefix)
    if problem is not None:
        notice(problem)
