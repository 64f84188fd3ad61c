"""Issue 25: a run's up-to-date answers are kept until a step starts or ends (uptodate.Answers;
runner.py forgets them), so a no-op run does not walk every step's stamps, manifests and
checkout three times; and they are never kept across a step."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rocbuild.run.state.state import StateDir
from rocbuild.run.state.uptodate import Answers, Rule

COMP: Any = SimpleNamespace(name="alpha", fingerprint="f1")


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Each real evaluation of the rule (the walk of stamps and outputs)."""
    seen: list[tuple[str, str]] = []

    def evaluate(self: Rule, comp: Any, step: str) -> bool:
        seen.append((comp.name, step))
        return True

    monkeypatch.setattr(Rule, "_is_current", evaluate)
    return seen


def test_an_answer_is_kept_until_a_step_runs(tmp_path: Path,
                                              asked: list[tuple[str, str]]) -> None:
    answers = Answers()
    rule = Rule(stack=Any, state=StateDir(tmp_path), _answers=answers)  # type: ignore[arg-type]
    assert rule.is_current(COMP, "fetch") and rule.is_current(COMP, "fetch")
    assert asked == [("alpha", "fetch")]
    # another Rule of the run (the whole default set at the end) shares them
    other = Rule(stack=Any, state=StateDir(tmp_path), _answers=answers)  # type: ignore[arg-type]
    assert other.is_current(COMP, "fetch") and len(asked) == 1
    answers.forget()  # runner.py: a step started or ended
    rule.is_current(COMP, "fetch")
    assert len(asked) == 2


def test_another_recipe_of_the_same_component_is_another_question(
        tmp_path: Path, asked: list[tuple[str, str]]) -> None:
    rule = Rule(stack=Any, state=StateDir(tmp_path), _answers=Answers())  # type: ignore[arg-type]
    rule.is_current(COMP, "configure")
    rule.is_current(SimpleNamespace(name="alpha", fingerprint="f2"), "configure")
    assert len(asked) == 2


def test_an_answer_found_while_a_step_ended_is_not_kept(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    answers = Answers()
    calls: list[int] = []

    def evaluate(self: Rule, comp: Any, step: str) -> bool:
        calls.append(1)
        if len(calls) == 1:
            answers.forget()  # another thread's step ended while this one was reading
        return False

    monkeypatch.setattr(Rule, "_is_current", evaluate)
    rule = Rule(stack=Any, state=StateDir(tmp_path), _answers=answers)  # type: ignore[arg-type]
    rule.is_current(COMP, "compile")
    rule.is_current(COMP, "compile")
    rule.is_current(COMP, "compile")
    assert len(calls) == 2  # the first answer was dropped, the second kept


def test_without_answers_every_question_is_asked(tmp_path: Path,
                                                 asked: list[tuple[str, str]]) -> None:
    rule = Rule(stack=Any, state=StateDir(tmp_path))  # type: ignore[arg-type]
    rule.is_current(COMP, "install")
    rule.is_current(COMP, "install")
    assert len(asked) == 2
