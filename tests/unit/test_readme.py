"""The README's first-contact commands: what CI runs is what a new user pastes."""

from __future__ import annotations

import re
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


def test_no_shell_block_of_the_readme_or_the_guide_needs_sudo_or_user() -> None:
    """The neighbours of the overnight block: every command a root shell in a
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
    """A newcomer reads it in five minutes; the manual lives in docs/."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for page in ROOT.joinpath("docs").glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (page.parent / target).exists(), f"{page.name}: link to {target}"
    linked = set(re.findall(r"\]\(docs/([^)#]+)\)", readme))
    for target in linked:
        assert (ROOT / "docs" / target).is_file(), f"README links docs/{target}"
    pages = {p.name for p in ROOT.joinpath("docs").glob("*.md")}
    assert pages <= linked, f"pages the README does not name: {sorted(pages - linked)}"


# --- the roads: each block runs as written --------------------------------------------------

# which Debian releases' package lists each section's apt lines are checked against
# (tests/data/readme-packages.txt); the Ubuntu section uses names Debian 12 has too
ROAD_RELEASES = {
    "Get rocbuild": ("bookworm", "trixie", "sid"),
    "Two commands": ("bookworm",),
    "Ubuntu 24.04 or 22.04": ("bookworm",),
    "Debian testing or sid": ("forky", "sid"),
    "The overnight job": ("bookworm", "trixie"),
}


def sections() -> dict[str, list[str]]:
    """The README's shell blocks by the heading they stand under (## or ###), named by the
    heading's words before a colon."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    out: dict[str, list[str]] = {}
    for part in re.split(r"\n#{2,3} ", readme)[1:]:
        heading, _, body = part.partition("\n")
        out[heading.split(":")[0]] = sh_blocks(body)  # "Get rocbuild", "The overnight job"
    return out


def commands(block: str) -> list[str]:
    """Each command of a block: continued lines joined, comments and `$(command -v sudo)`
    taken out."""
    out = []
    for line in block.replace("\\\n", " ").replace("&&\n", "&& ").splitlines():
        line = re.sub(r"\s+#.*$", "", line).replace("$(command -v sudo) ", "").strip()
        out += [part.strip() for part in line.split("&&") if part.strip()]
    return out


def recorded_packages() -> dict[str, set[str]]:
    lines = (ROOT / "tests/data/readme-packages.txt").read_text().splitlines()
    return {line.split()[0]: {field.split("=")[0] for field in line.split()[1:]}
            for line in lines if line and not line.startswith("#")}


def test_every_road_block_parses_installs_known_packages_and_names_the_stacks_prefix(
        tmp_path: Path) -> None:
    """The README's roads run as written (AMD's repository before its packages, the build
    packages, the prefix made first). Every road's block: each `rocbuild ...`
    parses with rocbuild's own parser (real commands and flags), each package an apt line
    installs is in the package list of the releases the section is for (a one-time check
    recorded in tests/data/readme-packages.txt), each folder the prefix is made, chowned or
    sourced from is the prefix the stack computes, and the base is the ROCm AMD's package
    installs (that each block is valid bash: tests/e2e/test_readme_blocks.py)."""
    import shlex

    from rocbuild.cli import main as cli
    from rocbuild.model.graph import load_stack
    from rocbuild.model.settings import resolve

    found = sections()
    assert set(ROAD_RELEASES) <= set(found), sorted(found)
    known = recorded_packages()
    prefix = str(load_stack(resolve({"target": "gfx906", "workdir": str(tmp_path)},
                                    env={})).prefix)
    version = load_stack(resolve({"workdir": str(tmp_path)}, env={})).version
    parser = cli.build_parser()
    roads = ["Ubuntu 24.04 or 22.04", "Debian testing or sid", "The overnight job"]
    for heading, blocks in found.items():
        for block in blocks:
            for command in commands(block):
                words = shlex.split(command)
                if words[:1] == ["rocbuild"]:
                    try:
                        parser.parse_args(words[1:])
                    except SystemExit:
                        raise AssertionError(f"{heading}: `{command}` does not parse") from None
                    if "--base" in words and words[words.index("--base") + 1] != "/usr":
                        assert words[words.index("--base") + 1] == f"/opt/rocm-{version}"
                if words[:2] == ["apt-get", "install"] and heading in ROAD_RELEASES:
                    for package in (w for w in words[2:] if not w.startswith(("-", "./"))):
                        seen = known.get(package, set())
                        assert seen >= set(ROAD_RELEASES[heading]) or seen == {"amd"}, \
                            (heading, package, seen)
                if words[:1] in (["mkdir"], ["chown"], ["."]):
                    folder = words[-1].removesuffix("/env.sh")
                    if folder.startswith("/opt/"):
                        assert folder == prefix, (heading, command, prefix)
            if heading in roads and "rocbuild build" in block:  # a road makes the prefix
                assert f"mkdir -p {prefix}" in block, (heading, block)
    ubuntu = "\n".join(found["Ubuntu 24.04 or 22.04"])
    assert f"amdgpu-install/{version}/ubuntu/noble/" in ubuntu  # AMD's 6.4.3 repository
    assert "./amdgpu-install_" in ubuntu and "apt-get update" in ubuntu
