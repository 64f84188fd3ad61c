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
from jinja2.sandbox import SandboxedEnvironment

from rocbuild.errors import ConfigError

_ENV = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False,
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
