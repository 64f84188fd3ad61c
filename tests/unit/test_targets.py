from __future__ import annotations

import pytest

from rocbuild.model.targets import TargetError, parse_target, parse_target_list, runs_on


@pytest.mark.parametrize("text, canonical", [
    ("gfx906", "gfx906"),
    ("gfx90a", "gfx90a"),
    ("gfx1030", "gfx1030"),
    ("gfx906:xnack-", "gfx906:xnack-"),
    ("gfx906:sramecc+:xnack-", "gfx906:sramecc+:xnack-"),
    ("GFX906:xnack-:sramecc+", "gfx906:sramecc+:xnack-"),  # canonical order, lower case
])
def test_valid_targets(text: str, canonical: str) -> None:
    assert str(parse_target(text)) == canonical


@pytest.mark.parametrize("text, fragment", [
    ("gfx9060", "'gfx9060' is not a GPU processor LLVM knows"),
    ("906", "'906' is not a GPU target"),
    ("gfx906:foo+", "'foo+' is not a target feature"),
    ("gfx906:xnack", "'xnack' is not a target feature"),
    ("gfx1030:xnack+", "gfx1030 has no 'xnack' feature"),
    ("gfx906:xnack+:xnack-", "feature 'xnack' is given twice"),
    ("", "empty GPU target"),
])
def test_invalid_targets_say_why_and_what_is_valid(text: str, fragment: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(text)
    assert fragment in str(info.value)
    # every message shows a valid form to use instead
    assert "gfx906" in str(info.value) or "write it as" in str(info.value)


def test_target_list_splits_commas_and_drops_repeats() -> None:
    assert [str(t) for t in parse_target_list(["gfx906,gfx908", "gfx906"])] == ["gfx906", "gfx908"]
    with pytest.raises(TargetError):
        parse_target_list([","])


def test_loader_compatibility() -> None:
    mi50 = parse_target("gfx906:sramecc+:xnack-")
    assert runs_on(parse_target("gfx906"), mi50)
    assert runs_on(parse_target("gfx906:xnack-"), mi50)
    assert not runs_on(parse_target("gfx906:xnack+"), mi50)
    assert not runs_on(parse_target("gfx1030"), mi50)
    assert not runs_on(parse_target("gfx906:sramecc-"), mi50)


def test_every_generic_member_is_a_known_processor_of_its_family() -> None:
    """The members come from the 6.4 runtime's tables: each is a processor LLVM knows, and
    each generic is one too (so a bundle entry for it parses)."""
    from rocbuild.model.targets import GENERIC_MEMBERS, PROCESSOR_FEATURES

    for generic, members in GENERIC_MEMBERS.items():
        assert generic in PROCESSOR_FEATURES
        for member in members:
            assert member in PROCESSOR_FEATURES, member
            assert runs_on(parse_target(generic), parse_target(member))
    assert GENERIC_MEMBERS["gfx9-generic"] == ("gfx900", "gfx902", "gfx904", "gfx906",
                                               "gfx909", "gfx90c")
