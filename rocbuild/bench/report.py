"""The result on the terminal (rich, fits 80 columns), as CSV, and the JSON document."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rocbuild.bench import stats
from rocbuild.bench.host import POWER_FILE
from rocbuild.bench.runner import OK, BackendRun
from rocbuild.bench.session import BenchResult
from rocbuild.bench.stats import tokens_text
from rocbuild.checks.gpu import format_speed
from rocbuild.model.resources import format_bytes


def _gts(speed: float | None) -> str:
    return f"{speed:g} GT/s" if speed else "unknown"


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1 << 10 else format_bytes(n)


def _record_lines(result: BenchResult) -> Iterator[str]:
    m, h, s = result.model, result.host, result.settings
    yield f"model    {escape(m.name or m.path.name)} ({escape(m.quant or '?')}, {_size(m.size)})"
    extra = "".join([f" -b {s.batch}" if s.batch else "", f" -ub {s.ubatch}" if s.ubatch else "",
                     f" -d {s.depth}" if s.depth else ""])
    yield (f"settings pp{s.prompt} tg{s.gen} -ngl {s.ngl} -fa {int(s.flash_attn)}{extra}; "
           f"median of {s.repetitions} (+1 warm-up dropped)")
    for facts in h.gpus:
        g = facts.gpu
        vram = f", {format_bytes(g.vram)}" if g.vram else ""
        yield f"gpu      {escape(g.name)} ({g.gfx or '?'}{vram})"
        yield f"power    {escape(facts.power_level or 'unknown')} ({POWER_FILE})"
        if g.link is not None:
            load = (f", {_gts(result.link_under_load)} under load"
                    if result.link_under_load else "")
            yield (f"pcie     {_gts(g.link.speed)} x{g.link.width or '?'} idle{load}; max "
                   f"{format_speed(g.link.expected_speed, g.link.expected_width)}")
    if not h.gpus:
        yield "gpu      none found (no AMD GPU with a loaded driver)"
    yield f"rocm     {escape(h.rocm_version or '?')} (kernel {escape(h.kernel or '?')})"
    for name, version in h.llama_cpp.items() or [("llama.cpp", "unknown (no build-info)")]:
        yield f"{name:<16} {escape(version)}"
    tuning = ", ".join(f"{k}={v}" for k, v in h.variables.items()) or "none set"
    yield f"env      {escape(tuning)}"


def _published_cell(result: BenchResult, run: BackendRun, test: str) -> str:
    ref = result.published_for(run, test)
    return tokens_text(ref.tokens_per_s) if ref else "-"


def print_report(result: BenchResult, out: Console) -> None:
    out.print("[bold]rocbuild bench[/]")
    for line in _record_lines(result):
        out.print(line, overflow="fold")
    for backend in result.skipped:
        out.print(f"[yellow]{backend}: not run, no GPU found[/]")
    table = Table(title_justify="left", pad_edge=False)
    for name, justify in (("run", "left"), ("test", "left"), ("t/s", "right"),
                          ("min-max", "right"), ("±%", "right"), ("n", "right"),
                          ("MI50 pub.", "right")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    any_published = False
    for run in result.runs:
        if run.status != OK:
            table.add_row(escape(run.spec.label), "-", f"[red]{escape(run.status)}[/]", "", "",
                          "", "")
            continue
        for test in run.tests:
            s = test.summary
            cell = _published_cell(result, run, test.name)
            any_published |= cell != "-"
            if s is None:
                table.add_row(escape(run.spec.label), test.name, "too few", "", "", "0", cell)
                continue
            table.add_row(escape(run.spec.label), test.name, tokens_text(s.median),
                          f"{tokens_text(s.low)}-{tokens_text(s.high)}",
                          f"{s.spread_pct / 2:.1f}", str(s.n),
                          cell)
    out.print(table)
    for run in result.runs:
        if run.status == OK and run.device is not None and run.device.devices:
            out.print(f"  {escape(run.spec.label)} ran on "
                      f"{escape(run.device.devices[0].name)}", overflow="fold")
        elif run.status != OK:
            out.print(f"  [red]{escape(run.spec.label)}: {escape(run.detail)}[/]",
                      overflow="fold")
    if any_published:
        ref = next(r for r in (result.published_for(run, t.name) for run in result.runs
                               for t in run.tests) if r)
        out.print(f"  MI50 pub.: {ref.setup}; source: {ref.source}")
    for verdict in result.verdicts:
        style = {"helped": "green", "hurt": "red"}.get(verdict.verdict, "dim")
        out.print(f"  tune {escape(verdict.variant)} {verdict.test}: "
                  f"[{style}]{verdict.verdict}[/] ({verdict.change_pct:+.1f}% median)")
    for warning in result.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning.text)}", overflow="fold")
        out.print(f"  fix: {escape(warning.fix)}", overflow="fold")


CSV_FIELDS = ("backend", "variant", "status", "device", "test", "median_ts", "min_ts",
              "max_ts", "n", "samples_ts", "published_ts", "model", "quant", "n_gpu_layers",
              "flash_attn", "n_batch", "n_ubatch", "n_depth", "gpu", "power_level")


def csv_rows(result: BenchResult) -> Iterator[dict[str, Any]]:
    gpu = result.host.gpu
    common = {"model": result.model.path.name, "quant": result.model.quant or "",
              "gpu": gpu.gpu.name if gpu else "", "power_level": gpu.power_level or ""
              if gpu else ""}
    for run in result.runs:
        device = run.device.devices[0].name if run.device and run.device.devices else ""
        base = {**common, "backend": run.spec.backend, "variant": run.spec.variant,
                "status": run.status, "device": device}
        if not run.tests:
            yield base
        for test in run.tests:
            s: stats.Summary | None = test.summary
            ref = result.published_for(run, test.name)
            yield {**base, "test": test.name,
                   "median_ts": s.median if s else "", "min_ts": s.low if s else "",
                   "max_ts": s.high if s else "", "n": s.n if s else 0,
                   "samples_ts": ";".join(f"{v:g}" for v in s.samples) if s else "",
                   "published_ts": ref.tokens_per_s if ref else "",
                   **{k: test.meta.get(k, "") for k in ("n_gpu_layers", "flash_attn",
                                                         "n_batch", "n_ubatch", "n_depth")}}


def to_csv(result: BenchResult) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, restval="", lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(result):
        writer.writerow(row)
    return buffer.getvalue()
