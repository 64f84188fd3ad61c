"""`rocbuild env [--shell bash|zsh|fish|lmod] [--tune]`: print the environment file the install
step writes into the prefix, for the stack as configured now."""

from __future__ import annotations

import argparse
import os
import sys

from rocbuild.errors import ConfigError, printable_lines
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import Settings
from rocbuild.prefix import envfiles, prefixguard


def default_shell() -> str:
    """The login shell when rocbuild has a file for it, else bash."""
    name = os.path.basename(os.environ.get("SHELL", ""))
    return name if name in envfiles.SHELLS else "bash"


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "env", parents=parents, help="print the prefix's environment file for a shell",
        description="Print env.sh (bash, zsh), env.fish, the Lmod or the Tcl modulefile as the "
                    "install step writes it into the prefix. It sets what the stack's "
                    "recipes provide (ROCm's: ROCM_PATH, HIP_PATH, HIP_PLATFORM, "
                    "HIP_DEVICE_LIB_PATH) and puts the prefix first in PATH "
                    "and CMAKE_PREFIX_PATH; never LD_LIBRARY_PATH (each installed program "
                    "finds its libraries through its RUNPATH) and never "
                    "HSA_OVERRIDE_GFX_VERSION.")
    parser.add_argument("--shell", choices=envfiles.SHELLS, default=None,
                        help="which file (default: your login shell, else bash)")
    parser.add_argument("--tune", action="store_true",
                        help="add runtime tuning variables of the HIP runtime (opt-in, each "
                             "with a comment and AMD's documentation; measure them with "
                             "llama-bench)")


def run(args: argparse.Namespace, settings: Settings) -> int:
    stack = load_stack(settings)
    if not prefixguard.is_ours(stack.prefix):
        # an env file for a folder rocbuild never built into would point a shell at nothing
        what = "does not exist" if not stack.prefix.exists() else "is not a prefix rocbuild built"
        raise ConfigError(f"prefix {stack.prefix} {what} (from {settings.source('prefix')}), so "
                          "there is no environment to print for it",
                          tip="build it first (`rocbuild build`), or give the --prefix of a "
                              "built stack (`rocbuild prefixes` lists them)")
    spec = envfiles.spec_for(stack, tune=args.tune)
    shell = args.shell or default_shell()
    sys.stdout.write(printable_lines(envfiles.render(spec, shell)))
    return 0
