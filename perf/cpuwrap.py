"""Run ``python -m rocbuild ARGS`` in this process and write where its CPU time went: its
own (all its threads) and each child's it waited for (the child with everything the child
waited for: a compile step's `cmake --build` with ninja and every compiler), to the JSON
file $PERF_CPU_OUT. perf/parallel.py runs every rocbuild it measures through this, before
and after alike, so their CPU times split the same way as the commands by hand.

    PERF_CPU_OUT=cpu.json python -m perf.cpuwrap build ...

Each child's CPU is read from os.wait4 where subprocess reaps it (Popen._try_wait), which
rocbuild does for every program it runs (rocbuild/proc.py).
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import runpy
import subprocess
import sys
import threading
from typing import Any

_ROWS: list[tuple[float, list[str]]] = []
_LOCK = threading.Lock()
_original = subprocess.Popen._try_wait  # type: ignore[attr-defined]


def _try_wait(self: subprocess.Popen[Any], wait_flags: int) -> tuple[int, int]:
    try:
        pid, status, usage = os.wait4(self.pid, wait_flags)
    except ChildProcessError:
        return self.pid, 0  # as subprocess does: already reaped
    if pid:
        argv = [self.args] if isinstance(self.args, (str, bytes)) else list(self.args)
        with _LOCK:
            _ROWS.append((usage.ru_utime + usage.ru_stime, [str(a) for a in argv[:8]]))
    return pid, status


def kind(argv: list[str]) -> str:
    """What a child was, for the split: git, configure, compile, install, watchdog, other."""
    tool = os.path.basename(argv[0]) if argv else ""
    if tool == "git":
        return "git"
    if tool == "cmake":
        if "--build" in argv:
            return "compile"
        if "--install" in argv:
            return "install"
        if "-S" in argv or "-G" in argv:
            return "configure"
    if tool.startswith("python") and "-I" in argv and "-S" in argv:
        return "watchdog"
    return "other"


def _write() -> None:
    own = resource.getrusage(resource.RUSAGE_SELF)
    split: dict[str, float] = {}
    for cpu, argv in _ROWS:
        split[kind(argv)] = split.get(kind(argv), 0.0) + cpu
    out = os.environ.get("PERF_CPU_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"rocbuild": own.ru_utime + own.ru_stime, "children": split,
                       "count": len(_ROWS)}, f)


def main() -> None:
    subprocess.Popen._try_wait = _try_wait  # type: ignore[attr-defined,method-assign]
    atexit.register(_write)
    sys.argv = ["rocbuild", *sys.argv[1:]]
    runpy.run_module("rocbuild", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
