"""The step table (model/steptable.py) is the one declaration of step kinds: every kind has
its run-side binding, every binding a kind, every stamped component step its own facts and
output check in the up-to-date rule, and a name the table does not declare is an error, never
a fall-through to another step's inputs or a guess at what dependents are built against."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.model import steptable
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from rocbuild.model.steptable import CHECK, RUN, SHORTCUT, STEP, STEPS, UnknownStep
from rocbuild.run.engine import stepbind
from rocbuild.run.state import uptodate
from rocbuild.run.state.state import StateDir
from rocbuild.run.state.uptodate import Rule
from tests.conftest import RecipeWriter


def test_every_declared_step_has_an_action_and_every_action_a_declaration() -> None:
    declared = {k.name for k in STEPS}
    assert set(stepbind.BINDINGS) == declared
    for kind in STEPS:
        binding = stepbind.BINDINGS[kind.name]
        assert callable(binding.action)
        if kind.who == RUN:  # the up-to-date rule judges component steps only
            assert binding.current is not None, f"{kind.name} needs its own current check"


def test_every_stamped_component_step_has_its_facts_and_a_known_output() -> None:
    chained = {k.name for k in steptable.chained()}
    assert chained == {"fetch", "patch", "configure", "compile", "install"}
    assert set(uptodate.FACTS) == chained
    for kind in steptable.chained():
        assert kind.output in (None, *uptodate.OUTPUTS), kind.name
        assert bool(kind.output) == bool(kind.missing), f"{kind.name}: say what is missing"
        for source in kind.inputs:
            assert source.of == steptable.DEPENDENCIES or source.step in chained, source


def test_roles_are_consistent() -> None:
    for kind in STEPS:
        assert kind.role in (STEP, CHECK, SHORTCUT)
        if kind.role == CHECK:
            assert kind.gates in steptable.BY_NAME and kind.current_with in steptable.BY_NAME
        if kind.who == RUN:
            assert kind.record is not None and kind.title, kind.name
    # what a source-only component's users see (patch) and a built one's (install)
    assert [k.name for k in STEPS if k.dependents_see] == ["patch", "install"]
    assert [k.name for k in STEPS if k.source] == ["fetch", "patch"]


def _stack(tmp_path: Path, write_recipes: RecipeWriter):  # type: ignore[no-untyped-def]
    folder = write_recipes(
        lib="""
            [source]
            git = "https://example.invalid/lib.git"
            ref = "v1"
            [cmake]
            """,
        headers="""
            kind = "source-only"
            [source]
            git = "https://example.invalid/headers.git"
            ref = "v1"
            """,
        part="""
            depends = ["lib"]
            [source]
            from = "headers"
            [cmake]
            """)
    settings = resolve({"recipes": str(folder), "workdir": str(tmp_path / "w"),
                        "prefix": str(tmp_path / "p")})
    return load_stack(settings, ["lib", "headers", "part"])


def test_steps_and_what_dependents_see_come_from_the_table(
        tmp_path: Path, write_recipes: RecipeWriter) -> None:
    stack = _stack(tmp_path, write_recipes)
    lib, headers, part = (stack.components[n] for n in ("lib", "headers", "part"))
    assert steptable.steps_of(lib) == ("fetch", "patch", "configure", "compile", "install")
    assert steptable.steps_of(headers) == ("fetch", "patch")
    assert steptable.steps_of(part) == ("configure", "compile", "install")  # reused checkout
    rule = Rule(stack, StateDir.of(stack))
    assert rule.final_step(lib) == ("lib", "install")
    assert rule.final_step(headers) == ("headers", "patch")
    assert rule.input_steps(part, "configure") == [("headers", "patch"), ("lib", "install")]
    assert rule.input_steps(lib, "install") == [("lib", "compile")]
    # every step with a log, for `rocbuild logs`: the checks and the run-wide venv too
    assert [k.name for k in steptable.with_logs(lib)] == [
        "python-venv", "cache", "fetch", "patch", "options", "configure", "compile", "install"]
    assert steptable.log_path(stack.work, "lib", "python-venv") == \
        stack.workdir / "logs" / "_python" / "venv.log"


@pytest.mark.parametrize("step", ["test", "options", "python-venv"])
def test_a_step_the_rule_does_not_know_is_an_error_not_a_guess(
        tmp_path: Path, write_recipes: RecipeWriter, step: str) -> None:
    stack = _stack(tmp_path, write_recipes)
    rule = Rule(stack, StateDir.of(stack))
    lib = stack.components["lib"]
    with pytest.raises(UnknownStep, match=f"'{step}'"):
        rule.expected_inputs(lib, step)
    with pytest.raises(UnknownStep):
        rule.input_steps(lib, step)
    with pytest.raises(UnknownStep):
        rule.is_current(lib, step)
    with pytest.raises(UnknownStep, match=r"model/steptable\.py"):
        steptable.kind("no-such-step")


def test_the_axes_cannot_be_mixed() -> None:
    """Who, where an output lives and whose run an input is were three strings "checkout":
    one given for another passed. Each axis is an Enum now, so they never compare equal, and
    each role has a constructor taking only its own fields."""
    assert steptable.CHECKOUT != steptable.IN_CHECKOUT != steptable.OF_CHECKOUT
    assert steptable.CHECKOUT != steptable.OF_CHECKOUT
    for kind in STEPS:
        assert isinstance(kind.who, steptable.Who) and isinstance(kind.role, steptable.Role)
        assert kind.output is None or isinstance(kind.output, steptable.Where)
        assert all(isinstance(i.of, steptable.Of) for i in kind.inputs)
    with pytest.raises(TypeError):
        steptable.check("x", "x", steptable.Who.BUILD, gates="configure",  # type: ignore[call-arg]
                        current_with="configure", output=steptable.Where.TREE)
