"""The folders a prefix may be (FHS, prefixguard.py) and the host-derived bounds of counts
(bounds.py): pure decisions, checked without a process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocbuild.errors import ConfigError
from rocbuild.model import bounds
from rocbuild.prefix import prefixguard


@pytest.mark.parametrize("prefix", [
    "/", "/usr", "/usr/include", "/usr/local", "/usr/local/lib", "/usr/local/share/rocm",
    "/usr/sbin", "/usr/lib/x86_64-linux-gnu", "/etc", "/etc/ssl", "/var", "/var/lib",
    "/var/opt/rocm", "/opt", "/opt/lib", "/opt/bin", "/boot/rocm", "/run/rocm", "/srv",
    "/tmp", "/home", "/root", "/mnt", "/dev/shm/rocm", "/proc/1", "/lib64/rocm"])
def test_system_folders_are_refused_whatever_the_flags(prefix: str) -> None:
    with pytest.raises(ConfigError, match="installs only into a folder of its own"):
        prefixguard.check(Path(prefix), allow_existing=True)


@pytest.mark.parametrize("prefix", [
    "/opt/rocm-6.4-gfx906", "/opt/rocm-6.4-gfx906_xnack-", "/usr/local/rocm-6.4",
    "/usr/local/rocm-6.4/sub", "/srv/rocm", "/mnt/data/rocm", "/tmp/rocm-test"])
def test_folders_of_their_own_are_allowed(prefix: str) -> None:
    prefixguard.check(Path(prefix), allow_existing=True)  # the default /opt/rocm-... included


def test_a_prefix_holding_home_is_refused_and_one_inside_home_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "users" / "me"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    for holder in (home, home.parent, tmp_path):
        with pytest.raises(ConfigError, match="home"):
            prefixguard.check(holder, allow_existing=True)
    prefixguard.check(home / "rocm-6.4", allow_existing=True)


def test_a_workdir_equal_to_or_inside_the_prefix_is_refused(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    for workdir in (prefix, prefix / "work", prefix / "a" / "b"):
        with pytest.raises(ConfigError, match=r"--workdir .* the prefix"):
            prefixguard.check(prefix, workdir=workdir)
    prefixguard.check(prefix, workdir=tmp_path / "work")  # side by side
    prefixguard.check(prefix, workdir=tmp_path)  # the prefix inside the workdir is no escape


@pytest.mark.parametrize("values, message", [
    ({"parallel": 9}, "--parallel: 9 is more than this host can use: at most 8"),
    ({"jobs": 17}, "--jobs: 17 is more than this host can use: at most 16"),
    ({"distcc": "box/1025"}, "'box/1025' is more than this host can use: at most 1024"),
    ({"distcc": "localhost/17"}, "'localhost/17' is more than this host can use: at most 16"),
    ({"distcc": " ".join(f"b{i}/64" for i in range(2))}, "128 remote slots"),
    ({"jobs": 16 + 64 + 1, "distcc": "b/64"}, "at most 80 (4 per CPU on 2 CPUs, at least 16, "
                                              "plus 64 distcc slots)"),
])
def test_counts_above_what_the_host_runs_are_refused(values: dict[str, object],
                                                     message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        bounds.check(values, {}, cpus=2)


def test_counts_within_the_bounds_pass() -> None:
    bounds.check({"parallel": 8, "jobs": 16 + 64, "distcc": "b/64 localhost/16"}, {}, cpus=2)
    bounds.check({"parallel": 256, "jobs": 512}, {}, cpus=128)  # a big host gets more


def test_the_message_names_where_the_value_came_from() -> None:
    with pytest.raises(ConfigError, match=r"^env ROCBUILD_PARALLEL: 100 is more"):
        bounds.check({"parallel": 100}, {"parallel": "env ROCBUILD_PARALLEL"}, cpus=2)
