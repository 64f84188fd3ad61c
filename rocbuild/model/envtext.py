"""What the env files and modulefiles say that comes from the recipes: the variables a recipe
provides to users (``provides_env``) and the stack's summary, rendered from their templates.

The prefix layer writes them into env.sh, env.fish and the modulefiles at the end of a build
(prefix/envfiles.py); ``check`` renders the same texts when the stack loads, so a template
that fails, or a value the files could not carry, is bad input (exit 2) before anything runs,
not a failure after the last component was built. Every text here lands in a file every user
sources, inside a comment or a quoted value: a newline in a comment would start a command, so
no control character passes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocbuild.errors import ConfigError
from rocbuild.model.recipes import check_plain_text, one_line
from rocbuild.model.render import render as render_text

if TYPE_CHECKING:
    from rocbuild.model.graph import Stack

PREFIX_MARK = "\x00rocbuild-prefix\x00"  # what {{ prefix }} renders to in a provides_env value
# a path inside the tree, as the env files write it after their computed prefix ("/lib")
_TREE_PATH = re.compile(r"[A-Za-z0-9/_.+-]*")


@dataclass(frozen=True)
class Provided:
    """A variable a component's recipe sets for users (``provides_env``): ``in_tree`` is the
    path inside the tree the component is installed in ("" for the tree itself; None: ``value``
    is a plain value), and ``on_base`` says that tree is the --base (the component is taken
    from it), else the prefix."""

    name: str
    value: str
    comment: str
    in_tree: str | None = None
    on_base: bool = False


def provided_by(stack: Stack) -> tuple[Provided, ...]:
    """The variables the stack's recipes provide to users, in the order of the stack's
    default set and then of each recipe (the first recipe that names a variable wins): a
    stack's identity comes from its recipes, so a stack without ROCm sets no ROCM_PATH."""
    names = [*stack.recipes.stack.components, *(n for n in stack.order
                                                 if n not in stack.recipes.stack.components)]
    taken = stack.base.taken if stack.base else frozenset()
    out: dict[str, Provided] = {}
    for name in names:
        recipe = stack.recipes.recipes.get(name)
        if recipe is None:
            continue
        context = {"prefix": PREFIX_MARK, "version": stack.version, "series": stack.series,
                   "targets": [str(t) for t in stack.targets], "name": name}
        for var, (template, comment) in recipe.provides_env.items():
            if var in out:
                continue
            key = f"provides_env.{var}"
            value = render_text(template, context, file=recipe.file, key=key)
            if value.startswith(PREFIX_MARK):
                rel = value[len(PREFIX_MARK):].strip("/")
                if not _TREE_PATH.fullmatch(rel):
                    raise ConfigError(
                        f"{recipe.file}: key '{key}': the path after {{{{ prefix }}}} is "
                        f"{rel!r}; the env files write it as it is, so use letters, digits "
                        "and / _ . + - only", tip=f"fix '{key}' in {recipe.file}")
                out[var] = Provided(var, rel, comment or f"set by {name}", rel, name in taken)
            elif PREFIX_MARK in value:
                raise ConfigError(f"{recipe.file}: key '{key}': {{{{ prefix }}}} "
                                  "may only start the value (a path inside the tree)",
                                  tip=f"fix '{key}' in {recipe.file}")
            else:
                out[var] = Provided(var, one_line(recipe.file, key, value),
                                    comment or f"set by {name}")
    return tuple(out.values())


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
