"""What `--help` says beyond each option: examples per subcommand, the config file, exit codes.

cli.py attaches these to the parsers after each cmd_*.py registered its own, so the examples
live in one place and a new subcommand without examples is caught by a test. The help
formatter keeps the global options out of each subcommand's usage line (they are listed
once, in their own group) and keeps the example lines as written.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from collections.abc import Iterable

from rocbuild import errors
from rocbuild.model.settings import CONFIG_FILE_NAME, OPTION_BY_NAME

EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {  # command -> (what it does, the line)
    "plan": (
        ("order, state, jobs, time and disk of each component", "rocbuild plan --target gfx906"),
        ("rocBLAS and what it needs, with the job arithmetic", "rocbuild plan rocblas --why"),
        ("what needs rocBLAS (the dependency tree, reversed)",
         "rocbuild plan --tree --reverse rocblas"),
    ),
    "build": (
        ("the whole stack; run it again after any failure", "rocbuild build --target gfx906"),
        ("rocBLAS and what it needs", "rocbuild build rocblas --keep-going"),
        ("overnight, plain timestamped lines",
         "nohup rocbuild build --target gfx906 > build.log 2>&1 &"),
    ),
    "status": (
        ("done / failed / stale / running, and why", "rocbuild status"),
        ("one component and what it needs", "rocbuild status rocblas"),
        ("for scripts (exit 1 when a step failed)", "rocbuild status --json"),
    ),
    "list": (
        ("each prefix: components, commits, sizes, built or cached", "rocbuild list"),
        ("one prefix, for scripts", "rocbuild list --prefix /opt/rocm-6.4-gfx906 --json"),
    ),
    "info": (
        ("recipe, dependencies, dependents, state, files", "rocbuild info rocblas"),
        ("the same for scripts", "rocbuild info rocblas --json"),
    ),
    "logs": (
        ("the log of its last step that ran", "rocbuild logs rocblas"),
        ("the end of one step's log", "rocbuild logs llvm compile --tail 50"),
        ("follow the running step, as tail -f", "rocbuild logs -f llvm"),
    ),
    "completion": (
        ("tab completion in this bash", ". <(rocbuild completion bash)"),
        ("for every fish session",
         "rocbuild completion fish > ~/.config/fish/completions/rocbuild.fish"),
    ),
    "verify": (
        ("every library in the prefix has gfx906 code", "rocbuild verify --target gfx906"),
        ("one file", "rocbuild verify /opt/rocm-6.4-gfx906/lib/librocblas.so"),
        ("also a llama-bench run on the GPU", "rocbuild verify --model ~/models/m.gguf"),
    ),
    "doctor": (
        ("this host: GPU, RAM, swap, disk, tools", "rocbuild doctor"),
        ("the same for scripts", "rocbuild doctor --json"),
    ),
    "env": (
        ("load the prefix into this shell", ". <(rocbuild env)"),
        ("env.fish with the tuning variables", "rocbuild env --shell fish --tune"),
        ("the Environment Modules (Tcl) modulefile", "rocbuild env --shell tcl"),
    ),
    "activate": (
        ("/opt/rocm -> that prefix", "sudo rocbuild activate /opt/rocm-6.4-gfx906"),
        ("a link you own", "rocbuild activate /opt/rocm-6.4-gfx906 --link ~/.local/rocm"),
        ("switch back", "sudo rocbuild activate --previous"),
    ),
    "prefixes": (
        ("built prefixes: complete or not, which is active", "rocbuild prefixes"),
        ("the same for scripts", "rocbuild prefixes --json"),
    ),
    "lint-recipes": (
        ("the recipes alone", "rocbuild lint-recipes"),
        ("every -D option against the checkouts", "rocbuild lint-recipes --sources"),
    ),
    "bench": (
        ("llama-bench of each backend built, same settings", "rocbuild bench ~/models/m.gguf"),
        ("HIP and Vulkan with flash attention, as JSON",
         "rocbuild bench m.gguf --backends hip,vulkan -fa --json"),
    ),
    "cache": (
        ("store every built component in a shared folder", "rocbuild cache push --to /srv/rb"),
        ("what a cache holds", "rocbuild cache list /srv/rb"),
        ("another machine installs from it", "rocbuild build --cache /srv/rb"),
    ),
    "clean": (
        ("what would be freed, and how much", "rocbuild clean --all --dry-run"),
        ("LLVM's build tree", "rocbuild clean llvm"),
        ("everything but the prefix", "rocbuild clean --all --sources --caches"),
    ),
    "targets": (
        ("every processor, its features and product names", "rocbuild targets"),
        ("the same for scripts", "rocbuild targets --json"),
    ),
    "recipes": (
        ("your own copy of a recipe, kept over upgrades", "rocbuild recipes edit llama.cpp"),
        ("the stack: components, targets, prefix", "rocbuild recipes edit stack"),
    ),
    "uninstall": (
        ("take one component's files out of the prefix", "rocbuild uninstall llama.cpp"),
        ("also when others depend on it", "rocbuild uninstall hipblas --force"),
    ),
    "config": (
        ("the rocbuild.toml read, each setting and its source", "rocbuild config"),
        ("the same for scripts", "rocbuild config --json"),
    ),
    "help": (
        ("one command's options and examples", "rocbuild help build"),
        ("the global options (--workdir, --prefix, ...)", "rocbuild help options"),
    ),
}

GLOBAL_TITLE = "global options (before or after the command)"
GLOBAL_DESCRIPTION = (
    "Each can also come from the environment (ROCBUILD_<NAME>, e.g. ROCBUILD_WORKDIR) or "
    f"from {CONFIG_FILE_NAME}, the nearest one in the current directory or a directory "
    "above it (not above your home directory), else "
    f"$XDG_CONFIG_HOME/rocbuild/{CONFIG_FILE_NAME} (~/.config/rocbuild/): a [rocbuild] table "
    "with the option names as keys, e.g. workdir = \"/data/rocbuild\", "
    "target = \"gfx906\", swap_weight = 0.5. A flag wins over the environment, which wins "
    "over the file; `rocbuild config` shows the file read and where each value came from."
)

EXIT_CODES = "exit codes: " + "; ".join(  # the one table (errors.py), in the help's words
    f"{code} {what}" for code, what in errors.EXIT_CODES.items())


FIRST_COMMANDS = (  # what a newcomer runs first, in order (bare `rocbuild` shows them)
    # each line fits 80 columns whole: a comment wrapped onto a line of its own would be
    # run as a command by someone who pastes the lines
    ("host ready? GPU, memory, disk, tools", "rocbuild doctor"),
    ("what is built, in which order, how long", "rocbuild plan --target gfx906"),
    ("the overnight build; rerun after a failure", "rocbuild build --target gfx906"),
)
GLOBALS_POINTER = ("global options (--workdir, --prefix, --target, --jobs, ...) work here "
                   "too: `rocbuild help options` lists them")


def epilog(command: str) -> str:
    examples = EXAMPLES.get(command, ())
    lines = [f"  # {what}\n  {line}" for what, line in examples]
    text = "examples:\n" + "\n".join(lines) if lines else ""
    return (text + "\n\n" if text else "") + GLOBALS_POINTER


def command_list(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(name, one-line help) of every command, in the order --help lists them."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(c.dest, c.help or "") for c in sub._choices_actions]


def no_command(parser: argparse.ArgumentParser) -> str:
    """What bare `rocbuild` prints: the commands and the first three to run (exit 2)."""
    rows = command_list(parser)
    width = max(len(name) for name, _ in rows)
    lines = ["rocbuild: error: no command given", "commands:"]
    lines += [f"  {name:<{width}}  {what}" for name, what in rows]
    lines.append("to start:")
    first = max(len(line) for _, line in FIRST_COMMANDS)
    lines += [f"  {line:<{first}}  # {what}" for what, line in FIRST_COMMANDS]
    lines.append("TIP: `rocbuild help COMMAND` for a command, `rocbuild help options` for "
                 "globals")
    return "\n".join(lines) + "\n"


def global_options_help(parser: argparse.ArgumentParser) -> str:
    """`rocbuild help options`: the global options group of the top parser, alone."""
    formatter = parser._get_formatter()
    for group in parser._action_groups:
        if group.title == GLOBAL_TITLE:
            formatter.start_section(group.title)
            formatter.add_text(group.description)
            formatter.add_arguments(group._group_actions)
            formatter.end_section()
    return formatter.format_help()


def add_help_command(sub: argparse._SubParsersAction, top: argparse.ArgumentParser) -> None:
    """`rocbuild help [COMMAND [SUBCOMMAND]]` and `rocbuild help options`, since people type
    `help build` as often as `build --help`."""
    parser = sub.add_parser("help", help="describe a command, or the global options",
                            description="Describe one command (`rocbuild help build`), a "
                                        "subcommand (`rocbuild help cache push`), or the "
                                        "global options (`rocbuild help options`).")
    parser.add_argument("topic", nargs="*", metavar="COMMAND",
                        help="a command, or 'options' for the global options")

    def run(args: argparse.Namespace, settings: object = None) -> int:
        return show_help(top, list(args.topic))

    parser.set_defaults(func=run, needs_settings=False)


def show_help(top: argparse.ArgumentParser, topic: list[str]) -> int:
    from rocbuild.cli import argerrors  # the CLI's own refusal shape for a wrong topic

    if topic == ["options"]:
        sys.stdout.write(global_options_help(top))
        return 0
    words, parser = argerrors.command_path(top, topic)
    if len(words) < len(topic):
        names = [name for name, _ in command_list(parser if words else top)]
        from rocbuild.errors import ConfigError

        close = difflib.get_close_matches(topic[len(words)], [*names, "options"], n=1)
        raise ConfigError(f"no help on '{' '.join(topic)}': '{topic[len(words)]}' is not a "
                          "command" + (f". Did you mean '{close[0]}'?" if close else ""),
                          tip="`rocbuild help` lists the commands")
    sys.stdout.write(parser.format_help())
    return 0


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples keep their line breaks; the usage line of a subcommand
    leaves out the global options (listed once below in their group) and says
    ``[global options]`` instead."""

    def add_usage(self, usage: str | None, actions: Iterable[argparse.Action],
                  groups: Iterable[argparse._MutuallyExclusiveGroup],
                  prefix: str | None = None) -> None:
        actions = list(actions)
        own = [a for a in actions if a.dest not in OPTION_BY_NAME]
        if len(own) < len(actions):
            # a stand-in optional that argparse prints as "[global options]", wrapped in place
            stand_in = argparse.Action(["global options"], dest="global_options", nargs=0)
            at = next((i + 1 for i, a in enumerate(own) if "-h" in a.option_strings), 0)
            actions = [*own[:at], stand_in, *own[at:]]
        super().add_usage(usage, actions, groups, prefix)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        # paragraphs wrap as an option's help does; lines that start with two spaces
        # (examples) stay as written
        return "\n".join(indent + block if block.startswith("  ") or not block else
                         "\n".join(indent + line
                                   for line in self._split_lines(block, width - len(indent)))
                         for block in text.split("\n"))

    def _split_lines(self, text: str, width: int) -> list[str]:
        """An option's help, wrapped between words only, as the fitted console wraps
        (ui.FittedConsole): argparse's textwrap broke "opt-in" at its hyphen and would cut a
        path longer than the column."""
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False,
                             break_long_words=False)


def attach(sub: argparse._SubParsersAction, prefix: str = "") -> None:
    """Examples and the help formatter on every subcommand parser, nested ones too
    (``rocbuild cache push``)."""
    for name, parser in sub.choices.items():
        parser.formatter_class = Formatter
        parser.epilog = epilog(prefix + name)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                attach(action, f"{prefix}{name} ")
