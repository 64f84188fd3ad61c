"""The README's first-contact commands: what CI runs is what a new user pastes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sh_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", text, flags=re.S)]


def two_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return sh_blocks(section)


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    _install, test = two_commands()
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test in ci_lines


def test_the_two_commands_suit_externally_managed_pythons_and_root_shells() -> None:
    for command in two_commands():
        assert "\n" not in command  # one line each, pasted as is
        assert not re.search(r"(^|[\s&;])python\s", command)  # python3 only
        assert not re.search(r"(^|[\s&;])pip\s", command)  # never the system pip
        assert "python3 -m venv .venv" in command
        assert not re.search(r"(^|[&;]\s*)sudo\s", command)  # root shells have no sudo
        assert "$(command -v sudo) apt-get" in command


def overnight_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The overnight job", 1)[1].split("\n## ", 1)[0]
    (block,) = sh_blocks(section)
    return block


def test_the_overnight_block_works_as_root_in_a_container(tmp_path: Path) -> None:
    """Issue 32: the block used `sudo` and "$USER", which a root shell in a container has
    neither of (the README promises that case). Its prefix lines run in a real bash with no
    sudo on PATH and no USER, on a folder under tmp_path."""
    block = overnight_block()
    assert not re.search(r"(^|[\s&;(])sudo\s", block), block
    assert "$USER" not in block, block
    lines = block.split("rocbuild doctor", 1)[0].split("\n")
    prefix_lines = "\n".join(lines[next(i for i, line in enumerate(lines) if "mkdir" in line):])
    script = prefix_lines.replace("/opt/rocm-6.4-gfx906", str(tmp_path / "prefix"))
    done = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, (script, done.stderr)
    assert (tmp_path / "prefix").is_dir()


def test_no_shell_block_of_the_readme_or_the_guide_needs_sudo_or_user() -> None:
    """The neighbours of the overnight block (issue 32): every command a root shell in a
    container pastes from the README or the guide runs there too."""
    for page in (ROOT / "README.md", ROOT / "docs" / "guide.md"):
        for block in sh_blocks(page.read_text(encoding="utf-8")):
            for line in block.splitlines():
                if line.lstrip().startswith("#") or "rocbuild activate" in line \
                        or "sudo rocbuild" in line:
                    continue  # activating /opt/rocm is the root's own step, said as such
                assert not re.search(r"(^|[\s&;(])sudo\s", line), (page.name, line)
                assert "$USER" not in line, (page.name, line)


def test_the_readme_says_module_use_before_module_load() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for match in re.finditer(r"module load (\S+)", readme):
        before = readme[:match.start()]
        assert "module use " in before.rsplit("```", 1)[-1], match.group(0)


def test_the_readme_is_a_front_door_and_its_links_resolve() -> None:
    """A newcomer reads it in five minutes; the manual lives in docs/ (issue 26)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for page in ROOT.joinpath("docs").glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (page.parent / target).exists(), f"{page.name}: link to {target}"
    linked = set(re.findall(r"\]\(docs/([^)#]+)\)", readme))
    for target in linked:
        assert (ROOT / "docs" / target).is_file(), f"README links docs/{target}"
    pages = {p.name for p in ROOT.joinpath("docs").glob("*.md")}
    assert pages <= linked, f"pages the README does not name: {sorted(pages - linked)}"
