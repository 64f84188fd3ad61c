"""An empty path is never "the current folder": every path setting (found from
``settings.OPTIONS``: flag, ``ROCBUILD_*`` variable, config key) and every path argument of a
command refuses one, so a script's unset variable cannot make `clean` clean, or `build`
install into, the folder it runs in. Every rocbuild here runs as a child process."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.model import settings
from tests.cli import run_cli, run_flags

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def a_users_project(tmp_path: Path) -> Path:
    """A folder of the user's own, shaped like a workdir (src/, build/) but never one."""
    project = tmp_path / "myproject"
    for rel, text in (("src/main.c", "int main(void) { return 0; }\n"),
                      ("build/notes.txt", "mine\n"), ("src/a/keep.txt", "mine\n")):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    return project


PATH_OPTIONS = [o for o in settings.OPTIONS if o.metavar in ("DIR", "PATH", "DIR_OR_URL")]


@pytest.mark.parametrize("option", PATH_OPTIONS, ids=[o.name for o in PATH_OPTIONS])
def test_an_empty_path_is_refused_wherever_it_is_given(tmp_path: Path,
                                                      option: settings.Option) -> None:
    project = tmp_path / "project"
    project.mkdir()
    done = run_cli("config", f"{option.flag}=", cwd=project, expect=2)
    said = " ".join(done.stderr.split())
    assert option.flag in said and "empty path" in said, done.explain()
    done = run_cli("config", cwd=project, env={option.env: ""}, expect=2)
    said = " ".join(done.stderr.split())
    assert option.env in said and "empty path" in said, done.explain()
    # safe_directories is read from the user's own file only (a project's cannot vouch)
    config = (tmp_path / "home" / ".config" / "rocbuild" / "rocbuild.toml"
              if option.name == "safe_directories" else project / "rocbuild.toml")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[rocbuild]\n{option.name} = ""\n')
    done = run_cli("config", cwd=project, expect=2)
    said = " ".join(done.stderr.split())
    assert f"key '{option.name}'" in said and "empty path" in said, done.explain()


def test_clean_with_an_empty_workdir_keeps_the_current_folder(tmp_path: Path,
                                                              small: list[str]) -> None:
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    project = a_users_project(tmp_path)
    flags = [f for f in small]
    flags[flags.index("--workdir") + 1] = ""
    run_flags(flags, "clean", "--all", "--sources", cwd=project, expect=2)
    assert (project / "src" / "main.c").is_file() and (project / "build").is_dir()


def test_an_empty_prefix_installs_nothing_into_the_current_folder(tmp_path: Path,
                                                                  small: list[str]) -> None:
    project = tmp_path / "project"
    project.mkdir()
    flags = [f for f in small]
    flags[flags.index("--prefix") + 1] = ""
    run_flags(flags, "build", "--no-verify", "--quiet", cwd=project, expect=2)
    assert list(project.iterdir()) == []


@pytest.mark.parametrize("args", [("prefixes", "--remove", ""), ("prefixes", "--forget", ""),
                                  ("activate", ""), ("activate", "--previous", "--link", "")])
def test_an_empty_path_argument_is_refused(tmp_path: Path, args: tuple[str, ...]) -> None:
    from tests.unit.test_activate import make_prefix

    here = make_prefix(tmp_path, "cwd")  # the current folder is a prefix rocbuild built
    link = tmp_path / "rocm"  # never the host's /opt/rocm, should the refusal fail
    done = run_cli(*args, cwd=here, env={"ROCBUILD_LINK": str(link)}, expect=2)
    assert not link.is_symlink()
    assert "empty path" in " ".join(done.stderr.split()), done.explain()
    assert (here / ".rocbuild" / "build-info.json").is_file()
