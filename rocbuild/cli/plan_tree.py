"""`rocbuild plan --tree [--reverse]`: the dependency graph as a tree (as `cargo tree` and
`spack spec` draw it).

Forward: from each requested component (default: the stack's tops, the components nothing
else in the stack needs) down to what it needs. Reverse: from each requested component
(default: the stack's roots, which need nothing) up to what needs it. A component already
drawn is drawn again as its name with "(*)", not its whole subtree, so the tree of a stack of
40 components stays readable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rocbuild.model.graph import Stack


def edges(stack: Stack, *, reverse: bool) -> dict[str, list[str]]:
    """Each component's children in the tree: its dependencies, or (reverse) its
    dependents, within the stack, sorted by name."""
    names = list(stack.order)
    forward = {n: sorted(d for d in stack.components[n].depends if d in stack.components)
               for n in names}
    if not reverse:
        return forward
    back: dict[str, list[str]] = {n: [] for n in names}
    for name, deps in forward.items():
        for dep in deps:
            back[dep].append(name)
    return {n: sorted(v) for n, v in back.items()}


def roots(stack: Stack, children: Mapping[str, list[str]], requested: Sequence[str]) -> list[str]:
    """Where the trees start: the requested components, else those no other one points to."""
    if requested:
        return list(requested)
    pointed = {c for kids in children.values() for c in kids}
    return [n for n in stack.order if n not in pointed]


def lines(children: Mapping[str, list[str]], starts: Sequence[str]) -> list[str]:
    """The tree drawn with box characters; a name seen before ends with " (*)"."""
    out: list[str] = []
    seen: set[str] = set()

    def walk(name: str, lead: str, branch: str) -> None:
        repeat = name in seen and bool(children.get(name))
        out.append(f"{lead}{branch}{name}{' (*)' if repeat else ''}")
        if repeat:
            return
        seen.add(name)
        kids = children.get(name, [])
        below = lead + ("" if not branch else "    " if branch == "└── " else "│   ")
        for i, kid in enumerate(kids):
            walk(kid, below, "└── " if i == len(kids) - 1 else "├── ")

    for start in starts:
        walk(start, "", "")
    return out


def nested(children: Mapping[str, list[str]], starts: Sequence[str]) -> list[dict[str, Any]]:
    """The same trees as JSON: ``{"name": ..., "children": [...]}``, every subtree whole."""
    def node(name: str, path: tuple[str, ...]) -> dict[str, Any]:
        kids = [k for k in children.get(name, []) if k not in path]  # graphs are acyclic
        return {"name": name, "children": [node(k, (*path, name)) for k in kids]}
    return [node(s, ()) for s in starts]
