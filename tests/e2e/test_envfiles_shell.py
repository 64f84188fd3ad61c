"""The generated environment files in the real interpreters: bash, zsh, POSIX sh (dash), fish,
real Lmod (Debian's lmod package), and the Tcl modulefile under tclsh with a stand-in for
Environment Modules' commands (Debian's environment-modules conflicts with lmod, so CI has
Lmod). Each shell prints its exported environment as JSON through python3, so the test sees
exactly what a program started from that shell would see."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocbuild.prefix.envfiles import write_env_files
from tests.conftest import require_tool
from tests.support.envspec import rocm_spec

pytestmark = pytest.mark.e2e

DUMP = f"{sys.executable} -c 'import json, os; print(json.dumps(dict(os.environ)))'"
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    # a space and a quote in the path: the files must quote every value
    path = tmp_path / "opt" / "rocm 6.4 it's-gfx906"
    write_env_files(rocm_spec(path, "6.4.3", "6.4", ("gfx906",)))
    return path


@pytest.fixture
def tuned(tmp_path: Path) -> Path:
    path = tmp_path / "tuned"
    write_env_files(rocm_spec(path, "6.4.3", "6.4", ("gfx906",), tune=True))
    return path


def shell_env(argv: list[str], env: dict[str, str]) -> tuple[dict[str, str], str]:
    base = {"PATH": BASE_PATH, "HOME": os.environ.get("HOME", "/tmp"), **env}
    done = subprocess.run(argv, env=base, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def in_bash(script: Path, extra: str = "", env: dict[str, str] | None = None, *,
            shell: str = "bash") -> tuple[dict[str, str], str]:
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed")
    code = f'. "$1"; {extra} {DUMP}'
    return shell_env([exe, "-c", code, "sh", str(script)], env or {})


def in_fish(script: Path, extra: str = "", env: dict[str, str] | None = None
            ) -> tuple[dict[str, str], str]:
    exe = shutil.which("fish")
    if exe is None:
        pytest.skip("fish is not installed")
    code = f"source $argv[1]; {extra} {DUMP}"
    return shell_env([exe, "--no-config", "-c", code, str(script)], env or {})


def check_core(env: dict[str, str], prefix: Path) -> None:
    p = str(prefix)
    assert env["ROCM_PATH"] == p
    assert env["HIP_PATH"] == p
    assert env["HIP_PLATFORM"] == "amd"
    assert env["HIP_DEVICE_LIB_PATH"] == f"{p}/amdgcn/bitcode"
    assert env["PATH"] == f"{p}/bin:{BASE_PATH}"
    # exactly the prefix: an empty element (a trailing ':') would mean "the current folder"
    assert env["CMAKE_PREFIX_PATH"] == p
    # every program finds its libraries through its RUNPATH: nothing leaks into others
    assert "LD_LIBRARY_PATH" not in env
    assert "HSA_OVERRIDE_GFX_VERSION" not in env
    assert not [k for k in env if k.startswith(("_rocbuild", "rocbuild_"))]  # helpers unset


@pytest.mark.parametrize("shell", ["bash", "zsh", "sh"])
def test_env_sh_in_bash_zsh_and_posix_sh(prefix: Path, shell: str) -> None:
    env, err = in_bash(prefix / "env.sh", shell=shell)
    check_core(env, prefix)
    assert err == ""


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_env_sh_of_a_copied_prefix_points_at_the_copy(prefix: Path, tmp_path: Path,
                                                      shell: str) -> None:
    copy = tmp_path / "elsewhere" / "rocm copy"
    shutil.copytree(prefix, copy, symlinks=True)
    env, err = in_bash(copy / "env.sh", shell=shell)
    check_core(env, copy)
    assert err == ""


def test_env_sh_read_from_a_pipe_uses_the_prefix_it_was_written_for(prefix: Path) -> None:
    text = (prefix / "env.sh").read_text()
    code = f'. /dev/stdin; {DUMP}'
    done = subprocess.run(["bash", "-c", code], input=text, capture_output=True, text=True,
                          env={"PATH": BASE_PATH}, check=True)
    check_core(json.loads(done.stdout.strip().splitlines()[-1]), prefix)


def test_env_sh_twice_adds_each_entry_once_and_keeps_existing_ones(prefix: Path) -> None:
    env, _ = in_bash(prefix / "env.sh", extra='. "$1";',
                     env={"LD_LIBRARY_PATH": "/usr/lib/other", "CMAKE_PREFIX_PATH": "/opt/x"})
    assert env["PATH"] == f"{prefix}/bin:{BASE_PATH}"
    assert env["LD_LIBRARY_PATH"] == "/usr/lib/other"  # the user's own, untouched
    assert env["CMAKE_PREFIX_PATH"] == f"{prefix}:/opt/x"


def test_ld_library_path_only_for_a_recipe_without_a_runpath(tmp_path: Path) -> None:
    path = tmp_path / "opted-out"
    write_env_files(rocm_spec(path, "6.4.3", "6.4", ("gfx906",),
                            runpath_opt_outs=(("oldlib", "its build hard-codes -rpath"),)))
    text = (path / "env.sh").read_text()
    assert "oldlib (its build hard-codes -rpath)" in text  # the file says who needs it
    env, _ = in_bash(path / "env.sh", env={"LD_LIBRARY_PATH": "/usr/lib/other"})
    assert env["LD_LIBRARY_PATH"] == f"{path}/lib:/usr/lib/other"


def test_env_sh_warns_about_an_override_without_touching_it(prefix: Path) -> None:
    env, err = in_bash(prefix / "env.sh", env={"HSA_OVERRIDE_GFX_VERSION": "9.0.6"})
    assert env["HSA_OVERRIDE_GFX_VERSION"] == "9.0.6"
    assert "unset HSA_OVERRIDE_GFX_VERSION" in err


def test_env_sh_tune_sets_the_article_values_but_keeps_the_users(tuned: Path) -> None:
    env, _ = in_bash(tuned / "env.sh", env={"HSA_ENABLE_SDMA": "0"})
    assert env["HSA_FORCE_FINE_GRAIN_PCIE"] == "1"
    assert env["AMD_DIRECT_DISPATCH"] == "1"
    assert env["GPU_MAX_HW_QUEUES"] == "8"
    assert env["HIP_FORCE_DEV_KERNARG"] == "1"
    assert env["HSA_ENABLE_SDMA"] == "0"  # a value the user set wins


def test_env_fish(prefix: Path) -> None:
    env, err = in_fish(prefix / "env.fish")
    check_core(env, prefix)
    assert err == ""


def test_env_fish_twice_and_with_existing_values(prefix: Path) -> None:
    env, _ = in_fish(prefix / "env.fish", extra="source $argv[1];",
                     env={"LD_LIBRARY_PATH": "/usr/lib/other"})
    assert env["PATH"] == f"{prefix}/bin:{BASE_PATH}"
    assert env["LD_LIBRARY_PATH"] == "/usr/lib/other"


def test_env_fish_of_a_copied_prefix_points_at_the_copy(prefix: Path, tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "rocm copy"
    shutil.copytree(prefix, copy, symlinks=True)
    env, err = in_fish(copy / "env.fish")
    check_core(env, copy)
    assert err == ""


def test_env_fish_tune_and_override_warning(tuned: Path) -> None:
    env, err = in_fish(tuned / "env.fish",
                       env={"GPU_MAX_HW_QUEUES": "4", "HSA_OVERRIDE_GFX_VERSION": "10.3.0"})
    assert env["GPU_MAX_HW_QUEUES"] == "4" and env["HSA_FORCE_FINE_GRAIN_PCIE"] == "1"
    assert "set -e HSA_OVERRIDE_GFX_VERSION" in err


def check_module_calls(calls: list[tuple[str, ...]], prefix: Path, *, prepend: str) -> None:
    """What a modulefile (Lua or Tcl) asks the module tool to set, as the stub recorded it."""
    p = str(prefix)
    for name, value in (("ROCM_PATH", p), ("HIP_PATH", p), ("HIP_PLATFORM", "amd"),
                        ("HIP_DEVICE_LIB_PATH", f"{p}/amdgcn/bitcode")):
        assert ("setenv", name, value) in calls, name
    for name, value in (("PATH", f"{p}/bin"), ("CMAKE_PREFIX_PATH", p)):
        assert (prepend, name, value) in calls, name
    assert not [c for c in calls if "LD_LIBRARY_PATH" in c]


LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")  # Debian's lmod package


def with_lmod(script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``script`` in bash after Lmod's own init (the real `module` command)."""
    if not LMOD_INIT.is_file():
        require_tool("lmod")  # fails under RB_TEST_REQUIRE_TOOLS, skips elsewhere
    return subprocess.run(["bash", "-c", f". {LMOD_INIT}; {script}"], capture_output=True,
                          text=True, env={"PATH": BASE_PATH, "HOME": os.environ.get("HOME", "/tmp"),
                                          "LMOD_ALLOW_ROOT_USE": "yes", **(env or {})})


def test_real_lmod_loads_the_module_of_a_copied_prefix(prefix: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy" / "rocm-6.4-gfx906-mi50"
    shutil.copytree(prefix, copy, symlinks=True)
    module = rocm_spec(copy, "6.4.3", "6.4", ("gfx906",)).module_name
    # the copy keeps its old file name; what matters is that it loads the copy's folders
    name = f"rocm/{sorted((copy / 'modulefiles' / 'rocm').glob('*.lua'))[0].stem}"
    done = with_lmod(f"module use {shlex.quote(str(copy / 'modulefiles'))} && "
                     f"module load {shlex.quote(name)} && {DUMP}")
    assert done.returncode == 0, done.stderr
    env = json.loads(done.stdout.strip().splitlines()[-1])
    check_core({**env, "PATH": env["PATH"].replace(":/usr/share/lmod/lmod/libexec", "")}, copy)
    assert module == "rocm/6.4-gfx906-mi50"


def test_two_prefixes_for_one_target_are_two_modules(tmp_path: Path) -> None:
    a, b = tmp_path / "opt" / "rocm-6.4-gfx906", tmp_path / "opt" / "rocm-6.4-gfx906-test"
    for path in (a, b):
        write_env_files(rocm_spec(path, "6.4.3", "6.4", ("gfx906",)))
    uses = " && ".join(f"module use {p / 'modulefiles'}" for p in (a, b))
    done = with_lmod(f"{uses} && module load rocm/6.4-gfx906-test && module list 2>&1 && "
                     "echo ROCM_PATH=$ROCM_PATH")
    assert done.returncode == 0, done.stderr
    assert "rocm/6.4-gfx906-test" in done.stdout
    assert f"ROCM_PATH={b}" in done.stdout
    done = with_lmod(f"{uses} && module load rocm/6.4-gfx906 && echo ROCM_PATH=$ROCM_PATH")
    assert f"ROCM_PATH={a}\n" in done.stdout


# A stand-in for the Lmod functions the modulefile calls, recording what it asks for.
LMOD_STUB = r"""
local calls = {}
local function rec(kind, a, b) calls[#calls + 1] = {kind, a, b or ""} end
function setenv(n, v) rec("setenv", n, v) end
function prepend_path(n, v) rec("prepend_path", n, v) end
function whatis(t) rec("whatis", t) end
function help(t) rec("help", t) end
function family(t) rec("family", t) end
function mode() return "load" end
function myFileName() return arg[1] end
function LmodMessage(t) rec("message", t) end
dofile(arg[1])
for _, c in ipairs(calls) do io.write(c[1], "\t", c[2], "\t", c[3], "\n") end
"""


def test_modulefile_under_lua(prefix: Path, tmp_path: Path) -> None:
    lua = shutil.which("lua5.4") or shutil.which("lua")
    if lua is None:
        pytest.skip("no lua interpreter to run the modulefile")
    stub = tmp_path / "stub.lua"
    stub.write_text(LMOD_STUB)
    module = next((prefix / "modulefiles" / "rocm").glob("*.lua"))
    done = subprocess.run([lua, str(stub), str(module)], capture_output=True, text=True,
                          check=True, env={"PATH": BASE_PATH, "HSA_OVERRIDE_GFX_VERSION": "9.0.6"})
    calls = [tuple(line.split("\t")) for line in done.stdout.splitlines()]
    check_module_calls(calls, prefix, prepend="prepend_path")
    assert ("family", "rocm", "") in calls
    assert not [c for c in calls if "HSA_OVERRIDE" in c[1] and c[0] == "setenv"]
    assert any(c[0] == "message" and "HSA_OVERRIDE_GFX_VERSION" in c[1] for c in calls)


# A stand-in for the Environment Modules commands the Tcl modulefile calls, recording them;
# the modulefile runs in a real tclsh, as `modulecmd` would source it.
TCL_STUB = r"""
set calls {}
proc rec {args} { lappend ::calls $args }
proc module-whatis {t} { rec whatis $t }
proc conflict {n} { rec conflict $n }
proc setenv {n v} { rec setenv $n $v }
proc prepend-path {n v} { rec prepend-path $n $v }
proc module-info {what args} { return [expr {$what eq "mode" && [lindex $args 0] eq "load"}] }
# as modulecmd sets it: the modulefile's full path (the prefix is computed from it)
set ModulesCurrentModulefile [lindex $argv 0]
source [lindex $argv 0]
ModulesHelp
foreach c $::calls { puts [join $c "\t"] }
"""


def test_tcl_modulefile_under_tclsh(prefix: Path, tmp_path: Path) -> None:
    tclsh = shutil.which("tclsh")
    if tclsh is None:
        pytest.skip("no tclsh to run the Tcl modulefile")
    stub = tmp_path / "stub.tcl"
    stub.write_text(TCL_STUB)
    copy = tmp_path / "moved" / "prefix"
    shutil.copytree(prefix, copy, symlinks=True)
    module = next(p for p in (copy / "modulefiles" / "rocm").iterdir() if p.suffix != ".lua")
    assert module.read_text().startswith("#%Module")  # Environment Modules' magic line
    done = subprocess.run([tclsh, str(stub), str(module)], capture_output=True, text=True,
                          check=True, env={"PATH": BASE_PATH, "HSA_OVERRIDE_GFX_VERSION": "9.0.6"})
    calls = [tuple(line.split("\t")) for line in done.stdout.splitlines()]
    # the prefix is where the module file lies (the copy); its name held a space and a quote
    check_module_calls(calls, copy, prepend="prepend-path")
    assert ("conflict", "rocm") in calls
    assert not [c for c in calls if c[0] == "setenv" and "HSA_OVERRIDE" in c[1]]
    assert "HSA_OVERRIDE_GFX_VERSION is set" in done.stderr
    assert str(copy) in done.stderr  # ModulesHelp names the prefix


@pytest.mark.parametrize("odd", ["/opt/a{b", "/opt/a}b", "/opt/a$b[c]\\d\"e", "/opt/{x}"])
def test_tcl_quoting_keeps_odd_values_literal(odd: str, tmp_path: Path) -> None:
    tclsh = shutil.which("tclsh")
    if tclsh is None:
        pytest.skip("no tclsh")
    from rocbuild.prefix.envfiles import quote_tcl
    script = tmp_path / "q.tcl"
    script.write_text(f"puts -nonewline {quote_tcl(odd)}\n")
    done = subprocess.run([tclsh, str(script)], capture_output=True, text=True, check=True)
    assert done.stdout == odd
