"""`rocbuild targets`: every GPU processor the ROCm 6.4 LLVM knows, with the target features
it accepts and the product names rocbuild reads as one (MI50 is gfx906). The full list lives
here so that a mistyped ``--target`` can name just the three nearest."""

from __future__ import annotations

import argparse
import re

from rich.markup import escape
from rich.table import Table

from rocbuild.cli.ui import console, print_json
from rocbuild.model.settings import Settings
from rocbuild.model.targets import PROCESSOR_FEATURES, PRODUCT_NAMES


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "targets", parents=parents, help="list the GPU targets --target accepts",
        description="List every GPU processor the ROCm 6.4 LLVM knows, the target features "
                    "(:sramecc+/-, :xnack+/-) each accepts, and the product names rocbuild "
                    "reads as a processor (mi50 = gfx906).")
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    parser.set_defaults(memo_notes=False)


GENERIC = 99  # a generic target sorts after the processors of its family


def _order(name: str) -> tuple[int, int, int, str]:
    """gfx600 < gfx906 < gfx90a < gfx1030: by LLVM's processor number, which is a major
    version (one or two digits), a minor digit and a stepping in hex (gfx90a is 9.0.10, after
    9.0.6, not "90a" before "600"); a generic target after its family (gfx9-4-generic after
    gfx942)."""
    exact = re.fullmatch(r"gfx(\d+)([0-9a-f])([0-9a-f])", name)
    if exact:
        return (int(exact.group(1)), int(exact.group(2), 16), int(exact.group(3), 16), name)
    generic = re.fullmatch(r"gfx(\d+)(?:-(\d+))?-generic", name)
    if generic:
        minor = int(generic.group(2)) if generic.group(2) else GENERIC
        return (int(generic.group(1)), minor, GENERIC, name)
    return (0, 0, 0, name)


def products_of(processor: str) -> list[str]:
    return sorted({title for proc, title in PRODUCT_NAMES.values() if proc == processor})


def run(args: argparse.Namespace, settings: Settings) -> int:
    names = sorted(PROCESSOR_FEATURES, key=_order)
    if args.json:
        print_json([{"processor": n, "features": sorted(PROCESSOR_FEATURES[n]),
                     "products": products_of(n)} for n in names])
        return 0
    out = console()
    table = Table(title=f"{len(names)} GPU processors (ROCm 6.4 LLVM)", title_justify="left",
                  show_edge=False, pad_edge=False)
    table.add_column("processor", no_wrap=True)
    table.add_column("features", no_wrap=True)
    table.add_column("known as")
    for name in names:
        features = " ".join(f":{f}+/-" for f in sorted(PROCESSOR_FEATURES[name])) or "-"
        table.add_row(name, features, escape(", ".join(products_of(name))))
    out.print(table)
    out.print("Give one or more, separated by commas: --target gfx906 or "
              "--target gfx906,gfx90a:xnack-")
    return 0
