"""Render recipe strings as jinja2 templates in a sandbox, failing on any undefined name.

Recipes are data from files a user may edit or download, so templates run in jinja2's
SandboxedEnvironment; StrictUndefined turns a typo such as ``{{ tarets }}`` into an error
naming the file and key instead of an empty string in a six-hour build.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from rocbuild.errors import ConfigError

MAX_INT_BITS = 256  # far above any version, job count or size a recipe computes
MAX_REPEAT = 1 << 20  # characters or items a `*` may build ('x' * n, [a] * n)


class _LimitedSandbox(SandboxedEnvironment):
    """The sandbox with arithmetic limits: jinja2 caps range() (MAX_RANGE) but not `**` or
    `*`, so ``{{ 10**10**9 }}`` would run for hours and ``{{ 'x' * 10**12 }}`` fill the memory.
    Intercepted operators are also never folded at compile time (jinja2 nodes.BinExpr)."""

    intercepted_binops = frozenset({"**", "*"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if (operator == "**" and _is_int(left) and _is_int(right) and abs(left) > 1
                and right * (abs(left).bit_length() - 1) > MAX_INT_BITS):  # log2(left) * right
            raise SecurityError(f"{left} ** {right} is larger than rocbuild computes "
                                    f"(limit: {MAX_INT_BITS}-bit numbers)")
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and _is_int(count) and (
                        count * len(seq) > MAX_REPEAT):
                    raise SecurityError(f"repeating {len(seq)} items {count} times is more "
                                        f"than rocbuild builds (limit {MAX_REPEAT})")
        result = super().call_binop(context, operator, left, right)
        if _is_int(result) and result.bit_length() > MAX_INT_BITS:
            raise SecurityError(f"the result has {result.bit_length()} bits (limit "
                                f"{MAX_INT_BITS})")
        return result


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_ENV = _LimitedSandbox(undefined=jinja2.StrictUndefined, autoescape=False,
                       keep_trailing_newline=True)
_UNSAFE_IN_PATH = re.compile(r"[:\s]")


def pathsafe(text: object) -> str:
    """``gfx906:xnack-`` -> ``gfx906_xnack-``: a ':' would split PATH-like variables and
    whitespace breaks unquoted shell use, so neither may reach a prefix. '_' keeps xnack+ and
    xnack- apart (the same spelling the Lmod module name uses, envfiles.py)."""
    return _UNSAFE_IN_PATH.sub("_", str(text))


_ENV.filters["pathsafe"] = pathsafe


@functools.lru_cache(maxsize=4096)
def _compile(text: str) -> jinja2.Template:
    return _ENV.from_string(text)


def render(text: str, context: Mapping[str, Any], *, file: Path, key: str) -> str:
    """Render one recipe string; errors name ``file`` and ``key`` (e.g. ``cmake.args[2]``)."""
    if "{" not in text:  # most strings are plain; skip jinja for them
        return text
    try:
        return _compile(text).render(**context)
    except jinja2.UndefinedError as exc:
        known = ", ".join(sorted(context))
        raise ConfigError(
            f"{file}: key '{key}': undefined template variable: {exc.message} "
            f"(template {text!r}; variables: {known})",
            tip=f"fix the template in '{key}' of {file}",
        ) from None
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{file}: key '{key}': template syntax error: {exc.message} "
                          f"(template {text!r})", tip=f"fix the template in '{key}' of {file}"
                          ) from None
    except jinja2.TemplateError as exc:  # sandbox refusals and filter errors
        raise ConfigError(f"{file}: key '{key}': template error: {exc} (template {text!r})",
                          tip=f"fix the template in '{key}' of {file}") from None
    except (ArithmeticError, ValueError, TypeError, LookupError, MemoryError,
            RecursionError) as exc:  # range() too long, 1/0, int('x'), a 5000-digit literal
        raise ConfigError(f"{file}: key '{key}': template error: {type(exc).__name__}: "
                          f"{str(exc)[:200]} (template {text[:200]!r})",
                          tip=f"fix the template in '{key}' of {file}") from None
