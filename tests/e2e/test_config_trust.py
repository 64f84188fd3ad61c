"""Whose configuration is used: a rocbuild.toml, a recipe overlay or a recipes folder that
someone other than the user (or root) could have written is not used, as git refuses a
repository another user owns (CVE-2022-24765); one warning names it and the setting that
allows it (``safe_directories`` in the user's own config file). The tests run as root, so
"another user" is uid 1000 made with ``os.chown``; every rocbuild runs as a child process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli import REPO, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")]

OTHER = 1000  # "another user": any uid that is not this test's and not root
NO_SUDO = {"SUDO_UID": ""}  # a sudo caller would be trusted like the user (as git does)


def config_doc(cwd: Path, env: dict[str, str] | None = None) -> tuple[dict, str]:
    done = run_cli("config", "--json", cwd=cwd, env={**NO_SUDO, **(env or {})}, expect=0)
    return json.loads(done.stdout), done.stderr


def rows(doc: dict) -> dict[str, dict]:
    return {row["name"]: row for row in doc["settings"]}


def user_config(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".config" / "rocbuild" / "rocbuild.toml"  # conftest's XDG


def sticky_folder(tmp_path: Path) -> Path:
    """A shared folder like /tmp: everyone may create files, only their owner removes them."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    return shared


def test_a_config_another_user_wrote_above_the_current_folder_is_not_used(
        tmp_path: Path) -> None:
    shared = sticky_folder(tmp_path)
    planted = shared / "rocbuild.toml"
    planted.write_text('[rocbuild]\nlauncher = "/tmp/evil"\njobs = 7\n')
    os.chown(planted, OTHER, OTHER)
    mine = shared / "me" / "project"
    mine.mkdir(parents=True)
    doc, err = config_doc(mine)
    assert doc["config_file"] is None, doc
    assert rows(doc)["launcher"]["source"] == "default" and rows(doc)["jobs"]["value"] != "7"
    said = " ".join(err.split())
    assert f"{planted} is not used" in said and f"uid {OTHER}" in said, err
    assert "safe_directories" in said and str(user_config(tmp_path)) in said, err
    assert said.count("is not used") == 1, err
    # the user says the folder is theirs to trust: the file is read
    user_config(tmp_path).parent.mkdir(parents=True)
    user_config(tmp_path).write_text(f'[rocbuild]\nsafe_directories = ["{shared}"]\n')
    doc, err = config_doc(mine)
    assert doc["config_file"] == str(planted) and rows(doc)["jobs"]["value"] == "7", (doc, err)
    assert "is not used" not in err


def test_a_config_in_a_folder_another_user_owns_is_not_used_nor_the_overlay_it_names(
        tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    overlay = theirs / "recipes"
    overlay.mkdir(parents=True)
    (overlay / "rocm-cmake.toml").write_text(
        (REPO / "recipes" / "rocm-cmake.toml").read_text().replace('summary = "',
                                                                   'summary = "THEIRS ', 1))
    (theirs / "rocbuild.toml").write_text(f'[rocbuild]\nrecipe_overlay = "{overlay}"\n')
    os.chown(theirs, OTHER, OTHER)  # the file is root's, but its folder is theirs to swap
    doc, err = config_doc(theirs)
    assert doc["config_file"] is None, (doc, err)
    assert f"{theirs / 'rocbuild.toml'} is not used" in " ".join(err.split()), err
    plan = json.loads(run_cli("plan", "--json", "--workdir", str(tmp_path / "work"),
                              cwd=theirs, env=NO_SUDO, expect=0).stdout)
    comp = next(c for c in plan["components"] if c["name"] == "rocm-cmake")
    assert not comp["summary"].startswith("THEIRS"), comp


def test_a_world_writable_config_of_roots_is_not_used(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "rocbuild.toml").write_text("[rocbuild]\njobs = 7\n")
    os.chmod(project / "rocbuild.toml", 0o666)
    doc, err = config_doc(project)
    assert doc["config_file"] is None and rows(doc)["jobs"]["value"] != "7", (doc, err)
    assert "writable by" in err and "mode 0666" in err, err
    # the group-writable file of a group whose only member is its owner is harmless (a user
    # private group, Debian's and Ubuntu's default umask 002 makes every file so)
    os.chmod(project / "rocbuild.toml", 0o664)
    doc, err = config_doc(project)
    assert doc["config_file"] == str(project / "rocbuild.toml"), (doc, err)


def test_an_overlay_another_user_can_write_is_not_used(tmp_path: Path) -> None:
    overlay = tmp_path / "home" / ".config" / "rocbuild" / "recipes"
    overlay.mkdir(parents=True)
    (overlay / "rocm-cmake.toml").write_text(
        (REPO / "recipes" / "rocm-cmake.toml").read_text().replace('summary = "',
                                                                   'summary = "THEIRS ', 1))
    os.chown(overlay / "rocm-cmake.toml", OTHER, OTHER)
    done = run_cli("plan", "--json", "--workdir", str(tmp_path / "work"), env=NO_SUDO,
                   expect=0)
    comp = next(c for c in json.loads(done.stdout)["components"] if c["name"] == "rocm-cmake")
    assert not comp["summary"].startswith("THEIRS") and comp["recipe_source"] == "recipes"
    said = " ".join(done.stderr.split())
    assert f"{overlay / 'rocm-cmake.toml'}" in said and "overlay" in said, done.stderr
    assert "safe_directories" in said, done.stderr


def test_an_overlay_patch_another_user_owns_is_not_used(tmp_path: Path) -> None:
    series = tmp_path / "home" / ".config" / "rocbuild" / "patches" / "rocm-cmake"
    series.mkdir(parents=True)
    (series / "0001-theirs.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    os.chown(series / "0001-theirs.patch", OTHER, OTHER)
    done = run_cli("plan", "--json", "--workdir", str(tmp_path / "work"), env=NO_SUDO,
                   expect=0)
    comp = next(c for c in json.loads(done.stdout)["components"] if c["name"] == "rocm-cmake")
    assert comp["patches"] == [] and comp["recipe_source"] == "recipes", comp
    assert "0001-theirs.patch" in done.stderr, done.stderr


def test_a_recipes_folder_another_user_can_write_is_refused(tmp_path: Path,
                                                            write_recipes) -> None:
    recipes = write_recipes(a="""
        [source]
        git = "https://example.invalid/a.git"
        ref = "v1"
        [cmake]
        args = []
    """)
    os.chmod(recipes, 0o777)
    done = run_cli("plan", "--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
                   env=NO_SUDO, expect=2)
    said = " ".join(done.stderr.split())
    assert str(recipes) in said and "mode 0777" in said and "safe_directories" in said, said


def test_the_users_own_config_file_must_be_the_users(tmp_path: Path) -> None:
    shared = sticky_folder(tmp_path)
    (shared / "rocbuild.toml").write_text("[rocbuild]\njobs = 7\n")
    os.chown(shared / "rocbuild.toml", OTHER, OTHER)
    user_config(tmp_path).parent.mkdir(parents=True)
    user_config(tmp_path).write_text(f'[rocbuild]\nsafe_directories = ["{shared}"]\n')
    os.chown(user_config(tmp_path), OTHER, OTHER)  # their file cannot vouch for theirs
    doc, err = config_doc(shared)
    assert doc["config_file"] is None, (doc, err)
    assert f"{user_config(tmp_path)} is not used" in " ".join(err.split()), err


def test_safe_directories_is_read_only_from_the_users_own_file(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "rocbuild.toml").write_text('[rocbuild]\nsafe_directories = ["/"]\n')
    done = run_cli("config", cwd=project, env=NO_SUDO, expect=2)
    said = " ".join(done.stderr.split())
    assert "safe_directories" in said and str(user_config(tmp_path)) in said, said


def test_the_home_ceiling_compares_resolved_paths(tmp_path: Path) -> None:
    real_home = tmp_path / "data" / "me"
    inside = real_home / "stack" / "sub"
    inside.mkdir(parents=True)
    (tmp_path / "data" / "rocbuild.toml").write_text("[rocbuild]\njobs = 7\n")
    home_link = tmp_path / "home-link"
    home_link.symlink_to(real_home)
    doc, _ = config_doc(inside, env={"HOME": str(home_link)})
    assert doc["config_file"] is None, doc
    assert str(tmp_path / "data" / "rocbuild.toml") not in doc["searched"]


def test_a_config_that_is_a_fifo_or_a_link_loop_is_named(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    os.mkfifo(project / "rocbuild.toml")
    done = run_cli("config", cwd=project, env=NO_SUDO, timeout=60, expect=2)
    assert str(project / "rocbuild.toml") in done.stderr and "FIFO" in done.stderr, done.stderr
    (project / "rocbuild.toml").unlink()
    (project / "rocbuild.toml").symlink_to("loop.toml")
    (project / "loop.toml").symlink_to("rocbuild.toml")
    done = run_cli("config", cwd=project, env=NO_SUDO, expect=2)
    said = " ".join(done.stderr.split())
    assert str(project / "rocbuild.toml") in said and "loop" in said, said


@pytest.mark.parametrize(("line", "key"), [("workdir = {a = 1}", "workdir"),
                                           ('prefix = ["/opt/x"]', "prefix"),
                                           ("recipes = 5", "recipes"),
                                           ('jobs = [1, 2]', "jobs")])
def test_a_config_value_of_the_wrong_type_names_the_key(tmp_path: Path, line: str,
                                                        key: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "rocbuild.toml").write_text(f"[rocbuild]\n{line}\n")
    done = run_cli("plan", cwd=project, env=NO_SUDO, expect=2)
    said = " ".join(done.stderr.split())
    assert f"key '{key}'" in said and str(project / "rocbuild.toml") in said, said
    assert not (project / "{'a': 1}").exists()


def test_a_signer_list_another_user_can_write_trusts_no_key(tmp_path: Path,
                                                            small: list[str]) -> None:
    """allowed_signers says whose artifacts install into the prefix: one another user can
    change would make their artifacts install as this user (root)."""
    from tests.conftest import require_tool

    require_tool("ssh-keygen")
    run_cli("build", *small, "--no-verify", "--quiet", env=NO_SUDO, expect=0)
    cache = tmp_path / "cache"
    run_cli("cache", "keys", "new", "alice", env=NO_SUDO, expect=0)
    run_cli("cache", "push", *small, "--to", str(cache), "--sign", "alice", env=NO_SUDO,
            expect=0)
    signers = tmp_path / "home" / ".config" / "rocbuild" / "allowed_signers"
    assert signers.is_file()
    os.chown(signers, OTHER, OTHER)
    flags = [*small]
    flags[flags.index("--workdir") + 1] = str(tmp_path / "work2")
    flags[flags.index("--prefix") + 1] = str(tmp_path / "prefix2")
    done = run_cli("build", *flags, "--cache", str(cache), "--no-verify", env=NO_SUDO,
                   expect=0)
    said = " ".join(done.output.split())
    assert f"{signers} is not used" in said and f"uid {OTHER}" in said, done.explain()
    assert (tmp_path / "work2" / "logs" / "a" / "compile.log").exists()  # built, not served
    os.chown(signers, 0, 0)  # the user's own again: the artifact is served
    flags[flags.index("--workdir") + 1] = str(tmp_path / "work3")
    flags[flags.index("--prefix") + 1] = str(tmp_path / "prefix3")
    done = run_cli("build", *flags, "--cache", str(cache), "--no-verify", env=NO_SUDO,
                   expect=0)
    assert not (tmp_path / "work3" / "logs" / "a" / "compile.log").exists(), done.explain()


def test_a_compiler_cache_another_user_can_write_is_not_used(tmp_path: Path,
                                                             small: list[str]) -> None:
    """ccache.conf in the cache folder names commands every compile runs (prefix_command,
    compiler_check): a folder another user owns is theirs to fill with one."""
    from tests.conftest import require_tool

    require_tool("ccache")
    shared = tmp_path / "shared-ccache"
    shared.mkdir()
    (shared / "ccache.conf").write_text("prefix_command = /tmp/theirs\n")
    os.chown(shared, OTHER, OTHER)
    plan = run_cli("plan", *small, "--ccache-dir", str(shared), env=NO_SUDO, expect=0)
    said = " ".join(plan.stdout.split())
    assert f"the compiler cache {shared} is not used" in said and f"uid {OTHER}" in said, said
    done = run_cli("build", *small, "--ccache", "on", "--ccache-dir", str(shared),
                   "--no-verify", env=NO_SUDO, expect=2)
    assert str(shared) in " ".join(done.output.split()), done.explain()
    # trusted by name (a team's shared cache): used
    plan = run_cli("plan", *small, "--ccache-dir", str(shared), "--safe-directories",
                   str(shared), env=NO_SUDO, expect=0)
    assert "auto: on (ccache" in " ".join(plan.stdout.split()), plan.explain()
