"""Known build failures: match a failed step's log tail against a table -> cause and fix.

The table is ordered by priority: the first pattern that matches anywhere in the tail wins,
and within one pattern the newest (last) matching line is the one reported. Root causes that
make every later line noise (a full disk, the OOM killer) come first; the generic "a package
is missing" rows come last, because a missing package is often a symptom of something above.

The table is data: ``diagnose.toml`` beside this module, one ``[[pattern]]`` per row; rows
marked ``memory = true`` tell the compile step that a job died of memory (jobs.py retries).
Each row names where the knowledge comes from (``source``): a row of the error table in the
seed article (seeds/002_17252f5232dfa86a.txt, section 5.1) or a reference file. Fixes are
commands to run, never destructive ones run blindly: where something must be removed, the fix
first shows how to find out what owns it.

Fix texts may hold placeholders filled from ``context`` (``<prefix>``, ``<component>``) and
``{group}`` fields filled from the regex's named groups of the matched line.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocbuild.errors import TERMINAL_SEQUENCE
from rocbuild.model import commandline

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Pattern:
    id: str
    regexes: tuple[re.Pattern[str], ...]
    cause: str
    fix: str
    source: str
    memory: bool = False  # the job died of memory: the compile step retries with fewer jobs

    def search(self, line: str) -> re.Match[str] | None:
        for regex in self.regexes:
            match = regex.search(line)
            if match:
                return match
        return None


@dataclass(frozen=True)
class Diagnosis:
    id: str
    cause: str
    fix: str
    matched_line: str


DATA_FILE = Path(__file__).with_name("diagnose.toml")


def load_patterns(file: Path = DATA_FILE) -> tuple[Pattern, ...]:
    """The table from its data file (shipped inside the package, beside this module)."""
    doc = tomllib.loads(file.read_text(encoding="utf-8"))
    return tuple(
        Pattern(row["id"],
                tuple(re.compile(r, re.IGNORECASE if row.get("ignore_case") else 0)
                      for r in row["regexes"]),
                row["cause"], row["fix"], row["source"], bool(row.get("memory", False)))
        for row in doc["pattern"])


@functools.cache
def patterns() -> tuple[Pattern, ...]:
    """The shipped table, read and compiled when first needed: most commands never diagnose
    a log, and compiling every regex cost each of them several ms at import (perf/noop.py)."""
    return load_patterns()


@functools.cache
def memory_diagnoses() -> frozenset[str]:
    return frozenset(p.id for p in patterns() if p.memory)


def __getattr__(name: str) -> object:
    """``PATTERNS`` and ``MEMORY_DIAGNOSES``, as module constants read on first use."""
    if name == "PATTERNS":
        return patterns()
    if name == "MEMORY_DIAGNOSES":
        return memory_diagnoses()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_memory_death(lines: Sequence[str]) -> bool:
    """The log ends the way a compiler, linker or Tensile ends when the kernel kills it for
    memory (the rows marked ``memory = true``)."""
    found = diagnose(lines)
    return found is not None and found.id in memory_diagnoses()


def _fill(text: str, match: re.Match[str], context: Mapping[str, str]) -> str:
    groups = {k: v for k, v in match.groupdict().items() if v}
    # `{url}` when the line named none: say what to put there instead of an empty hole
    text = _FIELD.sub(lambda m: groups.get(m.group(1), f"<{m.group(1)}>"), text)
    for key, value in context.items():
        text = text.replace(f"<{key}>", value)
    # the fix's `rocbuild build X` with the run's --recipes/--workdir/--prefix/...: the same
    # command as the "continue with:" line, pasteable
    return commandline.with_run_flags(text, context.get("command"))


def clean(line: str) -> str:
    # colour codes from clang/gcc/ninja would otherwise split words the regexes look for
    return TERMINAL_SEQUENCE.sub("", line).rstrip("\r\n")


def diagnose(lines: Sequence[str], *, context: Mapping[str, str] | None = None
             ) -> Diagnosis | None:
    """The first known failure (by table priority) found in ``lines``; the newest matching
    line of that pattern is reported. ``context`` fills ``<prefix>``, ``<component>`` and
    ``<workdir>`` in the fix, and its ``command`` (the run's continuation) gives each
    `rocbuild build …` of the fix the run's flags. None when nothing in the table matches."""
    cleaned = [clean(line) for line in lines]
    for pattern in patterns():
        for line in reversed(cleaned):
            match = pattern.search(line)
            if match:
                return Diagnosis(pattern.id, pattern.cause,
                                 _fill(pattern.fix, match, context or {}), line.strip())
    return None
