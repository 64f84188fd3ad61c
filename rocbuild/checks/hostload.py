"""What this host can give a build right now, and what its kernel killed for memory.

CPU count respects the affinity mask and a cgroup v2/v1 CPU quota; available memory and
free swap respect a cgroup memory limit, because a container's build is OOM-killed at its
cgroup limit long before the host runs out. ``root`` lets tests read a captured tree. The
job counts computed from a snapshot are model/resources.py's.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

from rocbuild.checks import privilege
from rocbuild.model import resources
from rocbuild.model.resources import HostSnapshot


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel.lstrip("/")).read_text().strip()
    except OSError:
        return None


def _cgroup_dir(root: Path) -> tuple[Path | None, bool]:
    """This process's cgroup v2 folder under ``root``, or the v1 hierarchy root; (dir, is_v2)."""
    text = _read(root, "/proc/self/cgroup") or ""
    for line in text.splitlines():
        hierarchy, _, path = line.partition("::")
        if hierarchy == "0" and path:  # cgroup v2 line is "0::/path"
            return root / "sys/fs/cgroup" / path.lstrip("/"), True
    if (root / "sys/fs/cgroup/memory").is_dir():
        return root / "sys/fs/cgroup", False
    return None, False


def _int_or_none(text: str | None) -> int | None:
    if text is None or text in ("max", ""):
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    # cgroup v1 reports "no limit" as a huge page-rounded number
    return None if value >= 1 << 60 else value


def cgroup_cpu_quota(root: Path) -> float | None:
    folder, v2 = _cgroup_dir(root)
    if folder is None:
        return None
    if v2:
        quota, _, period = (_read(folder, "cpu.max") or "max").partition(" ")
        q, p = _int_or_none(quota), _int_or_none(period)
    else:
        q = _int_or_none(_read(folder, "cpu/cpu.cfs_quota_us"))
        p = _int_or_none(_read(folder, "cpu/cpu.cfs_period_us"))
        if q is not None and q < 0:
            q = None
    return q / p if q and p else None


def cgroup_memory_room(root: Path) -> tuple[int | None, int | None]:
    """(memory the cgroup still allows, swap it still allows), None where unlimited."""
    folder, v2 = _cgroup_dir(root)
    if folder is None:
        return None, None
    if v2:
        limit, used = _int_or_none(_read(folder, "memory.max")), _int_or_none(
            _read(folder, "memory.current"))
        swap_limit = _int_or_none(_read(folder, "memory.swap.max"))
        swap_used = _int_or_none(_read(folder, "memory.swap.current")) or 0
    else:
        limit = _int_or_none(_read(folder, "memory/memory.limit_in_bytes"))
        used = _int_or_none(_read(folder, "memory/memory.usage_in_bytes"))
        swap_limit, swap_used = None, 0
    # page cache counts in "current" but is reclaimable; take the usage as a safe upper bound
    mem_room = max(limit - (used or 0), 0) if limit is not None else None
    swap_room = max(swap_limit - swap_used, 0) if swap_limit is not None else None
    return mem_room, swap_room


def usable_cpus(root: Path = Path("/")) -> tuple[int, str]:
    """(CPUs this process may use, why): the affinity mask (taskset, cpusets), lowered to a
    cgroup CPU quota. The one CPU count of job sizing and of the bounds on --jobs,
    --parallel and --distcc (model/bounds.py gets it from the CLI)."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        affinity = os.cpu_count() or 1
    quota = cgroup_cpu_quota(root)
    if quota is not None and math.ceil(quota) < affinity:
        return max(1, math.ceil(quota)), f"{math.ceil(quota)} CPUs (cgroup quota)"
    return affinity, f"{affinity} CPUs"


def snapshot(root: Path = Path("/")) -> HostSnapshot:
    """What this host can give a build right now."""
    cpus, cpu_reason = usable_cpus(root)
    import psutil  # loaded when the host is measured (not per command: perf/noop.py)

    vm, sw = psutil.virtual_memory(), psutil.swap_memory()
    mem, swap, mem_reason = int(vm.available), int(sw.free), "memory"
    mem_room, swap_room = cgroup_memory_room(root)
    if mem_room is not None and mem_room < mem:
        mem, mem_reason = mem_room, "cgroup memory"
    if swap_room is not None and swap_room < swap:
        swap = swap_room
    return HostSnapshot(cpus=cpus, cpu_reason=cpu_reason, mem_available=mem, swap_free=swap,
                        mem_reason=mem_reason)


def cgroup_oom_kills(root: Path = Path("/")) -> int | None:
    """The cgroup's count of OOM kills (cgroup v2 memory.events), None where unreadable: when
    it rises during a step, the kernel killed something of ours for memory."""
    folder, v2 = _cgroup_dir(root)
    if folder is None or not v2:
        return None
    text = _read(folder, "memory.events")
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return _int_or_none(value)
    return None


KMSG = Path("/dev/kmsg")
# An OOM kill of a compiler, linker or Tensile's Python: a browser killed during a failing
# compile must not turn a real compile error into "retry with fewer jobs".
_BUILD_TOOL_KILLED = re.compile(
    r"(Killed process \d+ \(|task=)(cc1plus|cc1|clang[\w+.-]*|amdclang[\w+.-]*|ld[\w.-]*|lld|"
    r"collect2|llvm-[\w-]+|python[\d.]*|hipcc|ninja|make)\b")


def monotonic_usec() -> int:
    """Now on the clock the kernel log stamps its records with (microseconds since boot)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def kernel_oom_kills_since(start_usec: int, kmsg: Path = KMSG) -> list[str]:
    """Kernel log lines about OOM kills at or after ``start_usec``, where the log is readable
    (root, or a kernel without dmesg_restrict); [] when it is not. Records look like
    ``6,1234,5678901234,-;Out of memory: Killed process 4242 (cc1plus) ...``."""
    try:
        fd = os.open(kmsg, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    found: list[str] = []
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break  # read everything there is
            except OSError:  # EPIPE: records overwritten while reading; go on with the rest
                continue
            if not record:
                break
            # /dev/kmsg gives one record per read; a saved copy gives many: parse lines, and
            # skip the " KEY=value" continuation lines of a record
            for line in record.decode("utf-8", "replace").splitlines():
                header, sep, text = line.partition(";")
                fields = header.split(",")
                if line.startswith(" ") or not sep or len(fields) < 3 or not fields[2].isdigit():
                    continue
                if int(fields[2]) >= start_usec and _BUILD_TOOL_KILLED.search(text):
                    found.append(text)
    finally:
        os.close(fd)
    return found


SWAPFILE = "/swapfile-rocbuild"  # a name of its own: never an existing /swapfile


def swap_advice(need: int, mem_available: int, swap_free: int, swap_weight: float) -> str:
    """"add a N GiB swapfile: <commands>": the smallest whole GiB of swap (at least 1) that
    brings ``resources.memory_budget`` to ``need`` at ``swap_weight`` (at least 0.1), with
    the commands that make it and keep it, written for this host (``privilege``). The one
    swap advice of doctor and of a compile that died of memory with one job."""
    weight = max(swap_weight, 0.1)
    swap_needed = math.ceil(max(need + resources.DEFAULT_RESERVE - mem_available, 0) / weight)
    gib = max(1, math.ceil((swap_needed - swap_free) / resources.GIB))
    keep = privilege.pipe_to_root(f"echo '{SWAPFILE} none swap sw 0 0'", "tee -a /etc/fstab")
    return (f"add a {gib} GiB swapfile: "
            + privilege.as_root(f"fallocate -l {gib}G {SWAPFILE}", f"chmod 600 {SWAPFILE}",
                                f"mkswap {SWAPFILE}", f"swapon {SWAPFILE}")
            + f"  (keep it across reboots: {keep}; on btrfs use "
            f"`{privilege.as_root('btrfs filesystem mkswapfile')}` instead of fallocate)")
