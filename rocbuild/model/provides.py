"""The variables a stack's recipes provide (``provides_env``), for its users and its builds.

A stack's identity comes from its recipes: the env files and modulefiles set what they
provide (``prefix/envfiles.py``), and a build step runs with those of them a recipe marks
``steps = "always"`` (or ``"from base"``, only while the component is taken from a --base),
so a stack of other projects gets no ROCM_PATH or HIP_PLATFORM in its files or its builds
(``steps.env_overrides``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rocbuild.errors import ConfigError
from rocbuild.model.base import device_lib_dir
from rocbuild.model.graph import Stack
from rocbuild.model.render import render as render_text

PREFIX_MARK = "\x00rocbuild-prefix\x00"  # what {{ prefix }} renders to in a provides_env value
# the variable naming the device bitcode: on a base it is where the base showed its
# device-libs (Debian: clang's resource folder), not the recipe's path inside the base
DEVICE_LIB_VAR = "HIP_DEVICE_LIB_PATH"


@dataclass(frozen=True)
class Provided:
    """A variable a component's recipe sets for users (``provides_env``): ``in_tree`` is the
    path inside the tree the component is installed in ("" for the tree itself; None: ``value``
    is a plain value), and ``on_base`` says that tree is the --base (the component is taken
    from it), else the prefix. ``steps``: whether build steps run with it ("always", "from
    base", "": never)."""

    name: str
    value: str
    comment: str
    in_tree: str | None = None
    on_base: bool = False
    steps: str = ""


def provided_by(stack: Stack) -> tuple[Provided, ...]:
    """The variables the stack's recipes provide to users, in the order of the stack's
    default set (every recipe, by name, when stack.toml lists none), then of the components
    built and those taken from a base (the first recipe that names a variable wins): a
    stack's identity comes from its recipes, so a stack without ROCm sets no ROCM_PATH."""
    taken = stack.base.taken if stack.base else frozenset()
    default = stack.recipes.stack.components or sorted(stack.recipes.recipes)
    names = list(dict.fromkeys([*default, *stack.order, *sorted(taken)]))
    out: dict[str, Provided] = {}
    for name in names:
        recipe = stack.recipes.recipes.get(name)
        if recipe is None:
            continue
        context = {"prefix": PREFIX_MARK, "version": stack.version, "series": stack.series,
                   "targets": [str(t) for t in stack.targets], "name": name}
        for var, (template, comment, steps) in recipe.provides_env.items():
            if var in out:
                continue
            value = render_text(template, context, file=recipe.file, key=f"provides_env.{var}")
            if value.startswith(PREFIX_MARK):
                rel = value[len(PREFIX_MARK):].strip("/")
                out[var] = Provided(var, rel, comment or f"set by {name}", rel, name in taken,
                                    steps)
            elif PREFIX_MARK in value:
                raise ConfigError(f"{recipe.file}: key 'provides_env.{var}': {{{{ prefix }}}} "
                                  "may only start the value (a path inside the tree)",
                                  tip=f"fix 'provides_env.{var}' in {recipe.file}")
            else:
                out[var] = Provided(var, value, comment or f"set by {name}", steps=steps)
    return tuple(out.values())


def step_variables(stack: Stack) -> dict[str, str]:
    """The provided variables every build step of ``stack`` runs with: those a recipe marks
    ``steps = "always"``, and ``"from base"`` ones while their component is taken from the
    base (its files are not where ROCM_PATH would lead a build). A path is in the tree the
    component is installed in: the prefix, or the base."""
    out: dict[str, str] = {}
    for p in provided_by(stack):
        if p.steps == "always" or (p.steps == "from base" and p.on_base):
            if p.name == DEVICE_LIB_VAR and p.on_base and stack.base is not None:
                bitcode = device_lib_dir(stack.base)
                if bitcode is not None:  # where the base showed its device bitcode
                    out[p.name] = str(bitcode)
                continue
            if p.in_tree is None:
                out[p.name] = p.value
            else:
                tree = stack.base.path if p.on_base and stack.base else stack.prefix
                out[p.name] = str(tree / p.in_tree) if p.in_tree else str(tree)
    return out
