"""`rocbuild list`'s table fits 80 columns with ROCm's longest names and refs: each
cell stays one word (no "rocm-6.|4.3"), and the install time drops its year there."""

from __future__ import annotations

import io
from pathlib import Path

from rocbuild.cli import ui
from rocbuild.cli.cmd_list import print_prefix
from rocbuild.prefix.buildinfo import BuildInfo
from rocbuild.prefix.inventory import Installed, PrefixInventory
from tests.cli import too_wide


def rendered(width: int) -> str:
    info = BuildInfo("0.1", "rocm", "6.4.3", "6.4", ("gfx906",), "/opt/rocm-6.4-gfx906", "x",
                     {}, "2026-12-03T18:00:00+00:00", None, True, True)
    comps = [Installed(name, "rocm-6.4.3", "a" * 40, ("0001-x.patch",), (), 123456789,
                       "cache", "k", 1796323251.0)
             for name in ("rocprofiler-register", "hipblas-common", "llama.cpp")]
    out = io.StringIO()
    print_prefix(PrefixInventory(Path("/opt/rocm-6.4-gfx906"), info, None, comps),
                 ui.FittedConsole(file=out, width=width, highlight=False, emoji=False))
    return out.getvalue()


def test_the_list_table_keeps_one_row_per_component_at_80_columns() -> None:
    text = rendered(80)
    rows = [line for line in text.splitlines() if "rocm-6.4.3" in line]
    assert len(rows) == 3 and too_wide(text, 80) == [], text
    assert all(line.split()[1] == "rocm-6.4.3" for line in rows), text
    assert "ROCm 6.4.3 for gfx906; verified; 3 components" in text, text
    assert "2026-" in rendered(120)  # the year where there is room
