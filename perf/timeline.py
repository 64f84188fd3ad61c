"""Where the job slots went: a timeline of one build, sampled from /proc, the same way for
builds by hand and through rocbuild (nothing in either is changed).

Each sample counts, per component, the jobs its ninja runs (ninja's child processes; the
component is the folder ninja runs in) and, where it runs none, its light step (``f`` git,
``c`` a configure, ``i`` an install); and the CPUs busy over the whole host (/proc/stat).

    python -m perf.timeline record --root DIR --out run.json -- COMMAND...
    python -m perf.timeline draw run.json [--svg run.svg] [--width 72]

perf/parallel.py records one for each build it compares and draws them side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PERIOD = 0.2  # seconds between samples: a compile job of ggml takes 0.5 to 15 s
LIGHT = {"git": "f", "cmake": "c"}  # a configure or (with --install) an install


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot."""
    with open("/proc/stat", "rb") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _processes() -> dict[int, tuple[str, int]]:
    """pid -> (command name, parent pid) of every process."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        head, _, tail = raw.rpartition(b")")
        comm = head.split(b"(", 1)[-1].decode(errors="replace")
        parts = tail.split()
        if len(parts) > 2:
            found[int(name)] = (comm, int(parts[1]))
    return found


def _component(pid: int, root: str, argv: list[str] | None = None) -> str | None:
    """The component a process works for: the last folder of the tree it names (cmake's -B,
    --build or --install, git's -C) or else of its working directory, when that lies under
    ``root`` (ninja runs in the build tree, git in the checkout)."""
    where = None
    for flag in ("-B", "--build", "--install", "-C"):
        if argv and flag in argv[:-1]:
            where = argv[argv.index(flag) + 1]
            break
    if where is None:
        try:
            where = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return None
    where = os.path.realpath(where) if not where.startswith("/") else where
    if not where.startswith(root):
        return None
    parts = Path(where[len(root):]).parts
    for i, part in enumerate(parts[:-1]):  # <...>/build/<name>/..., <...>/src/<name>
        if part in ("build", "src"):
            return parts[i + 1].removesuffix(".partial")
    return "cache" if "cache" in parts else (parts[-1] if parts else None)


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


@dataclass
class Sampler:
    """Samples every ``PERIOD`` seconds in a thread of its own while a build runs."""

    root: Path
    period: float = PERIOD
    samples: list[dict[str, object]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self, started: float, last: tuple[int, int]) -> tuple[int, int]:
        root = str(self.root.resolve())
        procs = _processes()
        jobs: dict[str, int] = {}
        light: dict[str, str] = {}
        ninjas = {}  # a build's ninja; a configure's (try_compile) counts as the configure
        for pid, (comm, _) in procs.items():
            if comm == "ninja":
                owner = _component(pid, root)
                if owner is not None and "/CMakeFiles/" in _cwd(pid):
                    light[owner] = "c"
                else:
                    ninjas[pid] = owner
        for _, ppid in procs.values():
            owner = ninjas.get(ppid)
            if owner:
                jobs[owner] = jobs.get(owner, 0) + 1
        for pid, (comm, ppid) in procs.items():
            letter = LIGHT.get(comm)
            if letter is None or procs.get(ppid, ("",))[0] in LIGHT:
                continue
            argv = _cmdline(pid)
            owner = _component(pid, root, argv)
            if owner is None:
                continue
            if comm == "cmake" and "--build" in argv:
                continue  # the compile: its ninja's jobs are counted
            if comm == "cmake" and "--install" in argv:
                letter = "i"
            light.setdefault(owner, letter)
        now = _cpu_ticks()
        busy = (now[0] - last[0]) / max(1, now[1] - last[1]) * (os.cpu_count() or 1)
        self.samples.append({"t": round(time.monotonic() - started, 3), "cpu": round(busy, 2),
                             "jobs": jobs, "light": light})
        return now

    def _run(self) -> None:
        started, last = time.monotonic(), _cpu_ticks()
        while not self._stop.wait(self.period):
            last = self.sample(started, last)

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def record(self, label: str) -> dict[str, object]:
        return {"label": label, "period": self.period, "samples": self.samples}


def digit(value: float) -> str:
    """0 as '.', 1-9, then a letter per ten more (a = 10-19, b = 20-29, ...)."""
    n = round(value)
    if n <= 0:
        return "."
    if n < 10:
        return str(n)
    return chr(ord("a") + min(n // 10 - 1, 25))


def summary(run: dict[str, object]) -> dict[str, float]:
    samples: list[dict] = run["samples"]  # type: ignore[assignment]
    if not samples:
        return {}
    jobs = [sum(s["jobs"].values()) for s in samples]
    cpu = [s["cpu"] for s in samples]
    first = next((s["t"] for s in samples if s["jobs"]), samples[-1]["t"])
    last = next((s["t"] for s in reversed(samples) if s["jobs"]), samples[-1]["t"])
    within = [c for s, c in zip(samples, cpu, strict=True) if first <= s["t"] <= last]
    return {"seconds": samples[-1]["t"], "cpus_busy": sum(cpu) / len(cpu),
            "jobs": sum(jobs) / len(jobs), "first_job": first, "last_job": last,
            "cpus_busy_compiling": sum(within) / max(1, len(within)),
            "peak_jobs": max(jobs)}


def draw(run: dict[str, object], width: int = 72, seconds: float | None = None) -> str:
    """A text timeline: a row per component (its jobs, or the letter of its light step), the
    jobs of all, and the CPUs busy; each column is the mean over its stretch of time."""
    samples: list[dict] = run["samples"]  # type: ignore[assignment]
    if not samples:
        return f"{run['label']}: no samples"
    total = seconds or samples[-1]["t"] or 1.0
    names = sorted({n for s in samples for n in (*s["jobs"], *s["light"])})
    cols: list[list[dict]] = [[] for _ in range(width)]
    for s in samples:
        cols[min(width - 1, int(s["t"] / total * width))].append(s)
    rows = []
    for name in names:
        line = ""
        for col in cols:
            if not col:
                line += " "
                continue
            jobs = sum(s["jobs"].get(name, 0) for s in col) / len(col)
            letters = [s["light"][name] for s in col if name in s["light"]]
            line += digit(jobs) if jobs >= 0.5 else (letters[0] if letters else ".")
        rows.append(f"  {name[:10]:>10} |{line}|")
    for label, value in (("all jobs", lambda s: sum(s["jobs"].values())),
                         ("CPUs busy", lambda s: s["cpu"])):
        line = "".join(digit(sum(value(s) for s in col) / len(col)) if col else " "
                       for col in cols)
        rows.append(f"  {label:>10} |{line}|")
    facts = summary(run)
    head = (f"{run['label']}: {facts['seconds']:.1f}s; {facts['cpus_busy']:.1f} CPUs busy on "
            f"average ({facts['cpus_busy_compiling']:.1f} from the first job to the last), "
            f"{facts['jobs']:.1f} jobs, at most {facts['peak_jobs']}; one column = "
            f"{total / width:.2f}s; digits: jobs (a = 10-19, b = 20-29, ...); f git, c "
            f"configure, i install")
    return "\n".join([head, *rows])


def svg(runs: list[dict[str, object]], cpus: int) -> str:
    """The runs one above the other: each component's jobs stacked, the CPUs busy a line."""
    width, height, gap = 900, 160, 40
    colors = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"]
    total = max((r["samples"][-1]["t"] for r in runs if r["samples"]), default=1.0)  # type: ignore[index]
    top = max([cpus] + [sum(s["jobs"].values()) for r in runs for s in r["samples"]])  # type: ignore[attr-defined]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + 120}" '
             f'height="{len(runs) * (height + gap) + gap}" font-family="sans-serif" '
             'font-size="12">']
    for i, run in enumerate(runs):
        y0 = gap + i * (height + gap)
        samples: list[dict] = run["samples"]  # type: ignore[assignment]
        names = sorted({n for s in samples for n in s["jobs"]})
        x = [s["t"] / total * width for s in samples]
        base = [0.0] * len(samples)
        parts.append(f'<text x="0" y="{y0 - 6}">{run["label"]}</text>')
        for k, name in enumerate(names):
            upper = [b + s["jobs"].get(name, 0) for b, s in zip(base, samples, strict=True)]
            points = [f"{xx:.1f},{y0 + height - u / top * height:.1f}"
                      for xx, u in zip(x, upper, strict=True)]
            points += [f"{xx:.1f},{y0 + height - b / top * height:.1f}"
                       for xx, b in reversed(list(zip(x, base, strict=True)))]
            parts.append(f'<polygon points="{" ".join(points)}" fill="{colors[k % len(colors)]}" '
                         f'opacity="0.8"><title>{name}</title></polygon>')
            base = upper
        line = " ".join(f"{xx:.1f},{y0 + height - s['cpu'] / top * height:.1f}"
                        for xx, s in zip(x, samples, strict=True))
        parts.append(f'<polyline points="{line}" fill="none" stroke="black" stroke-width="1"/>')
        cores = y0 + height - cpus / top * height
        parts.append(f'<line x1="0" x2="{width}" y1="{cores:.1f}" y2="{cores:.1f}" '
                     'stroke="grey" stroke-dasharray="4"/>')
        parts.append(f'<text x="{width + 6}" y="{cores + 4:.1f}">{cpus} CPUs</text>')
        parts.append(f'<rect x="0" y="{y0}" width="{width}" height="{height}" fill="none" '
                     'stroke="#ccc"/>')
    parts.append("</svg>")
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run a command and sample it")
    rec.add_argument("--root", type=Path, required=True,
                     help="the folder the builds run in (their workdir or build folders)")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--label", default="")
    rec.add_argument("argv", nargs=argparse.REMAINDER)
    show = sub.add_parser("draw", help="draw recorded timelines")
    show.add_argument("runs", type=Path, nargs="+")
    show.add_argument("--width", type=int, default=72)
    show.add_argument("--svg", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        with Sampler(args.root) as sampler:
            code = subprocess.call(argv)
        args.out.write_text(json.dumps(sampler.record(args.label or " ".join(argv)[:60])))
        return code
    runs = [json.loads(p.read_text()) for p in args.runs]
    for run in runs:
        print(draw(run, args.width))
    if args.svg:
        args.svg.write_text(svg(runs, os.cpu_count() or 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
