"""The status model behind `rocbuild status`: per component and step, done / failed / pending /
stale, and why.

Everything comes from the workdir's state (stamps, failure records, job caps) compared with
what each step's inputs are now. The walk applies uptodate.py's rule, the same one the build
uses (a step runs when it is not current now or when one of its input steps runs first), so
the steps shown as not done are exactly the steps the next `rocbuild build` runs. Stamps
keep their named inputs; comparing them key by key turns "the fingerprint differs" into
"recipe options changed" or "dependency clr was rebuilt". Nothing here writes or locks:
status is safe to run while a build is going.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocbuild import proc
from rocbuild.errors import ConfigError
from rocbuild.files import read_json
from rocbuild.model import steptable
from rocbuild.model.graph import Component, Stack, default_request, load_stack
from rocbuild.model.settings import Settings
from rocbuild.model.steptable import log_path, steps_of
from rocbuild.model.workdir import Workdir
from rocbuild.prefix import registry, uninstall
from rocbuild.prefix.buildinfo import read_build_info
from rocbuild.run.engine import continuation
from rocbuild.run.engine.jobs import job_cap_path
from rocbuild.run.state import running
from rocbuild.run.state.running import RunningStep
from rocbuild.run.state.uptodate import Rule

DONE, FAILED, PENDING, STALE, RUNNING = "done", "failed", "pending", "stale", "running"
UNPROVEN = "unproven"  # the verify row of a complete prefix verify never proved
UNPROVEN_WHY = "skipped (--no-verify); activate needs --unproven"

if TYPE_CHECKING:  # the failure table is loaded when a failure is shown
    from rocbuild.checks.diagnose import Diagnosis


@dataclass(frozen=True)
class StepStatus:
    step: str
    state: str
    why: str = ""
    seconds: float | None = None
    peak_rss: int | None = None
    jobs: int | None = None
    oom_retries: int = 0
    log: Path | None = None
    attempts: int = 1  # its last run took this many attempts (seconds: all of them)


@dataclass(frozen=True)
class FailureStatus:
    step: str
    when: float | None
    message: str
    log: str | None
    tail: list[str]
    diagnosis: Diagnosis | None
    command: str  # the one command that continues
    first_error: list[str] = field(default_factory=list)  # the tool's first (CMake's)


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    steps: list[StepStatus]
    failure: FailureStatus | None = None
    job_cap: dict[str, Any] | None = None
    shares: str | None = None  # the owner of a reused checkout, for a component with no steps
    shared_state: str = DONE  # that owner's state, which is this component's

    @property
    def state(self) -> str:
        if not self.steps:
            return self.shared_state
        states = {s.state for s in self.steps}
        return next((s for s in (FAILED, RUNNING, STALE, PENDING) if s in states), DONE)


@dataclass(frozen=True)
class StatusReport:
    workdir: Path
    prefix: Path
    components: list[ComponentStatus] = field(default_factory=list)
    # the build's own command line (continuation.py), repeated by "continue with"
    command: str = "rocbuild build"
    lock_holder: int | None = None  # pid of the build running in this workdir now
    verify: StepStatus | None = None  # the last build's verify, once every step is done
    # run-wide steps that failed (the build venv): (their title, the failure)
    run_failures: list[tuple[str, FailureStatus]] = field(default_factory=list)
    # processes a killed run left running (its watchdog died too): each command and its pids
    leftovers: list[tuple[str, list[int]]] = field(default_factory=list)
    # components installed in the prefix that the stack no longer has: the next build that
    # completes the stack takes them out (finish.py), as `rocbuild uninstall` would
    dropped: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A step or the verify failed: `rocbuild status` then exits 1."""
        return (any(c.state == FAILED for c in self.components) or bool(self.run_failures)
                or (self.verify is not None and self.verify.state == FAILED))

    def next_command(self, requested: list[str]) -> str | None:
        """The one command that continues, None when nothing is left or a build is running
        (a second one would only be refused)."""
        if self.lock_holder is not None:
            return None
        if self.failed or any(c.state != DONE for c in self.components) or self.dropped:
            return self.command
        return None


def format_duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


@dataclass
class _Walk:
    """What is known so far while walking the components in build order."""

    rule: Rule
    running: dict[tuple[str, str], RunningStep] = field(default_factory=dict)
    interrupted: dict[tuple[str, str], RunningStep] = field(default_factory=dict)
    unsettled: dict[str, str] = field(default_factory=dict)  # component -> state, not done
    changed: set[str] = field(default_factory=set)  # recorded inputs differ from now
    # (component, step) -> the step runs in the next build (uptodate.Rule.next_runs)
    runs: dict[tuple[str, str], bool] = field(default_factory=dict)

    def moving_inputs(self, comp: Component, step: str) -> list[str]:
        """The input steps of ``step`` that run first: a step name for this component's
        own steps, a component name for a dependency (or the owner of a reused checkout)."""
        return [s if c == comp.name else c for c, s in self.rule.input_steps(comp, step)
                if self.runs.get((c, s), False)]


def collect(rule: Rule, settings: Settings, requested: list[str] | None = None
            ) -> StatusReport:
    """The status of every selected component, in build order, with the steps running now,
    the run that holds the workdir, and the last verify."""
    workdir = rule.stack.workdir
    walk = _Walk(rule, running=running.steps(workdir), interrupted=running.interrupted(workdir),
                 runs=rule.next_runs(rule.stack.selected()))
    command = (continuation.recorded(rule.stack.work)
               or continuation.fallback(settings, requested or []))
    holder = running.lock_holder(workdir)
    report = StatusReport(workdir, rule.stack.prefix, command=command, lock_holder=holder,
                          run_failures=_run_failures(rule, command),
                          leftovers=[] if holder is not None else
                          proc.ChildRegistry(rule.stack.work.running).leftovers())
    default = set(default_request(rule.stack.recipes))
    for comp in rule.stack.selected():
        # a component the recorded command does not build (tried with `rocbuild build X`
        # outside the stack's set): its own command continues it
        own = command if comp.name in default or comp.name in shlex.split(command) \
            else continuation.fallback(settings, [comp.name])
        status = _component_status(walk, comp, own)
        if status.state != DONE:
            walk.unsettled[comp.name] = status.state
        report.components.append(status)
    if all(c.state == DONE for c in report.components):
        report = replace(report, verify=_verify_status(rule.stack.work, rule.stack.prefix))
    return replace(report, dropped=dropped_components(rule.stack, settings, requested or []))


def dropped_components(stack: Stack, settings: Settings, requested: list[str]) -> list[str]:
    """The components the prefix holds (an install record) that the stack no longer has:
    the same rule as the build's (finish.py ``_uninstall_dropped``: neither in the stack's
    whole default set nor in what was asked for)."""
    installed = uninstall.installed_components(stack.prefix)
    if not installed:
        return []
    whole = load_stack(settings) if requested else stack
    keep = {*whole.order, *stack.order}
    return [name for name in installed if name not in keep]


def tried_outside(rule: Rule) -> list[str]:
    """Components outside the loaded selection that failed in this workdir (a `rocbuild
    build X` for an X not in stack.components): plain `rocbuild status` reports them too."""
    recipes = rule.stack.recipes.recipes
    return [name for name in rule.state.failed_units()
            if name in recipes and name not in rule.stack.components]


def _run_failures(rule: Rule, command: str) -> list[tuple[str, FailureStatus]]:
    """The failures of run-wide steps (the build venv) still on record: the step's next
    success removes its record. A step the stack no longer needs is not reported."""
    out: list[tuple[str, FailureStatus]] = []
    for kind in steptable.STEPS:
        if kind.who != steptable.RUN or kind.record is None:
            continue
        if kind is steptable.PYTHON_VENV and rule.stack.python_needs() == ((), ()):
            continue  # no recipe needs Python any more: the venv step never runs again
        failure = rule.state.read_failure(kind.record[0])
        if failure is None or failure.get("step") != kind.name:
            continue
        tail = [str(line) for line in failure.get("tail") or []]
        from rocbuild.checks.diagnose import diagnose  # a failure's cause: its table then

        found = diagnose([*tail, *str(failure.get("message") or "").splitlines()],
                         context={"workdir": str(rule.stack.workdir), "command": command})
        out.append((kind.title, FailureStatus(kind.name, failure.get("when"),
                                              str(failure.get("message") or ""),
                                              failure.get("log"), tail, found, command)))
    return out


def _verify_status(work: Workdir, prefix: Path) -> StepStatus | None:
    """The verify that ended the last build into this prefix (finish.py records it), or,
    when none did, a complete prefix that verify never proved (``build --no-verify``)."""
    doc = read_json(work.verify_record)
    if not doc or doc.get("prefix") != str(prefix):
        try:
            info = read_build_info(prefix)
        except ConfigError:
            return None
        if info is not None and info.complete and not info.verified:
            links = [str(link) for link, unproven in registry.known_links().items()
                     if unproven and _points_at(link, prefix)]
            why = UNPROVEN_WHY + (f"; activated with --unproven at {', '.join(links)}"
                                  if links else "")
            return StepStatus("verify", UNPROVEN, why)
        return None
    if doc.get("ok"):
        return StepStatus("verify", DONE, "", doc.get("seconds"))
    return StepStatus("verify", FAILED, str(doc.get("summary") or "verify failed"),
                      doc.get("seconds"))


def _points_at(link: Path, prefix: Path) -> bool:
    try:
        return os.path.realpath(link) == os.path.realpath(prefix) and link.is_symlink()
    except OSError:
        return False


def _component_status(walk: _Walk, comp: Component, command: str) -> ComponentStatus:
    rule = walk.rule
    failure = rule.state.read_failure(comp.name)
    found = _diagnose_failure(rule, comp, failure, command) if failure is not None else None
    steps: list[StepStatus] = []
    for step in steps_of(comp):
        failed_here = failure if failure is not None and failure.get("step") == step else None
        check = _failed_check(walk, comp, step, failure, found)
        if check is not None:  # a check that gates this step failed: its own row, first
            steps.append(check)
        status = _step_status(walk, comp, step, steps[-1] if steps else None, failed_here,
                              found)
        steps.append(status)
    failed = _failure_status(comp, failure, found, steps, command)
    cap = read_json(job_cap_path(rule.stack.workdir, comp.name))
    shares = comp.checkout if not steps and comp.checkout != comp.name else None
    shared_state = walk.unsettled.get(shares, DONE) if shares else DONE
    return ComponentStatus(comp.name, steps, failed, cap, shares, shared_state)


def _step_status(walk: _Walk, comp: Component, step: str, before: StepStatus | None,
                 failure: Mapping[str, Any] | None, found: Diagnosis | None) -> StepStatus:
    """Simulate the next build for one step: it runs when it is not current now or when an
    input step runs first (then its run id, an input here, changes)."""
    rule = walk.rule
    stamp = rule.state.read_stamp(comp.name, step)
    log = log_path(rule.stack.work, comp.name, step)
    recorded = _recorded(step, stamp, log)
    now = walk.running.get((comp.name, step))
    if now is not None:  # the step is running right now: it will run, whatever its stamp
        walk.runs[(comp.name, step)] = True
        since = time.strftime("%H:%M:%S", time.localtime(now.since))
        return _with(recorded, RUNNING, f"pid {now.pid}, since {since} "
                                        f"({format_duration(time.time() - now.since)})")
    moving = walk.moving_inputs(comp, step)
    current = not walk.runs[(comp.name, step)]
    differs = stamp is not None and _inputs_differ(rule, comp, step, stamp)
    if differs:
        walk.changed.add(comp.name)
    if current:  # also when a failure record is older than the step's success
        return _with(recorded, DONE, "")
    cut = walk.interrupted.get((comp.name, step))
    if cut is not None and (failure is None or float(failure.get("when") or 0) < cut.since):
        # the run that started this step was killed: that is why it runs again, whatever
        # else its inputs say (a configure that ran before the kill, say)
        return _with(recorded, STALE if stamp is not None else PENDING, interrupted_why(cut))
    if failure is not None:
        why = f"{found.id} (see below)" if found else "cause unknown (see below)"
        return StepStatus(step, FAILED, why, failure.get("seconds"), failure.get("peak_rss"),
                          failure.get("jobs"), int(failure.get("oom_retries") or 0),
                          recorded.log)
    if stamp is None:
        return StepStatus(step, PENDING, _why_pending(walk, comp, step, before),
                          log=recorded.log)
    reasons = [_why_stale(rule, comp, step, stamp, walk.changed)] if differs else []
    own = [m for m in moving if m in steps_of(comp)]  # a step of this component
    if own:
        reasons.append(f"follows {own[0]}, which runs again")
    elif moving and not differs:
        reasons.append(f"dependency {', '.join(moving)} is rebuilt first")
    if not reasons:  # same inputs: what the step made is gone
        reasons.append(_why_stale(rule, comp, step, stamp, walk.changed))
    return _with(recorded, STALE, "; ".join(reasons))


def interrupted_why(cut: RunningStep) -> str:
    """Why a step runs again after its run was stopped in the middle of it."""
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(cut.since))
    if cut.ended:
        after = f" after {cut.seconds:.0f}s" if cut.seconds is not None else ""
        return (f"interrupted: the run that started it at {since} was stopped by "
                f"{cut.ended}{after}")
    return (f"interrupted: the run that started it at {since} was stopped (killed, or the "
            "machine went down)")


def _failed_check(walk: _Walk, comp: Component, step: str,
                  failure: Mapping[str, Any] | None, found: Diagnosis | None
                  ) -> StepStatus | None:
    """The row of a failed step that is not stamped, placed before ``step``: a check
    (``options``) before the step it gates, the binary cache's shortcut before the first
    step; shown while ``step`` has not run since (the table has no row for one that passed)."""
    if failure is None or str(failure.get("step")) not in steptable.BY_NAME:
        return None
    check = steptable.kind(str(failure["step"]))
    if check.role == steptable.CHECK:
        before = check.gates
    elif check.role == steptable.SHORTCUT:
        before = steps_of(comp)[0]
    else:
        return None
    if before != step or not walk.runs[(comp.name, step)]:
        return None
    log = log_path(walk.rule.stack.work, comp.name, check.name)
    why = f"{found.id} (see below)" if found else "see below"
    return StepStatus(check.name, FAILED, why, failure.get("seconds"),
                      log=log if log.is_file() else None)


def _why_pending(walk: _Walk, comp: Component, step: str, before: StepStatus | None) -> str:
    if before is not None and before.state != DONE:
        return f"after {before.step}"
    waiting = [d for d in comp.depends if d in walk.unsettled]
    if not steptable.kind(step).source and waiting:  # a source step waits for nobody
        return "waits for " + ", ".join(f"{d} ({walk.unsettled[d]})" for d in waiting)
    return "not run yet"


def _inputs_differ(rule: Rule, comp: Component, step: str,
                   stamp: Mapping[str, Any]) -> bool:
    stored, expected = stamp.get("inputs"), rule.expected_inputs(comp, step)
    return expected is None or not isinstance(stored, dict) or stored != expected


def _recorded(step: str, stamp: Mapping[str, Any] | None, log: Path) -> StepStatus:
    """What the stamp recorded about the step's last successful run: its time over every
    attempt it took (a failed, interrupted or killed one too: actions.time_history)."""
    stamp = stamp or {}
    total = stamp.get("attempts_seconds")
    attempts = stamp.get("attempts")
    return StepStatus(step, "", "", total if isinstance(total, (int, float))
                      else stamp.get("seconds"), stamp.get("peak_rss"),
                      stamp.get("jobs"), int(stamp.get("oom_retries") or 0),
                      log if log.is_file() else None,
                      attempts if isinstance(attempts, int) else 1)


def _with(recorded: StepStatus, state: str, why: str) -> StepStatus:
    if state == DONE and not why and recorded.attempts > 1:
        why = f"{recorded.attempts} attempts"
    return StepStatus(recorded.step, state, why, recorded.seconds, recorded.peak_rss,
                      recorded.jobs, recorded.oom_retries, recorded.log, recorded.attempts)


def _why_stale(rule: Rule, comp: Component, step: str, stamp: Mapping[str, Any],
               changed: set[str]) -> str:
    """Which input of the step changed since its stamp was written."""
    stored = stamp.get("inputs")
    expected = rule.expected_inputs(comp, step)
    if expected is None:
        return "an input step has no record yet"
    if not isinstance(stored, dict):
        return "recorded by an older rocbuild (inputs unknown)"
    if stored == expected:
        return rule.missing_output(comp, step) or "its output is missing"
    reasons = _input_changes(comp, stored, expected, changed,
                             patches_changed=_patches_changed(rule, comp))
    return "; ".join(reasons) or "inputs changed"


def _input_changes(comp: Component, old: Mapping[str, Any], new: Mapping[str, Any],
                   changed: set[str], *, patches_changed: bool = False) -> list[str]:
    reasons: list[str] = []
    differs = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    old_deps, new_deps = old.get("deps") or {}, new.get("deps") or {}
    rebuilt = [d for d in sorted(set(old_deps) | set(new_deps))
               if old_deps.get(d) != new_deps.get(d)]
    for key in differs:
        before, now = old.get(key), new.get(key)
        if key == "ref":
            reasons.append(f"ref changed: {before} -> {now}")
        elif key == "url":
            reasons.append("source URL changed")
        elif key == "submodules":
            reasons.append("submodules setting changed")
        elif key == "commit":
            reasons.append(f"new source commit {str(before)[:10]} -> {str(now)[:10]}")
        elif key == "checkout":
            reasons.append("the checkout was made again")
        elif key == "fetch":
            if "commit" not in differs and "checkout" not in differs:
                reasons.append("fetch ran again")
        elif key == "command":
            if "recipe" not in differs:
                reasons.append("rocbuild's configure command changed (a newer rocbuild)")
        elif key == "edits":
            paths = (now or {}).get("paths") or []
            reasons.append("your edits in the checkout: " + ", ".join(paths[:4])
                           + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")
                           if paths else "your edits in the checkout were undone")
        elif key == "patches":
            reasons.append("patches changed: " + _patch_changes(before or {}, now or {}))
        elif key == "recipe":
            reasons.extend(_recipe_change(comp, changed, rebuilt, patches_changed))
        elif key == "source":
            reasons.append("source changed (patch step ran again)")
        elif key == "deps":
            reasons.extend(f"dependency {d} was rebuilt" for d in rebuilt)
        elif key in ("configure", "compile"):
            reasons.append(f"{key} ran again")
        else:
            reasons.append(f"{key} changed")
    return reasons


def _patch_changes(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    parts = [f"{n} (new)" for n in sorted(set(new) - set(old))]
    parts += [f"{n} (removed)" for n in sorted(set(old) - set(new))]
    parts += [n for n in sorted(set(old) & set(new)) if old[n] != new[n]]
    return ", ".join(parts)


def _patches_changed(rule: Rule, comp: Component) -> bool:
    """The patch series of the component's checkout differs from what its patch step
    applied last (the recipe fingerprint includes the patches, so this tells them apart)."""
    stamp = rule.state.read_stamp(comp.checkout, "patch") or {}
    inputs = stamp.get("inputs")
    if not isinstance(inputs, dict) or "patches" not in inputs:
        return False
    owner = rule.component(comp.checkout) if comp.checkout in rule.stack.components else comp
    return inputs["patches"] != {p.path.name: p.sha256 for p in owner.patches}


def _recipe_change(comp: Component, changed: set[str], rebuilt: list[str],
                   patches_changed: bool = False) -> list[str]:
    """A component's recipe fingerprint includes its dependencies' fingerprints, so a change
    upstream shows here too. The stamp keeps only the combined hash: when a dependency
    changed (stale now) or was rebuilt, that is named; the component's own options may have
    changed as well, which this cannot tell apart."""
    if rebuilt:
        return []  # "dependency X was rebuilt" says it
    upstream = [d for d in comp.depends if d in changed]
    if upstream:
        return [f"dependency {', '.join(upstream)} changed"]
    # the fingerprint holds the patches: say what the user changed
    return ["patches changed" if patches_changed else "recipe options changed"]


def _diagnose_failure(rule: Rule, comp: Component, failure: Mapping[str, Any], command: str
                      ) -> Diagnosis | None:
    tail = [*_first_error(failure), *(str(line) for line in failure.get("tail") or [])]
    message = str(failure.get("message") or "")
    context = {"prefix": str(rule.stack.prefix), "component": comp.name,
               "workdir": str(rule.stack.workdir), "command": command}
    # The message holds rocbuild's own line, e.g. "... was killed by signal 9".
    from rocbuild.checks.diagnose import diagnose  # a failure's cause: its table then

    return diagnose([*tail, *message.splitlines()], context=context)


def _failure_status(comp: Component, failure: Mapping[str, Any] | None,
                    found: Diagnosis | None, steps: list[StepStatus],
                    command: str) -> FailureStatus | None:
    if failure is None or not any(s.state == FAILED for s in steps):
        return None  # a record the step has since overtaken (it ran again and passed)
    return FailureStatus(str(failure.get("step")), failure.get("when"),
                         str(failure.get("message") or ""), failure.get("log"),
                         [str(line) for line in failure.get("tail") or []], found, command,
                         _first_error(failure))


def _first_error(failure: Mapping[str, Any]) -> list[str]:
    lines = failure.get("first_error")
    return [str(line) for line in lines] if isinstance(lines, list) else []


def to_json(report: StatusReport) -> dict[str, Any]:
    """The stable document behind `rocbuild status --json`."""
    verify = report.verify
    return {
        "workdir": str(report.workdir),
        "prefix": str(report.prefix),
        "components": [_component_json(c) for c in report.components],
        "verify": None if verify is None else {"state": verify.state, "why": verify.why},
        "run_failures": [{"title": title, **(_failure_json(f) or {})}
                         for title, f in report.run_failures],
        "running": report.lock_holder,  # pid of the build holding the workdir, or null
        "leftovers": [{"command": c, "pids": p} for c, p in report.leftovers],
        "failed": report.failed,
        "uninstalls": report.dropped,  # no longer in the stack: the next build removes them
        "continue": report.next_command([]),
    }


def _component_json(comp: ComponentStatus) -> dict[str, Any]:
    return {
        "name": comp.name,
        "state": comp.state,
        "steps": [{"step": s.step, "state": s.state, "why": s.why, "seconds": s.seconds,
                   "peak_rss": s.peak_rss, "jobs": s.jobs, "oom_retries": s.oom_retries,
                   "log": str(s.log) if s.log else None} for s in comp.steps],
        "failure": _failure_json(comp.failure),
        "job_cap": comp.job_cap,
    }


def _failure_json(failure: FailureStatus | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    found = failure.diagnosis
    return {
        "step": failure.step, "when": failure.when, "message": failure.message,
        "log": failure.log, "tail": failure.tail, "first_error": failure.first_error,
        "diagnosis": None if found is None else {
            "id": found.id, "cause": found.cause, "fix": found.fix,
            "matched_line": found.matched_line},
        "continue": failure.command,
    }
