"""The commands of each step (fetch, patch, configure, compile, install) as plain data.

The engine runs exactly these argv lists and ``rocbuild plan --commands`` prints them, so
what a user pastes into a shell is what rocbuild would run. This module decides what the
engine adds to every CMake project: ``-G Ninja``, the install prefix and CMAKE_PREFIX_PATH.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocbuild import launchers, sources
from rocbuild.base import base_runpath, rpath_args
from rocbuild.graph import Component, Stack, venv_dir, wheelhouse_dir

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


def env_overrides(stack: Stack, component: Component) -> dict[str, str]:
    """The variables rocbuild sets for a build step, in one place: the prefix (and the build
    venv) first on PATH, ROCM_PATH and HIP_PLATFORM=amd, then the recipe's own [env], which
    wins. PATH keeps a ``$PATH`` reference for printing; ``step_env`` expands it."""
    overrides = {"PATH": ":".join(path_head(stack)) + ":$PATH",
                 "ROCM_PATH": str(stack.rocm_root),
                 "HIP_PLATFORM": "amd"}
    if stack.base is not None:  # hipcc's HIP is the base's, whatever the user's shell says
        overrides["HIP_PATH"] = str(stack.rocm_root)
    overrides.update(launchers.step_env(stack.launch, stack, component, os.environ))
    overrides.update(component.env)
    return overrides


def step_env(stack: Stack, component: Component,
             base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a build step really runs in: ``base`` (default: ours) plus
    ``env_overrides``, with ``$PATH`` at the end of a value replaced by the base's PATH."""
    env = dict(os.environ if base is None else base)
    for key, value in env_overrides(stack, component).items():
        if value.endswith(":$PATH"):
            value = os.pathsep.join(p for p in (value[: -len(":$PATH")], env.get("PATH", ""))
                                    if p)
        env[key] = value
    return env


def install_runpath(stack: Stack, component: Component) -> str:
    """The RUNPATH of the programs and libraries a component installs, relative to $ORIGIN so
    a prefix still works when copied or moved: the component's own lib/ first, then the
    stack's lib/ and the lib/ of every component it depends on that installs elsewhere
    (LLVM's lib/llvm/lib), never a folder of a component it does not use. Relative to bin/,
    which is also right for lib/ (its sibling)."""
    users_of = [stack.components[n] for n in stack.closure(component.name)
                if n in stack.components]
    libs = [component.install_prefix / "lib", stack.prefix / "lib",
            *(c.install_prefix / "lib" for c in users_of)]
    origin = component.install_prefix / "bin"
    entries: list[str] = []
    for lib in libs:
        entry = "$ORIGIN/" + os.path.relpath(lib, origin)
        if entry not in entries:
            entries.append(entry)
    entries += base_runpath(stack.base)  # a --base's lib dirs, absolute, after the prefix's
    return ";".join(entries)


def _sets_rpath(args: list[str]) -> bool:
    return any(a.startswith(("-DCMAKE_INSTALL_RPATH=", "-DCMAKE_INSTALL_RPATH:")) for a in args)


def configure_argv(stack: Stack, component: Component, jobs: Mapping[str, int] | None
                   ) -> list[str]:
    """The cmake configure command; ``jobs`` (per kind of work) fills the recipe's job_args,
    which change only the speed and so are not part of any fingerprint (None: leave them out).
    Every component gets an install RUNPATH (DESIGN 3.5) unless its recipe sets its own or
    opts out (install.runpath = false, with a reason)."""
    prefix_path = ";".join(str(p) for p in stack.search_prefixes)  # the prefix, then a --base
    recipe_args: list[str] = []
    for arg in component.cmake_args:
        if arg.startswith("-DCMAKE_PREFIX_PATH="):  # the recipe's paths come after the prefix
            prefix_path += ";" + arg.split("=", 1)[1]
        else:
            recipe_args.append(arg)
    runpath = ([f"-DCMAKE_INSTALL_RPATH={install_runpath(stack, component)}"]
               if component.recipe.runpath and not _sets_rpath(recipe_args) else [])
    return ["cmake", "-G", "Ninja", "-S", str(component.source_dir), "-B",
            str(component.build_dir), f"-DCMAKE_BUILD_TYPE={component.build_type}",
            f"-DCMAKE_INSTALL_PREFIX={component.install_prefix}",
            f"-DCMAKE_PREFIX_PATH={prefix_path}", *runpath, *rpath_args(stack.base),
            *recipe_args, *launchers.cmake_args(stack.launch, component),
            *(component.render_job_args(jobs) if jobs is not None else [])]


def build_argv(component: Component, jobs: int) -> list[str]:
    return ["cmake", "--build", str(component.build_dir), "--parallel", str(jobs)]


def install_argv(component: Component) -> list[str]:
    return ["cmake", "--install", str(component.build_dir)]


def fetch_argv(component: Component, workdir: Path,
               mirror: tuple[tuple[str, str], ...] = ()) -> list[list[str]]:
    """Shell equivalents of the fetch step as sources.fetch does it (through gitpython): the
    ref into the bare cache ``<workdir>/cache/git/<repo>.git`` (kept, so a clean rebuild does
    not download again), then a checkout assembled from the cache in ``<dir>.partial`` and
    renamed into place only when complete. (rocbuild also skips the download when a tag is
    cached, and tags the checkout with an id file for its stamps.)"""
    assert component.fetch_url is not None and component.ref is not None
    cache = str(sources.cache_dir(workdir / "cache" / "git", component.fetch_url))
    pinned = sources.cache_ref(component.ref)
    where = str(component.checkout_dir)
    partial = where + ".partial"
    cmds = [["git", "init", "-q", "--bare", cache],
            ["git", "-C", cache, "config", "uploadpack.allowAnySHA1InWant", "true"],
            ["git", "-C", cache, "fetch", "--depth", "1", "--no-tags", "--",
             component.fetch_url, component.ref],
            ["git", "-C", cache, "update-ref", pinned, "FETCH_HEAD"],
            ["rm", "-rf", partial],
            ["git", "init", "-q", partial],
            ["git", "-C", partial, "fetch", "--depth", "1", "--no-tags", "--",
             Path(cache).as_uri(), pinned],
            ["git", "-C", partial, "checkout", "-q", "--detach", "FETCH_HEAD"]]
    if component.submodules:
        cmds.append(["git", "-C", partial, *sources.insteadof_args(mirror), "submodule",
                     "update", "--init", "--recursive", "--depth", "1"])
    cmds += [["rm", "-rf", where], ["mv", partial, where]]
    return cmds


def venv_commands(stack: Stack, python: str) -> list[list[str]]:
    """The build venv (``<workdir>/venv``) with the recipes' Python packages, and the wheels
    builds pip-install by themselves downloaded into ``<workdir>/wheels``; empty when no
    selected recipe needs Python packages. actions.setup_python runs exactly these."""
    packages, wheels = stack.python_needs()
    if not packages and not wheels:
        return []
    venv = venv_dir(stack.workdir)
    commands = [[python, "-m", "venv", "--clear", str(venv)]]
    in_venv = str(venv / "bin" / "python")
    if packages:
        commands.append([in_venv, "-m", "pip", "install", "--disable-pip-version-check",
                         *packages])
    if wheels:
        commands.append([in_venv, "-m", "pip", "download", "--disable-pip-version-check",
                         "-d", str(wheelhouse_dir(stack.workdir)), *wheels])
    return commands


def patch_argv(component: Component) -> list[list[str]]:
    return [["git", "-C", str(component.checkout_dir), "apply", "--", str(p.path)]
            for p in component.patches]


@dataclass(frozen=True)
class StepCommands:
    step: str
    argvs: tuple[tuple[str, ...], ...]
    env: tuple[tuple[str, str], ...] = ()  # overrides, only for the cmake steps


def commands_for(stack: Stack, component: Component, jobs: Mapping[str, int],
                 mirror: tuple[tuple[str, str], ...] = ()) -> list[StepCommands]:
    env = tuple(env_overrides(stack, component).items())
    out = []
    for step in steps_of(component):
        if step == "fetch":
            out.append(StepCommands(step, tuple(map(tuple, fetch_argv(
                component, stack.workdir, mirror)))))
        elif step == "patch":
            out.append(StepCommands(step, tuple(map(tuple, patch_argv(component)))))
        elif step == "configure":
            out.append(StepCommands(step, (tuple(configure_argv(stack, component, jobs)),), env))
        elif step == "compile":
            out.append(StepCommands(step, (tuple(build_argv(component, jobs["compile"])),), env))
        else:
            out.append(StepCommands(step, (tuple(install_argv(component)),), env))
    return out


def shell_line(argv: Sequence[str], env: tuple[tuple[str, str], ...] = ()) -> str:
    """One paste-ready shell line (plan's commands, smoke's echo); ``$PATH`` in an override
    stays expandable."""
    assignments = []
    for key, value in env:
        if value.endswith(":$PATH"):
            assignments.append(f'{key}={shlex.quote(value[: -len(":$PATH")])}:"$PATH"')
        else:
            assignments.append(f"{key}={shlex.quote(value)}")
    return " ".join([*assignments, shlex.join(list(argv))])

