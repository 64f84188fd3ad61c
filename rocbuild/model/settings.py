"""Settings: flag > ``ROCBUILD_*`` environment > config file > default, each with its source.

Every setting is declared once in ``OPTIONS`` (flag, environment variable, config key, help,
parser and default); the argparse flags, the environment names, the config-file keys and the
provenance shown by ``rocbuild plan`` all come from that table. ``Settings`` holds one typed
field per option (a unit test keeps the two in step).
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rocbuild.errors import ConfigError, printable, redact
from rocbuild.model import bounds, inputcheck
from rocbuild.model.launchers import parse_ccache_mode, parse_distcc_hosts, parse_launcher
from rocbuild.model.recipes import read_toml, suggest
from rocbuild.model.targets import TargetError, TargetId, parse_target_list, product_note
from rocbuild.model.trust import EVERYTHING, Trust, recipe_files

CONFIG_FILE_NAME = "rocbuild.toml"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


EMPTY_PATH = ("an empty path; give a folder (an empty value never means the current folder: "
              "a script's unset variable made `clean --workdir ''` clean the folder it ran in)")


def _parse_path(text: str) -> Path:
    """An absolute path without control characters: a newline or a tab in a workdir or
    prefix is accepted by the file system but breaks the generated build files (ninja reads
    a newline as the end of a rule) and every PATH-like variable, hours later. An empty one
    is refused: pathlib reads it as the current folder."""
    if not text.strip():
        raise ValueError(EMPTY_PATH)
    bad = _CONTROL.search(text)
    if bad:
        what = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab"}.get(
            bad.group(), f"the control character {bad.group()!r}")
        raise ValueError(f"{text!r} contains {what} (control character); use a path "
                         "without one")
    path = Path(os.path.expanduser(text)).absolute()
    try:
        os.stat(path)
    except OSError as exc:  # ELOOP: pathlib's resolve() raised RuntimeError at build time
        if exc.errno == errno.ELOOP:
            raise ValueError(f"'{text}' runs through a loop of symbolic links") from None
    except ValueError:  # a path too long for the system, or a surrogate: later checks say
        pass
    return path


def _parse_base(text: str) -> Path | None:
    """A base folder, or ``none``: no base (build from source), also when the workdir
    remembers the base of its last build (run/state/basememo.py)."""
    return None if text.strip().lower() == "none" else _parse_path(text)


# the kernel's file systems: no folder there holds sources and builds (/proc/self is a link
# to a process's own folder, where nothing can be created)
_PSEUDO_FS = ("/proc", "/sys", "/dev")


def _parse_workdir(text: str) -> Path:
    """A folder for sources, builds and state: not inside the kernel's file systems, and
    no file where it or a folder above it should be."""
    path = _parse_path(text)
    real = Path(os.path.realpath(path))
    for root in _PSEUDO_FS:
        if real == Path(root) or Path(root) in real.parents:
            raise ValueError(f"'{text}' is inside {root}, a file system of the kernel's, not a "
                             "folder for sources and builds")
    probe = real
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        what = "is a file" if probe == real else f"is below the file {probe}"
        raise ValueError(f"'{text}' {what}, not a folder")
    return path


def _parse_targets(text: str) -> tuple[TargetId, ...]:
    return parse_target_list([text])


_PROFILE_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")


def _parse_profile(text: str) -> str:
    """A profile's name; whether the stack declares it is judged with the recipes
    (graph.resolve_profile), which know the names."""
    name = text.strip()
    if not _PROFILE_RE.fullmatch(name):
        raise ValueError(f"{text!r} is not a profile name (lower-case letters, digits, '.', '_' "
                         "and '-', as stack.toml's [profiles.<name>] tables are named)")
    return name


def _parse_mirror_rules(text: str) -> tuple[tuple[str, str], ...]:
    rules = []
    for rule in re.split(r"[;\s]+", text.strip()):
        if not rule:
            continue
        source, sep, dest = rule.partition("=")
        if not sep or not source or not dest:
            raise ValueError(f"mirror rule '{rule}' is not FROM=TO (for example "
                             "https://github.com/=file:///srv/mirrors/)")
        for part, url in (("FROM", source), ("TO", dest)):
            try:  # the TO part becomes the URL git fetches from
                inputcheck.git_url("mirror rule", part, url)
            except ConfigError as exc:
                raise ValueError(f"{exc} (in rule '{rule}')") from None
        rules.append((source, dest))
    return tuple(rules)


def _parse_names(text: str) -> tuple[str, ...]:
    """Component names, separated by commas or spaces (checked against the recipes when the
    stack loads: graph.load_stack)."""
    names = tuple(n for n in re.split(r"[,\s]+", text.strip()) if n)
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", name):
            raise ValueError(f"'{name}' is not a component name (letters, digits and . _ + -)")
    return names


def _parse_positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise ValueError(f"{value} is not a positive number")
    return value


AUTO = "auto"


def _parse_parallel(text: str) -> int | str:
    """``auto`` (rocbuild decides for the run: run/engine/parallel.py) or a positive count."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return _parse_positive_int(text)
    except ValueError as exc:
        raise ValueError(f"{exc}; give a count or 'auto'") from None


def _parse_fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{value} is not between 0 and 1")
    return value


def _parse_cache(text: str) -> str:
    """A folder (made absolute) or a URL, kept as text: the store its scheme names is found
    when it is opened (run/cache/stores.py)."""
    _, sep, rest = text.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:  # user:password@host: urllib sends none of it,
        # and the URL is shown in plan and "continue with" lines
        raise ValueError(f"'{redact(text)}' carries a user or password before the host; "
                         "rocbuild sends no credentials in a cache URL (an oci:// registry "
                         "reads them from ROCBUILD_REGISTRY_AUTH or the Docker config)")
    return text if sep else str(_parse_path(text))


def _parse_safe_directories(text: str) -> tuple[str, ...]:
    """Folders (``;``-separated, or one each time the flag is given) whose files are used
    whoever owns them, or ``*`` for every folder (model/trust.py)."""
    return tuple(EVERYTHING if part.strip() == EVERYTHING else str(_parse_path(part))
                 for part in text.split(";"))


def _default_recipes_dir() -> Path:
    package = Path(__file__).resolve().parent.parent  # rocbuild/, not rocbuild/model/
    packaged = package / "_data" / "recipes"  # wheel layout (see pyproject force-include)
    return packaged if packaged.is_dir() else package.parent / "recipes"


def user_config_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/rocbuild``: the user's config file, own recipes and signing keys."""
    config = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "rocbuild"


def default_overlay(env: Mapping[str, str]) -> Path:
    """Where a user's own recipes live (`rocbuild recipes edit` copies one there)."""
    return user_config_dir(env) / "recipes"


def _default_workdir(env: Mapping[str, str]) -> Path:
    cache = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "rocbuild"


def _default_ccache_dir(env: Mapping[str, str]) -> Path:
    """One compiler cache per user, shared by every workdir (a second workdir of the same
    recipes compiles from the first one's objects: CCACHE_BASEDIR is the workdir, so paths
    inside it hash alike)."""
    return _default_workdir(env) / "ccache"


@dataclass(frozen=True)
class Option:
    """One setting: its flag, environment variable and config key derive from ``name``;
    ``default`` is the value when none of them is given (a function of the environment for
    the folders that follow XDG variables)."""

    name: str
    help: str
    parse: Callable[[str], Any]
    metavar: str
    default: Any = None
    repeatable: bool = False  # a flag given several times adds up (mirror rules)
    default_from_env: Callable[[Mapping[str, str]], Any] | None = None
    default_doc: str = ""  # how docs/settings.md states a default that depends on the host
    is_path: bool = False  # a folder: relative in a config file means from the file's folder
    path: bool = False  # the value is a path: empty is refused wherever it is given
    # the TOML types a config file may give (a list is joined with ';'); anything else, a
    # table above all, is refused naming the key
    config_types: tuple[type, ...] = (str,)

    def default_value(self, env: Mapping[str, str]) -> Any:
        return self.default_from_env(env) if self.default_from_env else self.default

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "ROCBUILD_" + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option("recipes", "recipes folder (default: the one shipped with rocbuild)", _parse_path,
           "DIR", default_from_env=lambda env: _default_recipes_dir(), is_path=True, path=True,
           default_doc="the recipes shipped with rocbuild"),
    Option("recipe_overlay", "folder of your own recipes: a <name>.toml there replaces the "
           "shipped recipe of that name (or adds one; stack.toml too), and "
           "../patches/<name>/ beside it replaces its patch series; read with the shipped "
           "recipes, or with --recipes when given here", _parse_path, "DIR", is_path=True,
           path=True, default_from_env=lambda env: default_overlay(env),
           default_doc="`$XDG_CONFIG_HOME/rocbuild/recipes` (`~/.config/rocbuild/recipes`)"),
    Option("workdir", "sources, build trees, logs and state", _parse_workdir, "DIR", is_path=True,
           path=True, default_from_env=_default_workdir,
           default_doc="`$XDG_CACHE_HOME/rocbuild` (`~/.cache/rocbuild`)"),
    Option("prefix", "install prefix (default: the prefix given to the workdir's last build, "
           "else the one recipes/stack.toml names)", _parse_path, "PATH", is_path=True, path=True),
    Option("target", "comma-separated GPU targets, e.g. gfx906 or gfx906,gfx90a", _parse_targets,
           "LIST", config_types=(str, list)),
    Option("profile", "the set of components a build takes when none is named: a profile of "
           "stack.toml, e.g. llama.cpp (rocBLAS, hipBLAS, llama.cpp) or pytorch (the ROCm "
           "libraries PyTorch needs)", _parse_profile, "NAME",
           default_doc="the profile stack.toml names (`llama.cpp` in the shipped recipes)"),
    Option("mirror", "rewrite a source URL prefix, like git's insteadOf (repeatable)",
           _parse_mirror_rules, "FROM=TO", default=(), repeatable=True,
           config_types=(str, list)),
    Option("base", "an installed ROCm (e.g. /opt/rocm-6.4.3) whose components are used instead "
           "of built; only what it lacks for the targets is built. Without it, the base of the "
           "workdir's last build; 'none' builds from source", _parse_base, "PATH", is_path=True,
           path=True),
    Option("from_source", "components to build from source although the --base provides "
           "them, e.g. rocblas (your own Tensile logic, a patch, a newer commit); what uses "
           "them is built against the new build too (hipBLAS over rocBLAS). Comma-separated, "
           "repeatable", _parse_names, "LIST", default=(), repeatable=True,
           config_types=(str, list)),
    Option("jobs", "upper bound on parallel jobs", _parse_positive_int, "N",
           config_types=(str, int)),
    Option("parallel", "components compiled at the same time (a count, or auto: more than one "
           "where the host has the cores and a ninja >= 1.13); their compiles share one job "
           "pool, and other components' fetch and configure run beside them",
           _parse_parallel, "N", default=AUTO, config_types=(str, int)),
    Option("swap_weight", "share of free swap counted as memory when sizing jobs (0-1)",
           _parse_fraction, "F", default=0.5, config_types=(str, int, float)),
    Option("ccache", "compiler cache: on, off or auto (auto: on when ccache is installed)",
           parse_ccache_mode, "MODE", default="auto"),
    Option("ccache_dir", "the compiler cache's folder, shared by every workdir (a CCACHE_DIR "
           "in your environment is used when this is not set)", _parse_path, "DIR",
           default_from_env=_default_ccache_dir, path=True,
           default_doc="`$XDG_CACHE_HOME/rocbuild/ccache` (`~/.cache/rocbuild/ccache`)"),
    Option("launcher", "your own compiler launcher for every CMake component, instead of "
           "ccache (e.g. sccache; a CMake list for several words); a recipe that names its own "
           "CMAKE_<LANG>_COMPILER_LAUNCHER keeps it", parse_launcher, "PROGRAM", default="",
           config_types=(str, list)),
    Option("distcc", "distcc hosts for the components a recipe marks distributable, e.g. "
           "'box1/8 box2/4' (DISTCC_HOSTS syntax)", parse_distcc_hosts, "HOSTS", default=""),
    Option("cache", "binary cache of built components to install from (a folder, an "
           "http(s):// URL serving one, or oci://REGISTRY/NAMESPACE/NAME)", _parse_cache,
           "DIR_OR_URL", is_path=True, path=True),
    Option("safe_directories", "folders whose files are used even when another user owns "
           "them or may write them: config files, recipes, patches, allowed_signers, the "
           "compiler cache (as git's safe.directory; '*' for every folder). Read from the "
           "flag, the variable or your own config file ($XDG_CONFIG_HOME/rocbuild/"
           "rocbuild.toml) only, never from a project's",
           _parse_safe_directories, "DIR", default=(), repeatable=True, path=True,
           config_types=(str, list)),
)
OPTION_BY_NAME = {o.name: o for o in OPTIONS}


def user_config_path(env: Mapping[str, str]) -> Path:
    return user_config_dir(env) / CONFIG_FILE_NAME


@dataclass(frozen=True)
class Settings:
    """Resolved settings, one field per option in ``OPTIONS`` (defaults live there). ``None``
    means "use what the recipes say" (prefix, target) or "no limit" (jobs)."""

    recipes: Path
    recipe_overlay: Path  # the user's recipes over the shipped ones (recipes.load_recipes)
    workdir: Path
    prefix: Path | None
    target: tuple[TargetId, ...] | None
    profile: str | None  # a profile of stack.toml; None: the one stack.toml names
    mirror: tuple[tuple[str, str], ...]
    base: Path | None
    from_source: tuple[str, ...]  # built although the base provides them (base.load_base)
    jobs: int | None
    parallel: int | str  # a count, or AUTO
    swap_weight: float
    ccache: str  # on, off or auto (launchers.CCACHE_MODES)
    ccache_dir: Path  # the compiler cache, one per user by default (not per workdir)
    launcher: str  # the user's own compiler launcher, "" for rocbuild's (launchers.py)
    distcc: str  # a DISTCC_HOSTS list, "" for none
    cache: str | None  # a folder or a URL (run/cache/stores.py opens it)
    safe_directories: tuple[str, ...]  # folders trusted whoever owns them (model/trust.py)
    # where each value came from: "flag --jobs", "env ROCBUILD_JOBS", "config PATH", "default"
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    # said once on stderr, e.g. how a product name was read
    notes: tuple[str, ...] = field(default=(), compare=False)
    # said once on stderr as warnings: the files not used because others could write them
    warnings: tuple[str, ...] = field(default=(), compare=False)
    # why the recipe overlay is not used ("" while it is): others could write it
    refused_overlay: str = field(default="", compare=False)
    # which config file was read and which were passed over (`rocbuild config` shows both)
    config: ConfigChoice | None = field(default=None, compare=False)

    def source(self, name: str) -> str:
        return self.sources.get(name, "default")

    def value(self, name: str) -> Any:
        """The value of the option called ``name`` (for tables over ``OPTIONS``)."""
        if name not in OPTION_BY_NAME:
            raise KeyError(name)
        return getattr(self, name)

    @property
    def overlay(self) -> Path | None:
        """The recipe overlay in force: the user's folder over the shipped recipes, or over
        their own --recipes only when they name an overlay too (an overlay's stack.toml must
        not replace the stack of a folder the user gave). None as well when others could
        write it (``refused_overlay``: model/trust.py)."""
        return None if self.refused_overlay else self.named_overlay

    @property
    def named_overlay(self) -> Path | None:
        """The overlay the settings name, whoever could write it."""
        if self.source("recipes") == "default" or self.source("recipe_overlay") != "default":
            return self.recipe_overlay
        return None

    def with_value(self, name: str, value: Any, source: str) -> Settings:
        if name not in OPTION_BY_NAME:
            raise KeyError(name)
        return replace(self, **{name: value}, sources={**self.sources, name: source})


# ROCBUILD_* variables that are not settings of OPTIONS, read by one command each; any other
# ROCBUILD_* name in the environment is a typo the user is told about (unknown_variables)
EXTRA_VARIABLES: dict[str, str] = {
    "ROCBUILD_LINK": "the link `rocbuild activate` changes when --link is not given",
    "ROCBUILD_REGISTRY_AUTH": "user:secret for an OCI registry cache (a token or a password), "
                              "before ~/.docker/config.json",
}


def known_variables() -> list[str]:
    return sorted([o.env for o in OPTIONS] + list(EXTRA_VARIABLES))


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """One warning per ``ROCBUILD_*`` variable rocbuild does not read, with the closest name
    (a misspelt workdir variable would otherwise be ignored in silence, where a misspelt
    config key is refused)."""
    known = known_variables()
    return [f"environment variable {printable(name)} is not a rocbuild setting and is ignored."
            + suggest(name, known) + " (`rocbuild help options` lists them)"
            for name in sorted(env) if name.startswith("ROCBUILD_") and name not in known]


def add_flags(parser: argparse.ArgumentParser, title: str | None = None,
              description: str | None = None, *, hidden: bool = False) -> None:
    """Add every setting's flag, in one argument group when ``title`` is given. ``hidden``:
    accepted but left out of --help (each subcommand takes the global options too, and its
    help points at `rocbuild help options` instead of repeating 40 lines). Defaults are
    suppressed so a flag given before the subcommand is not overwritten by the subcommand's
    parser, and so unset flags are told apart."""
    group: argparse._ActionsContainer = (
        parser.add_argument_group(title, description) if title else parser)
    for option in OPTIONS:
        group.add_argument(
            option.flag,
            dest=option.name,
            metavar=option.metavar,
            help=argparse.SUPPRESS if hidden else f"{option.help} [env {option.env}]",
            action="append" if option.repeatable else "store",
            default=argparse.SUPPRESS,
        )


def _read_config_file(path: Path) -> dict[str, Any]:
    data = read_toml(path, tip=f"fix or remove {path}")
    names = [o.name for o in OPTIONS]
    section = data.get("rocbuild", data)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [rocbuild] must be a table", tip=f"fix {path}")
    if "rocbuild" in data:  # settings go in [rocbuild]; any other table is a mistake
        for key in data:
            if key != "rocbuild":
                raise ConfigError(
                    f"{path}: table or key '{printable(key)}' is not allowed beside [rocbuild] "
                    "(rocbuild reads only [rocbuild])." + suggest(key, ["rocbuild", *names]),
                    tip=f"move the settings into [rocbuild] or remove '{printable(key)}' from "
                        f"{path}")
    for key in section:
        if key not in OPTION_BY_NAME:
            kind = "table" if isinstance(section[key], dict) else "key"
            # people write the flag's spelling (swap-weight) as often as a typo (worksdir)
            hint = (f" Did you mean '{key.replace('-', '_')}'?"
                    if key.replace("-", "_") in OPTION_BY_NAME else suggest(key, names))
            raise ConfigError(f"{path}: {kind} '{printable(key)}' is not a setting (known "
                              f"settings: {', '.join(names)})." + hint,
                              tip=f"fix the spelling or remove '{printable(key)}' from {path}; "
                                  "`rocbuild --help` describes each setting")
    return section


_TYPE_WORDS = {str: "a string", int: "a whole number", float: "a number",
               list: "a list of strings"}


def _toml_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return {str: "a string", int: "a number", float: "a number"}.get(type(value),
                                                                    type(value).__name__)


def _config_text(option: Option, value: Any) -> str:
    """A config file's value as the text a flag would give, when its TOML type is one the
    option takes (``config_types``); ValueError naming what was found otherwise (never a
    folder named "{'a': 1}" for a table)."""
    accepted = option.config_types
    fits = (not isinstance(value, bool) and isinstance(value, accepted)
            and not (isinstance(value, list) and not all(isinstance(v, str) for v in value)))
    if not fits:
        words = " or ".join(_TYPE_WORDS[t] for t in accepted)
        raise ValueError(f"must be {words}, not {_toml_kind(value)} ({value!r})")
    return ";".join(value) if isinstance(value, list) else str(value)


def project_folders(cwd: Path, env: Mapping[str, str]) -> list[Path]:
    """The folders searched for a project's rocbuild.toml, nearest first: ``cwd`` and each
    folder above it up to the file system's root, as cargo and git look for their files, but
    never above the user's home folder when ``cwd`` is inside it (a file in /home or / is not
    the user's; git's GIT_CEILING_DIRECTORIES does this for git). Both are compared
    resolved, so a $HOME that is a link (/home/me -> /data/me) still stops the search."""
    start = Path(os.path.realpath(cwd))
    home = Path(os.path.realpath(env.get("HOME") or os.path.expanduser("~")))
    ceiling = home if start == home or home in start.parents else None
    folders = [start]
    for parent in start.parents:
        if ceiling is not None and parent in ceiling.parents:
            break
        folders.append(parent)
    return folders


def config_candidates(cwd: Path, env: Mapping[str, str]) -> list[Path]:
    """Every file ``find_config`` looks at, in order: the project's rocbuild.toml in
    ``cwd`` or the nearest folder above (``project_folders``), then the user's."""
    return [folder / CONFIG_FILE_NAME for folder in project_folders(cwd, env)] + [
        user_config_path(env)]


@dataclass(frozen=True)
class ConfigChoice:
    """The config file read (None: none), those passed over because others could write
    them (path, why), and every place looked at."""

    path: Path | None
    skipped: tuple[tuple[Path, str], ...]
    searched: tuple[Path, ...]


def _entry_problem(path: Path) -> str | None:
    """Why what is at ``path`` cannot be read as a config file, in words; None for a regular
    file (a link to one included) and for nothing at all."""
    try:
        os.lstat(path)
    except OSError:
        return None  # nothing there (or a file where a folder above it should be)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "runs through a loop of symbolic links"
        if exc.errno == errno.ENOENT:
            return f"is a link to {os.readlink(path)}, which does not exist"
        return f"cannot be read: {exc.strerror}"
    if stat.S_ISREG(mode):
        return None
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "a device")
    return f"is {kind}, not a file"


def find_config(cwd: Path, env: Mapping[str, str], trust: Trust | None = None
                ) -> ConfigChoice:
    """The one config file read: the first of ``config_candidates`` that is there and that
    ``trust`` uses (the nearest project file wins over those above it and over the user's;
    they are not merged). One that others could write is passed over, as if it were not
    there; anything else in a candidate's place (a FIFO, a folder, a link loop or a link to
    nothing) is a ConfigError naming it, never "no config file" in silence."""
    searched = tuple(config_candidates(cwd, env))
    skipped: list[tuple[Path, str]] = []
    for candidate in searched:
        if not (candidate.exists() or candidate.is_symlink()):
            continue
        why = trust.why_not(candidate) if trust is not None else None
        if why is not None:
            skipped.append((candidate, why))
            continue
        problem = _entry_problem(candidate)
        if problem is not None:
            raise ConfigError(f"{candidate} {problem}; rocbuild reads its settings from that "
                              "name", tip=f"remove or replace {candidate}")
        return ConfigChoice(candidate, tuple(skipped), searched)
    return ConfigChoice(None, tuple(skipped), searched)


def _from_config_folder(option: Option, text: str, folder: Path) -> str:
    """A folder named in a config file relative to that file's folder, as cargo reads its
    config, so a rocbuild.toml found above the current folder means what it says (an empty
    one stays empty: the option refuses it)."""
    if not option.is_path or "://" in text or text.strip().lower() in ("none", ""):
        return text
    expanded = os.path.expanduser(text)
    return expanded if os.path.isabs(expanded) else os.path.normpath(folder / expanded)


SAFE = "safe_directories"


def _not_used(path: Path, why: str, user_file: Path, folder: Path | None = None) -> str:
    """The warning for a file or folder passed over because others could write it."""
    if path == user_file:
        return (f"{path} is not used: {why}; your own config file must be yours alone: "
                f"make it and its folders owned by you and writable only by you "
                f"(chown, chmod go-w)")
    return (f"{path} is not used: {why}; if you trust it, add {folder or path.parent} to "
            f"{SAFE} in {user_file} (as git's safe.directory)")


def _safe_directories(flags: Mapping[str, Any], env: Mapping[str, str], user_file: Path,
                      trust: Trust | None, warnings: dict[Path, str]
                      ) -> tuple[tuple[str, ...], str]:
    """``safe_directories`` and where it came from: the flag, the variable, or the user's own
    config file (whichever config file is read otherwise), never a project's: a file that
    could vouch for itself would vouch for anything."""
    option = OPTION_BY_NAME[SAFE]
    if flags.get(SAFE) is not None:
        raw, where = flags[SAFE], f"flag {option.flag}"
    elif option.env in env:
        raw, where = env[option.env], f"env {option.env}"
    else:
        why = trust.why_not(user_file) if trust is not None else None
        if why is not None:
            warnings[user_file] = _not_used(user_file, why, user_file)
            return (), "default"
        if not user_file.is_file() or SAFE not in (doc := _read_config_file(user_file)):
            return (), "default"
        try:
            raw, where = _config_text(option, doc[SAFE]), f"config {user_file}"
        except ValueError as exc:
            raise ConfigError(f"{user_file}: key '{SAFE}' {exc}",
                              tip=f"write {SAFE} = [\"/a/folder\", ...] in {user_file}") from None
        if doc[SAFE] == []:
            return (), where
    return tuple(d for dirs in _parsed(option, raw, where, user_file) for d in dirs), where


def _parsed(option: Option, raw: Any, where: str, config_file: Path | None) -> list[Any]:
    """``raw`` (one value, or a list: a repeated flag, a config file's list) parsed by
    ``option``; a ConfigError naming where it came from (flag, variable or file key)."""
    try:
        return [option.parse(str(item)) for item in (raw if isinstance(raw, list) else [raw])]
    except (ValueError, TargetError) as exc:
        said = f"{config_file}: key '{option.name}'" if where.startswith("config ") else where
        raise ConfigError(f"{said}: {exc}", tip=f"see `rocbuild --help` for {option.flag}"
                          ) from None


def _check_recipes(values: Mapping[str, Any], sources: Mapping[str, str], trust: Trust,
                   user_file: Path) -> None:
    """A recipes folder the user named (not the shipped one, which is part of rocbuild
    itself) must be one nobody else could write, with its patches: there is no other folder
    to build from instead, so it is refused (exit 2)."""
    if sources.get("recipes", "default") == "default":
        return
    folder = Path(values["recipes"])
    bad = trust.first_untrusted(recipe_files(folder))
    if bad is not None:
        path, why = bad
        raise ConfigError(
            f"the recipes folder {folder} (from {sources['recipes']}) is not used: {path} "
            f"{why.removeprefix('it ')}; recipes and patches are code rocbuild runs as you",
            tip=f"if you trust it, add {folder.parent} to {SAFE} in {user_file} (as git's "
                f"safe.directory), or copy the recipes to a folder of your own")


def _overlay_refusal(settings: Settings, trust: Trust, user_file: Path) -> str:
    """Why the settings' recipe overlay is not used (others could write it), "" when it is:
    the overlay is used whole or not at all, so no build mixes a recipe of it with patches
    of elsewhere."""
    overlay = settings.named_overlay
    if overlay is None:
        return ""
    bad = trust.first_untrusted(recipe_files(overlay))
    if bad is None:
        return ""
    path, why = bad
    return (f"your recipe overlay {overlay} is not used (the shipped recipes are): {path} "
            f"{why.removeprefix('it ')}; if you trust it, add {overlay.parent} to {SAFE} "
            f"in {user_file} (as git's safe.directory)")


def resolve(
    flags: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    cpus: int | None = None,
    trust: Trust | None = None,
) -> Settings:
    """Resolve every option from flags (argparse dest -> raw value), ``env`` (the user's
    environment; None: none), the config file and defaults; with ``cpus`` (this host's,
    checks/hostload.py ``usable_cpus``) the counts are checked against ``bounds``; with
    ``trust`` (checks/trust.py ``host_trust``: every command passes it) a config file, an
    overlay or a recipes folder that others could write is not used (model/trust.py).
    Raises ConfigError naming the flag, variable or file key that is wrong."""
    env = {} if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    user_file = user_config_path(env)
    warnings: dict[Path, str] = {}
    safe, safe_source = _safe_directories(flags, env, user_file, trust, warnings)
    if trust is not None:
        trust = trust.with_safe(safe)
    choice = find_config(cwd, env, trust)
    for path, why in choice.skipped:
        warnings.setdefault(path, _not_used(path, why, user_file))
    config_path = choice.path
    config = _read_config_file(config_path) if config_path else {}
    if config_path is not None and SAFE in config and config_path != user_file:
        raise ConfigError(f"{config_path}: key '{SAFE}' is read only from your own config "
                          f"file {user_file} (a project's file cannot say which folders are "
                          "safe: it would vouch for itself)",
                          tip=f"move '{SAFE}' to {user_file}")
    values: dict[str, Any] = {SAFE: safe}
    sources: dict[str, str] = {SAFE: safe_source}
    notes: list[str] = []
    for option in OPTIONS:
        if option.name == SAFE:
            continue
        raw: Any = None
        where = ""
        if option.name in flags and flags[option.name] is not None:
            raw, where = flags[option.name], f"flag {option.flag}"
        elif env.get(option.env) or (option.path and option.env in env):
            raw, where = env[option.env], f"env {option.env}"  # an empty path is refused
        elif option.name in config and config_path is not None:
            where = f"config {config_path}"
            try:
                raw = _from_config_folder(option, _config_text(option, config[option.name]),
                                          config_path.parent)
            except ValueError as exc:
                raise ConfigError(f"{config_path}: key '{option.name}' {exc}",
                                  tip=f"fix '{option.name}' in {config_path}; `rocbuild "
                                      "--help` describes each setting") from None
        if raw is None:
            values[option.name] = option.default_value(env)
            sources[option.name] = "default"
            continue
        items = raw if isinstance(raw, list) else [raw]
        parsed = _parsed(option, items, where, config_path)
        if option.repeatable:  # mirror rules, component names: each item adds its own
            value = tuple(dict.fromkeys(rule for rules in parsed for rule in rules))
        else:
            value = parsed[-1]
        values[option.name] = value
        sources[option.name] = where
        if option.name == "target":
            notes += [f"{where}: {note}" for item in items for part in str(item).split(",")
                      if (note := product_note(part))]
    if cpus is not None:  # counts a host cannot run are typos: exit 2, not threads
        bounds.check(values, sources, cpus)
    resolved = Settings(**values, sources=sources, notes=tuple(notes), config=choice)
    if trust is None:
        return resolved
    _check_recipes(values, sources, trust, user_file)
    refusal = _overlay_refusal(resolved, trust, user_file)
    if refusal:
        warnings[resolved.recipe_overlay] = refusal
    return replace(resolved, warnings=tuple(warnings.values()), refused_overlay=refusal)


def rewrite_url(url: str, rules: tuple[tuple[str, str], ...]) -> str:
    """Apply mirror rules like git's insteadOf: the longest matching prefix wins."""
    best = max((r for r in rules if url.startswith(r[0])), key=lambda r: len(r[0]), default=None)
    return best[1] + url[len(best[0]):] if best else url
