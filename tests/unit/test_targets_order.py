"""`rocbuild targets` lists processors by LLVM's processor number: gfx600 before
gfx90a, never by the text ("90" < "600")."""

from __future__ import annotations

import json

from tests.cli import run_cli


def test_targets_sort_by_processor_number_with_the_hex_stepping(tmp_path) -> None:
    names = [d["processor"] for d in json.loads(run_cli("targets", "--json", cwd=tmp_path,
                                                        expect=0).stdout)]
    assert names.index("gfx600") < names.index("gfx906") < names.index("gfx908") \
        < names.index("gfx90a") < names.index("gfx90c") < names.index("gfx942") \
        < names.index("gfx9-4-generic") < names.index("gfx1030") < names.index("gfx1200")
    text = run_cli("targets", cwd=tmp_path, expect=0).stdout
    assert text.index("gfx600") < text.index("gfx90a"), text
