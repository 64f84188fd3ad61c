"""The step table: every kind of step a build runs, declared once (like settings.OPTIONS).

A step kind says who has it (a component owning a checkout, a component that builds, or the
run once), what it is (a stamped step of the up-to-date chain, a check that gates another
step, or the binary cache's shortcut), which steps' run ids are its inputs, where its output
lives (what the up-to-date rule checks is still there), whether dependents are built against
its run, whether it is a source step (run in the sources-first phase), its log, and the
commands ``rocbuild plan --commands`` prints for it. The up-to-date rule, the doit task
builder, status, the engine's reporter, plain doit's entry and ``rocbuild logs`` read this
table; run/engine/stepbind.py binds each kind to its action and run/state/uptodate.py to its
own input facts and output check (tests/unit/test_steptable.py fails when one of those is
missing). Why the table is split this way: docs/architecture.md, The step table. Nothing
here runs anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from rocbuild.model import buildsystems, steps
from rocbuild.model.buildsystems.venv import PythonVenv
from rocbuild.model.graph import Component, Stack
from rocbuild.model.workdir import Workdir


class Who(Enum):
    """Who has a step."""

    CHECKOUT = "checkout"  # a component that owns its checkout (a reused one has none of these)
    BUILD = "build"  # a component whose recipe builds
    COMPONENT = "component"  # any component with steps of its own (the binary cache's shortcut)
    RUN = "run"  # once per run, for the whole stack


class Role(Enum):
    """What a step is."""

    STEP = "step"  # stamped; part of the up-to-date chain
    CHECK = "check"  # not stamped; must pass before the step it gates
    SHORTCUT = "shortcut"  # the binary cache: installs the result and stamps the steps instead


class Where(Enum):
    """Where a step's output lives (the up-to-date rule checks it is still there)."""

    CHECKOUT = "checkout"
    TREE = "build tree"
    PREFIX = "prefix"


class Of(Enum):
    """Whose run id an input is."""

    OWN = "own"  # the same component's step
    CHECKOUT = "checkout"  # the step of the component owning the checkout
    DEPENDENCIES = "dependencies"  # what each dependency's users are built against


# One Enum per axis: members of two Enums never compare equal, so a Where given for a Who
# (both say "checkout") fails instead of passing in silence; the short names are those members.
CHECKOUT, BUILD, COMPONENT, RUN = Who.CHECKOUT, Who.BUILD, Who.COMPONENT, Who.RUN
STEP, CHECK, SHORTCUT = Role.STEP, Role.CHECK, Role.SHORTCUT
IN_CHECKOUT, IN_TREE, IN_PREFIX = Where.CHECKOUT, Where.TREE, Where.PREFIX
OWN, OF_CHECKOUT, DEPENDENCIES = Of.OWN, Of.CHECKOUT, Of.DEPENDENCIES

Jobs = Mapping[str, int]
Mirror = tuple[tuple[str, str], ...]
PlanCommands = Callable[[Stack, Component, Jobs, Mirror], list[list[str]]]


@dataclass(frozen=True)
class Input:
    """One run id among a step's inputs: ``key`` in the stamp's inputs document."""

    key: str
    of: Of
    step: str = ""  # the step whose run it is (DEPENDENCIES: what each dependency's users see)


@dataclass(frozen=True)
class StepKind:
    """One kind of step. Made by the constructor of its role (``stamped``, ``check``,
    ``shortcut``, ``run_wide``), each taking only the fields its role has."""

    name: str  # the task basename, the stamp and log name, what status and `logs` call it
    summary: str  # one line: help, doit list
    who: Who
    role: Role = Role.STEP
    inputs: tuple[Input, ...] = ()
    source: bool = False  # a source step: every one runs before the first configure
    output: Where | None = None  # None when there is nothing to check
    # what a missing output means to the user (status); {files}: the build system's
    # tree_files of the step
    missing: str = ""
    dependents_see: bool = False  # users are built against the last such step's run
    gates: str = ""  # a check: the step it must pass before
    current_with: str = ""  # a check: current while that step is
    build_env: bool = False  # runs in the component's build environment (plan prints it)
    title: str = ""  # how the console names a run-wide step ("build venv")
    record: tuple[str, str] | None = None  # a run-wide step's (folder, name) of stamp and log
    commands: PlanCommands | None = None  # what `rocbuild plan --commands` prints


def stamped(name: str, summary: str, who: Who, *, inputs: tuple[Input, ...] = (),
            source: bool = False, output: Where | None = None, missing: str = "",
            dependents_see: bool = False, build_env: bool = False,
            commands: PlanCommands | None = None) -> StepKind:
    """A stamped component step of the up-to-date chain."""
    return StepKind(name, summary, who, Role.STEP, inputs=inputs, source=source,
                    output=output, missing=missing, dependents_see=dependents_see,
                    build_env=build_env, commands=commands)


def check(name: str, summary: str, who: Who, *, gates: str, current_with: str) -> StepKind:
    """A check that must pass before ``gates`` runs, current while ``current_with`` is."""
    return StepKind(name, summary, who, Role.CHECK, gates=gates, current_with=current_with)


def shortcut(name: str, summary: str, who: Who) -> StepKind:
    """The binary cache's step: installs the result and stamps the steps instead."""
    return StepKind(name, summary, who, Role.SHORTCUT)


def run_wide(name: str, summary: str, *, title: str, record: tuple[str, str]) -> StepKind:
    """A step run once per run, with its console title and its (folder, name) of stamp and
    log."""
    return StepKind(name, summary, Who.RUN, Role.STEP, title=title, record=record)


def _fetch(stack: Stack, comp: Component, jobs: Jobs, mirror: Mirror) -> list[list[str]]:
    return steps.fetch_argv(comp, stack.workdir, mirror)


def _patch(stack: Stack, comp: Component, jobs: Jobs, mirror: Mirror) -> list[list[str]]:
    return steps.patch_argv(comp)


def _configure(stack: Stack, comp: Component, jobs: Jobs, mirror: Mirror) -> list[list[str]]:
    return buildsystems.of(comp).configure(stack, comp, jobs)


def _compile(stack: Stack, comp: Component, jobs: Jobs, mirror: Mirror) -> list[list[str]]:
    return buildsystems.of(comp).build(stack, comp, jobs["compile"])


def _install(stack: Stack, comp: Component, jobs: Jobs, mirror: Mirror) -> list[list[str]]:
    return buildsystems.of(comp).install(stack, comp)


STEPS: tuple[StepKind, ...] = (
    run_wide("python-venv", "the build venv with the recipes' Python packages, and the "
             "wheelhouse", title="build venv", record=("_python", "venv")),
    shortcut("cache", "install the component from the binary cache (--cache) and stamp its "
             "steps", Who.COMPONENT),
    stamped("fetch", "fetch the pinned source into the checkout", Who.CHECKOUT, source=True,
            output=Where.CHECKOUT, missing="the checkout changed or was removed",
            commands=_fetch),
    stamped("patch", "apply the recipe's patch series to the checkout", Who.CHECKOUT,
            inputs=(Input("fetch", Of.OWN, "fetch"),), source=True,
            dependents_see=True,  # what a source-only component's users see
            commands=_patch),
    check("options", "check every option of the recipe against the fetched build files",
          Who.BUILD, gates="configure",
          # the options were accepted once the configure of this fingerprint succeeded
          current_with="configure"),
    stamped("configure", "configure the build tree", Who.BUILD,
            inputs=(Input("source", Of.CHECKOUT, "patch"), Input("deps", Of.DEPENDENCIES)),
            output=Where.TREE, build_env=True, commands=_configure,
            missing="the build tree was removed or replaced ({files} or its build id)"),
    stamped("compile", "compile, with the jobs that fit in memory", Who.BUILD,
            inputs=(Input("configure", Of.OWN, "configure"),), output=Where.TREE,
            build_env=True, missing="the build tree was removed or replaced",
            commands=_compile),
    stamped("install", "install into the prefix", Who.BUILD,
            inputs=(Input("compile", Of.OWN, "compile"),), output=Where.PREFIX, build_env=True,
            missing="installed files are missing from the prefix", dependents_see=True,
            commands=_install),
)
BY_NAME: Mapping[str, StepKind] = {k.name: k for k in STEPS}
PYTHON_VENV = BY_NAME["python-venv"]


class UnknownStep(LookupError):
    """A step name the table does not declare: an error inside rocbuild, never a guess."""


def kind(name: str) -> StepKind:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownStep(f"'{name}' is not a step of the step table (model/steptable.py: "
                          f"{', '.join(BY_NAME)})") from None


def applies(step: StepKind, comp: Component) -> bool:
    """Whether ``comp`` has ``step``."""
    if step.who == CHECKOUT:
        return comp.owns_checkout
    if step.who == BUILD:
        return comp.builds
    return step.who == COMPONENT and bool(steps_of(comp))


def steps_of(comp: Component) -> tuple[str, ...]:
    """The stamped steps of ``comp`` in build order: a component that reuses another's
    checkout has no fetch/patch of its own; a source-only component is fetched and patched,
    never built."""
    return tuple(k.name for k in STEPS if k.role == STEP and k.who != RUN and applies(k, comp))


def chained() -> tuple[StepKind, ...]:
    """The stamped component steps, in build order (what the up-to-date rule judges)."""
    return tuple(k for k in STEPS if k.role == STEP and k.who != RUN)


def with_logs(comp: Component) -> tuple[StepKind, ...]:
    """Every step of ``comp`` that writes a log, run-wide ones included, in table order
    (fetch ... install last, so the last one with a log is the latest step)."""
    return tuple(k for k in STEPS if k.who == RUN or applies(k, comp))


def seen_by_dependents(comp: Component) -> str | None:
    """The step of ``comp`` whose run its users are built against (its install; the patch of
    a source-only component), None when it has no steps of its own."""
    seen = [name for name in steps_of(comp) if BY_NAME[name].dependents_see]
    return seen[-1] if seen else None


def gating_checks(step: str) -> tuple[StepKind, ...]:
    """The checks that must pass before ``step`` runs (options before configure)."""
    return tuple(k for k in STEPS if k.role == CHECK and k.gates == step)


def log_path(work: Workdir, component: str, step: str) -> Path:
    """``logs/<component>/<step>.log`` of the workdir (source steps) or of the stack's
    configuration (model/workdir.py); a run-wide step keeps its own folder."""
    record = BY_NAME[step].record if step in BY_NAME else None
    return work.log(record[0], step, record[1]) if record is not None else work.log(component, step)


@dataclass(frozen=True)
class StepCommands:
    step: str
    argvs: tuple[tuple[str, ...], ...]
    env: tuple[tuple[str, str], ...] = ()  # overrides, only for steps in the build environment


def commands_for(stack: Stack, component: Component, jobs: Jobs,
                 mirror: Mirror = ()) -> list[StepCommands]:
    """What each step of ``component`` runs, for `rocbuild plan --commands` and --json."""
    env = tuple(steps.env_overrides(stack, component).items())
    out = []
    for name in steps_of(component):
        step = BY_NAME[name]
        assert step.commands is not None, f"{name} declares no commands"
        argvs = tuple(tuple(argv) for argv in step.commands(stack, component, jobs, mirror))
        own = (tuple(buildsystems.of(component).install_env.items())
               if name == "install" and component.builds else ())
        out.append(StepCommands(name, argvs, (env + own) if step.build_env else ()))
    return out


def venv_commands(stack: Stack, python: str) -> list[list[str]]:
    """The python-venv step's commands (empty when no selected recipe needs Python)."""
    return PythonVenv(python).commands(stack)
