"""Published figures shown beside the user's when model and settings match.

One entry today, as published (not re-measured by rocbuild): llama-2-7b Q4_0 on one
Instinct MI50 with ``-ngl 99 -fa 1``, ROCm 6.4.4, from the kyuz0/mi50-gfx906-toolboxes
README. A match needs the same model family and quantisation, the same test and settings,
and a gfx906 GPU: anything else would compare different work.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from rocbuild.bench.llamabench import BenchSettings
from rocbuild.bench.model import ModelInfo


@dataclass(frozen=True)
class Published:
    model: str
    quant: str
    gfx: str
    backend: str  # the backend it was measured with
    test: str
    tokens_per_s: float
    setup: str
    source: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_SOURCE = "kyuz0/mi50-gfx906-toolboxes README"
_SETUP = "one MI50, -ngl 99 -fa 1, ROCm 6.4.4"
FIGURES = (
    Published("llama-2-7b", "Q4_0", "gfx906", "hip", "pp512", 1228.8, _SETUP, _SOURCE),
    Published("llama-2-7b", "Q4_0", "gfx906", "hip", "tg128", 96.8, _SETUP, _SOURCE),
)

# "llama-2", "Llama 2", "LLaMA v2", "llama2" in general.name or the file name; not llama-20
_LLAMA2 = re.compile(r"llama[\s_-]*v?[\s_-]*2(?!\d)", re.IGNORECASE)


def _is_llama2_7b(model: ModelInfo) -> bool:
    names = " ".join(filter(None, (model.name, model.path.name, model.size_label))).lower()
    return bool(_LLAMA2.search(names)) and "7b" in names.replace(" ", "")


def matching(model: ModelInfo, settings: BenchSettings, gfx: str | None, backend: str,
             test: str) -> Published | None:
    """The published figure for this run's test, or None when anything differs."""
    if gfx != "gfx906" or not settings.flash_attn or settings.ngl != 99 or settings.depth:
        return None
    if settings.batch not in (None, 2048) or settings.ubatch not in (None, 512):
        return None  # the published runs use llama-bench's defaults
    if model.quant != "Q4_0" or not _is_llama2_7b(model):
        return None
    return next((f for f in FIGURES if f.test == test and f.backend == backend), None)
