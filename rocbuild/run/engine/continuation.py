"""The one command that continues a build: the command the user ran, made pasteable anywhere.

A build records the command line it was started with (``<workdir>/state/last-build.json``);
"continue with" in the build's summary and in `rocbuild status` repeats it, so a whole-stack
run with ``--recipes``, ``--workdir``, ``--mirror`` and ``--target`` continues as the same
whole-stack run, not as ``rocbuild build <one component>`` against the default recipes. To
work from another folder or a new shell the line is made self-contained: relative paths of
path options become absolute, settings that came from ``ROCBUILD_*`` variables are added as
flags, and a ``rocbuild.toml`` read from the build's folder is kept with ``cd <folder> &&``.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Sequence
from pathlib import Path

from rocbuild.errors import redact
from rocbuild.files import read_json
from rocbuild.model.settings import OPTIONS, Settings
from rocbuild.model.workdir import Workdir
from rocbuild.run.state.state import write_json_atomic

PATH_FLAGS = ("--recipes", "--workdir", "--prefix")
RECORD = "last-build.json"


def _absolute(value: str, cwd: Path) -> str:
    path = Path(os.path.expanduser(value))
    return str(path if path.is_absolute() else (cwd / path))


def _absolute_paths(argv: Sequence[str], cwd: Path) -> list[str]:
    """``argv`` with the values of --recipes/--workdir/--prefix made absolute (both
    ``--flag value`` and ``--flag=value``)."""
    out: list[str] = []
    follows_path_flag = False
    for word in argv:
        if follows_path_flag:
            out.append(_absolute(word, cwd))
            follows_path_flag = False
            continue
        flag, eq, value = word.partition("=")
        if flag in PATH_FLAGS and eq:
            out.append(f"{flag}={_absolute(value, cwd)}")
        else:
            out.append(word)
            follows_path_flag = word in PATH_FLAGS
    return out


def _env_as_flags(settings: Settings) -> list[str]:
    """Settings taken from ROCBUILD_* variables, as flags: a new shell may not have them."""
    flags: list[str] = []
    for option in OPTIONS:
        if not settings.source(option.name).startswith("env "):
            continue
        raw = os.environ.get(option.env, "")
        if option.repeatable:
            for rule in raw.replace(";", " ").split():
                flags += [option.flag, rule]
        else:
            flags += [option.flag, raw]
    return flags


def command_line(argv: Sequence[str], settings: Settings, cwd: Path | None = None) -> str:
    """The command the user ran (``argv`` after the program name), pasteable from anywhere."""
    cwd = cwd or Path.cwd()
    words = ["rocbuild", *_absolute_paths(argv, cwd), *_env_as_flags(settings)]
    line = shlex.join(words)
    from_cwd_config = any(settings.source(o.name) == f"config {cwd / 'rocbuild.toml'}"
                          for o in OPTIONS)
    # shown and kept in the workdir (which may be shared): a --mirror rule's password is not
    line = redact(line)
    return f"cd {shlex.quote(str(cwd))} && {line}" if from_cwd_config else line


def doit_command_line(argv: Sequence[str], settings: Settings, cwd: Path) -> str:
    """Plain doit's command (``argv`` after the program name) as it continues from anywhere:
    from the folder doit ran in (dodo.py is there), with the settings that came from
    ``ROCBUILD_*`` variables set in front (a new shell may not have them)."""
    assignments = [f"{o.env}={shlex.quote(os.environ.get(o.env, ''))}" for o in OPTIONS
                   if settings.source(o.name).startswith("env ")]
    return " ".join([f"cd {shlex.quote(str(cwd))} &&", *assignments,
                     shlex.join(["doit", *argv])])


def record(work: Workdir, command: str) -> None:
    """Remember the build's command line for `rocbuild status` (of its configuration)."""
    write_json_atomic(work.last_build,
                      {"command": command, "started": time.time(), "pid": os.getpid()})


def recorded(work: Workdir) -> str | None:
    doc = read_json(work.last_build)
    command = doc.get("command") if doc else None
    return command if isinstance(command, str) and command else None


def fallback(settings: Settings, components: Sequence[str]) -> str:
    """When no build recorded its command: `rocbuild build` with the settings this command
    was given (flags and environment), so the line still points at the same workdir."""
    words = ["rocbuild", "build", *components]
    for option in OPTIONS:
        if not settings.source(option.name).startswith(("flag ", "env ")):
            continue
        value = settings.value(option.name)
        items = value if option.repeatable else [value]
        for item in items:
            text = f"{item[0]}={item[1]}" if isinstance(item, tuple) and len(item) == 2 \
                and isinstance(item[0], str) else item
            if isinstance(text, tuple):  # targets
                text = ",".join(str(t) for t in text)
            words += [option.flag, str(text)]
    return redact(shlex.join(words))
