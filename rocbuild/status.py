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

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocbuild.build import log_path
from rocbuild.diagnose import Diagnosis, diagnose
from rocbuild.graph import Component
from rocbuild.jobs import job_cap_path
from rocbuild.state import read_json
from rocbuild.steps import steps_of
from rocbuild.uptodate import Rule

DONE, FAILED, PENDING, STALE = "done", "failed", "pending", "stale"



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


@dataclass(frozen=True)
class FailureStatus:
    step: str
    when: float | None
    message: str
    log: str | None
    tail: list[str]
    diagnosis: Diagnosis | None
    command: str  # the one command that continues


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
        for state in (FAILED, STALE, PENDING):
            if state in states:
                return state
        return DONE


@dataclass(frozen=True)
class StatusReport:
    workdir: Path
    prefix: Path
    components: list[ComponentStatus] = field(default_factory=list)

    def next_command(self, requested: list[str]) -> str | None:
        """The one command that continues: the failed component first, else the build."""
        for comp in self.components:
            if comp.failure is not None:
                return comp.failure.command
        if all(c.state == DONE for c in self.components):
            return None
        return " ".join(["rocbuild", "build", *requested])


@dataclass
class _Walk:
    """What is known so far while walking the components in build order."""

    ctx: Rule
    unsettled: dict[str, str] = field(default_factory=dict)  # component -> state, not done
    changed: set[str] = field(default_factory=set)  # recorded inputs differ from now
    # (component, step) -> the step runs in the next build (uptodate.Rule.next_runs)
    runs: dict[tuple[str, str], bool] = field(default_factory=dict)

    @property
    def rule(self) -> Rule:
        return self.ctx

    def moving_inputs(self, comp: Component, step: str) -> list[str]:
        """The input steps of ``step`` that run first: a step name for this component's
        own steps, a component name for a dependency (or the owner of a reused checkout)."""
        return [s if c == comp.name else c for c, s in self.rule.input_steps(comp, step)
                if self.runs.get((c, s), False)]


def collect(ctx: Rule) -> StatusReport:
    """The status of every selected component, in build order (read-only: the up-to-date rule
    over the workdir's stamps, no build context)."""
    walk = _Walk(ctx, runs=ctx.next_runs(ctx.stack.selected()))
    report = StatusReport(ctx.stack.workdir, ctx.stack.prefix)
    for comp in ctx.stack.selected():
        status = _component_status(walk, comp)
        if status.state != DONE:
            walk.unsettled[comp.name] = status.state
        report.components.append(status)
    return report


def _component_status(walk: _Walk, comp: Component) -> ComponentStatus:
    ctx = walk.ctx
    failure = ctx.state.read_failure(comp.name)
    found = _diagnose_failure(ctx, comp, failure) if failure is not None else None
    steps: list[StepStatus] = []
    for step in steps_of(comp):
        failed_here = failure if failure is not None and failure.get("step") == step else None
        status = _step_status(walk, comp, step, steps[-1] if steps else None, failed_here,
                              found)
        steps.append(status)
    failed = _failure_status(comp, failure, found, steps)
    cap = read_json(job_cap_path(ctx.stack.workdir, comp.name))
    shares = comp.checkout if not steps and comp.checkout != comp.name else None
    shared_state = walk.unsettled.get(shares, DONE) if shares else DONE
    return ComponentStatus(comp.name, steps, failed, cap, shares, shared_state)


def _step_status(walk: _Walk, comp: Component, step: str, before: StepStatus | None,
                 failure: Mapping[str, Any] | None, found: Diagnosis | None) -> StepStatus:
    """Simulate the next build for one step: it runs when it is not current now or when an
    input step runs first (then its run id, an input here, changes)."""
    ctx = walk.ctx
    stamp = ctx.state.read_stamp(comp.name, step)
    log = log_path(ctx.stack.workdir, comp.name, step)
    recorded = _recorded(step, stamp, log)
    moving = walk.moving_inputs(comp, step)
    current = not walk.runs[(comp.name, step)]
    differs = stamp is not None and _inputs_differ(ctx, comp, step, stamp)
    if differs:
        walk.changed.add(comp.name)
    if current:  # also when a failure record is older than the step's success
        return _with(recorded, DONE, "")
    if failure is not None:
        why = f"{found.id} (see below)" if found else "cause unknown (see below)"
        return StepStatus(step, FAILED, why, failure.get("seconds"), failure.get("peak_rss"),
                          failure.get("jobs"), int(failure.get("oom_retries") or 0),
                          recorded.log)
    if stamp is None:
        return StepStatus(step, PENDING, _why_pending(walk, comp, step, before),
                          log=recorded.log)
    reasons = [_why_stale(ctx, comp, step, stamp, walk.changed)] if differs else []
    own = [m for m in moving if m in steps_of(comp)]  # a step of this component
    if own:
        reasons.append(f"follows {own[0]}, which runs again")
    elif moving and not differs:
        reasons.append(f"dependency {', '.join(moving)} is rebuilt first")
    if not reasons:  # same inputs: what the step made is gone
        reasons.append(_why_stale(ctx, comp, step, stamp, walk.changed))
    return _with(recorded, STALE, "; ".join(reasons))


def _why_pending(walk: _Walk, comp: Component, step: str, before: StepStatus | None) -> str:
    if before is not None and before.state != DONE:
        return f"after {before.step}"
    waiting = [d for d in comp.depends if d in walk.unsettled]
    if step not in ("fetch", "patch") and waiting:
        return "waits for " + ", ".join(f"{d} ({walk.unsettled[d]})" for d in waiting)
    return "not run yet"


def _inputs_differ(ctx: Rule, comp: Component, step: str,
                   stamp: Mapping[str, Any]) -> bool:
    stored, expected = stamp.get("inputs"), ctx.expected_inputs(comp, step)
    return expected is None or not isinstance(stored, dict) or stored != expected


def _recorded(step: str, stamp: Mapping[str, Any] | None, log: Path) -> StepStatus:
    """What the stamp recorded about the step's last successful run."""
    stamp = stamp or {}
    return StepStatus(step, "", "", stamp.get("seconds"), stamp.get("peak_rss"),
                      stamp.get("jobs"), int(stamp.get("oom_retries") or 0),
                      log if log.is_file() else None)


def _with(recorded: StepStatus, state: str, why: str) -> StepStatus:
    return StepStatus(recorded.step, state, why, recorded.seconds, recorded.peak_rss,
                      recorded.jobs, recorded.oom_retries, recorded.log)


def _why_stale(ctx: Rule, comp: Component, step: str, stamp: Mapping[str, Any],
               changed: set[str]) -> str:
    """Which input of the step changed since its stamp was written."""
    stored = stamp.get("inputs")
    expected = ctx.expected_inputs(comp, step)
    if expected is None:
        return "an input step has no record yet"
    if not isinstance(stored, dict):
        return "recorded by an older rocbuild (inputs unknown)"
    if stored == expected:
        return ctx.missing_output(comp, step) or "its output is missing"
    reasons = _input_changes(comp, stored, expected, changed)
    return "; ".join(reasons) or "inputs changed"


def _input_changes(comp: Component, old: Mapping[str, Any], new: Mapping[str, Any],
                   changed: set[str]) -> list[str]:
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
            reasons.extend(_recipe_change(comp, changed, rebuilt))
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


def _recipe_change(comp: Component, changed: set[str], rebuilt: list[str]) -> list[str]:
    """A component's recipe fingerprint includes its dependencies' fingerprints, so a change
    upstream shows here too. The stamp keeps only the combined hash: when a dependency
    changed (stale now) or was rebuilt, that is named; the component's own options may have
    changed as well, which this cannot tell apart."""
    if rebuilt:
        return []  # "dependency X was rebuilt" says it
    upstream = [d for d in comp.depends if d in changed]
    if upstream:
        return [f"dependency {', '.join(upstream)} changed"]
    return ["recipe options changed"]


def _diagnose_failure(ctx: Rule, comp: Component, failure: Mapping[str, Any]
                      ) -> Diagnosis | None:
    tail = [str(line) for line in failure.get("tail") or []]
    message = str(failure.get("message") or "")
    context = {"prefix": str(ctx.stack.prefix), "component": comp.name,
               "workdir": str(ctx.stack.workdir)}
    # The message holds rocbuild's own line, e.g. "... was killed by signal 9".
    return diagnose([*tail, *message.splitlines()], context=context)


def _failure_status(comp: Component, failure: Mapping[str, Any] | None,
                    found: Diagnosis | None, steps: list[StepStatus]) -> FailureStatus | None:
    if failure is None or not any(s.state == FAILED for s in steps):
        return None  # a record the step has since overtaken (it ran again and passed)
    return FailureStatus(str(failure.get("step")), failure.get("when"),
                         str(failure.get("message") or ""), failure.get("log"),
                         [str(line) for line in failure.get("tail") or []], found,
                         f"rocbuild build {comp.name}")


def to_json(report: StatusReport) -> dict[str, Any]:
    """The stable document behind `rocbuild status --json`."""
    return {
        "workdir": str(report.workdir),
        "prefix": str(report.prefix),
        "components": [_component_json(c) for c in report.components],
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
        "log": failure.log, "tail": failure.tail,
        "diagnosis": None if found is None else {
            "id": found.id, "cause": found.cause, "fix": found.fix,
            "matched_line": found.matched_line},
        "continue": failure.command,
    }
