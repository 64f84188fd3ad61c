"""Rules for the strings a recipe, a config file or a flag hands to git, cmake and the prefix.

Recipes are data a user may download, so every string that becomes an argument of a program
or a path rocbuild writes is checked when the recipes load (exit 2, naming the file and key):
git refs and URLs that git could read as options (``--upload-pack=...``) or as a transport
that runs a command (``ext::``), NUL bytes (no argv or path can hold one), environment names
the kernel cannot hold, argument lists too long for exec, and paths that leave the prefix.
Each check raises ConfigError; this module knows nothing of git, doit or subprocesses.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from rocbuild.errors import ConfigError
from rocbuild.model import layout
from rocbuild.model.paths import resolve_links, within

# what exec accepts: one string at most MAX_ARG_STRLEN (32 pages), all of them ~2 MiB
MAX_ARG_BYTES = 128 * 1024 - 1
MAX_ENV_BYTES = 1 << 20  # a recipe's [env] together: exec's ~2 MiB holds argv, env and PATH
MAX_ARGS = 4096  # far above any real recipe (LLVM's has about 60), far below exec's limit
# a ref is a tag, a branch or a commit id: git's ref-name rules, minus what a shell or git's
# option parser would treat specially (check-ref-format allows a few of these; no ROCm tag
# uses them)
_REF_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/+@-]*$")
# git's "<transport>::<address>" syntax runs a helper; ext:: runs any command
_TRANSPORT_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
_URL_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f;|&$`<>'\"\\]")


def _fail(where: str, key: str, detail: str, fix: str) -> ConfigError:
    return ConfigError(f"{where}: key '{key}': {detail}", tip=fix)


def no_nul(where: str, key: str, value: str) -> str:
    """No argv element, path or environment value can hold a NUL byte."""
    if "\x00" in value:
        raise _fail(where, key, f"{value!r} contains a NUL byte (\\u0000)",
                    f"remove the NUL byte from '{key}' in {where}")
    return value


# a name that becomes one folder or file name (the stack's: modulefiles/<name>/): letters,
# digits and . _ + - , starting with a letter or digit (so never '', '.', '..', '-x' or a
# hidden file), no '/' and no control character, and short enough for every file system
_PATH_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def path_name(where: str, key: str, name: str) -> str:
    """A name rocbuild makes one path element of (the stack's name: the modulefiles folder
    ``modulefiles/<name>/`` and the module ``<name>/<version>``): ``../../x`` would put the
    modulefiles outside the prefix, where ``clean --prefix-files`` would delete that folder."""
    if not _PATH_NAME_RE.fullmatch(name):
        raise _fail(where, key, f"{name!r} is not a name rocbuild can make a folder of: use "
                    "letters, digits and . _ + - (at most 64, the first a letter or digit; "
                    "no '/', spaces or control characters)", f"fix '{key}' in {where}")
    return name


def git_ref(where: str, key: str, ref: str) -> str:
    """A tag, branch or full commit id that git cannot read as an option or a refspec trick."""
    no_nul(where, key, ref)
    if ref.startswith("-"):
        raise _fail(where, key, f"{ref!r} starts with '-', so git would read it as an option",
                    f"set '{key}' in {where} to a tag, branch or commit id")
    if not _REF_RE.fullmatch(ref) or ".." in ref or "@{" in ref or ref.endswith((".", "/")):
        raise _fail(where, key, f"{ref!r} is not a tag, branch or commit id (letters, digits "
                    "and . _ / + @ - only; no spaces, '..' or shell characters)",
                    f"fix '{key}' in {where}")
    if looks_like_short_commit(ref):
        # a server hands out commits by their full id only: this would fail at fetch time
        # ("couldn't find remote ref") after the plan said all was well
        raise _fail(where, key, f"{ref!r} looks like an abbreviated commit id; git fetches a "
                    "commit only by its full 40-character id",
                    f"write the full id in '{key}' of {where} (`git rev-parse {ref}` in a "
                    "clone prints it), or a tag")
    return ref


def looks_like_short_commit(ref: str) -> bool:
    """7 to 39 hex digits with a letter and a digit among them (``d99724f2``): an abbreviated
    commit id, not a tag like ``b6900`` (too short) or ``20240101`` (digits only)."""
    return (7 <= len(ref) < 40 and bool(re.fullmatch(r"[0-9a-f]+", ref))
            and any(c.isalpha() for c in ref) and any(c.isdigit() for c in ref))


def git_url(where: str, key: str, url: str) -> str:
    """A repository URL or path git fetches from, never an option or a command transport."""
    no_nul(where, key, url)
    if not url:
        raise _fail(where, key, "the URL is empty", f"set '{key}' in {where}")
    if url.startswith("-"):
        raise _fail(where, key, f"{url!r} starts with '-', so git would read it as an option",
                    f"fix '{key}' in {where}")
    if _TRANSPORT_RE.match(url):
        raise _fail(where, key, f"{url!r} uses git's '<transport>::' form, which runs a helper "
                    "program (ext:: runs any command)",
                    f"use an https://, ssh://, git:// or file:// URL in '{key}' of {where}")
    bad = _URL_FORBIDDEN.search(url)
    if bad:
        raise _fail(where, key, f"{url!r} contains {bad.group()!r} (spaces, control "
                    "characters and shell characters have no place in a repository URL)",
                    f"fix '{key}' in {where}")
    return url


# variables no step may see: DESTDIR moves every install under another folder (CMake and
# make install to $DESTDIR/<prefix>) while the records list prefix paths, so the prefix stayed
# empty and the build said success; CMAKE_INSTALL_MODE=*SYMLINK* makes CMake's
# install link into the build tree and the sources instead of copying, so the prefix breaks
# when the workdir is cleaned. steps.step_env clears them from the user's environment; a
# recipe's [env] may not set them.
CLEARED_ENV = ("DESTDIR", "CMAKE_INSTALL_MODE")


def env_name(where: str, key: str, name: str) -> str:
    if not name or "=" in name or "\x00" in name:
        raise _fail(where, key, f"{name!r} is not an environment variable name (it must be "
                    "non-empty, without '=' or NUL)", f"rename '{key}' in {where}")
    if name in CLEARED_ENV:
        raise _fail(where, key, f"{name} would make installs land outside the prefix or "
                    "link out of it (rocbuild installs into the prefix itself and clears it "
                    "for every step)",
                    f"remove '{key}' from {where}")
    return name


# the variables that add folders to the compiler's, the linker's and the loader's searches
SEARCH_PATH_VARS = frozenset({"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
                              "OBJC_INCLUDE_PATH", "LIBRARY_PATH", "LD_LIBRARY_PATH",
                              "LD_RUN_PATH"})
# the system's own include and library folders, which those programs search by themselves
_SYSTEM_DIR_RE = re.compile(r"^(/usr(/local)?)?/(include|lib(32|64)?(/[a-z0-9_]+-linux-gnu\w*)?)$")


def system_dir(entry: str) -> bool:
    """Whether ``entry`` of a search variable is one of the system's own folders
    (/usr/include, /usr/lib, /usr/lib/x86_64-linux-gnu, /lib64, /usr/local/include...)."""
    return bool(_SYSTEM_DIR_RE.match(os.path.normpath(entry))) if entry.startswith("/") \
        else False


def env_value(where: str, key: str, name: str, value: str) -> str:
    """A value exec can pass: ``NAME=value`` is one string, held to MAX_ARG_BYTES like an
    argument (a longer one fails every step's exec with E2BIG, at configure, hours in). A
    search variable (SEARCH_PATH_VARS) never names a system folder: the tools search those
    already, and naming one moves it before the compiler's own headers (CMake turns CPATH into
    ``-isystem /usr/include``, and GCC's <cmath> then stops at ``#include_next <math.h>``)."""
    no_nul(where, key, value)
    if name in SEARCH_PATH_VARS:
        system = [e for e in value.split(":") if system_dir(e)]
        if system:
            raise _fail(where, key, f"{name} names the system folder {system[0]}, which the "
                        "compiler and the linker search by themselves; in a search variable it "
                        "comes before the compiler's own headers and breaks C++ builds "
                        "(#include_next <math.h> fails)",
                        f"drop {system[0]} from '{key}' in {where} (on a distribution's base "
                        "{{ rocm_dirs }} already leaves /usr out)")
    size = len(f"{name}={value}".encode("utf-8", "surrogatepass"))
    if size > MAX_ARG_BYTES:
        raise _fail(where, key, f"a value of {len(value)} characters; {name}=<value> is "
                    f"{size} bytes, more than exec passes in one variable ({MAX_ARG_BYTES} "
                    "bytes)", f"shorten '{key}' in {where} (a long list belongs in a file "
                    "the build reads)")
    return value


def env_total(where: str, env: Sequence[tuple[str, str]]) -> None:
    """All of a recipe's [env] at most MAX_ENV_BYTES: exec takes about 2 MiB for the
    arguments and the whole environment together, the user's own included."""
    size = sum(len(f"{k}={v}".encode("utf-8", "surrogatepass")) + 1 for k, v in env)
    if size > MAX_ENV_BYTES:
        raise _fail(where, "env", f"the variables add up to {size} bytes, more than rocbuild "
                    f"passes to a step ({MAX_ENV_BYTES} bytes; exec's limit is shared with "
                    "the arguments)", f"shorten the values of [env] in {where}")


def arg_list(where: str, key: str, args: Sequence[str]) -> None:
    """Arguments exec can take: at most MAX_ARGS of them, each without NUL and short enough."""
    if len(args) > MAX_ARGS:
        raise _fail(where, key, f"{len(args)} arguments; rocbuild accepts at most {MAX_ARGS}",
                    f"shorten '{key}' in {where}")
    for i, arg in enumerate(args):
        no_nul(where, f"{key}[{i}]", arg)
        if len(arg.encode("utf-8", "surrogatepass")) > MAX_ARG_BYTES:
            raise _fail(where, f"{key}[{i}]", f"an argument of {len(arg)} characters is longer "
                        f"than exec allows ({MAX_ARG_BYTES} bytes)",
                        f"shorten '{key}[{i}]' in {where}")


def requirements(where: str, key: str, items: Sequence[str]) -> None:
    """pip requirements: never an option (``--index-url=...`` would change where pip looks)."""
    arg_list(where, key, items)
    for i, item in enumerate(items):
        if item.startswith("-") or not item.strip():
            raise _fail(where, f"{key}[{i}]", f"{item!r} is not a requirement such as "
                        "'msgpack>=1.0' (pip would read a leading '-' as an option)",
                        f"fix '{key}[{i}]' in {where}")


def relative_inside(where: str, key: str, rel: str) -> str:
    """A prefix-relative path that names something below the prefix (not the prefix itself)."""
    no_nul(where, key, rel)
    parts = [p for p in PurePosixPath(rel).parts if p != "."]
    if not rel or rel.startswith("/") or ".." in parts or not parts:
        raise _fail(where, key, f"{rel!r} must be a path inside the prefix, relative, without "
                    "'..' and not the prefix itself", f"fix '{key}' in {where}")
    return rel


def link_target_inside(where: str, key: str, prefix: Path, rel: str, target: str) -> str:
    """A link at ``prefix/rel`` whose target stays inside the prefix: a link out of it would
    let a later install write through it, outside (another component's too)."""
    no_nul(where, key, target)
    if not target:
        raise _fail(where, key, "the link target is empty", f"fix '{key}' in {where}")
    link_dir = os.path.normpath(os.path.join(str(prefix), os.path.dirname(rel)))
    resolved = os.path.join(link_dir, target)  # an absolute target replaces link_dir
    if not within(resolved, prefix):
        raise _fail(where, key, f"the link target {target!r} points outside the prefix "
                    f"{prefix} (it resolves to {os.path.normpath(resolved)})",
                    f"point '{key}' in {where} at a path inside the prefix, e.g. a relative one")
    return target


def links_chain_inside(where: str, prefix: Path, links: Sequence[tuple[str, str]],
                       files: Sequence[tuple[str, str]] = ()) -> None:
    """The recipe's links followed together, as they will be once all are written: each
    one's path and target, and each [install.files] path, stay inside the prefix (``share/up
    = ".."`` is inside, and so is ``share/esc = "up/../.."`` read alone; through ``share/up``
    it is the prefix's parent)."""
    table = dict(links)
    roots = (str(prefix),)
    for kind, entries in (("links", links), ("files", files)):
        for rel, _ in entries:
            key = f'install.{kind}."{rel}"'
            if not resolve_links(rel, table.get, roots):
                raise _fail(where, key, f"the path {rel!r} leads outside the prefix {prefix} "
                            "through the recipe's own [install.links]",
                            f"fix '{key}' or the links on its way in {where}")
            if kind == "links":
                target = table[rel]
                start = target if target.startswith("/") else \
                    os.path.join(os.path.dirname(rel), target)
                if resolve_links(start, table.get, roots, follow_last=True) is None:
                    raise _fail(where, key, f"the link target {target!r} leads outside the "
                                f"prefix {prefix} through the recipe's other [install.links] "
                                "(they are followed as the system will, once all are written)",
                                f"point '{key}' in {where} at a path inside the prefix "
                                "without a link on the way that climbs out")


def install_prefix_inside(where: str, key: str, prefix: Path, install_prefix: Path) -> Path:
    no_nul(where, key, str(install_prefix))
    if not install_prefix.is_absolute() or not within(install_prefix, prefix):
        raise _fail(where, key, f"{str(install_prefix)!r} is not inside the prefix {prefix}",
                    f"set '{key}' in {where} to a folder below {{{{ prefix }}}}, e.g. "
                    "'{{ prefix }}/lib/llvm'")
    return install_prefix


def subdir_inside(where: str, key: str, subdir: str) -> str:
    """A rendered source.subdir: relative and inside the checkout."""
    no_nul(where, key, subdir)
    if subdir.startswith("/") or ".." in PurePosixPath(subdir).parts:
        raise _fail(where, key, f"must be a relative path inside the checkout, got {subdir!r}",
                    f"fix '{key}' in {where}")
    return subdir


def not_reserved(where: str, key: str, rel: str, roots: tuple[str, ...]) -> str:
    """A prefix path that is not one of rocbuild's own files (model/layout.py): env.sh would
    be rewritten under the recipe's feet, .rocbuild/ holds the records that say what is
    installed."""
    root = layout.reserved_by(os.path.normpath(rel), roots)
    if root is not None:
        raise _fail(where, key, f"{rel!r} is rocbuild's own file in the prefix ({root}: "
                    "the env files, modulefiles and .rocbuild/ are written by rocbuild alone)",
                    f"choose another path for '{key}' in {where}")
    return rel
