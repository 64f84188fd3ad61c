"""GPU smoke tests: detection on captured sysfs trees, the skip path, and the commands they
would run. No GPU exists on the build or CI machines, so the tests themselves (rocminfo,
hello-world, SGEMM, llama-bench) cannot run here; their output checks are tested on sample
output instead."""

from __future__ import annotations

import json
from pathlib import Path

from rocbuild import smoke
from rocbuild.targets import parse_target_list

CPU_NODE = "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n"


def host_tree(root: Path, *node_versions: int | None, kfd: bool = True) -> Path:
    """A captured host: /dev/kfd and one KFD topology node per version (0 = a CPU node)."""
    if kfd:
        (root / "dev").mkdir(parents=True, exist_ok=True)
        (root / "dev" / "kfd").write_text("")
    for node, version in enumerate(node_versions):
        folder = root / "sys/class/kfd/kfd/topology/nodes" / str(node)
        folder.mkdir(parents=True)
        if version is not None:
            text = CPU_NODE if version == 0 else f"simd_count 240\ngfx_target_version {version}\n"
            (folder / "properties").write_text(text)
    return root


def test_no_dev_kfd(tmp_path: Path) -> None:
    presence = smoke.kfd_agents(host_tree(tmp_path, 0, 90006, kfd=False))
    assert not presence.present and presence.reason == "no AMD GPU (no /dev/kfd)"


def test_kfd_without_topology_or_gpu_nodes(tmp_path: Path) -> None:
    assert smoke.kfd_agents(host_tree(tmp_path / "a")).reason.startswith(
        "no AMD GPU (no KFD topology")
    assert smoke.kfd_agents(host_tree(tmp_path / "b", 0, None)).reason == \
        "no AMD GPU (no KFD node with a gfx_target_version)"


def test_gpu_nodes_are_decoded(tmp_path: Path) -> None:
    presence = smoke.kfd_agents(host_tree(tmp_path, 0, 90006, 100300, 90010))
    assert [(a.node, a.gfx) for a in presence.agents] == [
        (1, "gfx906"), (2, "gfx1030"), (3, "gfx90a")]


def test_run_smoke_skips_with_one_line_without_gpu(tmp_path: Path) -> None:
    lines: list[str] = []
    report = smoke.run_smoke(tmp_path / "prefix", parse_target_list(["gfx906"]),
                             root=host_tree(tmp_path / "host", 0, kfd=False), echo=lines.append)
    assert report.skipped == "smoke tests skipped: no AMD GPU (no /dev/kfd)"
    assert report.results == () and report.ok and lines == []


def test_run_smoke_skips_a_gpu_that_is_not_a_target(tmp_path: Path) -> None:
    report = smoke.run_smoke(tmp_path / "prefix", parse_target_list(["gfx906"]),
                             root=host_tree(tmp_path / "host", 0, 100300))
    assert report.skipped == ("smoke tests skipped: the GPU here (gfx1030) is not a requested "
                              "target (gfx906)")


def test_commands_use_the_prefix_tools(tmp_path: Path) -> None:
    prefix = Path("/opt/rocm-6.4-gfx906")
    tests = {t.name: t for t in smoke.plan_smoke(prefix, "gfx906")}
    assert list(tests) == ["rocminfo", "hip-hello", "rocblas-sgemm"]
    assert tests["rocminfo"].commands == (("/opt/rocm-6.4-gfx906/bin/rocminfo",),)
    compile_hello, run_hello = tests["hip-hello"].commands
    assert compile_hello[:2] == ("/opt/rocm-6.4-gfx906/bin/hipcc", "--offload-arch=gfx906")
    assert "hello.hip" in compile_hello and run_hello == ("./hello",)
    assert "-Wl,-rpath,/opt/rocm-6.4-gfx906/lib" in compile_hello
    assert "__global__" in tests["hip-hello"].files["hello.hip"]
    compile_gemm, run_gemm = tests["rocblas-sgemm"].commands
    assert run_gemm == ("./sgemm",)
    assert "-lrocblas" in compile_gemm and "-I/opt/rocm-6.4-gfx906/include" in compile_gemm
    assert "rocblas_sgemm" in tests["rocblas-sgemm"].files["sgemm.cpp"]
    model = tmp_path / "m.gguf"
    bench = smoke.plan_smoke(prefix, "gfx906", model)[-1]
    assert bench.commands == (("/opt/rocm-6.4-gfx906/bin/llama-bench", "-m", str(model),
                               "-o", "json"),)


def test_environment_puts_the_prefix_first() -> None:
    env = smoke.smoke_env(Path("/p"), {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/x"})
    assert env["PATH"] == "/p/bin:/usr/bin" and env["LD_LIBRARY_PATH"] == "/p/lib:/p/lib64:/x"
    assert env["HIP_PLATFORM"] == "amd" and env["ROCM_PATH"] == "/p"


def test_output_checks_on_sample_output() -> None:
    tests = {t.name: t for t in smoke.plan_smoke(Path("/p"), "gfx906", Path("/m.gguf"))}
    rocminfo = "Agent 2\n  Name:                    gfx906\n  Uuid:  GPU-xx\n"
    assert tests["rocminfo"].check(rocminfo) == (True, "Name:                    gfx906")
    ok, why = tests["rocminfo"].check("  Name:                    gfx1030\n")
    assert not ok and "agent gfx906 not found" in why
    assert tests["hip-hello"].check("hello OK on gfx906:sramecc+:xnack-\n")[0]
    assert not tests["rocblas-sgemm"].check("sgemm differs by 3\n")[0]
    runs = [{"n_prompt": 512, "n_gen": 0, "avg_ts": 850.5},
            {"n_prompt": 0, "n_gen": 128, "avg_ts": 60.25}]
    assert tests["llama-bench"].check(json.dumps(runs)) == (
        True, "llama-bench (prompt/gen) 512/0: 850.5 t/s, 0/128: 60.2 t/s")
    assert not tests["llama-bench"].check("error: failed to load model")[0]
    assert not tests["llama-bench"].check("[]")[0]
