"""What `--help` says beyond each option: examples per subcommand, the config file, exit codes.

cli.py attaches these to the parsers after each cmd_*.py registered its own, so the examples
live in one place and a new subcommand without examples is caught by a test. The help
formatter keeps the global options out of each subcommand's usage line (they are listed
once, in their own group) and keeps the example lines as written.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from rocbuild.settings import CONFIG_FILE_NAME, OPTION_BY_NAME

EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {  # command -> (what it does, the line)
    "plan": (
        ("order, state, jobs, time and disk of each component", "rocbuild plan --target gfx906"),
        ("rocBLAS and what it needs, with the job arithmetic", "rocbuild plan rocblas --why"),
        ("the exact commands a build runs", "rocbuild plan --commands > build.sh"),
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
    "logs": (
        ("the log of its last step that ran", "rocbuild logs rocblas"),
        ("the end of one step's log", "rocbuild logs llvm compile --tail 50"),
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
        ("what a cache holds", "rocbuild cache list --cache /srv/rb"),
        ("another machine installs from it", "rocbuild build --cache /srv/rb"),
    ),
    "clean": (
        ("what would be freed, and how much", "rocbuild clean --all --dry-run"),
        ("LLVM's build tree", "rocbuild clean llvm"),
        ("everything but the prefix", "rocbuild clean --all --sources --caches"),
    ),
}

GLOBAL_TITLE = "global options (before or after the command)"
GLOBAL_DESCRIPTION = (
    "Each can also come from the environment (ROCBUILD_<NAME>, e.g. ROCBUILD_WORKDIR) or "
    f"from {CONFIG_FILE_NAME}, read from the current directory, else from "
    f"$XDG_CONFIG_HOME/rocbuild/{CONFIG_FILE_NAME} (~/.config/rocbuild/): a [rocbuild] table "
    "with the option names as keys, e.g. workdir = \"/data/rocbuild\", "
    "target = \"gfx906\", swap_weight = 0.5. A flag wins over the environment, which wins "
    "over the file; `rocbuild plan` shows where each value came from."
)

EXIT_CODES = (
    "exit codes: 0 success; 1 a build step failed (build), a step has failed (status), a "
    "host check failed (doctor); 2 bad input (recipe, config, flag, value, a link you may "
    "not change, nothing to check); 3 busy (another run holds the workdir or the prefix; "
    "retry later); 4 verify found missing GPU code (verify, or the build's final verify; "
    "also a broken linkage or a failed smoke test); 130 interrupted"
)


def epilog(command: str) -> str:
    examples = EXAMPLES.get(command, ())
    lines = [f"  # {what}\n  {line}" for what, line in examples]
    return "examples:\n" + "\n".join(lines) if lines else ""


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
        # paragraphs wrap; lines that start with two spaces (examples) stay as written
        out = []
        for block in text.split("\n"):
            if block.startswith("  ") or not block:
                out.append(indent + block)
            else:
                out.append(argparse.HelpFormatter._fill_text(self, block, width, indent))
        return "\n".join(out)


def attach(sub: argparse._SubParsersAction, prefix: str = "") -> None:
    """Examples and the help formatter on every subcommand parser, nested ones too
    (``rocbuild cache push``)."""
    for name, parser in sub.choices.items():
        parser.formatter_class = Formatter
        text = epilog(prefix + name)
        if text:
            parser.epilog = text
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                attach(action, f"{prefix}{name} ")
