"""The layers import one way (README, Development): the CLI uses everything; running a build
uses the model, the checks and the prefix; the checks and the prefix use the model only; the
model uses nothing of the others. errors, faults, files and proc (the one way to run a
program) are shared by all."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rocbuild"
SHARED = {"errors", "faults", "files", "proc", "__init__", "__version__"}
ALLOWED = {
    "model": {"model"},
    "checks": {"checks", "model"},
    "prefix": {"prefix", "model"},
    "run": {"run", "model", "checks", "prefix"},
    "bench": {"bench", "model", "checks", "prefix"},
    "cli": {"cli", "run", "model", "checks", "prefix", "bench"},
}


def imported_layers(path: Path) -> set[tuple[str, int]]:
    """The rocbuild layers a module imports, with the line of each import (lazy ones too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "rocbuild":
                names = [f"rocbuild.{a.name}" for a in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "rocbuild" and len(parts) > 1 and parts[1] not in SHARED:
                found.add((parts[1], node.lineno))
    return found


def test_every_module_sits_in_a_layer() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.stem not in SHARED | {"__main__"})
    assert loose == [], f"put these in a layer folder: {loose}"


def test_imports_go_one_way() -> None:
    wrong = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for used, line in sorted(imported_layers(path)):
                if used not in allowed:
                    wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports rocbuild.{used}")
    assert wrong == [], "layers import one way:\n" + "\n".join(wrong)


# The model describes what is built and runs nothing: no process, no host probe.
# A module here that needs one belongs in run/ (a step's work) or checks/ (a probe).
PROCESS_MODULES = {"subprocess", "psutil", "multiprocessing", "pty", "asyncio", "git",
                   "rocbuild.proc"}
PROCESS_CALLS = {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp",
                 "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp",
                 "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle",
                 "spawnlp", "spawnlpe"}


def processes_started(path: Path) -> list[str]:
    """What in a module can start a process: an import of a process module (lazy ones too;
    ``from rocbuild import proc`` counts) or a call of os.system, os.popen, os.exec*, ..."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif (isinstance(node, ast.Attribute) and node.attr in PROCESS_CALLS
              and isinstance(node.value, ast.Name) and node.value.id == "os"):
            found.append(f"{node.lineno}: os.{node.attr}")
        hits = [n for n in names if n in PROCESS_MODULES or n.split(".")[0] in PROCESS_MODULES]
        if hits:
            found.append(f"{node.lineno}: imports {hits[-1]}")
    return found


def test_the_model_runs_nothing() -> None:
    wrong = [f"{path.relative_to(PACKAGE)}:{hit}"
             for path in sorted((PACKAGE / "model").rglob("*.py"))
             for hit in processes_started(path)]
    assert wrong == [], ("model/ starts no process and probes no host (move it to run/ or "
                         "checks/):\n" + "\n".join(wrong))


def test_the_process_rule_sees_what_it_forbids(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\nfrom rocbuild import proc\ndef f():\n    import psutil\n"
                      "    os.system('x')\n")
    assert processes_started(module) == ["2: imports rocbuild.proc", "4: imports psutil",
                                         "5: os.system"]


# The model reads no host facts either: the user's environment, the euid, the
# programs on PATH and the CPUs are passed in (Settings, HostTools/Launch, a step's base
# environment, ``cpus``), found by checks/ or the CLI.
HOST_READS = {("os", "environ"), ("os", "getenv"), ("os", "geteuid"), ("os", "getuid"),
              ("os", "sched_getaffinity"), ("os", "cpu_count"), ("shutil", "which")}


def host_reads(path: Path) -> list[str]:
    """Each ``os.environ``, ``os.geteuid``, ``shutil.which``, ... in a module, and each
    ``from os import environ`` style import of one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and (node.value.id, node.attr) in HOST_READS):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in {"os", "shutil"}:
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names
                      if (node.module, a.name) in HOST_READS]
    return sorted(found, key=lambda hit: int(hit.split(":")[0]))


def test_the_model_reads_no_host_facts() -> None:
    wrong = [f"{path.relative_to(PACKAGE)}:{hit}"
             for path in sorted((PACKAGE / "model").rglob("*.py"))
             for hit in host_reads(path)]
    assert wrong == [], ("model/ reads no host facts (pass them in, as HostTools; find them "
                         "in checks/):\n" + "\n".join(wrong))


def test_the_host_rule_sees_what_it_forbids(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os, shutil\nfrom os import environ\nos.environ.get('X')\n"
                      "shutil.which('sudo')\nos.geteuid()\nlen(os.sched_getaffinity(0))\n")
    assert host_reads(module) == ["2: from os import environ", "3: os.environ",
                                  "4: shutil.which", "5: os.geteuid", "6: os.sched_getaffinity"]


# --- run/'s rooms (docs/architecture.md, run/'s four rooms) ---
# Each room of run/ imports only the rooms its face names: the binary cache, the sources and
# the state never reach into the engine, so they can be read, tested and reused without a run.
ROOM_IMPORTS = {
    "engine": {"engine", "state", "sources", "cache"},
    "state": {"state", "sources"},
    "sources": {"sources"},
    "cache": {"cache", "state", "sources"},
}


def imported_rooms(path: Path) -> set[tuple[str, int]]:
    """The rooms of run/ a module imports, with the line of each import (lazy ones too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "rocbuild.run" else [
                f"rocbuild.run.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["rocbuild", "run"] and len(parts) > 2:
                found.add((parts[2], node.lineno))
    return found


def test_every_run_module_sits_in_a_room() -> None:
    loose = sorted(p.name for p in (PACKAGE / "run").glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"put these in a room of run/ (its __init__ says which): {loose}"
    assert sorted(p.name for p in (PACKAGE / "run").iterdir()
                  if p.is_dir() and p.name != "__pycache__") == sorted(ROOM_IMPORTS)


def test_rooms_import_one_way() -> None:
    wrong = []
    for room, allowed in ROOM_IMPORTS.items():
        for path in sorted((PACKAGE / "run" / room).rglob("*.py")):
            for used, line in sorted(imported_rooms(path)):
                if used not in allowed:
                    wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports rocbuild.run.{used}")
    assert wrong == [], "run/'s rooms import one way:\n" + "\n".join(wrong)


# --- the commands that show run state read it through run/state/view.py, which writes nothing
# (plan also saves the base's code memo: basememo) ---
SHOWS_STATE = {"cmd_status": set(), "cmd_logs": set(), "cmd_info": set(), "cmd_list": set(),
               "cmd_plan": {"basememo"}, "cmd_doctor": {"basememo"}, "ui": set()}


def test_the_commands_that_show_run_state_read_it_through_the_view() -> None:
    wrong = []
    for name, also in SHOWS_STATE.items():
        path = PACKAGE / "cli" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "rocbuild.run.state":
                used = {a.name for a in node.names} - {"view"} - also
            elif isinstance(node, ast.ImportFrom) and node.module \
                    and node.module.startswith("rocbuild.run.state."):
                used = {node.module}
            else:
                continue
            wrong += [f"cli/{name}.py:{node.lineno} imports {u}" for u in sorted(used)]
    assert wrong == [], "read run state through rocbuild.run.state.view:\n" + "\n".join(wrong)
