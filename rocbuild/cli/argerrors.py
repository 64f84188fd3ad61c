"""argparse's refusals in rocbuild's words: what is wrong, the closest valid word, a TIP.

argparse ends a bad command line with a bare ``prog: error: message`` (no did-you-mean, no
next step). cli/main.py's ``Parser`` takes what went wrong from argparse's own hooks, never
from the English of its messages: a value outside an argument's choices from
``_check_value`` (``BadChoice``: the action and the value), the words no argument took from
``parse_known_args`` (``unrecognized``); the messages argparse builds itself (a missing
argument, a value of the wrong type) are shown as argparse words them. Each ConfigError made
here is printed like every other refusal: ``rocbuild: error: …`` then ``TIP: …``, exit 2.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from pathlib import Path

from rocbuild.errors import ConfigError, printable
from rocbuild.model.settings import OPTIONS
from rocbuild.model.targets import looks_like_target

_GLOBAL_FLAGS = {o.flag for o in OPTIONS}  # each takes a value


class BadChoice(Exception):
    """A value outside ``action.choices`` (raised from ``Parser._check_value``): not an
    argparse.ArgumentError, so argparse does not turn it into English text on its way up."""

    def __init__(self, action: argparse.Action, value: object) -> None:
        super().__init__(f"{value!r} is not a choice of {action.dest}")
        self.action, self.value = action, value


def _close(word: str, choices: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return found[0] if found else None


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)),
                None)


def command_words(argv: Sequence[str]) -> list[tuple[int, str]]:
    """The words of ``argv`` that are not options or the values of global options (``--workdir
    build`` is not the command `build`), with their places: the command and its arguments."""
    words: list[tuple[int, str]] = []
    skip = False
    for i, token in enumerate(argv):
        if skip:
            skip = False
        elif token.startswith("-"):
            skip = token in _GLOBAL_FLAGS  # --flag value (not --flag=value)
        else:
            words.append((i, token))
    return words


def command_path(parser: argparse.ArgumentParser, argv: Sequence[str]
                 ) -> tuple[list[str], argparse.ArgumentParser]:
    """The (sub)command words in ``argv`` (``['cache', 'push']``) and the parser of the last
    one; the values of global options are skipped (``--workdir build`` is not `build`)."""
    words: list[str] = []
    current = parser
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token.startswith("-"):
            skip = token in _GLOBAL_FLAGS  # --flag value (not --flag=value)
            continue
        sub = _subparsers(current)
        if sub is None or token not in sub.choices:
            break
        words.append(token)
        current = sub.choices[token]
    return words, current


def _help_tip(words: list[str]) -> str:
    command = " ".join(["rocbuild", *words])
    return f"`{command} --help` lists its options; `rocbuild help options` the global ones"


def _flags_of(parser: argparse.ArgumentParser) -> list[str]:
    return sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--")}
                  | _GLOBAL_FLAGS)


def unknown_top_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """The options before the command that the top parser does not know (``rocbuild
    --verison``, ``rocbuild --jbos 4 plan``): argparse then reports only the missing command,
    or takes the flag's value for the command, and the misspelt flag goes unnamed."""
    known = {s for a in parser._actions for s in a.option_strings}
    sub = _subparsers(parser)
    found = []
    for token in argv:
        if sub is not None and token in sub.choices:
            break
        if token.startswith("-") and token != "-" and token.split("=", 1)[0] not in known:
            found.append(token)
    return found


def unknown_flags_error(parser: argparse.ArgumentParser, flags: Sequence[str],
                        command: str | None = None) -> ConfigError:
    """One refusal naming each of ``flags`` (options before the ``command`` word, if any)."""
    options = sorted({s for a in parser._actions for s in a.option_strings
                      if s.startswith("--")} | _GLOBAL_FLAGS)
    sub = _subparsers(parser)
    parts = []
    for word in flags:
        name, shown = word.split("=", 1)[0], printable(word)
        owners = [cmd for cmd, child in (sub.choices.items() if sub else ())
                  if any(name in a.option_strings for a in child._actions)]
        if command in owners:  # `rocbuild --json status`: the command's own, given before it
            parts.append(f"'{shown}' is an option of `rocbuild {command}`: give it after the "
                         "command")
        elif owners:  # `rocbuild --verbose`: some command's option
            parts.append(f"'{shown}' is an option of `rocbuild {owners[0]}`"
                         + (f" (and {len(owners) - 1} more commands)" if len(owners) > 1
                            else "") + ": give it after the command")
        else:
            close = _close(name, options)
            parts.append(f"'{shown}' is not an option of rocbuild"
                         + (f" (did you mean '{close}'?)" if close else ""))
    return ConfigError("; ".join(parts),
                       tip="`rocbuild --help` lists the commands and the global options")


def bad_choice(parser: argparse.ArgumentParser, bad: BadChoice, argv: Sequence[str]
               ) -> ConfigError:
    """The ConfigError for a value outside an argument's choices: a command, or an option's
    value, with the closest valid one."""
    stray = unknown_top_flags(parser, argv)
    if stray and isinstance(bad.action, argparse._SubParsersAction):
        return unknown_flags_error(parser, stray)  # `--jbos 3 plan`: '3' taken for the command
    words, where = command_path(parser, argv)
    value = str(bad.value)
    shown = printable(value)  # an argument: its control characters as escapes, one line
    sub = _subparsers(where)
    if isinstance(bad.action, argparse._SubParsersAction) and sub is not None:
        names = sorted(sub.choices)
        close = _close(value, names)
        scope = " ".join(["rocbuild", *words])
        hint = f" Did you mean '{close}'?" if close else ""
        if looks_like_target(value):
            hint = f" '{shown}' is a GPU target: give it as --target {shown}"
        return ConfigError(f"'{shown}' is not a command of {scope}.{hint}",
                           tip=f"`{scope} --help` lists the commands")
    choices = [str(c) for c in bad.action.choices or ()]
    name = "/".join(bad.action.option_strings) or bad.action.metavar or bad.action.dest
    close = _close(value, choices)
    hint = f" Did you mean '{close}'?" if close else ""
    return ConfigError(f"{name}: '{shown}' is not one of {', '.join(choices)}.{hint}",
                       tip=_help_tip(words))


def unrecognized(parser: argparse.ArgumentParser, unknown: Sequence[str], argv: Sequence[str]
                 ) -> ConfigError:
    """The ConfigError for the words of ``argv`` no argument took (``unknown``): an option
    with the closest known one, a second GPU target, or an unexpected word. The one place
    that words a misspelt option."""
    words, where = command_path(parser, argv)
    stray = unknown_top_flags(parser, argv)
    if stray and set(unknown) <= set(stray):  # given before the command
        return unknown_flags_error(parser, stray, words[0] if words else None)
    flags = _flags_of(where)
    parts = []
    for word in unknown:
        shown = printable(word)
        if word.startswith("-"):
            close = _close(word.split("=", 1)[0], flags)
            parts.append(f"'{shown}' is not an option here"
                         + (f" (did you mean '{close}'?)" if close else ""))
        elif looks_like_target(word):
            parts.append(f"'{shown}' looks like a second GPU target: to build for several "
                         "targets, separate them with commas (--target gfx906,gfx90a)")
        else:
            parts.append(f"'{shown}' is an unexpected argument")
    command = " ".join(["rocbuild", *words])
    return ConfigError(f"{command}: " + "; ".join(parts), tip=_help_tip(words))


def explain(parser: argparse.ArgumentParser, message: str, argv: Sequence[str]) -> ConfigError:
    """The ConfigError for a message argparse worded itself (a missing argument, a value of
    the wrong type), raised while parsing ``argv``."""
    stray = unknown_top_flags(parser, argv)
    if stray and "required: COMMAND" in message:  # `rocbuild --verison`: no command left
        return unknown_flags_error(parser, stray)
    words, _ = command_path(parser, argv)
    message = printable(message)  # one line, which may quote the value given
    required = message.partition("the following arguments are required: ")[2]
    if required:
        return ConfigError(f"{' '.join(['rocbuild', *words])}: missing {required}",
                           tip=_help_tip(words))
    return ConfigError(f"{' '.join(['rocbuild', *words])}: {message}", tip=_help_tip(words))


def path_arg(text: str) -> Path:
    """argparse's ``type`` for a path argument: an empty one (a script's unset variable) is
    refused instead of read as the current folder (``prefixes --remove ''`` must not delete
    the folder it runs in)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "an empty path; give one (an empty value never means the current folder)")
    return Path(text)
