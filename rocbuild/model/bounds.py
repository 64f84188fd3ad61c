"""Upper bounds for the counts a user gives, from this host: ``--jobs``, ``--parallel`` and the
slots of ``--distcc`` hosts. Exit 2 above them, naming the setting, where it came from and the
bound.

Why: every count turns into threads or processes. ``--parallel 1000000000`` would make doit
start worker threads until the host runs out, and a slot count of a billion would do the same
through make's and ninja's job servers. A count far above what the host can run is a typo,
not a wish, and no bound here is one a real machine reaches:

- ``--parallel`` (components at once): 2 per CPU, at least 8. Each component gets at least
  one job of the shared budget, which is sized to the CPUs, so more only waits.
- ``--jobs`` (a cap on parallel jobs): 4 per CPU, at least 16, plus the remote slots of
  ``--distcc`` (what distcc may run elsewhere).
- ``--distcc``: a host's ``/LIMIT`` at most 1024 (more threads than any one machine has); all
  remote slots together at most 32 per local CPU, at least 64 (this host still preprocesses
  and links everything distcc sends); ``localhost/N`` at most the ``--jobs`` bound without
  distcc (it runs here).

The CPUs are the ones this process may use, counted by the caller (checks/hostload.py
``usable_cpus``: the affinity mask and a cgroup quota, as job sizing counts them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rocbuild.errors import ConfigError
from rocbuild.model.launchers import remote_slots

SLOTS_PER_HOST = 1024


def max_parallel(cpus: int) -> int:
    return max(8, 2 * cpus)


def max_local_jobs(cpus: int) -> int:
    return max(16, 4 * cpus)


def max_remote_slots(cpus: int) -> int:
    return max(64, 32 * cpus)


def _host_limits(hosts: str) -> list[tuple[str, int, bool]]:
    """(host, its /LIMIT, runs here) for each distcc host that names a limit."""
    found = []
    for token in hosts.split():
        if token.startswith(("--", "+")):
            continue
        host = token.split(",", 1)[0]
        limit = re.search(r"/(\d+)", host)
        if limit:
            name = host.lstrip("@").split("@")[-1].split("/")[0].split(":")[0]
            found.append((token, int(limit.group(1)), name == "localhost"))
    return found


def _refuse(setting: str, source: str, value: object, bound: int, why: str) -> ConfigError:
    where = source if source != "default" else setting
    return ConfigError(f"{where}: {value} is more than this host can use: at most {bound} "
                       f"({why})", tip=f"lower {setting} (rocbuild sizes jobs to the memory and "
                                       "CPUs that are free anyway)")


def check(values: Mapping[str, Any], sources: Mapping[str, str], cpus: int) -> None:
    """Raise ConfigError (exit 2) for a count above its bound on a host of ``cpus`` (see the
    module's doc)."""
    per = f"{cpus} CPU{'s' if cpus != 1 else ''}"
    parallel = values.get("parallel")
    if isinstance(parallel, int) and parallel > max_parallel(cpus):
        raise _refuse("--parallel", sources.get("parallel", "default"), parallel,
                      max_parallel(cpus), f"2 components per CPU on {per}, at least 8")
    hosts = str(values.get("distcc") or "")
    for token, limit, local in _host_limits(hosts):
        bound = max_local_jobs(cpus) if local else SLOTS_PER_HOST
        if limit > bound:
            why = (f"localhost runs on this host's {per}" if local else
                   "more than the threads of any one machine")
            raise _refuse("--distcc", sources.get("distcc", "default"), f"'{token}'", bound, why)
    remote = remote_slots(hosts)
    if remote > max_remote_slots(cpus):
        raise _refuse("--distcc", sources.get("distcc", "default"), f"{remote} remote slots",
                      max_remote_slots(cpus), f"32 per local CPU on {per}, at least 64: this "
                      "host preprocesses and links all that distcc sends")
    jobs = values.get("jobs")
    bound = max_local_jobs(cpus) + remote
    if isinstance(jobs, int) and jobs > bound:
        raise _refuse("--jobs", sources.get("jobs", "default"), jobs, bound,
                      f"4 per CPU on {per}, at least 16" + (f", plus {remote} distcc slots"
                                                             if remote else ""))
