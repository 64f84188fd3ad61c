"""Render recipe strings as jinja2 templates in a sandbox, failing on any undefined name.

Recipes are data from files a user may edit or download, so templates run in jinja2's
SandboxedEnvironment; StrictUndefined turns a typo such as ``{{ tarets }}`` into an error
naming the file and key instead of an empty string in a six-hour build.

The sandbox keeps templates from reaching Python's internals, not from running long or
building huge strings, so this one is narrowed and bounded as well:

- globals: only ``range`` (jinja2 caps it at 100,000 items) and ``dict``. jinja2's others
  (``lipsum``, ``cycler``, ``joiner``, ``namespace``) are for HTML pages (``{{ lipsum(10**6) }}``
  runs for minutes), and recipes use none of them.
- the operators and calls that grow a string or a list in one C call (``*``, ``**``, ``%``,
  ``str.format``, ``center``, ``ljust``, ``replace``, ``join``, ``indent``, ``int`` of a long
  string, ...) are checked before they run (limits below);
- the output of one string is at most MAX_OUTPUT characters and its rendering at most
  MAX_SECONDS (a trace function, active only while a template renders, sees every line the
  template runs, so nested loops are cut too).
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from rocbuild.errors import ConfigError

MAX_INT_BITS = 256  # far above any version, job count or size a recipe computes
MAX_REPEAT = 1 << 20  # characters or items a `*` may build ('x' * n, [a] * n)
MAX_OUTPUT = 1 << 20  # characters one recipe string may render to (exec takes 128 KiB/arg)
MAX_SECONDS = 5.0  # a recipe string renders in microseconds; this is a loop that never ends
MAX_DIGITS = 4300  # int() of a longer string is quadratic (Python 3.11 refuses it too)
GLOBALS = ("range", "dict")  # what templates may call by name besides the filters


class _LimitedSandbox(SandboxedEnvironment):
    """The sandbox with arithmetic limits: jinja2 caps range() (MAX_RANGE) but not `**` or
    `*`, so ``{{ 10**10**9 }}`` would run for hours and ``{{ 'x' * 10**12 }}`` fill the memory.
    Intercepted operators are also never folded at compile time (jinja2 nodes.BinExpr)."""

    intercepted_binops = frozenset({"**", "*", "%"})

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
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, (list, tuple)) and _is_int(count) and (
                        count * _size(seq) > MAX_OUTPUT):
                    raise SecurityError(f"repeating {_size(seq)} characters {count} times is "
                                        f"more than rocbuild builds (limit {MAX_OUTPUT})")
        if operator == "%" and isinstance(left, str):
            _check_percent_format(left)
        result = super().call_binop(context, operator, left, right)
        if _is_int(result) and result.bit_length() > MAX_INT_BITS:
            raise SecurityError(f"the result has {result.bit_length()} bits (limit "
                                f"{MAX_INT_BITS})")
        return result

    def wrap_str_format(self, value: Any) -> Any:
        """jinja2 sandboxes ``'...'.format`` when the attribute is read; the format string
        is checked for huge or computed widths there too."""
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_brace_format(value.__self__)
        return wrapped

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """Calls of str methods that grow a string are checked before they run."""
        name = getattr(__obj, "__name__", "")
        if isinstance(getattr(__obj, "__self__", None), str) and name in _GROWING_METHODS:
            _GROWING_METHODS[name](__obj.__self__, *args, **kwargs)
        return super().call(__context, __obj, *args, **kwargs)


def _size(items: Any) -> int:
    """Characters of the strings in ``items`` (1 for anything else), a list's output size."""
    return sum(len(x) if isinstance(x, str) else 1 for x in items)


def _width(value: Any, what: str) -> None:
    if _is_int(value) and value > MAX_OUTPUT:
        raise SecurityError(f"{what} {value} is more than rocbuild builds (limit {MAX_OUTPUT})")


_SPEC_NUMBER = re.compile(r"%[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?")
_FORMAT_NUMBER = re.compile(r"\{[^{}]*:[^{}]*?(\d{7,})[^{}]*\}")
_NESTED_FIELD = re.compile(r"\{[^{}]*:[^{}]*\{")  # '{:{w}}': a width computed at run time


def _check_percent_format(text: str) -> None:
    for width, precision in _SPEC_NUMBER.findall(text):
        for part in (width, precision):
            if part == "*" or (part and int(part) > MAX_OUTPUT):
                raise SecurityError(f"the format {text[:40]!r} asks for a width or precision "
                                    f"above {MAX_OUTPUT} (or a computed one)")


def _check_brace_format(text: str, *args: Any, **kwargs: Any) -> None:
    if _FORMAT_NUMBER.search(text) or _NESTED_FIELD.search(text):
        raise SecurityError(f"the format {text[:40]!r} asks for a width above {MAX_OUTPUT} "
                            "(or a computed one)")


def _check_pad(text: str, width: Any = 0, *args: Any, **kwargs: Any) -> None:
    _width(width, "a width of")


def _check_replace(text: str, old: Any = "", new: Any = "", count: Any = -1) -> None:
    if isinstance(old, str) and isinstance(new, str) and len(new) > len(old):
        times = text.count(old) if old else len(text) + 1
        if _is_int(count) and count >= 0:
            times = min(times, count)
        if len(text) + times * (len(new) - len(old)) > MAX_OUTPUT:
            raise SecurityError(f"the replacement would build more than {MAX_OUTPUT} characters")


def _check_join(sep: str, items: Any = (), *args: Any, **kwargs: Any) -> None:
    if isinstance(items, (list, tuple)) and _size(items) + len(sep) * len(items) > MAX_OUTPUT:
        raise SecurityError(f"joining would build more than {MAX_OUTPUT} characters")


_GROWING_METHODS: dict[str, Callable[..., None]] = {
    "center": _check_pad, "ljust": _check_pad, "rjust": _check_pad, "zfill": _check_pad,
    "expandtabs": _check_pad, "replace": _check_replace, "join": _check_join}


def _bounded_filter(name: str, check: Callable[..., None]) -> Callable[..., Any]:
    """jinja2's filter ``name`` with ``check(value, *args)`` before it runs."""
    original = _FILTERS[name]

    def bounded(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return original(*args, **kwargs)

    if getattr(original, "jinja_pass_arg", None) is not None:  # pass_eval_context filters
        bounded.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined]
    return bounded


def _filter_value(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The filter's arguments without the context jinja2 passes to some filters first."""
    return args[1:] if args and not isinstance(args[0], (str, list, tuple, int)) else args


def _check_join_filter(*args: Any, **kwargs: Any) -> None:
    value, *rest = _filter_value(args)
    sep = rest[0] if rest else kwargs.get("d", "")
    if isinstance(value, (list, tuple)):
        _check_join(str(sep), [str(v) for v in value])


def _check_indent(value: Any = "", width: Any = 4, *args: Any, **kwargs: Any) -> None:
    lines = str(value).count("\n") + 1
    if _is_int(width):
        _width(width * lines + len(str(value)), "an indent building")


def _check_int(value: Any = "", *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str) and len(value) > MAX_DIGITS:
        raise SecurityError(f"a number of {len(value)} digits (limit {MAX_DIGITS})")


def _check_format_filter(value: Any = "", *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str):
        _check_percent_format(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class TemplateTooSlow(SecurityError):
    """A template ran past MAX_SECONDS."""


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise TemplateTooSlow inside the template once ``seconds`` have passed: a trace
    function of this thread sees each line the template's compiled code runs (every loop
    iteration), and checks the clock every 1024 of them."""
    end = time.monotonic() + seconds
    previous = sys.gettrace()
    seen = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal seen
        seen += 1
        if seen & 1023 == 0 and time.monotonic() > end:
            raise TemplateTooSlow(f"the template ran longer than {seconds:g} s (a loop that "
                                  "does not end in time)")
        return tracer

    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)


class _Undefined(jinja2.StrictUndefined):
    """StrictUndefined that fails when shown inside a container too: jinja2's prints a list
    or dict through repr(), which StrictUndefined allows, so ``{{ [nosuch] }}`` would render
    as ``[Undefined]`` in a build's arguments instead of the undefined-variable error."""

    __slots__ = ()
    __repr__ = jinja2.StrictUndefined._fail_with_undefined_error
    __format__ = jinja2.StrictUndefined._fail_with_undefined_error


_ENV = _LimitedSandbox(undefined=_Undefined, autoescape=False,
                       keep_trailing_newline=True)
_ENV.globals = {name: _ENV.globals[name] for name in GLOBALS}
_FILTERS = dict(_ENV.filters)
_ENV.filters.update(
    center=_bounded_filter("center", lambda *a, **k: _check_pad(*_filter_value(a), **k)),
    indent=_bounded_filter("indent", lambda *a, **k: _check_indent(*_filter_value(a), **k)),
    join=_bounded_filter("join", _check_join_filter),
    replace=_bounded_filter("replace",
                            lambda *a, **k: _check_replace(*map(_as_text, _filter_value(a)),
                                                           **k)),
    format=_bounded_filter("format", lambda *a, **k: _check_format_filter(*_filter_value(a))),
    int=_bounded_filter("int", lambda *a, **k: _check_int(*_filter_value(a))),
    float=_bounded_filter("float", lambda *a, **k: _check_int(*_filter_value(a))),
)
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


def _as_text(value: Any) -> Any:
    return str(value) if isinstance(value, (int, float)) else value


def _render_bounded(template: jinja2.Template, context: Mapping[str, Any]) -> str:
    """The template's output, stopped at MAX_OUTPUT characters or MAX_SECONDS."""
    out: list[str] = []
    size = 0
    with _deadline(MAX_SECONDS):
        for chunk in template.generate(**context):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise SecurityError(f"the template renders to more than {MAX_OUTPUT} "
                                    "characters")
            out.append(chunk)
    return "".join(out)


class NotTheTemplates(Exception):
    """Raised from inside a render by a value of the context (not by the template): the
    caller's decision to explain, which ``render`` lets through as it is (graph.RoadCut: a
    component the --base road took away, read through ``build.<name>``)."""


def render(text: str, context: Mapping[str, Any], *, file: Path, key: str) -> str:
    """Render one recipe string; errors name ``file`` and ``key`` (e.g. ``cmake.args[2]``)."""
    if "{" not in text:  # most strings are plain; skip jinja for them
        return text
    try:
        return _render_bounded(_compile(text), context)
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
    except NotTheTemplates:
        raise
    except Exception as exc:  # a template is the recipe author's code, and what it raises
        # is its error: 1/0, int('x'), {{ 1|wordwrap }} (AttributeError), {{ 'a'|truncate(-1) }}
        # (AssertionError), a 5000-digit literal, a deep recursion
        raise ConfigError(f"{file}: key '{key}': template error: {type(exc).__name__}: "
                          f"{str(exc)[:200]} (template {text[:200]!r})",
                          tip=f"fix the template in '{key}' of {file}") from None
