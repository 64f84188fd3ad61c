"""A deletion touches only what rocbuild made: `clean` of a folder that is no rocbuild workdir
is refused, an empty path is never "the current folder", no deletion goes through a link
rocbuild did not make, `uninstall` judges a file by where it lands, and a deletion a SIGKILL
cut short is finished by the next command (the kill-resume promise covers `clean`). Every
rocbuild here runs as a child process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli, run_flags
from tests.e2e.test_empty_paths import a_users_project
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_clean_refuses_a_folder_that_is_not_a_rocbuild_workdir(tmp_path: Path,
                                                               small: list[str]) -> None:
    project = a_users_project(tmp_path)
    before = sorted(str(p) for p in project.rglob("*"))
    flags = [f for f in small]
    flags[flags.index("--workdir") + 1] = str(project)
    for args in (("clean", "--all", "--sources"), ("clean", "a", "--sources"),
                 ("clean", "--all", "--caches", "--dry-run")):
        done = run_flags(flags, *args, expect=2)
        said = " ".join(done.stderr.split())
        assert str(project) in said and "not a rocbuild workdir" in said, done.explain()
    assert sorted(str(p) for p in project.rglob("*")) == before
    assert not (project / "state").exists()  # nothing of rocbuild's was made there either


def test_clean_prefix_files_never_deletes_through_a_link_at_the_stacks_modulefiles(
        tmp_path: Path, chain: Chain) -> None:
    run_flags(chain.flags(), "build", "--no-verify", "--quiet", expect=0)
    folder = chain.prefix / "modulefiles" / "chain"
    names = sorted(p.name for p in folder.iterdir())
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in names:  # files of the same names where the link leads
        (outside / name).write_text("not rocbuild's\n")
    for entry in folder.iterdir():
        entry.unlink()
    folder.rmdir()
    folder.symlink_to(outside)
    run_flags(chain.flags(), "clean", "--all", "--no-builds", "--prefix-files", expect=0)
    assert sorted(p.name for p in outside.iterdir()) == names
    assert all((outside / n).read_text() == "not rocbuild's\n" for n in names)
    assert not (chain.prefix / "env.sh").exists()  # the rest of its own files went


def test_clean_never_deletes_through_a_link_in_the_workdir(tmp_path: Path,
                                                           small: list[str]) -> None:
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    work = tmp_path / "work"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "a").mkdir(parents=True)
    (elsewhere / "a" / "precious.txt").write_text("mine\n")
    for folder in ("build", "src"):
        os.rename(work / folder, tmp_path / f"moved-{folder}")
        (work / folder).symlink_to(elsewhere)
        done = run_flags(small, "clean", "a", "--sources", expect=0)
        assert (elsewhere / "a" / "precious.txt").is_file(), done.explain()
        assert "link" in done.stdout, done.explain()
        (work / folder).unlink()
        os.rename(tmp_path / f"moved-{folder}", work / folder)


def test_uninstall_judges_a_file_by_where_it_lands(chain: Chain) -> None:
    run_flags(chain.flags(), "build", "--no-verify", "--quiet", expect=0)
    header = chain.prefix / "include" / "alpha.h"
    assert header.is_file()
    (chain.prefix / "share").mkdir(exist_ok=True)
    (chain.prefix / "share" / "l").symlink_to("../include")
    record = chain.prefix / ".rocbuild" / "installed" / "gamma.json"
    doc = json.loads(record.read_text())
    doc["files"].append("share/l/alpha.h")  # gamma's record, through a link: alpha's file
    record.write_text(json.dumps(doc))
    run_flags(chain.flags(), "uninstall", "gamma", expect=0)
    assert header.is_file()


def test_prefixes_remove_of_a_link_to_a_prefix_is_refused_without_a_traceback(
        tmp_path: Path, small: list[str]) -> None:
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    link = tmp_path / "prefix-link"
    link.symlink_to(tmp_path / "prefix")
    done = run_cli("prefixes", "--remove", str(link), expect=2)
    said = " ".join(done.stderr.split())
    assert str(link) in said and "link" in said and str(tmp_path / "prefix") in said, said
    assert (tmp_path / "prefix" / ".rocbuild").is_dir() and link.is_symlink()


# a `rocbuild` whose deletions die by SIGKILL at the Nth file or folder removed: a kill in the
# middle of removing a checkout, as a real `kill -9` (or the OOM killer) would leave it
KILL_AT = """
import os, signal, sys
count = [int(sys.argv[1])]
def counted(real):
    def call(*args, **kwargs):
        count[0] -= 1
        if count[0] == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call
os.unlink, os.rmdir = counted(os.unlink), counted(os.rmdir)
sys.argv = ["rocbuild", *sys.argv[2:]]
from rocbuild.__main__ import run
run()
"""


def test_a_killed_clean_sources_is_finished_by_the_next_command(tmp_path: Path,
                                                                small: list[str]) -> None:
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    checkout = tmp_path / "work" / "src" / "a"
    files = [p for p in checkout.rglob("*") if p.is_file()]
    assert len(files) > 6
    done = subprocess.run([sys.executable, "-c", KILL_AT, "4", "clean", "a", "--sources",
                           "--no-builds", *small], env=child_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    # the checkout is whole or gone, never a .git without half of its files
    assert not checkout.exists() or sorted(p for p in checkout.rglob("*") if p.is_file()) \
        == sorted(files)
    built = run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    assert (tmp_path / "prefix" / "share" / "a.txt").read_text() == "a\n"
    trash = tmp_path / "work" / "state" / "trash"
    assert not trash.exists() or list(trash.iterdir()) == [], built.explain()


def test_a_killed_clean_is_finished_by_the_next_clean(tmp_path: Path, small: list[str]) -> None:
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    tree = tmp_path / "work" / "build" / "a"
    assert tree.is_dir()
    done = subprocess.run([sys.executable, "-c", KILL_AT, "3", "clean", "a", *small],
                          env=child_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert not tree.exists()  # renamed away whole before its removal began
    trash = tmp_path / "work" / "state" / "trash"
    assert any(trash.iterdir())  # the part the kill did not remove
    again = run_flags(small, "clean", "a", "--sources", expect=0)
    assert "interrupted clean" in again.stdout, again.explain()
    assert list(trash.iterdir()) == [] and not (tmp_path / "work" / "src" / "a").exists()


def test_a_killed_activate_leaves_no_temp_file_after_the_next_activate(tmp_path: Path) -> None:
    from tests.unit.test_activate import make_prefix

    opt = tmp_path / "opt"
    opt.mkdir()
    old, new = make_prefix(opt, "rocm-a"), make_prefix(opt, "rocm-b")
    link = opt / "rocm"
    run_cli("activate", str(old), "--link", str(link), expect=0)
    child = ("import os, signal, sys\nfrom pathlib import Path\nimport rocbuild.files as f\n"
             "real = f.os.replace\n"
             "def replace(src, dst):\n"
             "    if str(dst).endswith('.rocbuild-state.json'):\n"
             "        os.kill(os.getpid(), signal.SIGKILL)\n"
             "    return real(src, dst)\n"
             "f.os.replace = replace\n"
             "sys.argv = ['rocbuild', 'activate', sys.argv[1], '--link', sys.argv[2]]\n"
             "from rocbuild.__main__ import run\nrun()\n")
    done = subprocess.run([sys.executable, "-c", child, str(new), str(link)],
                          env=child_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    temps = [p.name for p in opt.iterdir() if p.name.endswith(".tmp")]
    assert temps, sorted(p.name for p in opt.iterdir())  # what the kill left
    run_cli("activate", str(old), "--link", str(link), expect=0)
    assert [p.name for p in opt.iterdir() if p.name.endswith(".tmp")] == []
    assert os.readlink(link) == str(old)



def test_a_killed_prefixes_remove_is_finished_by_the_same_command(tmp_path: Path,
                                                                   small: list[str]) -> None:
    """Killed at each file it removes in turn: the same command again finishes the removal
    (the marker went first as often as not, and the rest was refused as "not a prefix
    rocbuild built" for good)."""
    import shutil

    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    prefix, pristine = tmp_path / "prefix", tmp_path / "pristine"
    shutil.copytree(prefix, pristine, symlinks=True)
    listed = tmp_path / "home" / ".local" / "state" / "rocbuild" / "prefixes.json"
    listing = listed.read_text()  # the user's list of prefixes names it (conftest's XDG)
    kills = 0
    for at in range(1, 40):
        if prefix.exists():
            shutil.rmtree(prefix)
        shutil.copytree(pristine, prefix, symlinks=True)
        listed.write_text(listing)
        done = subprocess.run([sys.executable, "-c", KILL_AT, str(at), "prefixes", "--remove",
                               str(prefix)], env=child_env(), capture_output=True, text=True,
                              timeout=120)
        if done.returncode != -signal.SIGKILL:  # fewer files than ``at``: removed in one go
            assert done.returncode == 0 and not prefix.exists(), done.stderr
            break
        kills += 1
        again = run_cli("prefixes", "--remove", str(prefix), expect=0)
        assert not prefix.exists() and str(prefix) not in listed.read_text(), (
            at, again.explain())
    assert kills >= 5


def test_a_killed_uninstall_is_finished_by_the_same_command(tmp_path: Path,
                                                            chain: Chain) -> None:
    """Killed at each file it removes in turn: the prefix never claims to be complete with a
    component gone, and the same command again finishes the removal."""
    import shutil

    from rocbuild.prefix.buildinfo import read_build_info

    run_flags(chain.flags(), "build", "--no-verify", "--quiet", expect=0)
    pristine = tmp_path / "pristine"
    shutil.copytree(chain.prefix, pristine, symlinks=True)
    kills = 0
    for at in range(1, 40):
        shutil.rmtree(chain.prefix)
        shutil.copytree(pristine, chain.prefix, symlinks=True)
        done = subprocess.run([sys.executable, "-c", KILL_AT, str(at), "uninstall", "gamma",
                               *chain.flags()], env=child_env(), capture_output=True,
                              text=True, timeout=120)
        if done.returncode != -signal.SIGKILL:
            assert done.returncode == 0, done.stderr
            break
        kills += 1
        info = read_build_info(chain.prefix)
        assert info is not None and not (info.complete and not (chain.prefix / "bin" /
                                                                "gamma").exists()), at
        again = run_flags(chain.flags(), "uninstall", "gamma")
        # killed after its last write (the temp name's cleanup): nothing was left to do
        assert again.returncode == 0 or "gamma is not installed" in again.stderr, again.explain()
        info = read_build_info(chain.prefix)
        assert info is not None and "gamma" not in info.components, (at, again.explain())
        assert not (chain.prefix / "bin" / "gamma").exists() and not info.complete
    assert kills >= 2
