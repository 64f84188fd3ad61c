from __future__ import annotations

import io

from rich.console import Console

from rocbuild.cli.progress import LiveOutput, eta_seconds, format_eta, ninja_progress


def test_ninja_status_lines() -> None:
    assert ninja_progress("[1234/5678] Building CXX object lib/Foo.cpp.o") == (1234, 5678)
    assert ninja_progress("-- Configuring done") is None
    assert ninja_progress("[0/0] nothing") is None


def test_eta_uses_history_first_then_ninja_pace() -> None:
    assert eta_seconds(60, None, 600) == 540  # history: 10 min last time
    assert eta_seconds(60, 0.05, 600) == 540  # too early to trust the pace
    assert eta_seconds(60, 0.25, 600) == 180  # a quarter done in a minute: 3 more
    assert eta_seconds(60, None, None) is None
    assert format_eta(3 * 3600 + 120) == "ETA 3h02m" and format_eta(None) == "ETA ?"


def test_live_output_draws_a_bar_with_counts_and_eta() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100)
    live = LiveOutput(buffer, console=console)
    live.step_started("llvm", "compile", expected=1200.0)
    live.build_line("llvm", "compile", "[250/1000] Building CXX object X.o")
    live.progress.refresh()
    live.say("▶ a line above the bars")
    live.step_finished("llvm", "compile")
    text = buffer.getvalue()
    assert "llvm: compile" in text and "250/1000" in text and "ETA" in text
    assert "▶ a line above the bars" in text
    assert not live.progress.live.is_started  # stopped once nothing runs


def test_whole_run_eta_from_the_steps_still_to_run() -> None:
    from rocbuild.cli.progress import run_eta

    expected = {("a", "configure"): 60.0, ("a", "compile"): 600.0, ("b", "compile"): None}
    assert run_eta(expected, set(), {}) == 660.0
    assert run_eta(expected, {("a", "configure")}, {("a", "compile"): 100.0}) == 100.0
    assert run_eta({("b", "compile"): None}, set(), {}) is None
    assert format_eta(30) == "ETA 30s" and format_eta(90) == "ETA 1m"


def test_live_output_shows_the_whole_run_line() -> None:
    buffer = io.StringIO()
    live = LiveOutput(buffer, console=Console(file=buffer, force_terminal=True, width=120))
    live.run_planned({("a", "configure"): 60.0, ("a", "compile"): 3 * 3600.0,
                      ("b", "install"): 30.0})
    live.step_started("a", "configure", expected=60.0)
    live.progress.refresh()
    text = buffer.getvalue()
    assert "whole run" in text and "0/3 steps" in text
    assert "ETA 3h01m, done about " in text  # 59 s left of configure + 3 h + 30 s
    live.step_finished("a", "configure")


def test_plain_output_says_the_whole_runs_estimate_once() -> None:
    from rocbuild.cli.output import Output

    buffer = io.StringIO()
    Output(buffer).run_planned({("a", "compile"): 1800.0, ("b", "compile"): None})
    line = buffer.getvalue()
    assert "expected: 2 steps, about 30 min" in line and "done about " in line
