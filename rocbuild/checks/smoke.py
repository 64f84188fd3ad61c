"""On-GPU smoke tests of an installed prefix: rocminfo sees the agent, a HIP hello-world
built with the prefix's hipcc runs, a rocBLAS SGEMM matches the CPU, and llama-bench runs a
model. They need an AMD GPU; without one they are skipped with one line saying so.

GPU presence comes from the kernel, as ROCr itself sees it: ``/dev/kfd`` and a KFD topology
node with a non-zero ``gfx_target_version`` (CPU nodes report 0). Both paths live under a
``root`` so tests can run the detection on captured trees. No GPU exists on the build and CI
machines, so only detection, the skip path and the commands are tested there.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rocbuild import proc
from rocbuild.checks import gpu
from rocbuild.files import parse_json
from rocbuild.model.steps import shell_line
from rocbuild.model.targets import TargetId

KFD_DEVICE = Path("dev/kfd")


@dataclass(frozen=True)
class GpuAgent:
    node: int  # KFD topology node number
    gfx: str  # processor name, e.g. gfx906
    gfx_target_version: int  # as the kernel reports it, e.g. 90006


@dataclass(frozen=True)
class GpuPresence:
    agents: tuple[GpuAgent, ...]
    reason: str = ""  # why there is no GPU, when agents is empty

    @property
    def present(self) -> bool:
        return bool(self.agents)


def kfd_agents(root: Path = Path("/")) -> GpuPresence:
    """The GPU agents ROCr would see under ``root``: the KFD nodes of gpu.detect_gpus (the
    one GPU detection) with a known ISA, and ``/dev/kfd`` must exist (without it nothing can
    run). The cards gpu.detect_gpus finds only on the PCI bus (no driver loaded) do not count:
    they cannot run a test."""
    if not (root / KFD_DEVICE).exists():
        return GpuPresence((), "no AMD GPU (no /dev/kfd)")
    if not gpu.kfd_present(root):
        return GpuPresence((), f"no AMD GPU (no KFD topology at /{gpu.KFD_NODES})")
    agents = [GpuAgent(g.node, g.gfx, g.gfx_target_version) for g in gpu.detect_gpus(root)
              if g.node is not None and g.gfx and g.gfx_target_version is not None]
    if not agents:
        return GpuPresence((), "no AMD GPU (no KFD node with a gfx_target_version)")
    return GpuPresence(tuple(agents))


# ---------------------------------------------------------------------------------------------
# The tests

HELLO_HIP = r"""// rocbuild smoke test: one kernel launch, checked on the host.
#include <hip/hip_runtime.h>
#include <cstdio>

__global__ void twice(int* out) { out[threadIdx.x] = 2 * static_cast<int>(threadIdx.x); }

int main() {
  hipDeviceProp_t prop;
  if (hipGetDeviceProperties(&prop, 0) != hipSuccess) { std::puts("no HIP device"); return 1; }
  int host[64] = {0};
  int* dev = nullptr;
  if (hipMalloc(&dev, sizeof host) != hipSuccess) { std::puts("hipMalloc failed"); return 1; }
  twice<<<1, 64>>>(dev);
  hipError_t err = hipGetLastError();
  if (err == hipSuccess) err = hipMemcpy(host, dev, sizeof host, hipMemcpyDeviceToHost);
  hipFree(dev);
  if (err != hipSuccess) { std::printf("kernel failed: %s\n", hipGetErrorString(err)); return 1; }
  for (int i = 0; i < 64; ++i) {
    if (host[i] != 2 * i) { std::printf("wrong result at %d: %d\n", i, host[i]); return 1; }
  }
  std::printf("hello OK on %s\n", prop.gcnArchName);
  return 0;
}
"""

SGEMM_CPP = r"""// rocbuild smoke test: a 128x128 SGEMM on the GPU against the CPU result.
#include <hip/hip_runtime.h>
#include <rocblas/rocblas.h>
#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const int n = 128;
  std::vector<float> a(n * n), b(n * n), c(n * n, 0.0f), ref(n * n, 0.0f);
  for (int i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>(i * 7 % 13) / 13.0f - 0.5f;
    b[i] = static_cast<float>(i * 5 % 11) / 11.0f - 0.5f;
  }
  for (int j = 0; j < n; ++j)  // column-major, as BLAS
    for (int k = 0; k < n; ++k)
      for (int i = 0; i < n; ++i) ref[i + j * n] += a[i + k * n] * b[k + j * n];
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  const size_t bytes = sizeof(float) * n * n;
  if (hipMalloc(&da, bytes) != hipSuccess || hipMalloc(&db, bytes) != hipSuccess ||
      hipMalloc(&dc, bytes) != hipSuccess) { std::puts("hipMalloc failed"); return 1; }
  hipMemcpy(da, a.data(), bytes, hipMemcpyHostToDevice);
  hipMemcpy(db, b.data(), bytes, hipMemcpyHostToDevice);
  rocblas_handle handle;
  if (rocblas_create_handle(&handle) != rocblas_status_success) {
    std::puts("rocblas_create_handle failed"); return 1;
  }
  const float alpha = 1.0f, beta = 0.0f;
  rocblas_status status = rocblas_sgemm(handle, rocblas_operation_none, rocblas_operation_none,
                                        n, n, n, &alpha, da, n, db, n, &beta, dc, n);
  if (status != rocblas_status_success) {
    std::printf("rocblas_sgemm failed: %s\n", rocblas_status_to_string(status)); return 1;
  }
  if (hipMemcpy(c.data(), dc, bytes, hipMemcpyDeviceToHost) != hipSuccess) {
    std::puts("copy back failed"); return 1;
  }
  float worst = 0.0f;
  for (int i = 0; i < n * n; ++i) worst = std::fmax(worst, std::fabs(c[i] - ref[i]));
  rocblas_destroy_handle(handle);
  hipFree(da); hipFree(db); hipFree(dc);
  if (!(worst < 1e-3f)) { std::printf("sgemm differs from the CPU by %g\n", worst); return 1; }
  std::printf("sgemm OK, max difference %g\n", worst);
  return 0;
}
"""

Check = Callable[[str], tuple[bool, str]]  # last command's output -> (passed, one line)


@dataclass(frozen=True)
class SmokeTest:
    """One test: sources to write, commands run in order in a scratch folder, and a check
    of the last command's output."""

    name: str
    commands: tuple[tuple[str, ...], ...]
    check: Check
    timeout: float = 600.0
    files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SmokeResult:
    name: str
    ok: bool
    detail: str
    command: str  # the shell line that failed, or the last one


@dataclass(frozen=True)
class SmokeReport:
    results: tuple[SmokeResult, ...] = ()
    skipped: str = ""  # the line saying why nothing ran

    @property
    def ok(self) -> bool:
        """Skipping is not a failure: the static checks carry the verdict without a GPU."""
        return all(r.ok for r in self.results)


def _expect(pattern: str, what: str) -> Check:
    def check(output: str) -> tuple[bool, str]:
        match = re.search(pattern, output, re.MULTILINE)
        if match:
            return True, match.group(0).strip()
        tail = output.strip().splitlines()[-1:] or ["(no output)"]
        return False, f"{what} not found in the output (last line: {tail[0]})"

    return check


def _check_bench(output: str) -> tuple[bool, str]:
    try:
        runs = parse_json(output)
    except ValueError as exc:
        return False, f"llama-bench did not print JSON ({getattr(exc, 'msg', exc)})"
    if not isinstance(runs, list) or not runs:
        return False, "llama-bench printed no result"
    parts = [f"{r.get('n_prompt', 0)}/{r.get('n_gen', 0)}: {float(r.get('avg_ts', 0)):.1f} t/s"
             for r in runs if isinstance(r, dict)]
    if any(isinstance(r, dict) and not float(r.get("avg_ts", 0)) > 0 for r in runs):
        return False, "llama-bench reported zero throughput: " + ", ".join(parts)
    return True, "llama-bench (prompt/gen) " + ", ".join(parts)


def plan_smoke(prefix: Path, gfx: str, model: Path | None = None,
               base: Path | None = None) -> list[SmokeTest]:
    """The tests for one GPU processor, as commands relative to a scratch folder. On a
    ``base`` (--base) hipcc and rocminfo are the base's, and the prefix's libraries and
    headers come before the base's."""
    bin_dir, lib_dir = prefix / "bin", prefix / "lib"
    tools = (base or prefix) / "bin"
    hipcc = str(tools / "hipcc")
    lib_dirs = [lib_dir, *([base / "lib"] if base else [])]
    link = [f"-L{d}" for d in lib_dirs] + [f"-Wl,-rpath,{d}" for d in lib_dirs]
    includes = [f"-I{prefix / 'include'}", *([f"-I{base / 'include'}"] if base else [])]
    tests = [
        SmokeTest("rocminfo", ((str(tools / "rocminfo"),),),
                  _expect(rf"^\s*Name:\s+{re.escape(gfx)}\b.*$", f"agent {gfx}"), timeout=120),
        SmokeTest("hip-hello",
                  ((hipcc, f"--offload-arch={gfx}", "-O2", "hello.hip", "-o", "hello", *link),
                   ("./hello",)),
                  _expect(r"^hello OK on .*$", "'hello OK'"), files={"hello.hip": HELLO_HIP}),
        SmokeTest("rocblas-sgemm",
                  ((hipcc, f"--offload-arch={gfx}", "-O2", "sgemm.cpp", "-o", "sgemm",
                    *includes, *link, "-lrocblas"),
                   ("./sgemm",)),
                  _expect(r"^sgemm OK.*$", "'sgemm OK'"), files={"sgemm.cpp": SGEMM_CPP}),
    ]
    if model is not None:
        tests.append(SmokeTest("llama-bench",
                               ((str(bin_dir / "llama-bench"), "-m", str(model), "-o", "json"),),
                               _check_bench, timeout=3600))
    return tests


def smoke_env(prefix: Path, base: Mapping[str, str] | None = None,
              rocm_base: Path | None = None) -> dict[str, str]:
    """The environment the tests run in: the prefix first on every search path, then a
    ``rocm_base`` (--base), which is also ROCM_PATH/HIP_PATH (its compilers and HIP)."""
    env = dict(os.environ if base is None else base)
    trees = [prefix, *([rocm_base] if rocm_base else [])]
    lib_path = [str(t / d) for t in trees for d in ("lib", "lib64")]
    if env.get("LD_LIBRARY_PATH"):
        lib_path.append(env["LD_LIBRARY_PATH"])
    rocm = str(rocm_base or prefix)
    env.update({
        "HIP_PLATFORM": "amd",  # hipcc must not pick CUDA when nvcc is also installed
        "ROCM_PATH": rocm,
        "HIP_PATH": rocm,
        "PATH": os.pathsep.join([*(str(t / "bin") for t in trees), env.get("PATH", "")]),
        "LD_LIBRARY_PATH": os.pathsep.join(lib_path),
    })
    return env


def _run(argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float,
         echo: Callable[[str], None]) -> tuple[int | None, str]:
    """(exit code or None on timeout, combined output). The child gets its own session so a
    timeout stops hipcc's clang children too. SIGTERM first and a long grace period: killing
    a GPU-busy process on gfx906 with SIGKILL has hung amdgpu (docs/architecture.md, Facts)."""
    done = proc.run_capture(argv, timeout=timeout, cwd=cwd, env=env, merge_stderr=True,
                            grace=120, echo=echo)
    if not done.started:
        return 127, f"cannot run {argv[0]}: not found or not executable"
    return (None if done.timed_out else done.returncode), done.stdout


def run_test(test: SmokeTest, workdir: Path, env: Mapping[str, str],
             echo: Callable[[str], None]) -> SmokeResult:
    for name, text in test.files.items():
        (workdir / name).write_text(text)
    output, line = "", ""
    for argv in test.commands:
        line = shell_line(argv)
        code, output = _run(argv, workdir, env, test.timeout, echo)  # echoes "+ line"
        if code != 0:
            why = "timed out" if code is None else f"exit {code}"
            tail = " | ".join(output.strip().splitlines()[-3:]) or "no output"
            return SmokeResult(test.name, False, f"{why}: {tail}", line)
    ok, detail = test.check(output)
    return SmokeResult(test.name, ok, detail, line)


def select_agent(presence: GpuPresence, targets: Sequence[TargetId]) -> GpuAgent | None:
    wanted = {t.processor for t in targets}
    return next((a for a in presence.agents if a.gfx in wanted), None)


def run_smoke(prefix: Path, targets: Sequence[TargetId], model: Path | None = None,
              root: Path = Path("/"), echo: Callable[[str], None] = lambda _: None,
              base: Path | None = None) -> SmokeReport:
    """Run the smoke tests on the first GPU whose processor is a requested target, or say
    in one line why they are skipped."""
    presence = kfd_agents(root)
    if not presence.present:
        return SmokeReport(skipped=f"smoke tests skipped: {presence.reason}")
    agent = select_agent(presence, targets)
    if agent is None:
        found = ", ".join(a.gfx for a in presence.agents)
        wanted = ", ".join(str(t) for t in targets)
        return SmokeReport(skipped=f"smoke tests skipped: the GPU here ({found}) is not a "
                                   f"requested target ({wanted})")
    gpu_index = presence.agents.index(agent)
    env = {**smoke_env(prefix, rocm_base=base), "ROCR_VISIBLE_DEVICES": str(gpu_index)}
    with tempfile.TemporaryDirectory(prefix="rocbuild-smoke-") as scratch:
        return SmokeReport(tuple(run_test(test, Path(scratch), env, echo)
                                 for test in plan_smoke(prefix, agent.gfx, model, base)))


def to_json(report: SmokeReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "skipped": report.skipped or None,
        "results": [asdict(r) for r in report.results],
    }
