"""`rocbuild doctor` on the hand-made host trees in tests/data/hosts (see their README).

The environment, user name and disk probe are passed in, so nothing here depends on the
machine running the tests. Checks that run tools (toolchain, packages) are in
tests/e2e/test_doctor_tools.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from rocbuild.checks import doctor, privilege
from rocbuild.checks.doctor import FAIL, OK, SKIP, WARN, Host, Needs
from rocbuild.cli import cmd_doctor
from rocbuild.cli import main as cli
from rocbuild.model.settings import resolve
from rocbuild.model.targets import parse_target_list
from rocbuild.prefix.buildinfo import BuildInfo, write_build_info

HOSTS = Path(__file__).resolve().parent.parent / "data" / "hosts"
GIB = 1 << 30
CHECK_IDS = ["os", "amdgpu", "devices", "groups", "gpus", "pcie", "firmware", "aspm", "bar",
             "nouveau", "memory", "disk", "prefix", "toolchain", "ccache", "packages", "recipes",
             "shadow",
             "hsa-override", "base", "target"]
USERS = {"mi50": "ml", "radeon7": "anna", "nodriver": "ops", "rdna2": "dev"}


def needs(targets: str = "gfx906", **kw: object) -> Needs:
    base: dict = {"targets": parse_target_list([targets]), "targets_source": "test",
                  "workdir": Path("/work/rocbuild"), "prefix": Path("/opt/rocm-6.4-gfx906"),
                  "stack_summary": "rocm 6.4.3, 18 components"}
    base.update(kw)
    return Needs(**base)


def run(tree: str | Path, *, env: Mapping[str, str] | None = None, user: str | None = None,
        want: Needs | None = None, **host: object) -> doctor.Report:
    root = HOSTS / tree if isinstance(tree, str) else tree
    name = root.name
    return doctor.run(Host(root=root, env=env or {}, user=user or USERS.get(name, "nobody"),
                           **host), want or needs())


def copy_tree(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(HOSTS / name, root, symlinks=True)
    return root


@pytest.mark.parametrize(("tree", "target", "exit_code"), [
    ("mi50", "gfx906", 0), ("radeon7", "gfx906", 0), ("nodriver", "gfx906", 1),
    ("rdna2", "gfx1030", 0),
])
def test_each_tree_gets_its_target_and_a_stable_json_document(tree: str, target: str,
                                                              exit_code: int) -> None:
    report = run(tree)
    assert report.recommended_target == target
    assert report.exit_code == exit_code
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["recommended_target"] == target
    assert [c["id"] for c in doc["checks"]] == CHECK_IDS
    assert all(set(c) == {"id", "status", "summary", "fix"} for c in doc["checks"])
    assert all(c["status"] in ("ok", "warn", "fail", "skip") for c in doc["checks"])
    assert all(c["fix"] for c in doc["checks"] if c["status"] in ("warn", "fail"))
    assert [g["gfx"] for g in doc["gpus"]] == [target]


def test_mi50_warns_about_its_gen1_link_and_nothing_else() -> None:
    report = run("mi50")
    pcie = report.check("pcie")
    assert pcie.status == WARN
    assert "2.5 GT/s (Gen1) x16" in pcie.summary and "8 GT/s (Gen3)" in pcie.summary
    assert pcie.fix is not None and "Gen3" in pcie.fix and "ASPM" in pcie.fix
    assert "idle" in pcie.fix  # amdgpu's own link power management must not be misread
    problems = {c.id for c in report.checks if c.status in (WARN, FAIL)}
    assert problems == {"pcie"}
    assert report.check("gpus").summary.endswith("from the KFD topology")
    assert report.check("bar").status == OK
    assert report.check("os").status == OK


def test_radeon_vii_desktop_warns_about_bar_groups_and_swap() -> None:
    report = run("radeon7")
    assert report.check("bar").status == WARN
    assert "BAR0 256 MiB for 16.0 GiB VRAM" in report.check("bar").summary
    assert "Above 4G Decoding" in (report.check("bar").fix or "")
    groups = report.check("groups")
    assert groups.status == WARN and "render and video" in groups.summary
    # written the way it runs here: as is for root, with sudo or su for another user
    # (in backticks: a command to paste, printed whole)
    assert groups.fix is not None and groups.fix.startswith(
        f"`{privilege.as_root('usermod -aG render,video anna')}`")
    memory = report.check("memory")
    assert memory.status == WARN and "8.0 GiB" in memory.summary
    # 6.5 GiB available + 3.84 GiB free swap × 0.5 − 1 GiB reserve = 7.42 GiB < 8 GiB
    fix = memory.fix or ""
    assert "add a 2 GiB swapfile" in fix
    for command in ("fallocate -l", "mkswap", "swapon", "chmod 600"):
        assert command in fix


def test_swap_advice_matches_the_job_sizing_formula() -> None:
    report = run("radeon7")
    info = doctor.read_meminfo(Host(root=HOSTS / "radeon7"))
    available, swap_free = info["MemAvailable"], info["SwapFree"]
    fix = report.check("memory").fix or ""
    added = int(fix.split("add a ")[1].split(" GiB")[0])
    # with the advised file the budget reaches one link job, one GiB less would not
    budget = available + (swap_free + added * GIB) * 0.5 - GIB
    assert budget >= 8 * GIB > budget - 0.5 * GIB


def test_host_without_the_driver_fails_and_still_recommends_gfx906() -> None:
    report = run("nodriver")
    amdgpu = report.check("amdgpu")
    assert amdgpu.status == FAIL and "nomodeset" in amdgpu.summary
    assert "update-grub" in (amdgpu.fix or "")
    assert report.check("devices").status == FAIL
    gpus = report.check("gpus")
    assert gpus.status == WARN and "PCI-ID table" in gpus.summary
    assert report.check("firmware").status == WARN and "CSM" in report.check("firmware").summary
    assert report.check("bar").status == OK  # 16 GiB BAR0 even without knowing the VRAM
    assert report.gpus[0].source == "pci"


def test_rdna2_debian_host_warnings() -> None:
    report = run("rdna2")
    os_check = report.check("os")
    assert os_check.status == WARN and "Debian" in os_check.summary
    assert "MI300X" in os_check.summary
    assert report.check("aspm").status == WARN and "powersave" in report.check("aspm").summary
    nouveau = report.check("nouveau")
    assert nouveau.status == WARN and "beside amdgpu" in nouveau.summary
    shadow = report.check("shadow")
    assert shadow.status == WARN and "/usr/include/hip" in shadow.summary
    assert "libamdhip64-dev" in (shadow.fix or "")
    target = report.check("target")
    assert target.status == WARN and target.fix == "`rocbuild build --target gfx1030`"
    assert run("rdna2", want=needs("gfx1030")).check("target").status == OK


def test_hip_headers_name_only_their_installed_owners_and_when_they_matter() -> None:
    """The fix said "apt remove libamdhip64-dev libhipblas-dev librocblas-dev
    librocsolver-dev" whatever was installed (three of them were not), and warned also where
    the headers cannot matter. It names the owners dpkg records for /usr/include/hip (not
    hipcc, which is installed too), and says nothing for a stack that compiles no HIP or
    compiles it against /usr itself (--base /usr)."""
    shadow = run("rdna2").check("shadow")
    assert shadow.status == WARN and "of libamdhip64-dev in /usr/include/hip" in shadow.summary
    (remove,) = re.findall(r"`([^`]*apt remove[^`]*)`", shadow.fix or "")
    assert remove == privilege.as_root("apt remove libamdhip64-dev"), shadow
    assert "llama.cpp" in (shadow.fix or "") and "--base /usr" in (shadow.fix or "")
    for quiet in (needs(hip_rocm=None), needs(hip_rocm=Path("/usr"))):
        assert run("rdna2", want=quiet).check("shadow").status == OK


def test_debian_says_what_each_road_means_for_an_mi50() -> None:
    """"Debian 12 ... not official: AMD lists Debian 12 for ROCm 6.4 only for MI300X" beside
    a README that offers Debian 12: the fix says what that means on each road."""
    fix = run("rdna2").check("os").fix or ""
    assert "rocbuild build --target gfx906" in fix and "5.2, too old for --base" in fix, fix
    assert "Debian testing and sid package ROCm 6.4 (--base /usr)" in fix, fix


@pytest.mark.parametrize(("release", "said"), [
    ('VERSION_ID="13"\nVERSION_CODENAME=trixie\n', "Debian 13's own ROCm is 5.7"),
    ("VERSION_CODENAME=forky\n", "apt install llama.cpp-tools libggml0-backend-hip"),
])
def test_newer_debian_releases_get_their_own_road(tmp_path: Path, release: str,
                                                   said: str) -> None:
    """Debian 13 packages ROCm 5.7 (refused as a base); testing and sid (no VERSION_ID)
    package 6.4: Debian's own llama.cpp packages, or --base /usr."""
    root = copy_tree("rdna2", tmp_path)
    (root / "etc/os-release").write_text(f'PRETTY_NAME="Debian GNU/Linux"\nID=debian\n{release}')
    fix = run(root).check("os").fix or ""
    assert said in fix, fix


def test_override_on_a_build_target_fails_with_the_memory_fault_reason() -> None:
    report = run("mi50", env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"})
    check = report.check("hsa-override")
    assert check.status == FAIL and report.exit_code == 1
    assert "gfx1030" in check.summary and "memory access faults" in check.summary
    assert check.fix is not None and check.fix.startswith("unset HSA_OVERRIDE_GFX_VERSION")


def test_identity_override_on_gfx906_fails_too() -> None:
    check = run("mi50", env={"HSA_OVERRIDE_GFX_VERSION": "9.0.6"}).check("hsa-override")
    assert check.status == FAIL and "identity override" in check.summary


def test_per_node_override_follows_the_kfd_node_number() -> None:
    # libhsakmt reads HSA_OVERRIDE_GFX_VERSION_<node>; the MI50 is KFD node 2 on this host
    hit = run("mi50", env={"HSA_OVERRIDE_GFX_VERSION_2": "9.0.0"}).check("hsa-override")
    assert hit.status == FAIL and "HSA_OVERRIDE_GFX_VERSION_2" in (hit.fix or "")
    miss = run("mi50", env={"HSA_OVERRIDE_GFX_VERSION_1": "9.0.0"}).check("hsa-override")
    assert miss.status == WARN and "matches no GPU" in miss.summary


def test_override_on_a_gpu_the_stack_does_not_build_is_only_a_warning() -> None:
    check = run("rdna2", env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}).check("hsa-override")
    assert check.status == WARN
    assert run("rdna2").check("hsa-override").status == OK


def test_too_little_memory_even_with_all_swap_fails(tmp_path: Path) -> None:
    root = copy_tree("mi50", tmp_path)
    (root / "proc/meminfo").write_text("MemTotal:        4000000 kB\nMemFree:         3000000 kB\n"
                                      "MemAvailable:    3500000 kB\nSwapTotal:             0 kB\n"
                                      "SwapFree:              0 kB\n")
    check = run(root, user="ml").check("memory")
    assert check.status == FAIL and "swapfile" in (check.fix or "")


def test_link_mem_from_the_recipes_drives_the_memory_check() -> None:
    assert run("mi50", want=needs(link_mem=8 * GIB)).check("memory").status == OK
    assert run("mi50", want=needs(link_mem=100 * GIB)).check("memory").status == FAIL


def test_disk_counts_workdir_and_prefix_together_on_one_filesystem() -> None:
    def same_fs(free: int):
        return lambda path: (1, free)

    def own_fs(free: int):
        return lambda path: (hash(str(path)), free)

    want = needs(disk_workdir=80 * GIB, disk_prefix=20 * GIB)
    assert run("mi50", want=want, free_space=same_fs(90 * GIB)).check("disk").status == WARN
    assert run("mi50", want=want, free_space=own_fs(90 * GIB)).check("disk").status == OK
    assert run("mi50", want=want, free_space=same_fs(500 * GIB)).check("disk").status == OK
    assert run("mi50", want=want).check("disk").status == SKIP  # captured tree, no probe


def test_free_space_probes_the_nearest_existing_parent(tmp_path: Path) -> None:
    fs, free = doctor.free_space(tmp_path / "not" / "yet" / "created")
    assert fs == os.stat(tmp_path).st_dev and free > 0


def test_groups_skip_for_a_user_the_tree_does_not_know() -> None:
    assert run("mi50", user="someone-else").check("groups").status == SKIP
    assert run("mi50", user="ml").check("groups").status == OK
    assert run("mi50", user="root").check("groups").status == OK


def test_a_rocbuild_prefix_behind_opt_rocm_does_not_shadow(tmp_path: Path) -> None:
    root = copy_tree("mi50", tmp_path)
    prefix = root / "opt/rocm-6.4-gfx906"
    write_build_info(prefix, BuildInfo(
        rocbuild_version="0", stack="rocm", version="6.4.3", series="6.4", targets=("gfx906",),
        prefix="/opt/rocm-6.4-gfx906", recipe_fingerprint="x", components={},
        started="2026-01-01T00:00:00+00:00", complete=True))
    os.symlink("/opt/rocm-6.4-gfx906", root / "opt/rocm")  # absolute, as activate writes it
    check = run(root, user="ml").check("shadow")
    assert check.status == OK and "rocbuild prefix" in check.summary


def test_a_packaged_rocm_in_opt_rocm_shadows(tmp_path: Path) -> None:
    root = copy_tree("mi50", tmp_path)
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.2.4-120\n")
    check = run(root, user="ml").check("shadow")
    assert check.status == WARN and "ROCm 6.2.4-120" in check.summary
    assert "env.sh" in (check.fix or "")


def test_needs_come_from_the_recipes(write_recipes) -> None:
    folder = write_recipes(llvm="""
        system_packages = ["libelf-dev", "zlib1g-dev"]
        [source]
        git = "https://example.invalid/llvm.git"
        ref = "rocm-6.4.3"
        [cmake]
        [resources]
        link_mem = "12GiB"
    """)
    settings = resolve({"recipes": str(folder), "prefix": "/opt/x"}, env={})
    got = cmd_doctor.needs_from(settings)
    assert got.problem is None
    assert got.link_mem == 12 * GIB
    assert dict(got.packages) == {"llvm": ("libelf-dev", "zlib1g-dev")}
    assert [str(t) for t in got.targets] == ["gfx906"]
    assert got.prefix == Path("/opt/x")


def test_broken_recipes_are_a_warning_not_a_crash(write_recipes) -> None:
    folder = write_recipes(bad="this is = not toml [")
    settings = resolve({"recipes": str(folder)}, env={})
    got = cmd_doctor.needs_from(settings)
    assert got.problem and "bad.toml" in got.problem
    report = doctor.run(Host(root=HOSTS / "mi50", user="ml"), got)
    assert report.check("recipes").status == WARN
    assert report.check("memory").status == OK  # reference figures still apply


def test_cli_json_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["doctor", "--json", "--root", str(HOSTS / "nodriver"), "--user", "ops"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    assert doc["recommended_target"] == "gfx906"
    assert {c["id"]: c["status"] for c in doc["checks"]}["amdgpu"] == "fail"
    assert doc["gpus"][0]["source"] == "pci" and doc["gpus"][0]["device_id"] == "0x66a1"


def test_cli_text_output_names_the_fix_and_the_target(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    code = cli.main(["doctor", "--root", str(HOSTS / "mi50"), "--user", "ml"])
    out = capsys.readouterr().out
    assert code == 0
    assert "warn pcie" in out and "fix:" in out
    assert "rocbuild build --target gfx906" in out


def test_a_build_only_host_without_any_amd_gpu_is_not_a_failure(tmp_path: Path) -> None:
    root = copy_tree("nodriver", tmp_path)
    shutil.rmtree(root / "sys/devices/pci0000:00/0000:00:02.0")  # take the MI50 out
    (root / "sys/bus/pci/devices/0000:05:00.0").unlink()
    report = run(root, user="ops")
    assert report.gpus == ()
    assert report.check("amdgpu").status == WARN and "build-only" in report.check("amdgpu").summary
    assert report.check("devices").status == WARN
    assert report.check("target").status == WARN and report.recommended_target is None
    assert report.exit_code == 0
