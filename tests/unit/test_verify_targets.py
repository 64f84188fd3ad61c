"""Which code objects satisfy a requested target (verify.device_modes): the rule the loader
applies, plus what a request with features left out stands for."""

from __future__ import annotations

import pytest

from rocbuild.checks.verify import Bundle, Entry, describe_missing, device_modes, missing_in_bundle
from rocbuild.model.targets import parse_target, parse_target_list


def bundle(*targets: str) -> Bundle:
    return Bundle(0, 0, None, (Entry("host-x86_64-unknown-linux-gnu-"),
                               *(Entry(f"hipv4-amdgcn-amd-amdhsa--{t}") for t in targets)))


def passes(request: str, *code_objects: str) -> bool:
    return not missing_in_bundle(bundle(*code_objects), parse_target_list([request]))


def test_device_modes_of_a_plain_gfx906_request() -> None:
    # xnack off (the driver default on Vega 20); sramecc on (MI50/MI60) and off (Radeon VII)
    assert [str(m) for m in device_modes(parse_target("gfx906"))] == [
        "gfx906:sramecc+:xnack-", "gfx906:sramecc-:xnack-"]
    assert [str(m) for m in device_modes(parse_target("gfx906:xnack+"))] == [
        "gfx906:sramecc+:xnack+", "gfx906:sramecc-:xnack+"]
    assert [str(m) for m in device_modes(parse_target("gfx906:sramecc+:xnack-"))] == [
        "gfx906:sramecc+:xnack-"]
    assert [str(m) for m in device_modes(parse_target("gfx1030"))] == ["gfx1030"]
    # xnack default unknown for this APU: left as "any", so either setting passes
    assert [str(m) for m in device_modes(parse_target("gfx90c"))] == ["gfx90c"]


@pytest.mark.parametrize(("request_", "code_objects", "ok"), [
    ("gfx906", ["gfx906"], True),
    ("gfx906", ["gfx906:xnack-"], True),
    ("gfx906", ["gfx1030"], False),
    ("gfx906", ["gfx906:xnack+"], False),  # MI50 runs with xnack off
    ("gfx906:xnack-", ["gfx906:xnack+"], False),
    ("gfx906:xnack-", ["gfx906:xnack-"], True),
    ("gfx906:xnack+", ["gfx906:xnack+"], True),
    ("gfx906:xnack+", ["gfx906"], True),
    ("gfx906", ["gfx906:xnack+", "gfx906:xnack-"], True),
    # sramecc pinned: loads on MI50/MI60 but not on a Radeon VII (sramecc-)
    ("gfx906", ["gfx906:sramecc+:xnack-"], False),
    ("gfx906:sramecc+", ["gfx906:sramecc+:xnack-"], True),
    ("gfx906:sramecc-", ["gfx906:sramecc+"], False),
    ("gfx906", ["gfx906:sramecc+", "gfx906:sramecc-"], True),
    ("gfx906:sramecc+:xnack-", ["gfx906"], True),
    ("gfx90a", ["gfx906"], False),
    ("gfx906", ["gfx9999"], False),  # an unparsed processor never matches
    # a generic processor covers its members, as the ROCm 6.4 runtime maps them
    ("gfx906", ["gfx9-generic"], True),
    ("gfx906", ["gfx9-generic:xnack-"], True),
    ("gfx906", ["gfx9-generic:xnack+"], False),  # the features hold for a generic too
    ("gfx900", ["gfx9-generic"], True),
    ("gfx90c", ["gfx9-generic"], True),
    ("gfx908", ["gfx9-generic"], False),  # not a member
    ("gfx90a", ["gfx9-generic"], False),
    ("gfx906", ["gfx9-4-generic"], False),
    ("gfx942", ["gfx9-4-generic"], True),
    ("gfx940", ["gfx9-4-generic"], False),  # LLVM lists it; 6.4's HIP runtime does not map it
    ("gfx1030", ["gfx10-3-generic"], True),
    ("gfx1100", ["gfx11-generic"], True),
    ("gfx1152", ["gfx11-generic"], False),  # the same
    ("gfx1201", ["gfx12-generic"], True),
    ("gfx1030", ["gfx10-1-generic"], False),
    # a generic request is met by the generic code object only
    ("gfx9-generic", ["gfx906"], False),
    ("gfx9-generic", ["gfx9-generic"], True),
])
def test_bundle_satisfies_request(request_: str, code_objects: list[str], ok: bool) -> None:
    assert passes(request_, *code_objects) is ok


def test_every_requested_target_must_be_present() -> None:
    requests = parse_target_list(["gfx906,gfx1030"])
    assert not missing_in_bundle(bundle("gfx906", "gfx1030"), requests)
    missing = missing_in_bundle(bundle("gfx906"), requests)
    assert [(str(r), [str(m) for m in modes]) for r, modes in missing] == [
        ("gfx1030", ["gfx1030"])]


def test_describe_missing() -> None:
    requests = parse_target_list(["gfx906"])
    assert describe_missing(missing_in_bundle(bundle("gfx1030"), requests)) == \
        "no code object for gfx906"
    assert describe_missing(missing_in_bundle(bundle("gfx906:sramecc+"), requests)) == \
        "no gfx906 code object that runs on gfx906:sramecc-:xnack-"


def test_a_target_met_through_a_generic_code_object_is_named() -> None:
    from rocbuild.checks.verify import generic_uses
    from rocbuild.model.targets import via_generic

    gfx906 = parse_target("gfx906")
    assert via_generic([parse_target("gfx9-generic"), parse_target("gfx908")], gfx906) == \
        "gfx9-generic"
    # its own processor's code object is what the runtime takes first: no generic needed
    assert via_generic([parse_target("gfx9-generic"), parse_target("gfx906")], gfx906) is None
    assert via_generic([parse_target("gfx908")], gfx906) is None  # not met at all
    bundles = [bundle("gfx9-generic", "gfx908"), bundle("gfx906"), bundle("gfx9-generic")]
    assert [(str(r), g, n) for r, g, n in generic_uses(bundles, [gfx906])] == [
        ("gfx906", "gfx9-generic", 2)]
