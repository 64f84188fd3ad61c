"""docs/settings.md and docs/exit-codes.md are generated from the code (cli/refdocs.py): a
setting or an exit code added without regenerating them fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild import errors
from rocbuild.cli import help_text, refdocs
from rocbuild.model import settings

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", sorted(refdocs.PAGES))
def test_the_generated_page_is_current(name: str) -> None:
    assert (DOCS / name).read_text(encoding="utf-8") == refdocs.render(name), \
        "stale: run `python -m rocbuild.cli.refdocs` and commit docs/"


def test_every_setting_and_exit_code_is_on_its_page() -> None:
    settings_page, codes_page = refdocs.settings_page(), refdocs.exit_codes_page()
    for option in settings.OPTIONS:
        assert f"`{option.flag} " in settings_page and f"`{option.env}`" in settings_page
    for code in errors.EXIT_CODES:
        assert f"| {code} |" in codes_page
        assert f"{code} " in help_text.EXIT_CODES  # `rocbuild --help` reads the same table
