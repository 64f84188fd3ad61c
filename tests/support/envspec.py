"""``rocm_spec``: an EnvSpec of the shipped ROCm stack for tests that write env files without
loading a stack: the variables its recipes provide (ROCM_PATH, HIP_PATH, ...: clr.toml's
``provides_env``) and its title, read from recipes/ as a build would (envfiles.spec_for)."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from rocbuild.prefix.envfiles import EnvSpec, spec_for
from tests.cli import REPO


@functools.cache
def _shipped() -> EnvSpec:
    stack = load_stack(resolve({"recipes": str(REPO / "recipes"), "prefix": "/opt/x",
                                "workdir": "/nonexistent/rocbuild-test"}, env={}))
    spec = spec_for(stack)
    # the HIP runtime always comes from a base when there is one (clr.toml base.required)
    return replace(spec, provided=tuple(replace(p, on_base=True) for p in spec.provided))


def rocm_spec(*args: Any, **kwargs: Any) -> EnvSpec:
    """``EnvSpec(*args, **kwargs)`` with the shipped stack's provided variables and title."""
    shipped = _shipped()
    return EnvSpec(*args, **{"provided": shipped.provided, "title": shipped.title,
                             "summary": shipped.summary, **kwargs})
