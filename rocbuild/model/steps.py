"""What every step runs in, and the source steps' commands, as plain data.

The build environment of a component (``env_overrides``, ``step_env``) and the shell
equivalents of fetch and patch; the configure, compile and install commands are the build
system's (buildsystems/). The engine runs exactly these, and ``rocbuild plan --commands``
prints them (steptable.commands_for), so what a user pastes into a shell is what rocbuild
would run.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from rocbuild.errors import CONTROL
from rocbuild.model import gitcache, launchers
from rocbuild.model.graph import Component, Stack
from rocbuild.model.inputcheck import CLEARED_ENV
from rocbuild.model.provides import step_variables
from rocbuild.model.workdir import Workdir


def path_head(stack: Stack) -> list[str]:
    """What goes before the user's PATH: the prefix, then the build venv when recipes need
    Python packages (so `python3` in a build finds them, and the system Python is untouched)."""
    head = [f"{p}/bin" for p in stack.search_prefixes]  # the prefix, then a --base
    if stack.python_needs() != ((), ()):
        head.append(str(stack.work.venv / "bin"))
    return head


def env_overrides(stack: Stack, component: Component) -> dict[str, str]:
    """The variables rocbuild sets for a build step, in one place: the prefix (and the build
    venv) first on PATH, the variables the stack's recipes provide to its steps (ROCm's:
    ROCM_PATH and HIP_PLATFORM=amd, and on a base HIP_PATH and the base's device bitcode:
    clr.toml's ``provides_env``; a stack of other projects gets none), the compiler
    launchers', then the recipe's own [env], which wins. PATH keeps a ``$PATH`` reference for
    printing; ``step_env`` expands it."""
    overrides = {"PATH": ":".join(path_head(stack)) + ":$PATH", **step_variables(stack)}
    overrides.update(launchers.launcher_env(stack.launch, stack, component))
    overrides.update(component.env)
    return overrides


def step_env(stack: Stack, component: Component, base: Mapping[str, str]) -> dict[str, str]:
    """The environment a build step really runs in: ``base`` (the caller's: rocbuild's own
    environment for a run) plus ``env_overrides``, with ``$PATH`` at the end of a value
    replaced by the base's PATH, and without the variables no step may see
    (``inputcheck.CLEARED_ENV``: DESTDIR)."""
    env = {k: v for k, v in base.items() if k not in CLEARED_ENV}
    for key, value in env_overrides(stack, component).items():
        if value.endswith(":$PATH"):
            value = os.pathsep.join(p for p in (value[: -len(":$PATH")], env.get("PATH", ""))
                                    if p)
        env[key] = value
    return env


def cleared_env(base: Mapping[str, str]) -> list[str]:
    """The variables of ``base`` (the caller's environment) that ``step_env`` leaves out, as
    NAME=VALUE, for the step log."""
    return [f"{k}={base[k]}" for k in CLEARED_ENV if k in base]


def fetch_argv(component: Component, workdir: Path,
               mirror: tuple[tuple[str, str], ...] = ()) -> list[list[str]]:
    """Shell equivalents of the fetch step as run/sources.fetch does it (through gitpython): the
    ref into the bare cache ``<workdir>/cache/git/<repo>.git`` (kept, so a clean rebuild does
    not download again), then a checkout assembled from the cache in ``<dir>.partial`` and
    renamed into place only when complete. (rocbuild also skips the download when a tag is
    cached, and tags the checkout with an id file for its stamps.)"""
    assert component.fetch_url is not None and component.ref is not None
    cache = str(gitcache.cache_dir(Workdir.shared(workdir).git_cache, component.fetch_url))
    pinned = gitcache.cache_ref(component.ref)
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
        cmds.append(["git", "-C", partial, *gitcache.insteadof_args(mirror), "submodule",
                     "update", "--init", "--recursive", "--depth", "1"])
    cmds += [["rm", "-rf", where], ["mv", partial, where]]
    return cmds


def patch_argv(component: Component) -> list[list[str]]:
    return [["git", "-C", str(component.checkout_dir), "apply", "--", str(p.path)]
            for p in component.patches]


def shell_word(text: str) -> str:
    """``shlex.quote``, except that a word with a control character (an ESC, a newline in a
    recipe's argument) is written in bash's ``$'...'`` form with each one as its escape: the
    line still means the same argument when pasted, and no raw control byte reaches the
    terminal it is printed on."""
    if not CONTROL.search(text):  # what errors.printable escapes
        return shlex.quote(text)
    body = "".join(ch if not (CONTROL.fullmatch(ch) or ch in "'\\") else
                   f"\\x{ord(ch):02x}" if ord(ch) < 0x80 else f"\\u{ord(ch):04x}"
                   for ch in text)
    return f"$'{body}'"


def shell_line(argv: Sequence[str], env: tuple[tuple[str, str], ...] = ()) -> str:
    """One paste-ready shell line (plan's commands, smoke's echo); ``$PATH`` in an override
    stays expandable."""
    assignments = [f'{key}={shell_word(value.removesuffix(":$PATH"))}:"$PATH"'
                   if value.endswith(":$PATH") else f"{key}={shell_word(value)}"
                   for key, value in env]
    return " ".join([*assignments, *(shell_word(arg) for arg in argv)])

