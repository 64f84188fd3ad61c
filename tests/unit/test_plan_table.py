"""`rocbuild plan` at 80 columns: one line per component, the long reasons under the table."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from rocbuild.cli import cmd_plan, plan_table, ui
from rocbuild.cli.main import main
from rocbuild.model.graph import load_stack
from rocbuild.model.plan import build_plan
from rocbuild.model.resources import GIB, HostSnapshot
from rocbuild.model.settings import resolve
from rocbuild.run.state.state import StateDir
from rocbuild.run.state.uptodate import Rule
from tests.cli import too_wide


def host(cpus: int, mem_gib: float) -> HostSnapshot:
    return HostSnapshot(cpus=cpus, cpu_reason=f"{cpus} CPUs", mem_available=int(mem_gib * GIB),
                        swap_free=8 * GIB, mem_reason="test")


def render(tmp_path: Path, snapshot: HostSnapshot, *, width: int = 80, why: bool = False,
           flags: dict[str, str] | None = None) -> tuple[str, list[str]]:
    settings = resolve({"workdir": str(tmp_path / "wd"), **(flags or {})}, env={},
                       cwd=tmp_path)
    stack = load_stack(settings)  # the shipped recipes: the real 18 components
    plan = build_plan(stack, settings, snapshot)
    rule = Rule(stack, StateDir.of(stack))
    buffer = io.StringIO()
    out = Console(file=buffer, width=width, highlight=False, color_system=None)
    ui.print_plan(plan, out)
    plan_table.print_table(plan, out, cmd_plan.expected_seconds(rule, snapshot.cpus), why=why)
    return buffer.getvalue(), [p.name for p in plan.components]


@pytest.mark.parametrize("snapshot", [host(2, 4), host(64, 256), host(16, 32)])
def test_plan_fits_80_columns_one_row_per_component(tmp_path: Path,
                                                    snapshot: HostSnapshot) -> None:
    text, names = render(tmp_path, snapshot)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert len(names) >= 14
    for name in names:  # each component on exactly one line, whole (never cut or wrapped)
        rows = [line for line in lines if line.split(" ", 1)[0] == name]
        assert len(rows) == 1, (name, rows)
        assert "…" not in rows[0]
    header = next(i for i, line in enumerate(lines) if line.startswith("component"))
    body = lines[header + 2: header + 2 + len(names)]
    assert [line.split()[0] for line in body] == names  # consecutive rows, build order
    llvm = next(line for line in body if line.startswith("llvm "))
    assert "in llvm-project" in llvm and "link" in llvm and "GiB" in llvm
    assert llvm.split()[-3] != "-"  # the recipe's CPU-hours give an estimate
    assert "reserve" not in "\n".join(body)  # the arithmetic is not in the table


def test_jobs_setting_reads_auto_and_why_shows_the_arithmetic(tmp_path: Path) -> None:
    text, _ = render(tmp_path, host(8, 16))
    jobs_line = next(line for line in text.splitlines() if line.strip().startswith("jobs "))
    assert "auto" in jobs_line and "None" not in jobs_line
    assert "reserve" not in text
    why, names = render(tmp_path, host(8, 16), why=True)
    assert max(len(line) for line in why.splitlines()) <= 80
    assert why.count("reserve") >= len(names) - 3  # every built component explains its jobs
    assert "llvm — depends on llvm-project" in why
    capped, _ = render(tmp_path, host(8, 16), flags={"jobs": "3"})
    assert "3" in next(line for line in capped.splitlines() if line.strip().startswith("jobs "))


def test_time_column_uses_this_hosts_history(tmp_path: Path) -> None:
    from rocbuild.run.state.state import StateDir

    StateDir.shared(tmp_path / "wd").write_stamp("hipblas", "compile", "x", seconds=7 * 3600 + 60)
    text, _ = render(tmp_path, host(8, 16))
    row = next(line for line in text.splitlines() if line.startswith("hipblas "))
    assert "7h01m" in row


def test_cli_plan_honours_columns_in_a_pipe(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["plan", "--target", "gfx906"]) == 0
    out = capsys.readouterr().out
    assert too_wide(out, 80) == []
    assert sum(1 for line in out.splitlines() if line.startswith("rocblas ")) == 1


def test_estimates_read_the_cold_time_then_every_attempt(tmp_path: Path) -> None:
    """A step's estimate is its last cold run (a compile ccache served in a moment does not
    lower it), over every attempt of that run (not the last one only)."""
    from rocbuild.run.engine.outcome import expected_seconds

    settings = resolve({"workdir": str(tmp_path / "wd")}, env={}, cwd=tmp_path)
    stack = load_stack(settings, ["rocblas"])
    state = StateDir.of(stack)
    comp = stack.components["rocblas"]
    state.write_stamp("rocblas", "compile", "f", seconds=10.0, attempts_seconds=4200.0,
                      cold_seconds=4200.0)
    assert expected_seconds(state, comp, "compile", 2) == 4200.0
    state.write_stamp("rocblas", "compile", "f", seconds=1380.0, attempts_seconds=4200.0)
    assert expected_seconds(state, comp, "compile", 2) == 4200.0
    state.write_stamp("rocblas", "compile", "f", seconds=1380.0)  # an older rocbuild's stamp
    assert expected_seconds(state, comp, "compile", 2) == 1380.0
