"""An artifact into the prefix: pulled into the workdir, staged and checked whole in the
transaction's folder, placed, and recorded as its build system records an install."""

from __future__ import annotations

from collections.abc import Callable, Collection

from rocbuild.files import write_text_atomic
from rocbuild.model import buildsystems, layout
from rocbuild.model.graph import Stack
from rocbuild.prefix.transaction import Transaction
from rocbuild.run.cache import artifacts
from rocbuild.run.cache.artifacts import Relocation
from rocbuild.run.cache.cache_store import pull_archive
from rocbuild.run.cache.choice import Choice
from rocbuild.run.cache.stores import ReadStore


def install(store: ReadStore, stack: Stack, choice: Choice, txn: Transaction,
            log: Callable[[str], None], progress: artifacts.Progress | None = None,
            held: Collection[str] = (),
            before_place: Callable[[], None] = lambda: None) -> list[str]:
    """Pull the chosen artifact into the workdir's artifact folder, stage and check all of it
    in ``txn``'s folder (nothing onto ``held``, the real paths of other components' files,
    nor onto rocbuild's own), call ``before_place`` (the removal of the component's previous
    install: only once its artifact is known good), then place it in the prefix, each
    replaced entry saved in ``txn`` (the caller commits or rolls back), and write the
    component's record of installed files as its build system would (CMake's
    install_manifest.txt; so the install check, status and a later rebuild's removal of old
    files treat it like a build). Raises ArtifactRefused (the caller then builds it)."""
    manifest = choice.manifest
    assert manifest is not None and choice.usable
    comp = stack.components[choice.component]
    local = stack.work.artifacts / manifest.archive_name
    log(f"pull {manifest.archive_name} from {store.location}")
    pull_archive(store, manifest, local, progress)
    relocation = Relocation(manifest.prefix, str(stack.prefix))
    try:
        staged = artifacts.stage(local, list(manifest.files), stack.prefix, relocation,
                                 txn.folder, held,
                                 layout.reserved_roots(stack.recipes.stack.name))
    finally:  # staged or refused, the copy is not needed again (the stack is a few GiB)
        local.unlink(missing_ok=True)
    before_place()
    paths = artifacts.place(staged, txn, log)
    if not comp.builds:
        return paths
    comp.build_dir.mkdir(parents=True, exist_ok=True)
    extras = {rel for rel, _ in (*comp.install_links, *comp.install_files)}
    listed = [stack.prefix / p for p in sorted(paths) if p not in extras]
    system = buildsystems.of(comp)  # its record, in its own form (CMake's manifest)
    write_text_atomic(system.installed_record(comp), system.record_text(listed))
    return paths
