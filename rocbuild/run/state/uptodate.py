"""When is a step current: the one rule that `rocbuild build` and `rocbuild status` both use.

A step is current when (1) its stamp holds the fingerprint of the inputs it would have now and
(2) what it made is still the thing it made. The inputs chain every step to the *run* of the
step before it: each successful run writes a fresh run id into its stamp, so whenever a step
runs again, everything after it runs again too (a no-op ninja or install costs seconds; a
stale library left installed costs a night). Which run ids feed a step, and where its
output lives, is declared in the step table (model/steptable.py); a step's own facts are
FACTS below and the output checks OUTPUTS, by where the output lives. In order:

- fetch: the URL, ref and submodule setting;
- patch: the fetch run, the commit, the checkout token and the patch contents;
- configure: the recipe fingerprint, the configure command rocbuild would run (without job
  counts, which change only the speed), the patch run of its checkout and the final run of
  every dependency;
- compile: the configure run and the user's own edits in the checkout (so an edited source
  is rebuilt instead of ignored);
- install: the compile run.

Outputs: a fetch is current only while the checkout is the one it made (token and commit); a
configure only while the build tree holds the ``rocbuild-build-id`` it wrote and its build
system's files (CMake: CMakeCache.txt and build.ninja), so a deleted or replaced build tree is
configured again (and, by the chain, compiled and installed again); an install only while the
files its build system recorded (CMake's install_manifest.txt) are in the prefix.

Nothing here writes, so status may call it while a build runs.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocbuild.errors import redact
from rocbuild.files import read_regular
from rocbuild.model import buildsystems, steptable
from rocbuild.model.fingerprint import command_key, sha256_text
from rocbuild.model.graph import Component, Stack
from rocbuild.model.steptable import (
    DEPENDENCIES,
    IN_CHECKOUT,
    IN_PREFIX,
    IN_TREE,
    OWN,
    StepKind,
    Where,
    steps_of,
)
from rocbuild.prefix import records
from rocbuild.run.sources import patches, sources
from rocbuild.run.state import clockskew
from rocbuild.run.state.state import StateDir

BUILD_ID_FILE = "rocbuild-build-id"


def build_id(build_dir: Path) -> str | None:
    """The token configure wrote into this build tree; None when the tree is not ours."""
    try:
        return read_regular(build_dir / BUILD_ID_FILE).decode().strip() or None
    except OSError:
        return None


def run_id(stamp: dict[str, Any] | None) -> str | None:
    """The id of the run that wrote ``stamp`` (stamps of older rocbuilds: their fingerprint)."""
    return None if stamp is None else str(stamp.get("run") or stamp.get("fingerprint"))


class Answers:
    """Which steps a run's Rules found current, kept until the next step starts or ends
    (runner.py calls ``forget``): a no-op run asks about every step three times (the ETA,
    doit's up-to-date checks, whether the whole stack is complete) and each answer reads
    stamps, install manifests and the checkout (perf/noop.py). An answer found while a step
    ended on another thread (``--parallel``) is not kept."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str, str], bool] = {}
        self._generation = 0

    def get(self, key: tuple[str, str, str]) -> bool | None:
        return self._found.get(key)

    def keep(self, key: tuple[str, str, str], current: bool, generation: int) -> None:
        if generation == self._generation:
            self._found[key] = current

    @property
    def generation(self) -> int:
        return self._generation

    def forget(self) -> None:
        self._generation += 1
        self._found = {}


@dataclass(frozen=True)
class Rule:
    """The up-to-date rule for one Stack and its workdir state. It remembers each checkout's
    edits, so a status walk or a whole run runs `git status` once per checkout, not once per
    question about it (a run passes one record to all its Rules; a source step of the
    checkout makes it forget, runner.py), and, when the run gives it ``_answers``, which
    steps it found current until a step runs."""

    stack: Stack
    state: StateDir
    _edits: dict[str, dict[str, Any] | None] = field(default_factory=dict, compare=False,
                                                     repr=False)
    _answers: Answers | None = field(default=None, compare=False, repr=False)

    def component(self, name: str) -> Component:
        return self.stack.components[name]

    def _chained(self, step: str) -> StepKind:
        """The step's kind; only stamped component steps have inputs and outputs here."""
        kind = steptable.kind(step)  # UnknownStep for a name the table does not declare
        if kind not in steptable.chained():
            raise steptable.UnknownStep(f"'{step}' is not a stamped component step "
                                        "(model/steptable.py)")
        return kind

    def input_steps(self, comp: Component, step: str) -> list[tuple[str, str]]:
        """The (component, step) pairs whose run id is an input of ``step``."""
        pairs: list[tuple[str, str]] = []
        for source in self._chained(step).inputs:
            if source.of == DEPENDENCIES:
                pairs += [seen for d in comp.depends if d != comp.checkout
                          if (seen := self.final_step(self.component(d))) is not None]
            else:
                pairs.append((comp.name if source.of == OWN else comp.checkout, source.step))
        return pairs

    def final_step(self, comp: Component) -> tuple[str, str] | None:
        """The step whose run the users of ``comp`` are built against (the step table's
        ``dependents_see``: its install, or the patch of a source-only component)."""
        seen = steptable.seen_by_dependents(comp)
        if seen is not None:
            return (comp.name, seen)
        if comp.checkout != comp.name:  # reuses another checkout and builds nothing
            return self.final_step(self.component(comp.checkout))
        return None

    def final_run(self, comp: Component) -> str | None:
        final = self.final_step(comp)
        return None if final is None else run_id(self.state.read_stamp(*final))

    def expected_inputs(self, comp: Component, step: str) -> dict[str, Any] | None:
        """What the step's output depends on, by name: the run ids the step table names,
        then the step's own facts (FACTS); None while an input step has no stamp yet (then
        the step is not current). Stamps keep this document, so status can say which input
        changed."""
        doc: dict[str, Any] = {}
        for source in self._chained(step).inputs:
            if source.of == DEPENDENCIES:
                deps = {d: self.final_run(self.component(d)) for d in comp.depends
                        if d != comp.checkout}
                if None in deps.values():
                    return None
                doc[source.key] = deps
                continue
            owner = comp.name if source.of == OWN else comp.checkout
            ran = run_id(self.state.read_stamp(owner, source.step))
            if ran is None:
                return None
            doc[source.key] = ran
        facts = FACTS[step](self, comp)
        return None if facts is None else {**doc, **facts}

    def local_edits(self, comp: Component) -> dict[str, Any] | None:
        """The user's own changes in the checkout, beyond the patch series (None if none):
        the edited paths and a digest of their contents (the compile step's input)."""
        if comp.checkout not in self._edits:
            self._read_all_edits(comp)
        found = self._edits[comp.checkout]
        return None if found is None else {k: v for k, v in found.items() if k != "blobs"}

    def edit_blobs(self, comp: Component) -> dict[str, str | None]:
        """Each edited path of ``comp``'s checkout with its git blob id now (None: deleted),
        read with ``local_edits``: which files changed since the last compile
        (actions.date_edits)."""
        self.local_edits(comp)
        return dict((self._edits[comp.checkout] or {}).get("blobs") or {})

    def _read_all_edits(self, comp: Component) -> None:
        """The edits of ``comp``'s checkout, and of every other checkout of the stack not read
        yet, each in a thread of its own: a walk asks about every checkout, and their `git
        status` processes then run side by side (perf/noop.py). The others' answers are kept only
        when no step started or ended meanwhile (``Answers``): one may have changed a
        checkout while its answer was read."""
        others = {c.checkout: self.component(c.checkout) for c in self.stack.selected()
                  if c.checkout not in self._edits and c.checkout != comp.checkout
                  and (self.component(c.checkout).checkout_dir / ".git").exists()}
        found: dict[str, dict[str, Any] | None] = {}

        def read(name: str, owner: Component) -> None:
            with contextlib.suppress(Exception):  # asked for later, it raises there
                found[name] = self._read_edits(owner)

        generation = None if self._answers is None else self._answers.generation
        threads = [threading.Thread(target=read, args=item, daemon=True)
                   for item in others.items()]
        for thread in threads:
            thread.start()
        try:
            self._edits[comp.checkout] = self._read_edits(comp)
        finally:
            for thread in threads:
                thread.join()
        if generation is None or self._answers is None or \
                generation == self._answers.generation:
            self._edits.update({name: found[name] for name in others if name in found})

    def forget_edits(self, checkout: str) -> None:
        """The checkout changed (a fetch or patch ran): read its edits again when asked."""
        self._edits.pop(checkout, None)

    def _read_edits(self, comp: Component) -> dict[str, Any] | None:
        applied = (self.state.read_stamp(comp.checkout, "patch") or {}).get("applied")
        edits = patches.user_edits(self.component(comp.checkout).checkout_dir,
                                   applied if isinstance(applied, dict) else {})
        if not edits:
            return None
        return {"paths": sorted(edits), "digest": sha256_text(json.dumps(edits, sort_keys=True)),
                "blobs": edits}

    def expected_fingerprint(self, comp: Component, step: str) -> str | None:
        inputs = self.expected_inputs(comp, step)
        return None if inputs is None else sha256_text(json.dumps([step, inputs], sort_keys=True))

    def is_current(self, comp: Component, step: str) -> bool:
        answers = self._answers
        if answers is None:
            return self._is_current(comp, step)
        # a run's Rules for its own stack and for the whole default set share the answers:
        # one workdir, one prefix, and a component is the same recipe in both
        key = (comp.name, step, comp.fingerprint)
        known = answers.get(key)
        if known is None:
            generation = answers.generation
            known = self._is_current(comp, step)
            answers.keep(key, known, generation)
        return known

    def _is_current(self, comp: Component, step: str) -> bool:
        expected = self.expected_fingerprint(comp, step)
        if expected is None or not self.state.stamp_matches(comp.name, step, expected):
            return False
        return self.missing_output(comp, step) is None

    def missing_output(self, comp: Component, step: str) -> str | None:
        """Why what the step made is no longer there (None when it is): a stamp alone is not
        enough when the user deleted or replaced the step's output."""
        kind = self._chained(step)
        stamp = self.state.read_stamp(comp.name, step) or {}
        if stamp.get("from_cache") and kind.output != IN_PREFIX:
            return self._cached_output(comp, step)
        if not kind.output or OUTPUTS[kind.output](self, comp, step, stamp):
            if (step == "configure" and kind.output == IN_TREE
                    and clockskew.top_files_in_future(comp.build_dir)):
                # ninja would loop ("manifest still dirty"): configure afresh (clockskew.py)
                return "the build tree's files are dated in the future (clock skew)"
            return None
        files = buildsystems.of(comp).tree_files(step) if comp.builds else ()
        return kind.missing.format(files=" or ".join(files) or "its files")

    def _cached_output(self, comp: Component, step: str) -> str | None:
        """A step stamped by the binary cache (cache_install.py) left no checkout or build
        tree: it stands while every later step of the component is current, and is missing
        once one of them must run again, since that one needs the real sources."""
        steps = steps_of(comp)
        if all(self.is_current(comp, later) for later in steps[steps.index(step) + 1:]):
            return None
        return "installed from the binary cache; building it again needs the sources"

    def next_runs(self, components: Iterable[Component]) -> dict[tuple[str, str], bool]:
        """Which steps the next build runs, in build order: a step runs when it is not
        current now or when one of its input steps runs first (its run id then changes)."""
        runs: dict[tuple[str, str], bool] = {}
        for comp in components:
            for step in steps_of(comp):
                moving = any(runs.get(pair, False) for pair in self.input_steps(comp, step))
                runs[(comp.name, step)] = moving or not self.is_current(comp, step)
        return runs


# --- each step's own inputs beyond the run ids (the step table names those) ---------------
Facts = Callable[[Rule, Component], "dict[str, Any] | None"]


def _fetch_facts(rule: Rule, comp: Component) -> dict[str, Any]:
    # kept in the stamp (a workdir may be shared): a URL's password is not (errors.redact)
    return {"url": redact(comp.url) if comp.url else comp.url, "ref": comp.ref,
            "submodules": comp.submodules}


def _patch_facts(rule: Rule, comp: Component) -> dict[str, Any] | None:
    fetched = rule.state.read_stamp(comp.name, "fetch") or {}
    return {"commit": fetched.get("commit"), "checkout": fetched.get("checkout_id"),
            "patches": {p.path.name: p.sha256 for p in comp.patches}}


def _configure_facts(rule: Rule, comp: Component) -> dict[str, Any]:
    return {"recipe": comp.fingerprint, "command": command_key(rule.stack, comp)}


def _compile_facts(rule: Rule, comp: Component) -> dict[str, Any]:
    return {"edits": rule.local_edits(comp)}


FACTS: Mapping[str, Facts] = {
    "fetch": _fetch_facts, "patch": _patch_facts, "configure": _configure_facts,
    "compile": _compile_facts, "install": lambda rule, comp: {}}


# --- is what a step made still there (by where the step table says its output lives) ------
OutputCheck = Callable[[Rule, Component, str, "dict[str, Any]"], bool]


def _checkout_there(rule: Rule, comp: Component, step: str, stamp: dict[str, Any]) -> bool:
    """The checkout is the one the fetch made (its token and commit)."""
    return (sources.checkout_id(comp.checkout_dir) == stamp.get("checkout_id")
            and sources.checkout_commit(comp.checkout_dir) == stamp.get("commit"))


def _tree_there(rule: Rule, comp: Component, step: str, stamp: dict[str, Any]) -> bool:
    """The build tree holds the build system's files of the step and the build id configure
    wrote into it (so a deleted or replaced tree is configured and compiled again)."""
    made_by = stamp if step == "configure" else rule.state.read_stamp(comp.name, "configure")
    files = buildsystems.of(comp).tree_files(step)
    return all((comp.build_dir / name).is_file() for name in files) and (
        build_id(comp.build_dir) == (made_by or {}).get("build_id"))


def _prefix_there(rule: Rule, comp: Component, step: str, stamp: dict[str, Any]) -> bool:
    """Every file the install put into the prefix (the build system's record) is there,
    and the recipe's own links and files."""
    installed = buildsystems.of(comp).installed_files(comp)
    if installed is None:
        return False
    prefix = rule.stack.prefix
    if not (all(p.exists() or p.is_symlink() for p in installed) and all(
            (prefix / rel).is_symlink() or (prefix / rel).exists()
            for rel, _ in (*comp.install_links, *comp.install_files))):
        return False
    # and each is still what the install left: a library truncated by a full disk (its
    # mtime kept, so CMake's install would skip it as "Up-to-date"), a 0-byte file
    # (a damaged record is never "owns nothing": the run repairs it first, records.py)
    return records.stale_install(prefix, comp.name) is None


OUTPUTS: Mapping[Where, OutputCheck] = {IN_CHECKOUT: _checkout_there, IN_TREE: _tree_there,
                                     IN_PREFIX: _prefix_there}
