"""When is a step current: the one rule that `rocbuild build` and `rocbuild status` both use.

A step is current when (1) its stamp holds the fingerprint of the inputs it would have now and
(2) what it made is still the thing it made. The inputs chain every step to the *run* of the
step before it: each successful run writes a fresh run id into its stamp, so whenever a step
runs again, everything after it runs again too (a no-op ninja or install costs seconds; a
stale library left installed costs a night). In order:

- fetch: the URL, ref and submodule setting;
- patch: the fetch run, the commit, the checkout token and the patch contents;
- configure: the recipe fingerprint, the configure command rocbuild would run (without job
  counts, which change only the speed), the patch run of its checkout and the final run of
  every dependency;
- compile: the configure run and the user's own edits in the checkout (so an edited source
  is rebuilt instead of ignored);
- install: the compile run.

Outputs: a fetch is current only while the checkout is the one it made (token and commit); a
configure only while the build tree holds the ``rocbuild-build-id`` it wrote and its
CMakeCache.txt, so a deleted or replaced build tree is configured again (and, by the chain,
compiled and installed again); an install only while its files are in the prefix.

Nothing here writes, so status may call it while a build runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocbuild.files import read_regular
from rocbuild.model import launchers
from rocbuild.model.graph import Component, Stack, sha256_text
from rocbuild.model.steps import configure_argv, steps_of
from rocbuild.run import clockskew, patches, sources
from rocbuild.run.state import StateDir

BUILD_ID_FILE = "rocbuild-build-id"

# What a missing output means to the user, per step (see ``missing_output``).
MISSING_OUTPUT = {
    "fetch": "the checkout changed or was removed",
    "configure": "the build tree was removed or replaced (CMakeCache.txt or its build id)",
    "compile": "the build tree was removed or replaced",
    "install": "installed files are missing from the prefix",
}


def build_id(build_dir: Path) -> str | None:
    """The token configure wrote into this build tree; None when the tree is not ours."""
    try:
        return read_regular(build_dir / BUILD_ID_FILE).decode().strip() or None
    except OSError:
        return None


def run_id(stamp: dict[str, Any] | None) -> str | None:
    """The id of the run that wrote ``stamp`` (stamps of older rocbuilds: their fingerprint)."""
    if stamp is None:
        return None
    return str(stamp.get("run") or stamp.get("fingerprint"))


@dataclass(frozen=True)
class Rule:
    """The up-to-date rule for one Stack and its workdir state. One instance answers one
    question (a status walk, one doit up-to-date check): it remembers each checkout's edits so
    a walk runs `git status` once per checkout, not once per question about it."""

    stack: Stack
    state: StateDir
    _edits: dict[str, dict[str, Any] | None] = field(default_factory=dict, compare=False,
                                                     repr=False)

    def component(self, name: str) -> Component:
        return self.stack.components[name]

    def input_steps(self, comp: Component, step: str) -> list[tuple[str, str]]:
        """The (component, step) pairs whose run id is an input of ``step``."""
        if step == "fetch":
            return []
        if step == "patch":
            return [(comp.name, "fetch")]
        if step == "configure":
            deps = [self.final_step(self.component(d)) for d in comp.depends
                    if d != comp.checkout]
            return [(comp.checkout, "patch"), *(d for d in deps if d is not None)]
        return [(comp.name, {"compile": "configure", "install": "compile"}[step])]

    def final_step(self, comp: Component) -> tuple[str, str] | None:
        """The step whose run the users of ``comp`` are built against: its install, or the
        patch of its checkout for a source-only component."""
        steps = steps_of(comp)
        if steps:
            return (comp.name, steps[-1])
        if comp.checkout != comp.name:  # reuses another checkout and builds nothing
            return self.final_step(self.component(comp.checkout))
        return None

    def final_run(self, comp: Component) -> str | None:
        final = self.final_step(comp)
        return None if final is None else run_id(self.state.read_stamp(*final))

    def expected_inputs(self, comp: Component, step: str) -> dict[str, Any] | None:
        """What the step's output depends on, by name; None while an input step has no stamp
        yet (then the step is not current). Stamps keep this document, so status can say
        which input changed."""
        state = self.state
        if step == "fetch":
            return {"url": comp.url, "ref": comp.ref, "submodules": comp.submodules}
        if step == "patch":
            fetched = state.read_stamp(comp.name, "fetch")
            if fetched is None:
                return None
            return {"fetch": run_id(fetched), "commit": fetched.get("commit"),
                    "checkout": fetched.get("checkout_id"),
                    "patches": {p.path.name: p.sha256 for p in comp.patches}}
        if step == "configure":
            source = run_id(state.read_stamp(comp.checkout, "patch"))
            deps = {d: self.final_run(self.component(d)) for d in comp.depends
                    if d != comp.checkout}
            if source is None or None in deps.values():
                return None
            return {"recipe": comp.fingerprint, "command": command_key(self.stack, comp),
                    "source": source, "deps": deps}
        if step == "compile":
            configured = run_id(state.read_stamp(comp.name, "configure"))
            if configured is None:
                return None
            return {"configure": configured, "edits": self.local_edits(comp)}
        compiled = run_id(state.read_stamp(comp.name, "compile"))
        return None if compiled is None else {"compile": compiled}

    def local_edits(self, comp: Component) -> dict[str, Any] | None:
        """The user's own changes in the checkout, beyond the patch series (None if none)."""
        if comp.checkout not in self._edits:
            self._edits[comp.checkout] = self._read_edits(comp)
        return self._edits[comp.checkout]

    def _read_edits(self, comp: Component) -> dict[str, Any] | None:
        applied = (self.state.read_stamp(comp.checkout, "patch") or {}).get("applied")
        edits = patches.user_edits(self.component(comp.checkout).checkout_dir,
                                   applied if isinstance(applied, dict) else {})
        if not edits:
            return None
        return {"paths": sorted(edits), "digest": sha256_text(json.dumps(edits, sort_keys=True))}

    def expected_fingerprint(self, comp: Component, step: str) -> str | None:
        inputs = self.expected_inputs(comp, step)
        if inputs is None:
            return None
        return sha256_text(json.dumps([step, inputs], sort_keys=True))

    def is_current(self, comp: Component, step: str) -> bool:
        expected = self.expected_fingerprint(comp, step)
        if expected is None or not self.state.stamp_matches(comp.name, step, expected):
            return False
        return self.missing_output(comp, step) is None

    def missing_output(self, comp: Component, step: str) -> str | None:
        """Why what the step made is no longer there (None when it is): a stamp alone is not
        enough when the user deleted or replaced the step's output."""
        stamp = self.state.read_stamp(comp.name, step) or {}
        missing = MISSING_OUTPUT.get(step)
        if stamp.get("from_cache") and step != "install":
            return self._cached_output(comp, step)
        if step == "fetch":
            same = (sources.checkout_id(comp.checkout_dir) == stamp.get("checkout_id")
                    and sources.checkout_commit(comp.checkout_dir) == stamp.get("commit"))
            return None if same else missing
        if step == "configure":
            ours = (comp.build_dir / "CMakeCache.txt").is_file() and (
                build_id(comp.build_dir) == stamp.get("build_id"))
            if ours and clockskew.top_files_in_future(comp.build_dir):
                return "the build tree's files are dated in the future (clock skew)"
            return None if ours else missing
        if step == "compile":
            configured = self.state.read_stamp(comp.name, "configure") or {}
            ours = (comp.build_dir / "build.ninja").is_file() and (
                build_id(comp.build_dir) == configured.get("build_id"))
            return None if ours else missing
        if step == "install":
            return None if self._installed_files_present(comp) else missing
        return None

    def _cached_output(self, comp: Component, step: str) -> str | None:
        """A step stamped by the binary cache (cache_install.py) left no checkout or build
        tree: it stands while every later step of the component is current, and is missing
        once one of them must run again, since that one needs the real sources."""
        steps = steps_of(comp)
        if all(self.is_current(comp, later) for later in steps[steps.index(step) + 1:]):
            return None
        return "installed from the binary cache; building it again needs the sources"

    def _installed_files_present(self, comp: Component) -> bool:
        manifest = comp.build_dir / "install_manifest.txt"
        if not manifest.is_file():
            return False
        prefix = self.stack.prefix
        return all(Path(line).exists() or Path(line).is_symlink()
                   for line in manifest.read_text().splitlines() if line) and all(
            (prefix / rel).is_symlink() or (prefix / rel).exists()
            for rel, _ in (*comp.install_links, *comp.install_files))

    def next_runs(self, components: Iterable[Component]) -> dict[tuple[str, str], bool]:
        """Which steps the next build runs, in build order: a step runs when it is not
        current now or when one of its input steps runs first (its run id then changes)."""
        runs: dict[tuple[str, str], bool] = {}
        for comp in components:
            for step in steps_of(comp):
                moving = any(runs.get(pair, False) for pair in self.input_steps(comp, step))
                runs[(comp.name, step)] = moving or not self.is_current(comp, step)
        return runs


def command_key(stack: Stack, comp: Component) -> str:
    """The configure command as an input: the arguments rocbuild adds (generator, prefix,
    RUNPATH) change the result as much as the recipe's, so a new rule in rocbuild
    reconfigures; the job counts and the compiler launchers are left out (they change only
    the speed)."""
    argv = launchers.without_launchers(configure_argv(stack, comp, {}))
    return sha256_text(json.dumps(argv))
