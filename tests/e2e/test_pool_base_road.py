"""The base road's shape on one job pool: a rocBLAS whose Tensile runs a process pool inside
one build job (a stand-in here: its workers are counted like compiles), then hipBLAS on it,
then llama.cpp on both, with --parallel above 1 and a pool of 4 jobs. A counting compiler
launcher and the stand-in's workers write "+"/"-" under one lock; the pool is never exceeded
(compiles and Tensile workers together) and never idle while work is ready: each build,
having more files than the pool has slots, fills the whole pool. Before, rocBLAS held its
Tensile share (the pool less its first slot) for its whole compile, so its library files
compiled one at a time after Tensile was done."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from rocbuild.checks import buildtools
from rocbuild.cli.main import main
from rocbuild.model.buildsystems import cmake
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, make_repo

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

POOL = 4
MARK = textwrap.dedent('''\
    import fcntl, os, sys, time
    def mark(log, sign, what):
        with open(log + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(log, "a") as f:
                f.write(f"{sign} {what} {os.getpid()}\\n")
    ''')
# compiler launcher: LOG WHAT CMD...
LAUNCHER = MARK + textwrap.dedent('''\
    import subprocess
    log, what = sys.argv[1], sys.argv[2]
    mark(log, "+", what)
    try:
        time.sleep(0.3)  # long enough that compiles given at once overlap
        code = subprocess.call(sys.argv[3:])
    finally:
        mark(log, "-", what)
    sys.exit(code)
    ''')
# Tensile stand-in: LOG WORKERS OUT: a pool of WORKERS processes, each through two kernels
STANDIN = MARK + textwrap.dedent('''\
    import multiprocessing
    def kernel(log):
        mark(log, "+", "tensile")
        time.sleep(0.4)
        mark(log, "-", "tensile")
    if __name__ == "__main__":
        log, workers, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        with multiprocessing.Pool(workers) as pool:
            pool.map(kernel, [log] * (2 * workers), chunksize=1)
        open(out, "w").close()
    ''')


def project(name: str, files: int, standin: Path | None, log: Path) -> dict[str, str]:
    """``files`` C files in a library; with a Tensile stand-in (rocBLAS), its custom command
    and target, and a second library that waits for it as rocBLAS's TensileHost does (so
    ninja starts the stand-in first, beside the files that do not wait)."""
    sources = [f"{name}{i}.c" for i in range(files)]
    tree = {f: f"int {f[:-2]}(void) {{ return {i}; }}\n" for i, f in enumerate(sources)}
    tensile = ""
    if standin is not None:
        tree.update({f"host{i}.c": f"int host{i}(void) {{ return {i}; }}\n" for i in range(2)})
        tensile = textwrap.dedent(f"""\
            add_custom_command(OUTPUT library.dat COMMAND {sys.executable} {standin} {log}
                               ${{STANDIN_JOBS}} library.dat VERBATIM)
            add_custom_target(TENSILE_LIBRARY_TARGET ALL DEPENDS library.dat)
            add_library(host STATIC host0.c host1.c)
            add_dependencies(host TENSILE_LIBRARY_TARGET)
            """)
    tree["CMakeLists.txt"] = textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.20)
        project({name} C)
        """) + tensile + textwrap.dedent(f"""\
        add_library({name} STATIC {' '.join(sources)})
        install(TARGETS {name} ARCHIVE DESTINATION lib)
        """)
    return tree


def peaks(log: Path) -> tuple[int, dict[str, int]]:
    """The most jobs at once of all, and of each kind (a component's compiles, Tensile)."""
    running: dict[str, int] = {}
    peak_of: dict[str, int] = {}
    peak = 0
    for line in log.read_text().splitlines():
        sign, what, _ = line.split()
        running[what] = running.get(what, 0) + (1 if sign == "+" else -1)
        peak_of[what] = max(peak_of.get(what, 0), running[what])
        peak = max(peak, sum(running.values()))
    return peak, peak_of


def test_the_base_roads_builds_fill_one_pool_and_never_exceed_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for tool in ("git", "cmake"):
        require_tool(tool)
    if cmake.jobserver_ninja(buildtools) is None:
        pytest.skip("no ninja >= 1.13 here (pip install ninja): no jobserver client")
    # 8 CPUs for job sizing (the builds are real): each build alone would get --jobs 4
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr("rocbuild.checks.hostload.cgroup_cpu_quota", lambda root: None)
    log, launcher, standin = tmp_path / "jobs.log", tmp_path / "launcher.py", tmp_path / "st.py"
    launcher.write_text(LAUNCHER)
    standin.write_text(STANDIN)
    repos, recipes = tmp_path / "repos", tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n'
        'components = ["llama", "hipblas", "rocblas"]\n')
    for name, files, depends in (("rocblas", 8, []), ("hipblas", 6, ["rocblas"]),
                                 ("llama", 6, ["rocblas", "hipblas"])):
        make_repo(repos, name, project(name, files, standin if name == "rocblas" else None,
                                       log))
        launch = f"-DCMAKE_C_COMPILER_LAUNCHER={sys.executable};{launcher};{log};{name}"
        recipe = (f"depends = {depends!r}\n".replace("'", '"')
                  + f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n[cmake]\n'
                  f'args = ["{launch}"]\n')
        if name == "rocblas":  # as the shipped rocblas.toml: Tensile's pool, and its target
            recipe += ('job_args = ["-DSTANDIN_JOBS={{ jobs.tensile }}"]\n'
                       'tensile_target = "TENSILE_LIBRARY_TARGET"\n')
        (recipes / f"{name}.toml").write_text(recipe)
    code = main(["build", "--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
                 "--prefix", str(tmp_path / "prefix"), "--parallel", "3", "--jobs", str(POOL),
                 "--mirror", f"{FAKE_HOST}={repos.as_uri()}/", "--no-verify"])
    out = capsys.readouterr().out
    assert code == 0, out
    peak, peak_of = peaks(log)
    assert peak <= POOL, (peak_of, log.read_text())  # never exceeded, Tensile's workers too
    assert peak_of["tensile"] == POOL, (peak_of, out)  # Tensile had the pool to itself
    # never idle while work is ready: each build had more files than slots, and filled them
    assert peak_of == {"tensile": POOL, "rocblas": POOL, "hipblas": POOL, "llama": POOL}, (
        peak_of, out)
