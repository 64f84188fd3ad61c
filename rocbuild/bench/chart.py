"""The chart: tokens/s per run and test, the bar at the median and a whisker from the lowest
to the highest kept repetition, a published figure as a marked line. Plain SVG written here:
a few rectangles and lines do not need matplotlib (and its numpy, fonts and backends)."""

from __future__ import annotations

from xml.sax.saxutils import escape

from rocbuild.bench.runner import OK
from rocbuild.bench.session import BenchResult
from rocbuild.bench.stats import tokens_text

WIDTH = 720
LABEL_W = 170
ROW_H = 26
BAR_H = 16
PANEL_GAP = 18
COLOURS = {"hip": "#c0392b", "vulkan": "#2e86c1", "cpu": "#7f8c8d"}


def render_svg(result: BenchResult, note: str | None = None) -> str:
    """The chart; ``note`` is a line under the title (the README sample says it is a replay)."""
    tests: dict[str, list[tuple[str, str, float, float, float, float | None]]] = {}
    for run in result.runs:
        if run.status != OK:
            continue
        for test in run.tests:
            if test.summary is None:
                continue
            published = result.published_for(run, test.name)
            s = test.summary
            tests.setdefault(test.name, []).append(
                (run.spec.label, run.spec.backend, s.median, s.low, s.high,
                 published.tokens_per_s if published else None))
    plot_w = WIDTH - LABEL_W - 90
    parts: list[str] = []
    y = 44
    heading = (f"llama-bench {result.model.path.name}: tokens/s, median of the repetitions "
               "(whisker: min-max)")
    parts.append(f'<text x="12" y="24" font-size="15" font-weight="bold">{escape(heading)}'
                 "</text>")
    if note:
        parts.append(f'<text x="12" y="42" font-size="12" fill="#b03a2e">{escape(note)}</text>')
        y += 14
    any_published = False
    for name, rows in tests.items():
        top = max(max(high, ref or 0.0) for _, _, _, _, high, ref in rows) * 1.08 or 1.0
        parts.append(f'<text x="12" y="{y + 14}" font-size="13" font-weight="bold">'
                     f"{escape(name)}</text>")
        y += 22
        for label, backend, median, low, high, ref in rows:
            def x(value: float) -> float:
                return LABEL_W + plot_w * value / top  # noqa: B023 - used in this iteration

            colour = COLOURS.get(backend, "#555")
            mid = y + BAR_H / 2
            parts += [
                f'<text x="{LABEL_W - 8}" y="{mid + 4:.1f}" font-size="12" '
                f'text-anchor="end">{escape(label)}</text>',
                f'<rect x="{LABEL_W}" y="{y}" width="{x(median) - LABEL_W:.1f}" '
                f'height="{BAR_H}" fill="{colour}"/>',
                f'<line x1="{x(low):.1f}" y1="{mid:.1f}" x2="{x(high):.1f}" y2="{mid:.1f}" '
                'stroke="#222" stroke-width="1.5"/>',
                f'<line x1="{x(low):.1f}" y1="{y + 3}" x2="{x(low):.1f}" y2="{y + BAR_H - 3}" '
                'stroke="#222" stroke-width="1.5"/>',
                f'<line x1="{x(high):.1f}" y1="{y + 3}" x2="{x(high):.1f}" '
                f'y2="{y + BAR_H - 3}" stroke="#222" stroke-width="1.5"/>',
                f'<text x="{max(x(high), x(ref or 0)) + 6:.1f}" y="{mid + 4:.1f}" '
                f'font-size="12">{tokens_text(median)}</text>',
            ]
            if ref is not None:
                any_published = True
                parts.append(f'<line x1="{x(ref):.1f}" y1="{y - 3}" x2="{x(ref):.1f}" '
                             f'y2="{y + BAR_H + 3}" stroke="#e67e22" stroke-width="2.5" '
                             'stroke-dasharray="4 2"><title>published MI50: '
                             f"{tokens_text(ref)} t/s</title></line>")
            y += ROW_H
        y += PANEL_GAP
    if not tests:
        parts.append(f'<text x="12" y="{y + 14}" font-size="13">no figures: no run gave a '
                     "result</text>")
        y += 30
    for run in result.runs:
        if run.status != OK:
            parts.append(f'<text x="12" y="{y}" font-size="11">not shown: '
                         f"{escape(run.spec.label)}: {escape(run.status)}</text>")
            y += 16
    if any_published:
        source = next(r for r in (result.published_for(run, t.name) for run in result.runs
                                  for t in run.tests) if r)
        parts.append(f'<line x1="12" y1="{y}" x2="32" y2="{y}" stroke="#e67e22" '
                     'stroke-width="2.5" stroke-dasharray="4 2"/>')
        parts.append(f'<text x="38" y="{y + 4}" font-size="11">published MI50 figure '
                     f"({escape(source.setup)}; {escape(source.source)})</text>")
        y += 20
    height = y + 8
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">\n'
            f'<rect width="{WIDTH}" height="{height}" fill="white"/>\n'
            + "\n".join(parts) + "\n</svg>\n")
