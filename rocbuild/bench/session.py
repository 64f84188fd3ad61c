"""One `rocbuild bench` session: which backends to run, with which environments, and the
whole result (host record, runs, warnings, tuning verdicts) as one object for the reports."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocbuild.bench import llamabench, published, stats
from rocbuild.bench.host import HostRecord, HostWarning, VramWatcher, host_warnings
from rocbuild.bench.llamabench import GPU_BACKENDS, BenchSettings
from rocbuild.bench.model import ModelInfo
from rocbuild.bench.runner import OK, BackendRun, Echo, Limits, RunSpec, run_all
from rocbuild.checks import smoke
from rocbuild.errors import ConfigError
from rocbuild.prefix.buildinfo import now
from rocbuild.prefix.envfiles import TUNE_VARIABLES

SCHEMA = 1
TUNE_ALL = "all tuning"
BASELINE = "baseline"


def built_backends(prefix: Path) -> dict[str, Path]:
    """GPU backends whose llama-bench is installed in the prefix."""
    return {b: prefix / rel for b, rel in llamabench.BENCH_PATHS.items()
            if (prefix / rel).is_file()}


def choose_binaries(prefix: Path, requested: Sequence[str] | None, cpu: bool
                    ) -> dict[str, Path]:
    """backend -> llama-bench. Default: every GPU backend built. The CPU run uses the Vulkan
    build when there is one (it loads no ROCm runtime), else the HIP build."""
    built = built_backends(prefix)
    if not built:
        where = " or ".join(str(prefix / p) for p in llamabench.BENCH_PATHS.values())
        raise ConfigError(f"no llama-bench in {prefix} (looked for {where})",
                          tip="build one first: rocbuild build llama.cpp (HIP) or "
                              "rocbuild build llama.cpp-vulkan; or pass --prefix")
    wanted = list(requested) if requested else list(built)
    if cpu and "cpu" not in wanted:
        wanted.append("cpu")
    chosen: dict[str, Path] = {}
    for backend in wanted:
        if backend == "cpu":
            chosen["cpu"] = built.get("vulkan") or built["hip"]
        elif backend in built:
            chosen[backend] = built[backend]
        else:
            component = "llama.cpp" if backend == "hip" else "llama.cpp-vulkan"
            raise ConfigError(f"--backends {backend}: {prefix / llamabench.BENCH_PATHS[backend]}"
                              " is not built", tip=f"rocbuild build {component}, or leave "
                              f"{backend} out (built here: {', '.join(built)})")
    return chosen


def _without_tuning(env: Mapping[str, str]) -> dict[str, str]:
    names = {v.name for v in TUNE_VARIABLES}
    return {k: v for k, v in env.items() if k not in names}


def make_specs(binaries: Mapping[str, Path], prefix: Path, base_env: Mapping[str, str],
               tune: bool, gpu_present: bool) -> tuple[list[RunSpec], list[str]]:
    """The runs in order, and the backends left out (no GPU). With --tune the HIP backend
    runs without any tuning variable (baseline), then with each one alone, then with all:
    the variables are HIP/ROCr runtime settings, so Vulkan and the CPU run once."""
    env = smoke.smoke_env(prefix, base_env)  # the prefix's lib first, as env.sh does
    specs: list[RunSpec] = []
    skipped: list[str] = []
    for backend, binary in binaries.items():
        if backend in GPU_BACKENDS and not gpu_present:
            skipped.append(backend)
            continue
        if tune and backend == "hip":
            plain = _without_tuning(env)
            specs.append(RunSpec(backend, BASELINE, binary, plain))
            specs += [RunSpec(backend, f"+{var.name}", binary, {**plain, var.name: var.value})
                      for var in TUNE_VARIABLES]
            specs.append(RunSpec(backend, TUNE_ALL, binary,
                                 {**plain, **{v.name: v.value for v in TUNE_VARIABLES}}))
        else:
            specs.append(RunSpec(backend, "", binary, env))
    return specs, skipped


@dataclass(frozen=True)
class TuneVerdict:
    variant: str  # "+AMD_DIRECT_DISPATCH" or "all tuning"
    test: str
    verdict: str  # stats.HELPED / HURT / WITHIN
    change_pct: float

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "test": self.test, "verdict": self.verdict,
                "change_pct": round(self.change_pct, 2)}


def tune_verdicts(runs: Sequence[BackendRun]) -> list[TuneVerdict]:
    hip = [r for r in runs if r.spec.backend == "hip" and r.status == OK]
    base = next((r for r in hip if r.spec.variant == BASELINE), None)
    if base is None:
        return []
    base_tests = {t.name: t.summary for t in base.tests if t.summary}
    out = []
    for run in hip:
        if run is base:
            continue
        for test in run.tests:
            ref = base_tests.get(test.name)
            if ref is not None and test.summary is not None:
                out.append(TuneVerdict(run.spec.variant, test.name,
                                       stats.compare(ref, test.summary),
                                       stats.change_pct(ref, test.summary)))
    return out


@dataclass
class BenchResult:
    model: ModelInfo
    settings: BenchSettings
    host: HostRecord
    prefix: Path
    runs: list[BackendRun]
    skipped: list[str] = field(default_factory=list)  # GPU backends not run: no GPU
    warnings: list[HostWarning] = field(default_factory=list)
    verdicts: list[TuneVerdict] = field(default_factory=list)
    link_under_load: float | None = None
    started: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(r.status == OK for r in self.runs)

    def published_for(self, run: BackendRun, test: str) -> published.Published | None:
        gfx = self.host.gpu.gpu.gfx if self.host.gpu else None
        if run.spec.variant not in ("", BASELINE):
            return None
        return published.matching(self.model, self.settings, gfx, run.spec.backend, test)

    def to_json(self) -> dict[str, Any]:
        runs = []
        for run in self.runs:
            doc = run.to_json()
            for test in doc["tests"]:
                ref = self.published_for(run, test["test"])
                test["published"] = ref.to_json() if ref else None
            runs.append(doc)
        return {"schema": SCHEMA, "started": self.started, "prefix": str(self.prefix),
                "model": self.model.to_json(), "settings": self.settings.to_json(),
                "host": self.host.to_json(), "link_under_load_gts": self.link_under_load,
                "runs": runs, "skipped_no_gpu": self.skipped,
                "warnings": [w.to_json() for w in self.warnings],
                "tune": [v.to_json() for v in self.verdicts], "ok": self.ok}


def run_session(model: ModelInfo, settings: BenchSettings, host: HostRecord, prefix: Path,
                binaries: Mapping[str, Path], *, tune: bool, limits: Limits,
                vram_timeout: float, env: Mapping[str, str] | None = None,
                echo: Echo = lambda _: None) -> BenchResult:
    started = now()
    specs, skipped = make_specs(binaries, prefix, os.environ if env is None else env, tune,
                                gpu_present=host.gpu is not None)
    facts = host.gpu
    vram = VramWatcher(facts.read_vram_used, timeout=vram_timeout, poll=limits.poll) \
        if facts is not None else None
    runs, link = run_all(specs, model.path, settings, limits=limits, vram=vram,
                         link_reader=facts.read_link_speed if facts else lambda: None,
                         echo=echo)
    return BenchResult(model, settings, host, prefix, runs, skipped,
                       host_warnings(host, link), tune_verdicts(runs) if tune else [], link,
                       started)
