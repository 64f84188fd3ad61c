"""Many components at once against the same commands typed by hand, in one session, with the
machine's load printed beside every figure:

- four independent ggml components, cold, by hand one after another (ninja's default jobs)
  and by hand **all four started at once**; through rocbuild with ``--parallel auto`` (the
  default) and with ``--parallel 1``;
- one ggml, cold, by hand with ``cmake --build --parallel N`` and through rocbuild with
  ``--jobs N`` (N = this host's CPUs).

Goals: four with auto <= 0.9x all at once by hand (the floor is the four builds' CPU time over
the CPUs, about 0.35x one after another); --parallel 1 <= 1.03x one after another by hand;
one <= 1.03x by hand at the same jobs; rocbuild's CPU time within 3% of by hand's.

With ``--before DIR`` (a folder holding another rocbuild's ``rocbuild`` package, e.g. main's)
every rocbuild figure is also taken with that one, in the same session: before and after.
Every build is sampled for a timeline of its job slots (perf/timeline.py), drawn for the four
at once; ``--out DIR`` keeps them (JSON, one SVG). CPU time is split by what spent it: by
hand per command, through rocbuild per child (perf/cpuwrap.py) and rocbuild's own.

    python -m perf.parallel --source ggml.git            # a git repository of ggml
    python -m perf.parallel --source-tar ggml-src.tar.gz # a tarball of a ggml folder
    python -m perf.parallel ... [--runs 1] [--before DIR] [--out DIR] [--skip-one]

perf/bigmachine.sh runs it on a machine without network from the wheels in perf/wheels/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perf import fixedcost, ggml, timeline

NAMES = ("ggml-a", "ggml-b", "ggml-c", "ggml-d")
REPO = Path(__file__).resolve().parents[1]


def repo_from_tar(tar: Path, into: Path) -> Path:
    """A git repository of the ggml folder inside ``tar`` (one commit)."""
    into.mkdir(parents=True)
    with tarfile.open(tar) as archive:
        if sys.version_info >= (3, 12):
            archive.extractall(into, filter="data")
        else:  # our own tarball
            archive.extractall(into)
    top = next(p for p in into.iterdir() if p.is_dir())
    ident = ["-c", "user.name=perf", "-c", "user.email=perf@localhost"]
    for argv in (["init", "-q", "-b", "main"], [*ident, "add", "-A"],
                 [*ident, "commit", "-qm", "ggml"]):
        subprocess.run(["git", "-C", str(top), *argv], check=True)
    return top


def write_recipes(recipes: Path, names: Sequence[str]) -> None:
    recipes.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f'"{n}"' for n in names)
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n'
        f"components = [{listed}]\n")
    for name in names:  # the same repository for every one: one source cache, four checkouts
        (recipes / f"{name}.toml").write_text(ggml.recipe(own_folders(name)))


def own_folders(name: str) -> list[str]:
    """Install folders of the component's own (as llama.cpp-vulkan's recipe does): the four
    would otherwise install the same files into one prefix, which rocbuild refuses."""
    return [f"-DCMAKE_INSTALL_{kind}DIR={name}/{kind.lower()}"
            for kind in ("BIN", "LIB", "INCLUDE")]


@dataclass
class Cpu:
    """CPU seconds by what spent them (git, configure, compile, install, rocbuild, ...)."""

    split: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, what: str, seconds: float) -> None:
        with self.lock:
            self.split[what] = self.split.get(what, 0.0) + seconds

    def text(self) -> str:
        order = ("compile", "configure", "git", "install", "rocbuild", "watchdog", "other")
        return ", ".join(f"{k} {self.split[k]:.1f}" for k in order if self.split.get(k))


def run_counted(argv: list[str], cpu: Cpu, what: str, env: dict[str, str]) -> None:
    """``argv`` to its end (failing loudly), its CPU time (with its children) into ``cpu``."""
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    cpu.add(what, usage.ru_utime + usage.ru_stime)
    if child.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({child.returncode}): {' '.join(argv)}")


def hand_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CCACHE_")
            and k not in ("MAKEFLAGS", "CMAKE_BUILD_PARALLEL_LEVEL")}


def one_by_hand(served: Path, name: str, root: Path, jobs: int | None, cpu: Cpu) -> None:
    """git, cmake, ninja and cmake --install for one component."""
    src, build, prefix = root / "src" / name, root / "build" / name, root / "prefix"
    parallel = ["--parallel", str(jobs)] if jobs else []
    env = hand_env()
    for what, argv in (
            ("git", ["git", "init", "-q", str(src)]),
            ("git", ["git", "-C", str(src), "fetch", "-q", "--depth", "1", "--no-tags",
                     served.as_uri(), ggml.TAG]),
            ("git", ["git", "-C", str(src), "checkout", "-q", "--detach", "FETCH_HEAD"]),
            ("configure", ["cmake", "-G", "Ninja", "-S", str(src), "-B", str(build),
                           "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_INSTALL_PREFIX={prefix}",
                           *ggml.BASE_ARGS, *own_folders(name)]),
            ("compile", ["cmake", "--build", str(build), *parallel]),
            ("install", ["cmake", "--install", str(build)])):
        run_counted(argv, cpu, what, env)


def by_hand(served: Path, names: Sequence[str], root: Path, jobs: int | None, cpu: Cpu, *,
            at_once: bool) -> str:
    """Each component's commands; the components one after another, or all started at once
    (as a user who opens a terminal per build)."""
    if not at_once:
        for name in names:
            one_by_hand(served, name, root, jobs, cpu)
        return ""
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            one_by_hand(served, name, root, jobs, cpu)
        except BaseException as exc:  # raised after the join
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return ""


@dataclass(frozen=True)
class Tool:
    """A rocbuild to measure: its label and the folder holding its ``rocbuild`` package."""

    label: str
    package_root: Path


def through_rocbuild(tool: Tool, recipes: Path, repos: Path, root: Path, names: Sequence[str],
                     extra: Sequence[str], pycache: Path, cpu: Cpu) -> str:
    """``rocbuild build NAMES`` (through perf/cpuwrap.py); the lines that say how it ran them."""
    argv = [sys.executable, "-m", "perf.cpuwrap", "build", "--no-verify", "--ccache", "off",
            *names, *ggml.flags(recipes, root / "work", root / "prefix", repos), *extra]
    split = root / "cpu.json"
    env = ggml.bytecode_env(ggml.rocbuild_env(), pycache)
    # the tool's rocbuild first, then this checkout's perf (and the caller's PYTHONPATH)
    env["PYTHONPATH"] = os.pathsep.join([str(tool.package_root), env["PYTHONPATH"]])
    env["PERF_CPU_OUT"] = str(split)
    # run from the build's own folder: `-m` puts the working folder first on sys.path, and
    # this checkout's rocbuild must not shadow the tool's
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=root)
    if done.returncode != 0:
        raise SystemExit(f"rocbuild ({tool.label}) failed ({done.returncode}):\n"
                         f"{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    if split.exists():
        found = json.loads(split.read_text())
        cpu.add("rocbuild", found["rocbuild"])
        for what, seconds in found["children"].items():
            cpu.add(what, seconds)
    said = [line.split(" ", 1)[-1] for line in done.stdout.splitlines()
            if re.search(r"--parallel auto:|job pool:", line)]
    return "; ".join(said)[:300]


@dataclass
class Measured:
    wall: float
    cpu: float
    split: Cpu
    run: dict[str, object]
    said: str


def measure(label: str, root: Path, fn: Callable[[Cpu], str]) -> Measured:
    """Wall time, CPU time of every process waited for (RUSAGE_CHILDREN) and its split, and
    a timeline of ``fn``'s build under ``root``."""
    root.mkdir(parents=True)
    cpu = Cpu()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with timeline.Sampler(root) as sampler:
        started = time.perf_counter()
        said = fn(cpu)
        wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Measured(wall, total, cpu, sampler.record(label), said)


@dataclass
class Session:
    base: Path
    served: Path
    recipes: Path
    repos: Path
    pycache: Path
    cpus: int
    out: Path | None
    results: dict[str, list[Measured]] = field(default_factory=dict)
    timelines: list[dict[str, object]] = field(default_factory=list)
    count: int = 0

    def run(self, key: str, label: str, fn: Callable[[Path, Cpu], str]) -> None:
        self.count += 1
        root = self.base / f"m{self.count}"
        got = measure(label, root, lambda cpu: fn(root, cpu))
        shutil.rmtree(root, ignore_errors=True)
        self.results.setdefault(key, []).append(got)
        self.timelines.append(got.run)
        print(f"  {label:<44} {got.wall:7.2f}s wall {got.cpu:7.1f} CPU-s ({got.split.text()})"
              f"  {ggml.load()}" + (f"\n      {got.said}" if got.said else ""), flush=True)

    def wall(self, key: str) -> float | None:
        got = self.results.get(key)
        return statistics.median(m.wall for m in got) if got else None

    def cpu(self, key: str) -> float | None:
        got = self.results.get(key)
        return statistics.median(m.cpu for m in got) if got else None


def ratio(session: Session, tool: str, base: str) -> float | None:
    a, b = session.wall(tool), session.wall(base)
    return a / b if a is not None and b else None


def figures(session: Session, tools: Sequence[Tool]) -> list[str]:
    """The goals' lines: each rocbuild (before, after) against its by-hand baseline."""
    rows = []
    goals = (("four, --parallel auto vs all four at once by hand", "auto", "hand-once", 0.9),
             ("four, --parallel auto vs one after another by hand", "auto", "hand-seq", None),
             ("four, --parallel 1 vs one after another by hand", "p1", "hand-seq", 1.03),
             (f"one, --jobs {session.cpus} vs by hand at {session.cpus} jobs", "one",
              "hand-one", 1.03))
    for text, kind, base, goal in goals:
        parts = []
        for tool in tools:
            r = ratio(session, f"{kind}-{tool.label}", base)
            if r is not None:
                parts.append(f"{tool.label} {r:.3f}")
        if parts:
            met = ""
            if goal is not None:
                last = ratio(session, f"{kind}-{tools[-1].label}", base)
                met = (f" (goal <= {goal}: "
                       f"{'met' if last is not None and last <= goal else 'NOT met'})")
            rows.append(f"{text}: {', '.join(parts)}{met}")
    for kind, base, text in (("auto", "hand-once", "four at once"),
                             ("p1", "hand-seq", "four one after another"),
                             ("one", "hand-one", "one")):
        parts = []
        for tool in tools:
            a, b = session.cpu(f"{kind}-{tool.label}"), session.cpu(base)
            if a is not None and b:
                parts.append(f"{tool.label} {(a / b - 1) * 100:+.1f}%")
        if parts:
            rows.append(f"CPU time, rocbuild vs by hand ({text}): {', '.join(parts)} "
                        "(goal: within 3%)")
    hand_seq, hand_cpu = session.wall("hand-seq"), session.cpu("hand-seq")
    if hand_seq and hand_cpu:
        floor = hand_cpu / session.cpus
        rows.append(f"floor: the four builds' CPU time over the CPUs = {floor:.1f}s = "
                    f"{floor / hand_seq:.2f}x one after another by hand")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="a git repository of ggml")
    parser.add_argument("--source-tar", type=Path, help="a .tar.gz holding a ggml folder")
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--before", type=Path,
                        help="a folder holding the rocbuild package to compare with")
    parser.add_argument("--out", type=Path, help="keep the timelines here (JSON, SVG)")
    parser.add_argument("--reverse", action="store_true",
                        help="the first round in reverse order (a repeat on another machine "
                             "balances the drift of a long session)")
    parser.add_argument("--warmup", action="store_true",
                        help="one ggml by hand first, not measured: a cold machine gives its "
                             "first build more CPU per second (seen: 77 CPU-s per ggml first, "
                             "up to 94 later)")
    parser.add_argument("--only", default="",
                        help="only these figures (comma-separated: hand-seq, p1, hand-once, "
                             "auto, hand-one, one)")
    parser.add_argument("--skip-one", action="store_true", help="only the four components")
    parser.add_argument("--skip-four", action="store_true", help="only the one component")
    args = parser.parse_args()
    if (args.source is None) == (args.source_tar is None):
        parser.error("give --source or --source-tar")
    cpus = len(os.sched_getaffinity(0))
    tools = ([Tool("before", args.before.resolve())] if args.before else []) + [
        Tool("after", REPO)]
    ninja = subprocess.run(["ninja", "--version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="rocbuild-parallel-") as tmp:
        base = Path(tmp)
        source = args.source or repo_from_tar(args.source_tar, base / "unpacked")
        repos, recipes = base / "repos", base / "recipes"
        commit = ggml.serve(source, args.ref, repos)
        write_recipes(recipes, NAMES)
        pycache = base / "pycache"  # .pyc files, as an installed rocbuild has them
        for tool in tools:  # each one's bytecode, and the first-run costs, before any figure
            warm_repos, warm_recipes, _ = fixedcost.stack(base / f"warm-{tool.label}", 1)
            env = ggml.bytecode_env(ggml.rocbuild_env(), pycache)
            env["PYTHONPATH"] = os.pathsep.join([str(tool.package_root), env["PYTHONPATH"]])
            subprocess.run([sys.executable, "-m", "rocbuild", *fixedcost.rocbuild_argv(
                               warm_recipes, warm_repos, base / f"warm-{tool.label}", "auto")],
                           check=True, stdout=subprocess.DEVNULL, env=env, cwd=base)
        print(f"ggml {commit[:12]} (CPU; tests, examples and GGML_CCACHE off), {cpus} CPUs, "
              f"ninja {ninja} on PATH, Python {sys.version.split()[0]}, {ggml.load()}",
              flush=True)
        session = Session(base, repos / "ggml.git", recipes, repos, pycache, cpus, args.out)
        served = session.served
        plan: list[tuple[str, str, Callable[[Path, Cpu], str]]] = []
        if not args.skip_four:
            plan.append(("hand-seq", "four by hand, one after another",
                         lambda r, c: by_hand(served, NAMES, r, None, c, at_once=False)))
            for tool in tools:
                plan.append((f"p1-{tool.label}", f"four rocbuild --parallel 1 ({tool.label})",
                             lambda r, c, t=tool: through_rocbuild(
                                 t, recipes, repos, r, NAMES, ["--parallel", "1"], pycache, c)))
            plan.append(("hand-once", "four by hand, all started at once",
                         lambda r, c: by_hand(served, NAMES, r, None, c, at_once=True)))
            for tool in tools:
                plan.append((f"auto-{tool.label}", f"four rocbuild --parallel auto ({tool.label})",
                             lambda r, c, t=tool: through_rocbuild(
                                 t, recipes, repos, r, NAMES, ["--parallel", "auto"], pycache,
                                 c)))
        if not args.skip_one:
            plan.append(("hand-one", f"one by hand, --parallel {cpus}",
                         lambda r, c: by_hand(served, NAMES[:1], r, cpus, c, at_once=False)))
            for tool in tools:
                plan.append((f"one-{tool.label}", f"one rocbuild --jobs {cpus} ({tool.label})",
                             lambda r, c, t=tool: through_rocbuild(
                                 t, recipes, repos, r, NAMES[:1], ["--jobs", str(cpus)],
                                 pycache, c)))
        if args.only:
            wanted = set(args.only.split(","))
            plan = [step for step in plan if step[0].rsplit("-", 1)[0] in wanted
                    or step[0] in wanted]
        if args.warmup:
            session.run("warmup", "warm-up: one by hand (not a figure)",
                        lambda r, c: by_hand(served, NAMES[:1], r, cpus, c, at_once=False))
        for run in range(args.runs):  # alternate the order, so drift hits every side alike
            print(f"round {run + 1}", flush=True)
            forward = (run % 2 == 0) != args.reverse
            for key, label, fn in (plan if forward else list(reversed(plan))):
                session.run(key, label, fn)
        once = [t for t in session.timelines if "at once" in str(t["label"])
                or "parallel auto" in str(t["label"])][-(1 + len(tools)):]
        longest = max((t["samples"][-1]["t"] for t in once if t["samples"]), default=None)  # type: ignore[index]
        print("\nTIMELINES (the four at once: jobs per component, CPUs busy)")
        for run_ in once:
            print(timeline.draw(run_, width=60, seconds=longest))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "timelines.json").write_text(json.dumps(session.timelines))
            (args.out / "results.json").write_text(json.dumps({
                key: [{"wall": m.wall, "cpu": m.cpu, "split": m.split.split} for m in got]
                for key, got in session.results.items()}))
            (args.out / "timelines.svg").write_text(timeline.svg(
                [t for t in session.timelines if "four" in str(t["label"])], cpus))
        print(f"\nFIGURES ({cpus} CPUs, {args.runs} run{'s' if args.runs > 1 else ''} of each, "
              f"medians; {ggml.load()})")
        for line in figures(session, tools):
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
