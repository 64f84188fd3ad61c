"""The run's side of the step table: each kind's action, when it is current, its stamp.

model/steptable.py declares every step kind (the model runs nothing); this binds each one to
what runs it. runner.py runs a bound action, tasks.py makes a doit task of it. A kind
without a binding here, or a binding without a kind, fails tests/unit/test_steptable.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rocbuild.model import steptable
from rocbuild.model.graph import Component
from rocbuild.model.steptable import CHECK, SHORTCUT, STEP, StepKind
from rocbuild.run.engine import actions, cache_install, optcheck
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.outcome import StepOutcome

AnyAction = Callable[[BuildContext, "Component | None", Path, StepOutcome], None]
Current = Callable[[BuildContext, "Component | None"], bool]
Stamp = Callable[[BuildContext, "Component | None", StepOutcome, float], None]


def of_component(action: actions.Action) -> AnyAction:
    """A component step's action in the runner's shape (the runner passes its component)."""
    def run(ctx: BuildContext, comp: Component | None, log: Path, outcome: StepOutcome) -> None:
        assert comp is not None, "a component step without its component"
        action(ctx, comp, log, outcome)
    run.__doc__ = action.__doc__
    return run


def _stamp(ctx: BuildContext, comp: Component | None, outcome: StepOutcome,
           seconds: float) -> None:
    assert comp is not None
    actions.write_stamp(ctx, comp, outcome.step, outcome, seconds)


def _no_stamp(ctx: BuildContext, comp: Component | None, outcome: StepOutcome,
              seconds: float) -> None:
    raise AssertionError(f"{outcome.step} is not stamped")


@dataclass(frozen=True)
class Binding:
    action: AnyAction
    stamp: Stamp = _stamp  # after a stamped step succeeded (runner.py)
    current: Current | None = None  # None: by the step table (``is_current``)


def is_current(ctx: BuildContext, kind: StepKind, comp: Component | None) -> bool:
    """Whether ``kind`` has nothing to do: a stamped step by the up-to-date rule, a check
    while the step named in ``current_with`` is current, the cache's shortcut while every
    step of the component is, a run-wide step by its binding."""
    binding = BINDINGS[kind.name]
    if binding.current is not None:
        return binding.current(ctx, comp)
    assert comp is not None, f"{kind.name} is run-wide and needs its own current check"
    if kind.role == STEP:
        return ctx.is_current(comp, kind.name)
    if kind.role == CHECK:
        return ctx.is_current(comp, kind.current_with)
    assert kind.role == SHORTCUT
    return all(ctx.is_current(comp, s) for s in steptable.steps_of(comp))


BINDINGS: Mapping[str, Binding] = {
    "python-venv": Binding(actions.python_venv, stamp=actions.python_stamp,
                           current=actions.python_is_current),
    "cache": Binding(of_component(cache_install.install_from_cache), stamp=_no_stamp),
    "fetch": Binding(of_component(actions.fetch)),
    "patch": Binding(of_component(actions.patch)),
    "options": Binding(of_component(optcheck.check_options), stamp=_no_stamp),
    "configure": Binding(of_component(actions.configure)),
    "compile": Binding(of_component(actions.compile)),
    "install": Binding(of_component(actions.install)),
}
