from __future__ import annotations

from pathlib import Path

from rocbuild.checks.hostload import cgroup_cpu_quota, cgroup_memory_room
from rocbuild.model.resources import GIB, HostSnapshot, jobs_for


def host(cpus: int = 16, mem_gib: float = 11.2, swap_gib: float = 4) -> HostSnapshot:
    return HostSnapshot(cpus=cpus, cpu_reason=f"{cpus} CPUs", mem_available=int(mem_gib * GIB),
                        swap_free=int(swap_gib * GIB), mem_reason="memory")


def test_memory_bound_job_count_with_reason() -> None:
    count = jobs_for(host(), int(2.5 * GIB), swap_weight=0.5, reserve=GIB)
    # (11.2 + 4 * 0.5 - 1) / 2.5 = 4.88 -> 4
    assert count.jobs == 4
    assert count.reason.startswith("4 jobs: memory 11.2 GiB + swap 4.0 GiB × 0.5 − 1.0 GiB "
                                   "reserve at 2.5 GiB/job; 16 CPUs (allows 16)")


def test_cpu_bound_and_cap_and_floor() -> None:
    assert jobs_for(host(cpus=2), GIB).reason.startswith("2 jobs: 2 CPUs")
    assert jobs_for(host(), GIB, cap=3).jobs == 3
    assert "--jobs 3" in jobs_for(host(), GIB, cap=3).reason
    tiny = jobs_for(host(mem_gib=0.5, swap_gib=0), 8 * GIB)
    assert tiny.jobs == 1 and tiny.reason.startswith("1 job: memory")


def _cgroup_v2(root: Path, **files: str) -> None:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text("0::/user.slice/build\n")
    folder = root / "sys/fs/cgroup/user.slice/build"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text + "\n")


def test_cgroup_v2_limits(tmp_path: Path) -> None:
    _cgroup_v2(tmp_path, cpu_max="150000 100000", memory_max=str(8 * GIB),
               memory_current=str(3 * GIB))
    (tmp_path / "sys/fs/cgroup/user.slice/build/memory.swap.max").write_text(f"{2 * GIB}\n")
    assert cgroup_cpu_quota(tmp_path) == 1.5
    assert cgroup_memory_room(tmp_path) == (5 * GIB, 2 * GIB)


def test_cgroup_without_limits(tmp_path: Path) -> None:
    _cgroup_v2(tmp_path, cpu_max="max 100000", memory_max="max")
    assert cgroup_cpu_quota(tmp_path) is None
    assert cgroup_memory_room(tmp_path) == (None, None)
    assert cgroup_cpu_quota(tmp_path / "nothing") is None


def test_link_and_compile_pools_share_one_budget() -> None:
    from rocbuild.model.resources import jobs_by_kind

    sixteen = host(cpus=16, mem_gib=28.8, swap_gib=8)  # 16 cores, 32 GiB, idle desktop
    counts = jobs_by_kind({"compile_mem": 1.5 * GIB, "link_mem": 6 * GIB}, sixteen,
                        swap_weight=0.5, cap=None)
    link, compile_ = counts["link"].jobs, counts["compile"].jobs
    budget = (28.8 + 8 * 0.5 - 1) * GIB
    assert link >= 1 and compile_ >= 1
    assert link * 6 * GIB + compile_ * 1.5 * GIB <= budget  # both pools full at once still fit
    assert link == 2 and compile_ == 13


def test_kernel_oom_lines_after_the_step_started(tmp_path: Path) -> None:
    from rocbuild.checks.hostload import kernel_oom_kills_since

    kmsg = tmp_path / "kmsg"
    kmsg.write_text(
        "6,100,1000000,-;Out of memory: Killed process 11 (cc1plus) total-vm:1kB\n"
        "4,101,5000000,-;usb 1-1: new device\n"
        " SUBSYSTEM=usb\n"
        "3,102,6000000,-;Out of memory: Killed process 4242 (ld.lld) total-vm:9000000kB\n"
        "6,103,6000001,-;oom-kill:constraint=CONSTRAINT_NONE,task=ld.lld,pid=4242\n"
        "3,104,7000000,-;Out of memory: Killed process 77 (chrome) total-vm:1kB\n")
    found = kernel_oom_kills_since(2_000_000, kmsg)
    assert found == ["Out of memory: Killed process 4242 (ld.lld) total-vm:9000000kB",
                     "oom-kill:constraint=CONSTRAINT_NONE,task=ld.lld,pid=4242"]
    assert kernel_oom_kills_since(0, tmp_path / "unreadable") == []


def test_format_bytes_is_the_one_byte_formatter() -> None:
    from rocbuild.model.resources import GIB, format_bytes, format_gib
    assert format_bytes(16 * GIB) == "16.0 GiB"
    assert format_bytes(256 << 20) == "256 MiB"
    assert format_bytes(3 << 10) == "3 KiB"
    assert format_bytes(GIB // 2, "GiB", digits=2) == "0.50 GiB"
    assert format_gib(GIB // 2) == "0.5 GiB"
