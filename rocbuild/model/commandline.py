"""One pasteable `rocbuild build` command for any set of components, from the command that
continues a run (run/engine/continuation.py: the user's own line, made absolute).

``build_command`` keeps every flag of the run (``--recipes``, ``--workdir``, ``--prefix`` …)
and puts a fix's components in place of the run's, so a failure's "fix:" and its "continue
with:" line point at the same build.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from rocbuild.model.settings import OPTIONS

_VALUE_FLAGS = {o.flag for o in OPTIONS}  # the global settings: each takes a value
_BUILD = re.compile(r"`rocbuild build(?P<words>(?: [^`\s]+)*)`")


def split(command: str) -> tuple[str, list[str]]:
    """``("cd /x && ", words after "rocbuild build")`` of a continuation command."""
    head, sep, tail = command.rpartition("&& ")
    lead = head + sep if sep else ""
    words = shlex.split(tail)
    if words[:2] == ["rocbuild", "build"]:
        words = words[2:]
    return lead, words


def flags_of(words: Sequence[str]) -> list[str]:
    """``words`` without the components (positional words; a value after a settings flag
    given as ``--flag value`` is the flag's, not a component)."""
    out: list[str] = []
    takes_value = False
    for word in words:
        if takes_value or word.startswith("-"):
            out.append(word)
            takes_value = not takes_value and word in _VALUE_FLAGS
    return out


def build_command(continuation: str, components: Sequence[str]) -> str:
    """`rocbuild build COMPONENTS` with every flag (and the ``cd … &&``) of
    ``continuation``."""
    lead, words = split(continuation)
    return lead + shlex.join(["rocbuild", "build", *components, *flags_of(words)])


def with_run_flags(text: str, continuation: str | None) -> str:
    """``text`` with each `rocbuild build …` in backticks given the run's flags."""
    if not continuation:
        return text
    return _BUILD.sub(lambda m: f"`{build_command(continuation, m['words'].split())}`", text)
