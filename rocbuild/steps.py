"""The commands of each step (fetch, patch, configure, compile, install) as plain data.

The engine runs exactly these argv lists and ``rocbuild plan --commands`` prints them, so
what a user pastes into a shell is what rocbuild would run. This module decides what the
engine adds to every CMake project: ``-G Ninja``, the install prefix and CMAKE_PREFIX_PATH.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from rocbuild.base import rpath_args
from rocbuild.graph import Component, Stack, venv_dir

STEPS = ("fetch", "patch", "configure", "compile", "install")
SOURCE_STEPS = ("fetch", "patch")


def steps_of(component: Component) -> tuple[str, ...]:
    """A component that reuses another's checkout has no fetch/patch of its own; a
    source-only component is fetched and patched, never built."""
    own = SOURCE_STEPS if component.owns_checkout else ()
    return own + (("configure", "compile", "install") if component.builds else ())


def path_head(stack: Stack) -> list[str]:
    """What goes before the user's PATH: the prefix, then the build venv when recipes need
    Python packages (so `python3` in a build finds them, and the system Python is untouched)."""
    head = [f"{p}/bin" for p in stack.search_prefixes]  # the prefix, then a --base
    if stack.python_needs() != ((), ()):
        head.append(str(venv_dir(stack.workdir) / "bin"))
    return head


def step_env(stack: Stack, component: Component,
             base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a build step runs in: the prefix first on PATH, ROCM_PATH and
    HIP_PLATFORM=amd, then the recipe's own [env] (which wins)."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = os.pathsep.join(p for p in (*path_head(stack), env.get("PATH", "")) if p)
    env["ROCM_PATH"] = str(stack.rocm_root)
    env["HIP_PLATFORM"] = "amd"
    env.update(component.env)
    return env


def env_overrides(stack: Stack, component: Component) -> dict[str, str]:
    """Only the variables rocbuild sets, for printing; PATH keeps a ``$PATH`` reference."""
    overrides = {"PATH": ":".join(path_head(stack)) + ":$PATH",
                 "ROCM_PATH": str(stack.rocm_root),
                 "HIP_PLATFORM": "amd"}
    overrides.update(component.env)
    return overrides


def configure_argv(stack: Stack, component: Component, jobs: Mapping[str, int]) -> list[str]:
    """The cmake configure command; ``jobs`` (per kind of work) fills the recipe's job_args,
    which change only the speed and so are not part of any fingerprint."""
    prefix_path = ";".join(str(p) for p in stack.search_prefixes)
    recipe_args: list[str] = []
    for arg in component.cmake_args:
        if arg.startswith("-DCMAKE_PREFIX_PATH="):  # the recipe's paths come after the prefix
            prefix_path += ";" + arg.split("=", 1)[1]
        else:
            recipe_args.append(arg)
    return ["cmake", "-G", "Ninja", "-S", str(component.source_dir), "-B",
            str(component.build_dir), f"-DCMAKE_BUILD_TYPE={component.build_type}",
            f"-DCMAKE_INSTALL_PREFIX={component.install_prefix}",
            f"-DCMAKE_PREFIX_PATH={prefix_path}", *rpath_args(stack.base), *recipe_args,
            *component.render_job_args(jobs)]


def build_argv(component: Component, jobs: int) -> list[str]:
    return ["cmake", "--build", str(component.build_dir), "--parallel", str(jobs)]


def install_argv(component: Component) -> list[str]:
    return ["cmake", "--install", str(component.build_dir)]


def fetch_argv(component: Component) -> list[list[str]]:
    """Shell equivalents of the fetch step (the engine does the same through gitpython)."""
    assert component.fetch_url is not None and component.ref is not None
    where = str(component.checkout_dir)
    cmds = [["git", "init", "-q", where],
            ["git", "-C", where, "fetch", "--depth", "1", component.fetch_url, component.ref],
            ["git", "-C", where, "checkout", "-q", "--detach", "FETCH_HEAD"]]
    if component.submodules:
        cmds.append(["git", "-C", where, "submodule", "update", "--init", "--recursive",
                     "--depth", "1"])
    return cmds


def patch_argv(component: Component) -> list[list[str]]:
    return [["git", "-C", str(component.checkout_dir), "apply", str(p.path)]
            for p in component.patches]


@dataclass(frozen=True)
class StepCommands:
    step: str
    argvs: tuple[tuple[str, ...], ...]
    env: tuple[tuple[str, str], ...] = ()  # overrides, only for the cmake steps


def commands_for(stack: Stack, component: Component, jobs: Mapping[str, int]
                 ) -> list[StepCommands]:
    env = tuple(env_overrides(stack, component).items())
    out = []
    for step in steps_of(component):
        if step == "fetch":
            out.append(StepCommands(step, tuple(map(tuple, fetch_argv(component)))))
        elif step == "patch":
            out.append(StepCommands(step, tuple(map(tuple, patch_argv(component)))))
        elif step == "configure":
            out.append(StepCommands(step, (tuple(configure_argv(stack, component, jobs)),), env))
        elif step == "compile":
            out.append(StepCommands(step, (tuple(build_argv(component, jobs["compile"])),), env))
        else:
            out.append(StepCommands(step, (tuple(install_argv(component)),), env))
    return out


def shell_line(argv: tuple[str, ...] | list[str], env: tuple[tuple[str, str], ...] = ()) -> str:
    """One paste-ready shell line; ``$PATH`` in an override stays expandable."""
    assignments = []
    for key, value in env:
        if value.endswith(":$PATH"):
            assignments.append(f'{key}={shlex.quote(value[: -len(":$PATH")])}:"$PATH"')
        else:
            assignments.append(f"{key}={shlex.quote(value)}")
    return " ".join([*assignments, shlex.join(list(argv))])

