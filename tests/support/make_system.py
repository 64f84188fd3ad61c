"""A build system only the tests use: a hand-written ``configure`` script and a plain
Makefile, installed through ``make install DESTDIR=<build>/stage`` and copied into the
prefix, with the list of installed files written beside the build. It shows that a build
system is one module: nothing in rocbuild names it; a test registers it
(``buildsystems.register(Make())``) and a recipe says ``kind = "make"`` with a ``[make]``
table. Its build is a GNU make jobserver client: run without a job count, make takes its
jobs from the run's job pool."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from rocbuild.checks import buildtools
from rocbuild.model import buildsystems, launchers
from rocbuild.model.buildsystems import (
    BuildSystem,
    Commands,
    HostPrograms,
    Lint,
    install_runpath,
    refuse_reserved,
)
from rocbuild.model.graph import Component, Stack

RECORD = "installed.txt"
# The pool hands out --jobserver-auth=fifo:PATH (run/engine/jobserver.py), which GNU make
# reads from 4.4 on; 4.2 and 4.3 read only the pipe form R,W, descriptors they inherit, and
# stop at the fifo form ("invalid --jobserver-auth string"). The bridge opens the FIFO
# read-write on descriptor 3 (one open file for both ends, as the pool's own) and hands make
# that, keeping the rest of MAKEFLAGS.
FIFO_MAKE = (4, 4)
PIPE_MAKE = (4, 2)  # the first make that reads --jobserver-auth (before: --jobserver-fds)
BRIDGE = ('fifo=${MAKEFLAGS#*--jobserver-auth=fifo:}; exec 3<>"${fifo%% *}" && '
          'MAKEFLAGS="${MAKEFLAGS%%--jobserver-auth=*}--jobserver-auth=3,3" exec "$@"')


def client_command(make: list[str], version: tuple[int, ...] | None) -> list[str]:
    """``make`` as a client of the pool in MAKEFLAGS, for a make of ``version``."""
    if version is not None and version >= FIFO_MAKE:
        return make
    return ["sh", "-c", BRIDGE, "make-jobserver-bridge", *make]


@contextlib.contextmanager
def registered(system: BuildSystem) -> Iterator[BuildSystem]:
    """``system`` is the build system of its kind while the block runs (rocbuild itself never
    takes one back: its registry is read for the whole process)."""
    buildsystems.register(system)
    try:
        yield system
    finally:
        buildsystems._SYSTEMS.pop(system.kind, None)


class Make(BuildSystem):
    kind = "make"
    table = "make"
    keys = ("args",)  # VAR=value, given to configure (it writes them into config.mk)
    reserved = ("--prefix=",)

    def configure(self, stack: Stack, comp: Component, jobs: Mapping[str, int] | None
                  ) -> Commands:
        return [["sh", str(comp.source_dir / "configure"), f"--prefix={comp.install_prefix}",
                 *comp.build_args, *self.runpath_args(stack, comp),
                 *self.launcher_args(stack, comp)]]

    def build(self, stack: Stack, comp: Component, jobs: int | None,
              target: str | None = None) -> Commands:
        make = ["make", "-C", str(comp.build_dir), "-f", str(comp.source_dir / "Makefile")]
        if jobs is None:  # the pool's client
            return [client_command(make, buildtools.version("make"))]
        return [[*make, f"-j{jobs}"]]

    def why_no_pool_client(self, comp: Component, host: HostPrograms) -> str:
        """GNU make >= 4.2 is a client (through BRIDGE before 4.4)."""
        version = host.version("make")
        return "" if version is not None and version >= PIPE_MAKE else \
            "this make is older than 4.2 or no GNU make: no jobserver client"

    def install(self, stack: Stack, comp: Component) -> Commands:
        stage = comp.build_dir / "stage"
        staged = f"{stage}{comp.install_prefix}"
        return [["rm", "-rf", str(stage)],
                ["make", "-C", str(comp.build_dir), "-f", str(comp.source_dir / "Makefile"),
                 "install", f"DESTDIR={stage}"],
                ["sh", "-c", 'mkdir -p "$2" && cp -a "$1/." "$2/"', "copy", staged,
                 str(comp.install_prefix)],
                ["sh", "-c", 'cd "$1" && find . ! -type d | sed "s|^\\.|$2|" > "$3"', "record",
                 staged, str(comp.install_prefix), str(self.installed_record(comp))]]

    def runpath_args(self, stack: Stack, comp: Component) -> list[str]:
        """RUNPATH=<entries>, which the project's Makefile links with (-Wl,-rpath); make
        would expand $ORIGIN, so it is written $$ORIGIN."""
        if not comp.recipe.runpath:
            return []
        entries = install_runpath(stack, comp).replace(";", ":")
        return [f"RUNPATH={entries.replace('$', '$$')}"]

    def launcher_args(self, stack: Stack, comp: Component) -> list[str]:
        """LAUNCHER=<the C launcher>, which the project's Makefile puts before $(CC)."""
        launcher = launchers.choices(stack.launch, comp)["C"].launcher
        return [f"LAUNCHER={launcher.replace(';', ' ')}"] if launcher else []

    def check_args(self, file: Path, key: str, args: Sequence[str]) -> None:
        refuse_reserved(file, key, args, self.reserved)

    def lint(self, stacks: Sequence[Stack], comp_name: str) -> Lint:
        return []  # VAR=value has nothing to check beyond the option check

    def installed_record(self, comp: Component) -> Path:
        return comp.build_dir / RECORD

    def installed_files(self, comp: Component) -> list[Path] | None:
        try:
            text = self.installed_record(comp).read_text()
        except OSError:
            return None
        return [Path(line) for line in text.splitlines() if line]

    def option_names(self, stack: Stack, comp: Component) -> list[str]:
        return [arg.split("=", 1)[0] for arg in comp.build_args if "=" in arg]

    def is_build_file(self, name: str) -> bool:
        return name in ("Makefile", "configure") or name.endswith(".mk")

    def tree_files(self, step: str) -> tuple[str, ...]:
        return ("config.mk",)
