# ruff: noqa: E501  (log excerpts keep the real lengths of compiler and CMake lines)
"""Known failure patterns: each one found in a realistic log tail, priorities, and no false hit.

The excerpts are modelled on real output of gcc, clang, ld, ninja, CMake, pip and git (paths
shortened); several also carry the noise that follows a failure ("ninja: build stopped") so a
pattern must find the cause among it.
"""

from __future__ import annotations

import pytest

from rocbuild.checks.diagnose import PATTERNS, Diagnosis, diagnose

NINJA_STOP = "ninja: build stopped: subcommand failed."

# (pattern id, log excerpt) — at least one per pattern; the seed article's table rows are
# marked with the row they model.
EXCERPTS: list[tuple[str, str]] = [
    ("no-space", """\
[2811/5120] Building CXX object lib/Target/AMDGPU/CMakeFiles/LLVMAMDGPUCodeGen.dir/SIISelLowering.cpp.o
FAILED: lib/Target/AMDGPU/CMakeFiles/LLVMAMDGPUCodeGen.dir/SIISelLowering.cpp.o
/usr/bin/c++ -O3 -DNDEBUG -c /w/src/llvm-project/llvm/lib/Target/AMDGPU/SIISelLowering.cpp
/usr/bin/as: final close failed: No space left on device
ninja: build stopped: subcommand failed."""),
    ("no-space", """\
error: unable to write file .git/objects/pack/tmp_pack_Zx81: No space left on device
fatal: index-pack failed"""),
    # seed table row 3: Tensile crashes half way through (memory)
    ("tensile-oom", """\
# Writing Kernels...
Tensile::TensileCreateLibrary: Generating kernels for gfx906 (vega20)
joblib.externals.loky.process_executor.TerminatedWorkerError: A worker process managed by the executor was unexpectedly terminated. This could be caused by a segmentation fault while calling the function or by an excessive memory usage causing the Operating System to kill the worker.
CMake Error at /w/src/tensile/Tensile/cmake/TensileConfig.cmake:277 (message):
  Error creating Tensile library: 1"""),
    ("tensile-oom", """\
  File "/usr/lib/python3.11/concurrent/futures/process.py", line 420, in wait_result_broken_or_wakeup
concurrent.futures.process.BrokenProcessPool: A process in the process pool was terminated abruptly while the future was running or pending."""),
    # seed table row 5: the OOM killer ends the compiler
    ("oom-killed", """\
[1410/3977] Building CXX object tools/clang/lib/Sema/CMakeFiles/obj.clangSema.dir/SemaExpr.cpp.o
FAILED: tools/clang/lib/Sema/CMakeFiles/obj.clangSema.dir/SemaExpr.cpp.o
/usr/bin/c++ -DGTEST_HAS_RTTI=0 -O3 -DNDEBUG -std=c++17 -c /w/src/llvm-project/clang/lib/Sema/SemaExpr.cpp
c++: fatal error: Killed signal terminated program cc1plus
compilation terminated.
ninja: build stopped: subcommand failed."""),
    ("oom-killed", """\
[3975/3977] Linking CXX executable bin/clang-19
FAILED: bin/clang-19
collect2: fatal error: ld terminated with signal 9 [Killed]
compilation terminated."""),
    ("oom-killed", """\
[12/40] Building HIP object library/src/CMakeFiles/rocblas.dir/blas3/rocblas_gemm.cpp.o
clang++: error: unable to execute command: Killed
clang++: error: clang frontend command failed due to signal (use -v to see invocation)"""),
    ("oom-killed", "rocblas: compile failed: cmake was killed by signal 9"),
    ("cmake-too-old", """\
CMake Error at CMakeLists.txt:26 (cmake_minimum_required):
  CMake 3.25 or higher is required.  You are running version 3.22.1


-- Configuring incomplete, errors occurred!"""),
    ("usr-include-hip", """\
[3/120] Building HIP object ggml/src/ggml-hip/CMakeFiles/ggml-hip.dir/__/ggml-cuda/acc.cu.o
In file included from /w/src/llama.cpp/ggml/src/ggml-cuda/acc.cu:1:
In file included from /usr/include/hip/hip_runtime.h:62:
/usr/include/hip/amd_detail/amd_hip_bf16.h:146:17: error: unknown type name '__hip_bfloat16_raw'
1 error generated when compiling for gfx906."""),
    ("usr-include-hip", """\
/opt/rocm-6.4-gfx906/include/hip/hip_version.h:7:9: error: 'HIP_VERSION_MAJOR' macro redefined [-Werror,-Wmacro-redefined]
    7 | #define HIP_VERSION_MAJOR 6"""),
    ("roctx-missing", """\
[88/1650] Building CXX object library/src/CMakeFiles/rocblas.dir/handle.cpp.o
FAILED: library/src/CMakeFiles/rocblas.dir/handle.cpp.o
/w/src/rocblas/library/src/include/handle.hpp:40:10: fatal error: 'roctracer/roctx.h' file not found
   40 | #include <roctracer/roctx.h>
      |          ^~~~~~~~~~~~~~~~~~~
1 error generated."""),
    ("roctx-missing", """\
[1650/1650] Linking CXX shared library library/src/librocblas.so.4.4
FAILED: library/src/librocblas.so.4.4
ld.lld: error: unable to find library -lroctx64
/usr/bin/ld: cannot find -lroctx64: No such file or directory
clang++: error: linker command failed with exit code 1 (use -v to see invocation)"""),
    ("roctx-missing", """\
/w/src/rocblas/library/src/include/handle.hpp:40:10: fatal error: roctracer/roctx.h: No such file or directory"""),
    ("cppheaderparser-missing", """\
-- Found Python3: /usr/bin/python3 (found version "3.11.2") found components: Interpreter
Traceback (most recent call last):
  File "/w/src/clr/hipamd/src/hip_prof_gen.py", line 30, in <module>
    import CppHeaderParser
ModuleNotFoundError: No module named 'CppHeaderParser'"""),
    ("cppheaderparser-missing", """\
CMake Error at hipamd/src/CMakeLists.txt:98 (message):
  The "CppHeaderParser" Python3 package is not installed.  Please install it
  using the following command: "pip3 install CppHeaderParser"."""),
    ("python-venv-missing", """\
-- Creating virtualenv in /w/build/rocblas/virtualenv
The virtual environment was not created successfully because ensurepip is not
available.  On Debian/Ubuntu systems, you need to install the python3-venv
package using the following command.

    apt install python3.11-venv

You may need to use sudo with that command.  After installing the python3-venv
package, recreate your virtual environment."""),
    ("python-venv-missing", """\
Error: Command '['/w/build/rocblas/virtualenv/bin/python3', '-m', 'ensurepip', '--upgrade', '--default-pip']' returned non-zero exit status 1."""),
    ("tensile-pip-offline", """\
Processing /w/src/tensile
  Installing build dependencies: started
  WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution')': /simple/setuptools/
  ERROR: Could not find a version that satisfies the requirement setuptools>=40.8.0 (from versions: none)
  ERROR: No matching distribution found for setuptools>=40.8.0
  Installing build dependencies: finished with status 'error'"""),
    ("network", """\
Cloning into bare repository '/w/cache/git/rocBLAS.git'...
fatal: unable to access 'https://github.com/ROCm/rocBLAS.git/': Could not resolve host: github.com"""),
    ("network", """\
fatal: unable to access 'https://github.com/ROCm/clr.git/': Failed to connect to github.com port 443 after 130104 ms: Connection timed out"""),
    ("llvm-missing", """\
CMake Error at runtime/hsa-runtime/CMakeLists.txt:97 (find_package):
  Could not find a package configuration file provided by "Clang" with any of
  the following names:

    ClangConfig.cmake
    clang-config.cmake

  Add the installation prefix of "Clang" to CMAKE_PREFIX_PATH or set
  "Clang_DIR" to a directory containing one of the above files."""),
    ("llvm-missing", """\
CMake Error at CMakeLists.txt:61 (find_package):
  Could not find a package configuration file provided by "LLVM" with any of
  the following names:"""),
    # seed table row 1: Could NOT find ROCm
    ("rocm-not-found", """\
CMake Error at /usr/share/cmake-3.25/Modules/FindPackageHandleStandardArgs.cmake:230 (message):
  Could NOT find ROCm (missing: ROCM_PATH)"""),
    ("rocm-not-found", """\
CMake Error at CMakeLists.txt:48 (find_package):
  Could not find a package configuration file provided by "ROCM" (requested
  version 0.7.3) with any of the following names:

    ROCMConfig.cmake
    rocm-config.cmake"""),
    # seed table row 4: libamdhip64.so not found at link time
    ("hip-missing", """\
[2/2] Linking CXX executable hello_hip
FAILED: hello_hip
/usr/bin/ld: cannot find -lamdhip64: No such file or directory
collect2: error: ld returned 1 exit status"""),
    ("hip-missing", """\
./bin/llama-cli: error while loading shared libraries: libamdhip64.so.6: cannot open shared object file: No such file or directory"""),
    ("hip-missing", """\
CMake Error at ggml/src/ggml-hip/CMakeLists.txt:38 (find_package):
  Could not find a package configuration file provided by "hip" with any of
  the following names:"""),
    ("libdrm-missing", """\
-- Checking for module 'libdrm'
--   No package 'libdrm' found
CMake Error at /usr/share/cmake-3.25/Modules/FindPkgConfig.cmake:607 (message):
  A required package was not found"""),
    ("libdrm-missing", """\
/w/src/rocr/libhsakmt/src/libhsakmt.h:32:10: fatal error: xf86drm.h: No such file or directory"""),
    ("libelf-missing", """\
CMake Error at /usr/share/cmake-3.25/Modules/FindPackageHandleStandardArgs.cmake:230 (message):
  Could NOT find LibElf (missing: LIBELF_LIBRARIES LIBELF_INCLUDE_DIRS)"""),
    ("libelf-missing", """\
/w/src/rocr/runtime/hsa-runtime/loader/executable.cpp:52:10: fatal error: gelf.h: No such file or directory"""),
    ("libnuma-missing", """\
CMake Error at libhsakmt/CMakeLists.txt:192 (find_library):
  Could not find NUMA using the following names: numa"""),
    ("libnuma-missing", """\
/w/src/rocr/libhsakmt/src/topology.c:34:10: fatal error: numa.h: No such file or directory"""),
    # seed table row 2: Unsupported gpu arch: gfx906
    ("unknown-gpu-target", "hipcc: Unsupported gpu arch: gfx906"),
    ("unknown-gpu-target", """\
[1/30] Building HIP object CMakeFiles/kernels.dir/k.hip.o
error: unknown target CPU 'gfx906'
note: valid target CPU values are: x86-64, x86-64-v2, x86-64-v3"""),
    ("unknown-gpu-target", """\
clang: error: unsupported HIP gpu architecture: gfx1250"""),
    ("unknown-gpu-target", """\
CMake Error at CMakeLists.txt:121 (message):
  Unsupported target gfx906:xnack- by compiler /usr/bin/clang++"""),
    ("unknown-gpu-target", "'gfx1250' is not a recognized processor for this target "
                           "(ignoring processor)"),
]


def _lines(text: str) -> list[str]:
    return text.splitlines()


@pytest.mark.parametrize(("expected", "excerpt"), EXCERPTS,
                         ids=[f"{pid}-{i}" for i, (pid, _) in enumerate(EXCERPTS)])
def test_each_excerpt_maps_to_its_cause(expected: str, excerpt: str) -> None:
    found = diagnose(_lines(excerpt))
    assert found is not None, f"no pattern matched:\n{excerpt}"
    assert found.id == expected, f"got {found.id} on line {found.matched_line!r}"
    pattern = next(p for p in PATTERNS if p.id == expected)
    assert found.cause == pattern.cause
    assert found.matched_line in excerpt


def test_every_pattern_has_an_excerpt_and_its_fields() -> None:
    assert {pid for pid, _ in EXCERPTS} == {p.id for p in PATTERNS}
    assert len({p.id for p in PATTERNS}) == len(PATTERNS)
    for pattern in PATTERNS:
        assert pattern.cause.endswith(".") and pattern.fix and pattern.source
        assert "rm -rf" not in pattern.fix  # never a blind destructive command


def test_the_seed_articles_error_table_is_covered() -> None:
    """Seed 002 §5.1 lists five errors; each has a row naming it as its source."""
    rows = {row: [p.id for p in PATTERNS if f"seed 002 error table row {row}" in p.source]
            for row in range(1, 6)}
    assert all(rows.values()), rows


def test_a_log_with_no_known_failure_gives_none() -> None:
    log = """\
[1/2] Building C object CMakeFiles/beta.dir/beta.c.o
FAILED: CMakeFiles/beta.dir/beta.c.o
/w/src/beta/beta.c:2:2: error: #error beta was configured to fail
    2 | #error beta was configured to fail
ninja: build stopped: subcommand failed."""
    assert diagnose(_lines(log)) is None
    assert diagnose([]) is None


@pytest.mark.parametrize("line", [
    "CMake Error at cmake/Platform.cmake:12 (message):\n  Unsupported target platform: Windows",
    'message(FATAL_ERROR "Unsupported target type ${_type}")',
    "-- Killed 3 stale ccache entries",
    "ld: warning: unable to find library -lfoo",
])
def test_look_alike_lines_do_not_match(line: str) -> None:
    assert diagnose(_lines(line)) is None


def test_root_cause_wins_over_what_it_caused() -> None:
    """A full disk outranks the OOM-looking kill and the missing header that follow it."""
    log = [
        "c++: fatal error: Killed signal terminated program cc1plus",
        "/usr/bin/ld: final link failed: No space left on device",
        "fatal error: 'roctracer/roctx.h' file not found",
        NINJA_STOP,
    ]
    found = diagnose(log)
    assert found is not None and found.id == "no-space"


def test_newest_matching_line_of_the_pattern_is_reported() -> None:
    log = ["/usr/bin/ld: cannot find -lroctx64: No such file or directory",
           "something else",
           "ld.lld: error: unable to find library -lroctx64"]
    found = diagnose(log)
    assert found == Diagnosis("roctx-missing", found.cause, found.fix,
                              "ld.lld: error: unable to find library -lroctx64")


def test_fix_is_filled_from_context_and_the_matched_line() -> None:
    log = ["  CMake 3.25 or higher is required.  You are running version 3.22.1"]
    found = diagnose(log, context={"component": "rocminfo", "prefix": "/opt/r"})
    assert found is not None
    assert "cmake>=3.25" in found.fix and "rocbuild build rocminfo" in found.fix
    assert "<component>" not in found.fix and "{need}" not in found.fix
    roctx = diagnose(["cannot find -lroctx64"], context={"prefix": "/opt/r",
                                                         "component": "rocblas"})
    assert roctx is not None and "ls /opt/r/lib/libroctx64.so" in roctx.fix
    assert "rocbuild build roctracer rocblas" in roctx.fix


def test_unfilled_placeholders_stay_readable() -> None:
    found = diagnose(["fatal: Could not resolve host: github.com"])
    assert found is not None and found.id == "network"
    assert "git ls-remote <url>" in found.fix and "<component>" in found.fix


def test_colour_codes_do_not_hide_a_match() -> None:
    line = ("\x1b[1m/w/src/x.cpp:1:10: \x1b[0m\x1b[0;1;31mfatal error: \x1b[0m\x1b[1m"
            "'roctracer/roctx.h' file not found\x1b[0m")
    found = diagnose([line])
    assert found is not None and found.id == "roctx-missing"
    assert "\x1b" not in found.matched_line


def test_usr_include_hip_fix_checks_ownership_instead_of_deleting() -> None:
    found = diagnose(["In file included from /usr/include/hip/hip_runtime.h:62:"])
    assert found is not None and found.id == "usr-include-hip"
    assert "dpkg -S /usr/include/hip" in found.fix
    assert "rm " not in found.fix
