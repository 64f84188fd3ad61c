"""AMD GPU target IDs: parsing, canonical form and loader compatibility.

A target ID is a processor name with optional feature settings, as LLVM's AMDGPU backend
defines it (AMDGPUUsage, "Target ID"): ``gfx906``, ``gfx90a``, ``gfx906:xnack-``,
``gfx906:sramecc+:xnack-``. A feature left out means "any": code for plain ``gfx906``
runs on a ``gfx906:sramecc+:xnack-`` device, code for ``gfx906:xnack+`` does not run on an
``xnack-`` device.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

# Processors the LLVM shipped with ROCm 6.4 knows (AMDGPUUsage processor table), with the
# target features each one accepts. A processor outside this table fails early with a
# list of the known ones instead of an LLVM error at hour three.
_XNACK = frozenset({"xnack"})
_BOTH = frozenset({"sramecc", "xnack"})
_NONE: frozenset[str] = frozenset()
PROCESSOR_FEATURES: dict[str, frozenset[str]] = {
    **{p: _NONE for p in ("gfx600", "gfx601", "gfx602", "gfx700", "gfx701", "gfx702",
                          "gfx703", "gfx704", "gfx705", "gfx802", "gfx803", "gfx805")},
    **{p: _XNACK for p in ("gfx801", "gfx810", "gfx900", "gfx902", "gfx904", "gfx909",
                           "gfx90c", "gfx1010", "gfx1011", "gfx1012", "gfx1013",
                           "gfx9-generic", "gfx10-1-generic")},
    **{p: _BOTH for p in ("gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942",
                          "gfx950", "gfx9-4-generic")},
    **{p: _NONE for p in ("gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035",
                          "gfx1036", "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150",
                          "gfx1151", "gfx1152", "gfx1153", "gfx1200", "gfx1201",
                          "gfx10-3-generic", "gfx11-generic", "gfx12-generic")},
}

_FEATURE_RE = re.compile(r"^(sramecc|xnack)([+-])$")
_SHAPE_HINT = (
    "a target is a processor name such as gfx906, gfx90a or gfx1030, optionally followed by "
    ":sramecc+/- and :xnack+/- (for example gfx906 or gfx906:xnack-)"
)


class TargetError(ValueError):
    """A string that is not a valid GPU target ID; the message says why and what is valid."""


# Product names people know their card by, and the processor LLVM calls it
# (docs/architecture.md, Facts: MI50, MI60 and Radeon VII are all gfx906, "Vega 20").
PRODUCT_NAMES: dict[str, tuple[str, str]] = {
    "mi50": ("gfx906", "AMD Instinct MI50"),
    "mi60": ("gfx906", "AMD Instinct MI60"),
    "radeon-vii": ("gfx906", "AMD Radeon VII"),
    "radeonvii": ("gfx906", "AMD Radeon VII"),
}


def product_note(text: str) -> str | None:
    """'mi50 is gfx906 (AMD Instinct MI50)' when ``text`` names a product, else None."""
    found = PRODUCT_NAMES.get(text.strip().split(":")[0].lower())
    return f"'{text.strip()}' is {found[0]} ({found[1]})" if found else None


def nearest_processors(processor: str, count: int = 3) -> list[str]:
    """The known processors closest to ``processor``, best first: a swap of two neighbouring
    characters (gfx960 -> gfx906) or a missing 'gfx' (906) first, then by spelling."""
    swaps = [processor[:i] + processor[i + 1] + processor[i] + processor[i + 2:]
             for i in range(len(processor) - 1)]
    found = [c for c in (*swaps, "gfx" + processor) if c in PROCESSOR_FEATURES]
    found += difflib.get_close_matches(processor, sorted(PROCESSOR_FEATURES), n=count + 1,
                                       cutoff=0.6)
    return list(dict.fromkeys(found))[:count]


def _did_you_mean(processor: str) -> str:
    """' Did you mean 'gfx906'? (close: gfx906, gfx908, gfx90a)'; '' when nothing is close.
    Three names at most: the full list of 55 is `rocbuild targets`'s job."""
    near = nearest_processors(processor)
    if not near:
        return ""
    others = f" (close: {', '.join(near)})" if len(near) > 1 else ""
    return f" Did you mean '{near[0]}'?{others}"


@dataclass(frozen=True, order=True)
class TargetId:
    """One parsed target ID; ``features`` maps a feature name to True (+) or False (-)."""

    processor: str
    features: tuple[tuple[str, bool], ...] = ()

    def __str__(self) -> str:
        return self.processor + "".join(f":{n}{'+' if on else '-'}" for n, on in self.features)


def parse_target(text: str) -> TargetId:
    """Parse one target ID, returning it with features in canonical (sorted) order."""
    raw = text.strip()
    if not raw:
        raise TargetError(f"empty GPU target: {_SHAPE_HINT}")
    if re.search(r"[;\s]", raw):
        parts = [p for p in re.split(r"[;,\s]+", raw) if p]
        raise TargetError(f"'{raw}': separate GPU targets with commas, as in "
                          f"{','.join(parts)}")
    processor, *feature_parts = raw.split(":")
    processor = processor.lower()
    processor = PRODUCT_NAMES.get(processor, (processor, ""))[0]
    if processor not in PROCESSOR_FEATURES:
        if re.fullmatch(r"gfx[0-9a-f-]+[a-z0-9]*", processor):
            reason = "is not a GPU processor LLVM knows"
        else:
            reason = "is not a GPU target"
        raise TargetError(
            f"'{raw}' {reason}.{_did_you_mean(processor)} {_SHAPE_HINT[0].upper()}"
            f"{_SHAPE_HINT[1:]}; `rocbuild targets` lists every processor"
        )
    allowed = PROCESSOR_FEATURES[processor]
    features: dict[str, bool] = {}
    for part in feature_parts:
        match = _FEATURE_RE.fullmatch(part.strip().lower())
        if not match:
            raise TargetError(f"'{raw}': '{part}' is not a target feature: {_SHAPE_HINT}")
        name, sign = match.groups()
        if name not in allowed:
            supported = ", ".join(sorted(allowed)) or "none"
            raise TargetError(
                f"'{raw}': {processor} has no '{name}' feature (features it supports: "
                f"{supported}); write it as {processor}"
                + "".join(f":{f}{'+' if on else '-'}" for f, on in sorted(features.items()))
            )
        if name in features:
            raise TargetError(f"'{raw}': feature '{name}' is given twice")
        features[name] = sign == "+"
    return TargetId(processor, tuple(sorted(features.items())))


def looks_like_target(text: str) -> bool:
    """A word that parses as a GPU target or names a product (a stray second --target)."""
    try:
        parse_target(text)
    except TargetError:
        return False
    return True


def parse_target_list(texts: Iterable[str]) -> tuple[TargetId, ...]:
    """Parse targets given as items or comma-separated strings; keep order, drop repeats."""
    seen: dict[TargetId, None] = {}
    for text in texts:
        for item in text.split(","):
            if item.strip():
                seen.setdefault(parse_target(item), None)
    if not seen:
        raise TargetError(f"no GPU target given: {_SHAPE_HINT}")
    return tuple(seen)


# Generic processors (LLVM 19 and later, code object v6 only): one code object serves every
# member of a family. The members are those the ROCm 6.4 runtime gives each generic, which is
# what decides whether such a code object loads: the HIP runtime picks a generic bundle entry
# for a device whose own processor has none (clr rocm-6.4.3, hipamd/src/hip_comgr_helper.cpp
# GenericTargetMapping, used by hip_code_object.cpp isCodeObjectCompatibleWithDevice for plain
# bundles and for compressed ones through comgr), and ROCr 6.4.3 accepts it for that agent
# (runtime/hsa-runtime/core/runtime/isa.cpp: Isa::IsCompatible and the ISAREG_ENTRY_GEN table).
# LLVM's table (AMDGPUUsage, "AMDGPU Generic Processors", llvmorg-20.1.0) also lists gfx940 and
# gfx941 under gfx9-4-generic and gfx1152 and gfx1153 under gfx11-generic; 6.4's HIP runtime
# maps none of the four, so a generic code object does not cover them here.
GENERIC_MEMBERS: dict[str, tuple[str, ...]] = {
    "gfx9-generic": ("gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"),
    "gfx9-4-generic": ("gfx942", "gfx950"),
    "gfx10-1-generic": ("gfx1010", "gfx1011", "gfx1012", "gfx1013"),
    "gfx10-3-generic": ("gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035",
                        "gfx1036"),
    "gfx11-generic": ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151"),
    "gfx12-generic": ("gfx1200", "gfx1201"),
}
GENERIC_OF: dict[str, str] = {member: generic for generic, members in GENERIC_MEMBERS.items()
                              for member in members}


def runs_on(code_object: TargetId, device: TargetId) -> bool:
    """Whether the loader accepts a code object built for ``code_object`` on ``device``.

    Processors must match, or the code object's is the generic processor that covers the
    device's (``GENERIC_OF``: gfx9-generic for gfx906); each feature the code object pins
    must equal the device's setting. A feature the device reports as "any" (not given)
    accepts either setting, which is how a requested build target such as plain ``gfx906``
    is matched.
    """
    if code_object.processor != device.processor and \
            code_object.processor != GENERIC_OF.get(device.processor):
        return False
    device_features = dict(device.features)
    return all(device_features.get(name, on) == on for name, on in code_object.features)


# Processors whose kernel driver runs them with XNACK off unless the user opts in
# (amdgpu.noretry=0 plus HSA_XNACK=1): the kernel's noretry default covers GC 9.0.1 (gfx900),
# 9.4.x (gfx906 = Vega 20, gfx908, gfx90a, gfx94x, gfx950) and every gfx10.3+ part.
_XNACK_OFF_BY_DEFAULT = frozenset(
    {"gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"})


def device_modes(request: TargetId) -> tuple[TargetId, ...]:
    """The device configurations a requested target stands for; a bundle must hold a code
    object that runs on each of them.

    A feature the request leaves out means "the devices users actually have":
    - xnack: the default mode of the processor, off for gfx906 (MI50, MI60 and Radeon VII run
      with xnack- unless the user opts in), so ``gfx906:xnack+`` code alone does not satisfy
      a plain ``gfx906`` request. Where the default is not known, either setting passes.
    - sramecc: both settings, because it is a property of the board, not a user choice: MI50
      and MI60 report ``gfx906:sramecc+:xnack-``, a Radeon VII ``gfx906:sramecc-:xnack-``
      (ollama/ollama#4780). So code for only ``gfx906:sramecc+`` fails a plain ``gfx906``
      request (it would not load on a Radeon VII); request ``gfx906:sramecc+`` to check for
      MI50/MI60 only. Plain ``gfx906`` code objects, what GPU_TARGETS=gfx906 builds, pass.
    An explicit feature in the request is taken as given.
    """
    features = dict(request.features)
    allowed = PROCESSOR_FEATURES.get(request.processor, frozenset())
    if "xnack" in allowed and "xnack" not in features and \
            request.processor in _XNACK_OFF_BY_DEFAULT:
        features["xnack"] = False
    modes = [features]
    if "sramecc" in allowed and "sramecc" not in features:
        modes = [{**m, "sramecc": on} for m in modes for on in (True, False)]
    return tuple(TargetId(request.processor, tuple(sorted(m.items()))) for m in modes)


def uncovered(found: Iterable[TargetId], request: TargetId) -> list[TargetId]:
    """The device modes of ``request`` that no code object in ``found`` runs on (one
    bundle's, or a library's embedded set): empty when the request is met."""
    found = list(found)
    return [m for m in device_modes(request) if not any(runs_on(c, m) for c in found)]


def via_generic(found: Iterable[TargetId], request: TargetId) -> str | None:
    """The generic processor through which ``found`` meets ``request`` when its own
    processor's code objects alone do not ("gfx9-generic" for a gfx906 request met by a
    gfx9-generic code object); None when the request is met without one, or not at all."""
    found = list(found)
    if uncovered(found, request):
        return None
    if not uncovered([c for c in found if c.processor not in GENERIC_MEMBERS], request):
        return None
    return GENERIC_OF.get(request.processor)
