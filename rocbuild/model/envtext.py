"""What the env files and modulefiles say that comes from the recipes: the variables a recipe
provides to users (``provides_env``, model/provides.py) and the stack's summary, rendered from
their templates.

The prefix layer writes them into env.sh, env.fish and the modulefiles at the end of a build
(prefix/envfiles.py); ``check`` renders the same texts when the stack loads, so a template
that fails, or a value the files could not carry, is bad input (exit 2) before anything runs,
not a failure after the last component was built. Every text here lands in a file every user
sources, inside a comment or a quoted value: a newline in a comment would start a command, so
no control character passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocbuild.model.provides import provided_by
from rocbuild.model.recipes import check_plain_text
from rocbuild.model.render import render as render_text

if TYPE_CHECKING:
    from rocbuild.model.graph import Stack


def summary(stack: Stack) -> str:
    """``stack.summary`` rendered (the modulefiles' help line), plain text only."""
    spec = stack.recipes.stack
    text = render_text(spec.summary, {"version": stack.version, "series": stack.series,
                                      "targets": [str(t) for t in stack.targets]},
                       file=spec.file, key="stack.summary")
    check_plain_text(spec.file, "stack.summary", text)
    return text


def check(stack: Stack) -> None:
    """Render what the env files will say of ``stack`` now, when it loads (exit 2 for a
    template that fails or a text the files could not carry), not after the last build."""
    provided_by(stack)
    summary(stack)
