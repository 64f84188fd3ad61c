"""argparse's refusals in rocbuild's words: what is wrong, the closest valid word, a TIP.

argparse ends a bad command line with a bare ``prog: error: message`` (no did-you-mean, no
next step). ``Parser.error`` (cli/main.py) hands the message here and prints the ConfigError
this returns like every other refusal: ``rocbuild: error: …`` then ``TIP: …``, exit 2.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Sequence

from rocbuild.errors import ConfigError
from rocbuild.model.settings import OPTIONS
from rocbuild.model.targets import looks_like_target

_INVALID_CHOICE = re.compile(r"argument (?P<arg>\S+): invalid choice: '?(?P<value>.*?)'? "
                             r"\(choose from (?P<choices>.*)\)$")
_GLOBAL_FLAGS = {o.flag for o in OPTIONS}  # each takes a value


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
        name = word.split("=", 1)[0]
        owners = [cmd for cmd, child in (sub.choices.items() if sub else ())
                  if any(name in a.option_strings for a in child._actions)]
        if command in owners:  # `rocbuild --json status`: the command's own, given before it
            parts.append(f"'{word}' is an option of `rocbuild {command}`: give it after the "
                         "command")
        elif owners:  # `rocbuild --verbose`: some command's option
            parts.append(f"'{word}' is an option of `rocbuild {owners[0]}`"
                         + (f" (and {len(owners) - 1} more commands)" if len(owners) > 1
                            else "") + ": give it after the command")
        else:
            close = _close(name, options)
            parts.append(f"'{word}' is not an option of rocbuild"
                         + (f" (did you mean '{close}'?)" if close else ""))
    return ConfigError("; ".join(parts),
                       tip="`rocbuild --help` lists the commands and the global options")


def explain(parser: argparse.ArgumentParser, message: str, argv: Sequence[str]) -> ConfigError:
    """The ConfigError for argparse's ``message``, raised while parsing ``argv``."""
    stray = unknown_top_flags(parser, argv)
    if stray and ("required: COMMAND" in message or message.startswith("argument COMMAND")):
        return unknown_flags_error(parser, stray)
    words, where = command_path(parser, argv)
    choice = _INVALID_CHOICE.match(message)
    sub = _subparsers(where)
    if choice and sub is not None and choice["arg"] in (sub.metavar, sub.dest):
        names = sorted(sub.choices)
        value = choice["value"]
        close = _close(value, names)
        scope = " ".join(["rocbuild", *words])
        hint = f" Did you mean '{close}'?" if close else ""
        if looks_like_target(value):
            hint = f" '{value}' is a GPU target: give it as --target {value}"
        return ConfigError(f"'{value}' is not a command of {scope}.{hint}",
                           tip=f"`{scope} --help` lists the commands")
    if choice:
        choices = [c.strip().strip("'") for c in choice["choices"].split(",")]
        close = _close(choice["value"], choices)
        hint = f" Did you mean '{close}'?" if close else ""
        return ConfigError(f"{choice['arg']}: '{choice['value']}' is not one of "
                           f"{', '.join(choices)}.{hint}", tip=_help_tip(words))
    unknown = message.partition("unrecognized arguments: ")[2].split()
    if unknown and stray and set(unknown) <= set(stray):  # given before the command
        return unknown_flags_error(parser, stray, words[0] if words else None)
    if unknown:
        flags = _flags_of(where)
        parts = []
        for word in unknown:
            if word.startswith("-"):
                close = _close(word.split("=", 1)[0], flags)
                parts.append(f"'{word}' is not an option here"
                             + (f" (did you mean '{close}'?)" if close else ""))
            elif looks_like_target(word):
                parts.append(f"'{word}' looks like a second GPU target: to build for several "
                             "targets, separate them with commas (--target gfx906,gfx90a)")
            else:
                parts.append(f"'{word}' is an unexpected argument")
        command = " ".join(["rocbuild", *words])
        return ConfigError(f"{command}: " + "; ".join(parts), tip=_help_tip(words))
    required = message.partition("the following arguments are required: ")[2]
    if required:
        return ConfigError(f"{' '.join(['rocbuild', *words])}: missing {required}",
                           tip=_help_tip(words))
    return ConfigError(f"{' '.join(['rocbuild', *words])}: {message}", tip=_help_tip(words))
