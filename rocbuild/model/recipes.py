"""Load and validate recipes (``recipes/stack.toml`` + one TOML file per component).

Validation is strict and names the file and the key: an unknown key, a wrong type or a
malformed size is a ConfigError, never a traceback. Strings stay unrendered here (render.py
and graph.py render them); this module knows nothing of doit or subprocesses.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rocbuild.errors import CONTROL, ConfigError, printable
from rocbuild.model import buildsystems, inputcheck

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

STACK_FILE = "stack.toml"
SYSTEM_CHECK_KINDS = ("header", "pkg-config", "tool")  # hostreqs.probe_passes knows each
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """'2GiB', '512 MiB', '1.5G' -> bytes (binary units). Raises ValueError."""
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(f"'{text}' is not a size like 2GiB or 512MiB")
    number, unit = match.groups()
    return int(float(number) * _SIZE_UNITS[(unit or "")[:1].upper()])


def suggest(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """' Did you mean X?' when a close match exists, else ''."""
    close = difflib.get_close_matches(word, choices, n=1)
    return f" Did you mean '{close[0]}'?" if close else ""


def unknown_component(name: str, known: Iterable[str], tip: str, where: str = "") -> ConfigError:
    """The one "unknown component" error: names the known ones and the closest match.
    ``where`` is the file and key that named it (a recipe's ``depends``), else empty."""
    names = sorted(known)  # a name given as an argument is shown on one line, escaped
    return ConfigError(f"{where}unknown component '{printable(name)}' (known: "
                       f"{', '.join(names)})."
                       + suggest(name, names), tip=tip)


# --- schema ---------------------------------------------------------------------------------
# A key maps to a type tag or a nested table schema. Tags: str, bool, float, size, strlist,
# strmap (a table of string values).
_Schema = Mapping[str, Any]

# a provides_env entry's ``steps``: the stack's build steps run with the variable too,
# "always" or only while its component is taken "from base" (model/provides.py); "": never
ENV_STEPS = ("", "always", "from base")

STACK_SCHEMA: _Schema = {
    "stack": {
        "name": "str",
        "version": "str",
        "targets": "strlist",
        "prefix": "str",
        "components": "strlist",
        "title": "str",
        "summary": "str",
        "programs": "str",
        "cmake_packages": "str",
        "profile": "str",  # the profile a bare build takes (profiles below)
    },
}
# [profiles.<name>]: a named set of components a user picks with --profile (stack.toml)
PROFILE_SCHEMA: _Schema = {"summary": "str", "components": "strlist"}
_PROFILE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

# [gpu] shape: where a component's GPU code lives, so verify and the base audit know what a
# library must hold for a target to run (docs/verify.md, "Library shapes")
BUNDLES, TENSILE, HOST, HEADERS, JIT = "bundles", "tensile", "host", "headers", "jit"
GPU_SHAPES = {
    BUNDLES: "offload bundles (or embedded code objects) in its libraries, for every target",
    TENSILE: "its libraries' bundles plus a Tensile kernel folder per target (rocBLAS)",
    HOST: "no GPU code: a host library over another one that carries it (hipBLAS)",
    HEADERS: "header-only: the code is compiled into what uses it (rocPRIM, hipCUB)",
    JIT: "kernels compiled at run time by comgr/hipRTC (MIOpen, rocFFT), besides any bundles",
}
CODE_SHAPES = frozenset({BUNDLES, TENSILE, JIT})  # whose libraries must carry the targets

BUILD_TABLE = "<build>"  # a key path under the build system's own table ([cmake] for cmake)


def _key(path: str, tag: Any, default: Any) -> Any:
    """A Recipe (or SourceSpec) field read from the recipe key ``path`` (dotted; ``<build>.``
    is the build system's table), checked as ``tag`` (a type tag of ``_check_value``, or a
    table schema), ``default`` when the recipe does not set it. The one declaration of the
    recipe schema: RECIPE_SCHEMA, load_recipe and the defaults are all read from these."""
    meta = {"key": path, "tag": tag}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


# --- model ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SourceSpec:
    """Where a component's source comes from: its own git checkout, or another one's
    ([source] of a recipe)."""

    git: str | None = _key("git", "str", None)
    ref: str | None = _key("ref", "str", None)
    submodules: bool = _key("submodules", "bool", False)
    from_component: str | None = _key("from", "str", None)  # reuse that one's checkout
    # a folder of the checkout that holds the project (rendered)
    subdir: str = _key("subdir", "str", "")
    # per stack version, for a repository without release tags (Tensile); the version comes
    # from stack.toml or from --base's .info/version
    refs: Mapping[str, str] = _key("refs", "strmap", {})

    def ref_for(self, version: str) -> str | None:
        return self.refs.get(version, self.ref)


@dataclass(frozen=True)
class Recipe:
    """One component as written in its TOML file; strings are unrendered templates. Each
    field but the name and the file is declared with its key (``_key``), in the order the
    keys are listed to the user."""

    name: str
    file: Path
    summary: str = _key("summary", "str", "")
    kind: str = _key("kind", "str", "cmake")  # its build system (buildsystems/) or source-only
    depends: tuple[str, ...] = _key("depends", "strlist", ())
    # Debian/Ubuntu packages the build needs (doctor, preflight)
    system_packages: tuple[str, ...] = _key("system_packages", "strlist", ())
    # how to tell a system_packages entry is there without dpkg: "header:gelf.h",
    # "pkg-config:libdrm" or "tool:xxd" (hostreqs.py)
    system_checks: Mapping[str, str] = _key("system_checks", "strmap", {})
    # what it installs is read only while building what uses it (CMake modules, headers):
    # building it again does not make an installed copy of its users stale (base.py)
    build_time_only: bool = _key("build_time_only", "bool", False)
    # the older spelling of [gpu] shape = "bundles" (kept: an overlay written for it loads)
    gpu_code: bool = _key("gpu_code", "bool", False)
    # how its GPU code is carried ([gpu], GPU_SHAPES): verify and the base audit read it.
    # ``gpu.libraries``: the files (prefix- or base-relative; "a | b" alternatives and globs
    # for a base's layout) that must carry code for every target, or, for "host", that carry
    # none by design
    gpu_shape: str = _key("gpu.shape", "str", "")
    gpu_libraries: tuple[str, ...] = _key("gpu.libraries", "strlist", ())
    source: SourceSpec = field(default_factory=SourceSpec, metadata={"key": "source"})
    # what AMD's packaging adds after `cmake --install`, as data: prefix-relative paths
    install_links: Mapping[str, str] = _key("install.links", "strmap", {})
    install_files: Mapping[str, str] = _key("install.files", "strmap", {})
    # components whose installed files this one may replace (prefix/install.py)
    install_overwrites: tuple[str, ...] = _key("install.overwrites", "strlist", ())
    # installed programs get a RUNPATH relative to $ORIGIN unless this is false (then
    # runpath_reason must say why: the promise of docs/architecture.md is broken on purpose)
    runpath: bool = _key("install.runpath", "bool", True)
    runpath_reason: str = _key("install.runpath_reason", "str", "")
    # Python needs, met before any build step so no build pip-installs from the network
    python_packages: tuple[str, ...] = _key("python.packages", "strlist", ())
    python_wheels: tuple[str, ...] = _key("python.wheels", "strlist", ())
    env: Mapping[str, str] = _key("env", "strmap", {})
    # the environment variables the prefix's env files and modulefiles set for users of what
    # this component installs (ROCM_PATH, HIP_PATH, ...): NAME -> (value, comment, steps); a
    # value may name "{{ prefix }}", the tree the component is installed in (the prefix, or
    # the base it is taken from), which the env files compute where they lie (envfiles.py);
    # ``steps`` says whether the stack's build steps run with it too (model/provides.py)
    provides_env: Mapping[str, tuple[str, str, str]] = _key("provides_env", "envmap", {})
    # variables through which the project's build hands a compiler launcher to compiler
    # processes of its own (Tensile's): set to rocbuild's ccache where the component's C++
    # compiles go through it (launchers.launcher_env), never fingerprinted
    launcher_env: tuple[str, ...] = _key("launcher_env", "strlist", ())
    # how the component shows in an installed ROCm (--base): files that must exist (globs
    # allowed; "a | b" is met by either, for a file two layouts keep in different places),
    # a folder holding the Tensile set for every target, and whether a base without it is
    # refused (compilers, HIP runtime, ROCr) instead of building it
    base_provides: tuple[str, ...] = _key("base.provides", "strlist", ())
    base_tensile: str = _key("base.tensile", "str", "")
    base_required: bool = _key("base.required", "bool", False)
    # the distribution (Debian/Ubuntu) packages that install it into /usr: named, with what
    # they save, when a --base /usr lacks its files (base.py PackageHint)
    base_packages: tuple[str, ...] = _key("base.packages", "strlist", ())
    resources: Mapping[str, float] = _key("resources", {
        "compile_mem": "size", "link_mem": "size", "tensile_mem": "size", "disk": "size",
        "source_disk": "size",  # the checkout and its cache, for the component owning it
        "cpu_hours": "float"}, {})
    # the build system's table ([cmake] for cmake); each system accepts the keys it reads
    # (BuildSystem.keys): args (rendered), build_type, install_prefix (when not the stack
    # prefix), job_args (rendered with `jobs` when the step starts; never fingerprinted),
    # distribute (its compiles may go to --distcc hosts; never fingerprinted), tensile_target
    # (the build target whose one job runs Tensile's process pool of jobs.tensile workers:
    # built first, holding the job pool's slots for them; speed only, never fingerprinted)
    build_args: tuple[str, ...] = _key("<build>.args", "strlist", ())
    build_type: str = _key("<build>.build_type", "str", "Release")
    install_prefix: str = _key("<build>.install_prefix", "str", "")
    job_args: tuple[str, ...] = _key("<build>.job_args", "strlist", ())
    distribute: bool = _key("<build>.distribute", "bool", False)
    tensile_target: str = _key("<build>.tensile_target", "str", "")

    @property
    def builds(self) -> bool:
        return self.kind != buildsystems.SOURCE_ONLY

    @property
    def gpu(self) -> str:
        """Its GPU shape (GPU_SHAPES), "bundles" for the older ``gpu_code = true``, "" when
        the recipe does not say (verify then asks nothing of its files)."""
        return self.gpu_shape or (BUNDLES if self.gpu_code else "")

    @property
    def carries_gpu_code(self) -> bool:
        """Whether its installed libraries must carry code for every target."""
        return self.gpu in CODE_SHAPES

    @property
    def table(self) -> str:
        """The recipe table of its build system's options (for messages: 'cmake.args[2]')."""
        return buildsystems.for_kind(self.kind).table if self.builds else "cmake"


def _declared(cls: type) -> list[tuple[str, str, Any]]:
    """(field name, key path, tag) of each declared field of ``cls``, in order."""
    return [(f.name, f.metadata["key"], f.metadata.get("tag")) for f in fields(cls)
            if "key" in f.metadata]


def _schema_of(entries: list[tuple[str, str, Any]], prefix: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for _, path, tag in entries:
        if not path.startswith(prefix):
            continue
        *tables, key = path[len(prefix):].split(".")
        here = schema
        for table in tables:
            here = here.setdefault(table, {})
        here[key] = tag
    return schema


def _recipe_schema() -> dict[str, Any]:
    source = _schema_of(_declared(SourceSpec))
    return _schema_of([(name, path, source if path == "source" else tag)
                       for name, path, tag in _declared(Recipe)
                       if not path.startswith(BUILD_TABLE)])


# what a recipe may hold besides its build system's table (recipe_schema adds that)
RECIPE_SCHEMA: _Schema = _recipe_schema()
# the keys a build system's recipe table may hold, with their type tags
BUILD_TABLE_SCHEMA: _Schema = _schema_of(_declared(Recipe), BUILD_TABLE + ".")


def recipe_schema() -> _Schema:
    """RECIPE_SCHEMA plus one table per registered build system ([cmake]: args, build_type,
    install_prefix, job_args, distribute: the Recipe fields under ``<build>.``), with the
    keys that system reads (BuildSystem.keys)."""
    tables = {}
    for kind in buildsystems.kinds():
        if kind != buildsystems.SOURCE_ONLY:
            system = buildsystems.for_kind(kind)
            unknown = [k for k in system.keys if k not in BUILD_TABLE_SCHEMA]
            if unknown:  # a programming error of the build system's module, not bad input
                raise TypeError(f"build system {kind!r} reads [{system.table}] keys that no "
                                f"Recipe field declares: {unknown} (recipes.py, '<build>.')")
            tables[system.table] = {k: BUILD_TABLE_SCHEMA[k] for k in system.keys}
    return {**RECIPE_SCHEMA, **tables}


def _where(path: tuple[str, ...]) -> str:
    """A key's dotted path for a message; a TOML key may hold any character (``"a\\nb" =
    1``), so each part is shown escaped, on one line."""
    return ".".join(printable(part) for part in path) if path else "(top level)"


def _check_value(file: Path, keypath: tuple[str, ...], tag: str, value: Any) -> Any:
    key = _where(keypath)
    expected = {
        "str": "a string", "bool": "true or false", "float": "a number", "size": "a size string",
        "strlist": "a list of strings", "strmap": "a table of strings",
        "envmap": "a table of strings or of {value, comment} tables",
    }[tag]

    def bad(detail: str = "") -> ConfigError:
        got = type(value).__name__
        return ConfigError(f"{file}: key '{key}' must be {expected}, got {got} {value!r}{detail}",
                           tip=f"fix '{key}' in {file}")

    if tag in ("str", "bool") and not isinstance(value, str if tag == "str" else bool):
        raise bad()
    if tag == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        if not 0 <= value < float("inf"):
            raise bad(" (a finite number, 0 or more)")
        return float(value)
    if tag == "size":
        if not isinstance(value, str):
            raise bad(" (write it like \"2GiB\")")
        try:
            size = parse_size(value)
        except ValueError as exc:
            raise ConfigError(f"{file}: key '{key}': {exc}", tip=f"fix '{key}' in {file}") from None
        if size <= 0:  # jobs are sized by dividing memory by it
            raise ConfigError(f"{file}: key '{key}' must be more than 0, got {value!r}",
                              tip=f"fix '{key}' in {file}, e.g. \"2GiB\"")
        return size
    if tag == "strlist":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad()
        return tuple(value)
    if tag == "strmap":
        if not isinstance(value, dict):
            raise bad()
        for name, item in value.items():
            if not isinstance(item, str):
                raise ConfigError(
                    f"{file}: key '{key}.{name}' must be a string, got {type(item).__name__} "
                    f"{item!r}", tip=f"quote the value of '{key}.{name}' in {file}")
        return dict(value)
    if tag == "envmap":  # provides_env: NAME = "value" or NAME = {value = "...", comment = "..."}
        if not isinstance(value, dict):
            raise bad()
        out: dict[str, tuple[str, str, str]] = {}
        for name, item in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ConfigError(f"{file}: key '{key}.{name}' is not an environment variable "
                                  "name (letters, digits and '_')", tip=f"fix '{key}' in {file}")
            if isinstance(item, str):
                out[name] = (item, "", "")
            elif (isinstance(item, dict) and set(item) <= {"value", "comment", "steps"}
                  and all(isinstance(v, str) for v in item.values()) and "value" in item):
                steps = item.get("steps", "")
                if steps not in ENV_STEPS:
                    raise ConfigError(
                        f"{file}: key '{key}.{name}.steps' must be one of "
                        f"{', '.join(repr(s) for s in ENV_STEPS if s)}, got {steps!r}",
                        tip=f"fix '{key}.{name}.steps' in {file}")
                out[name] = (item["value"], item.get("comment", ""), steps)
            else:
                raise ConfigError(
                    f"{file}: key '{key}.{name}' must be a string or a table with a string "
                    f"'value' (and a 'comment', 'steps'), got {item!r}",
                    tip=f"fix '{key}.{name}' in {file}")
            for part, text in zip(("value", "comment"), out[name][:2], strict=True):
                one_line(file, f"{key}.{name}" + (".comment" if part == "comment" else ""),
                         text)
        return out
    return value


def one_line(file: Path, key: str, text: str) -> str:
    """Refuse a control character (a newline, an escape) in a text the env files write into
    a comment or a value every user sources: after a newline, the rest of a comment line is
    a command."""
    bad = CONTROL.search(text)  # what errors.printable escapes
    if bad:
        raise ConfigError(f"{file}: key '{key}' holds the control character {bad.group()!r}; "
                          "the env files write it into a line every user sources, so it must "
                          "be one line of plain text", tip=f"fix '{key}' in {file}")
    return text


def validate(file: Path, data: Mapping[str, Any], schema: _Schema,
             keypath: tuple[str, ...] = ()) -> dict[str, Any]:
    """Check ``data`` against ``schema``; return it with sizes parsed and lists as tuples."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        here = (*keypath, key)
        if key not in schema:
            known = ", ".join(schema)
            section = f"[{_where(keypath)}]" if keypath else "a recipe's top level"
            raise ConfigError(
                f"{file}: key '{_where(here)}' is not allowed in {section} (known keys: {known})."
                + suggest(key, list(schema)),
                tip=f"fix the spelling or remove '{_where(here)}' from {file}",
            )
        spec = schema[key]
        if isinstance(spec, Mapping):
            if not isinstance(value, dict):
                raise ConfigError(f"{file}: key '{_where(here)}' must be a table [{_where(here)}]",
                                  tip=f"fix '{_where(here)}' in {file}")
            out[key] = validate(file, value, spec, here)
        else:
            out[key] = _check_value(file, here, spec, value)
    return out


def read_toml(file: Path, tip: str = "check --recipes / ROCBUILD_RECIPES") -> dict[str, Any]:
    """Parse a TOML file; anything but a readable UTF-8 regular file is a ConfigError naming
    it (a FIFO is refused before it is opened, so loading never blocks on one)."""
    try:
        if not file.is_file():
            raise ConfigError(f"{file}: not a regular file (a folder, FIFO or device named "
                              "like a TOML file)", tip=f"remove or rename {file}")
        # utf-8-sig: Windows editors start a file with a byte-order mark, which TOML does not
        # allow ("Invalid statement (line 1, column 1)"); it carries no meaning in UTF-8
        return tomllib.loads(file.read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML: {exc}", tip=f"fix the syntax of {file}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start}: {exc.reason})",
                          tip=f"save {file} as UTF-8") from None
    except RecursionError:  # the parser recurses per level of [ or {: x = [[[[...]]]]
        raise ConfigError(f"{file}: invalid TOML: arrays or tables nested too deeply to read",
                          tip=f"fix the syntax of {file}") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror}", tip=tip) from None


def provides_alternatives(pattern: str) -> list[str]:
    """``"a | b"`` -> ``["a", "b"]``: a [base] provides entry any one of whose paths shows
    the component (AMD's packages and a source build keep the device bitcode apart)."""
    return [part.strip() for part in pattern.split("|")]


@dataclass(frozen=True)
class Profile:
    """A named set of components of the stack (``[profiles.<name>]`` in stack.toml): what a
    bare `rocbuild build --profile NAME` builds, with everything it needs."""

    name: str
    summary: str
    components: tuple[str, ...]


@dataclass(frozen=True)
class StackSpec:
    """``recipes/stack.toml``: the release, default targets and prefix template."""

    file: Path
    name: str
    version: str
    targets: tuple[str, ...]
    prefix: str
    components: tuple[str, ...]
    # what the env files and modulefiles call the stack ("ROCm 6.4.3 built for gfx906"), and
    # a line on what it holds for the modulefiles' help (a template with {{ version }})
    title: str = ""
    summary: str = ""
    # what the env files say the stack's bin/ holds ("hipcc, clang, rocminfo, llama.cpp
    # tools") and which CMake packages find_package finds in it ("hip/rocblas/hipblas"):
    # words of the stack's own, so a stack of other projects gets none of ROCm's
    programs: str = ""
    cmake_packages: str = ""
    # the named sets a user picks with --profile, and the one a bare build takes ("" none:
    # then ``components`` is the default set, as in a stack.toml without profiles)
    profiles: Mapping[str, Profile] = field(default_factory=dict)
    profile: str = ""

    @property
    def display_title(self) -> str:
        return self.title or self.name

    @property
    def series(self) -> str:
        return ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class RecipeSet:
    stack: StackSpec
    recipes: Mapping[str, Recipe]
    folder: Path
    overlay: Path | None = None  # the user's recipes over these (load_recipes)
    overlaid: frozenset[str] = frozenset()  # names taken from the overlay ("stack": stack.toml)

    @property
    def gpu_code(self) -> bool:
        """Whether a recipe says its files carry GPU code (a [gpu] shape with code, or the
        older ``gpu_code``): the stack's env files, activate and verify then speak of native
        code for the targets; a stack of other projects gets none of those words."""
        return any(r.carries_gpu_code for r in self.recipes.values())

    @property
    def patches_dir(self) -> Path:
        """Patches live beside the recipes folder: ``<recipes>/../patches/<component>/``."""
        return self.folder.parent / "patches"

    @property
    def overlay_patches_dir(self) -> Path | None:
        return self.overlay.parent / "patches" if self.overlay is not None else None

    def patches_dir_of(self, name: str) -> Path:
        """Where ``name``'s patch series is read: the overlay's ``patches/<name>/`` when it
        has one (it replaces the shipped series), else the recipes folder's."""
        mine = self.overlay_patches_dir
        if mine is not None and ((mine / name).exists() or (mine / name).is_symlink()):
            return mine
        return self.patches_dir

    def source_of(self, name: str) -> str:
        """"overlay" when ``name``'s recipe (or its patches) come from the overlay, else
        "recipes"."""
        if name in self.overlaid or self.patches_dir_of(name) != self.patches_dir:
            return "overlay"
        return "recipes"


def _require(file: Path, data: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in data:
        raise ConfigError(f"{file}: key '{key}' is missing ({what})",
                          tip=f"add '{key}' to {file}")
    return data[key]


# words the env files and modulefiles print as they are (a comment, a Lua [[...]] string, a
# Tcl "..." string): no quote, bracket, brace, '$' or newline that would end or run anything
_PLAIN_TEXT = re.compile(r"[A-Za-z0-9 ._+(),/:-]*")


def check_plain_text(file: Path, key: str, text: str) -> None:
    """Refuse a stack title, summary or other words the env files could not print as they
    are."""
    if not _PLAIN_TEXT.fullmatch(text):
        raise ConfigError(f"{file}: key '{key}' = {text!r}: use letters, digits, spaces and "
                          ". _ + ( ) , / : - only (the env files print it as it is)",
                          tip=f"fix '{key}' in {file}")


def load_stack_spec(folder: Path) -> StackSpec:
    file = folder / STACK_FILE
    if not file.is_file():
        raise ConfigError(f"{folder}: no {STACK_FILE} here, so this is not a recipes folder",
                          tip="point --recipes (or ROCBUILD_RECIPES) at a folder with stack.toml")
    raw = read_toml(file)
    profiles = _read_profiles(file, raw.pop("profiles", {}))
    data = validate(file, raw, STACK_SCHEMA)
    stack = _require(file, data, "stack", "the [stack] table")
    for key, what in (("version", 'the ROCm release, e.g. "6.4.3"'),
                      ("targets", 'default GPU targets, e.g. ["gfx906"]'),
                      ("prefix", "the install prefix template")):
        _require(file, stack, key, what)
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", stack["version"]):
        raise ConfigError(f"{file}: key 'stack.version' must look like 6.4.3, "
                          f"got {stack['version']!r}", tip=f"fix 'stack.version' in {file}")
    for key in ("title", "programs", "cmake_packages"):
        check_plain_text(file, f"stack.{key}", stack.get(key, ""))
    if "components" in stack and not stack["components"]:
        # without the key a bare `rocbuild build` builds every recipe of the folder, which
        # an empty list (read as "none") must not do without a word
        raise ConfigError(f"{file}: key 'stack.components' is empty, so it says nothing of "
                          "what a bare `rocbuild build` builds",
                          tip=f"list the components in 'stack.components' of {file}, or "
                              "remove the key to build every recipe of the folder")
    name = inputcheck.path_name(str(file), "stack.name", stack.get("name", "rocm"))
    default = stack.get("profile", "")
    if default and default not in profiles:
        raise ConfigError(f"{file}: key 'stack.profile' = {default!r} names no [profiles."
                          f"<name>] table (declared: {', '.join(profiles) or 'none'})."
                          + suggest(default, list(profiles)),
                          tip=f"fix 'stack.profile' or add [profiles.\"{default}\"] to {file}")
    return StackSpec(file=file, name=name, version=stack["version"],
                     targets=stack["targets"], prefix=stack["prefix"],
                     components=stack.get("components", ()), title=stack.get("title", ""),
                     summary=stack.get("summary", ""), programs=stack.get("programs", ""),
                     cmake_packages=stack.get("cmake_packages", ""), profiles=profiles,
                     profile=default)


def _read_profiles(file: Path, data: Any) -> dict[str, Profile]:
    """The ``[profiles.<name>]`` tables of stack.toml, each with its components."""
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: key 'profiles' must be a table of [profiles.<name>] tables",
                          tip=f"fix 'profiles' in {file}")
    profiles: dict[str, Profile] = {}
    for name, table in data.items():
        key = f"profiles.{name}"
        if not _PROFILE_NAME_RE.fullmatch(name):
            raise ConfigError(f"{file}: '{key}': a profile name uses lower-case letters, digits, "
                              "'.', '_' and '-' (it is typed as --profile NAME)",
                              tip=f"rename [profiles.\"{name}\"] in {file}")
        if not isinstance(table, dict):
            raise ConfigError(f"{file}: key '{key}' must be a table [{key}]",
                              tip=f"fix '{key}' in {file}")
        checked = validate(file, table, PROFILE_SCHEMA, ("profiles", name))
        components = _require(file, checked, "components", f"the components of profile {name}")
        if not components:
            raise ConfigError(f"{file}: key '{key}.components' is empty",
                              tip=f"name the components profile {name} builds in {file}")
        check_plain_text(file, f"{key}.summary", checked.get("summary", ""))
        profiles[name] = Profile(name, checked.get("summary", ""), tuple(components))
    return profiles


def load_recipe(file: Path) -> Recipe:
    name = file.stem
    if not _NAME_RE.fullmatch(name):
        raise ConfigError(f"{file}: '{name}' is not a valid component name (use lower-case "
                          "letters, digits, '.', '_' and '-')", tip=f"rename {file}")
    if name.endswith((".old", ".partial")):  # src/<c>.old and .partial are a run's leftovers
        raise ConfigError(f"{file}: a component name may not end in '.old' or '.partial' "
                          "(rocbuild uses those names for checkouts being replaced)",
                          tip=f"rename {file}")
    data = validate(file, read_toml(file), recipe_schema())
    kind = data.get("kind", "cmake")
    kinds = buildsystems.kinds()
    if kind not in kinds:
        raise ConfigError(f"{file}: key 'kind' must be one of {', '.join(kinds)}, got {kind!r}."
                          + suggest(kind, kinds), tip=f"fix 'kind' in {file}")
    source_data = _require(file, data, "source", "[source] with git + ref, or from")
    if "from" in source_data:
        for clash in ("git", "ref", "submodules", "refs"):
            if clash in source_data:
                raise ConfigError(
                    f"{file}: key 'source.{clash}' cannot be combined with 'source.from' "
                    f"(the checkout of '{source_data['from']}' is reused as it is)",
                    tip=f"remove 'source.{clash}' from {file}")
    else:
        _require(file, source_data, "git", "source.git: the repository URL")
        # key names in messages are full paths, so say 'source.ref'
        if "ref" not in source_data and "refs" not in source_data:
            raise ConfigError(f"{file}: key 'source.ref' is missing (a tag, branch or commit)",
                              tip=f"add 'ref' under [source] in {file}")
    subdir = source_data.get("subdir", "")
    if subdir.startswith("/") or ".." in Path(subdir).parts:
        raise ConfigError(f"{file}: key 'source.subdir' must be a relative path inside the "
                          f"checkout, got {subdir!r}", tip=f"fix 'source.subdir' in {file}")
    source = SourceSpec(**_read_declared(SourceSpec, {**source_data, "subdir": subdir}))
    # the build system's own table: [cmake] for kind = "cmake"
    tables = {buildsystems.for_kind(k).table: k for k in kinds if k != buildsystems.SOURCE_ONLY}
    own = buildsystems.for_kind(kind).table if kind != buildsystems.SOURCE_ONLY else None
    if own and data.get(own) is None:
        raise ConfigError(f"{file}: a {kind} component needs a [{own}] table (it may be empty)",
                          tip=f'add [{own}] to {file}, or kind = "source-only" if it is not built')
    for table, other in tables.items():
        if table != own and table in data:
            what = ("a source-only component is not built" if own is None
                    else f"a {kind} component is not built with {other}")
            fix = (f'remove [{table}] from {file} or drop kind = "source-only"' if own is None
                   else f"remove [{table}] from {file}, or set kind = \"{other}\"")
            raise ConfigError(f"{file}: {what}, so [{table}] has no effect", tip=fix)
    depends = data.get("depends", ())
    if len(set(depends)) != len(depends):
        raise ConfigError(f"{file}: key 'depends' lists a component twice: {list(depends)}",
                          tip=f"remove the repeat from 'depends' in {file}")
    install = data.get("install", {})
    for table in ("links", "files"):
        for rel in install.get(table, {}):
            inputcheck.relative_inside(str(file), f'install.{table}."{rel}"', rel)
    for env_key in data.get("env", {}):
        inputcheck.env_name(str(file), f'env."{env_key}"', env_key)
    system_checks = data.get("system_checks", {})
    for package, spec in system_checks.items():
        key = f"system_checks.{package}"
        if package not in data.get("system_packages", ()):
            raise ConfigError(f"{file}: key '{key}': '{package}' is not in system_packages",
                              tip=f"add '{package}' to system_packages or remove '{key}' "
                                  f"from {file}")
        kind_, _, name_ = spec.partition(":")
        if kind_ not in SYSTEM_CHECK_KINDS or not name_.strip():
            raise ConfigError(f"{file}: key '{key}' must be header:<file>, pkg-config:<name> or "
                              f"tool:<program>, got {spec!r}." + suggest(kind_, SYSTEM_CHECK_KINDS),
                              tip=f"fix '{key}' in {file}")
    one_line(file, "install.runpath_reason", install.get("runpath_reason", ""))
    if install.get("runpath") is False and not install.get("runpath_reason", "").strip():
        raise ConfigError(f"{file}: key 'install.runpath' is false but 'install.runpath_reason' "
                          "does not say why (installed programs then need env.sh to start)",
                          tip=f"add install.runpath_reason to {file}, or remove install.runpath")
    python = data.get("python", {})
    for table in ("packages", "wheels"):
        inputcheck.requirements(str(file), f"python.{table}", python.get(table, ()))
    base = data.get("base", {})
    _check_relative_paths(file, "base.provides", base.get("provides", ()), "installed ROCm")
    if ("tensile" in base or "required" in base or "packages" in base) and \
            not base.get("provides"):
        raise ConfigError(f"{file}: [base] needs 'provides', the files that show the component "
                          "in an installed ROCm", tip=f"add base.provides to {file}")
    _check_gpu(file, data)
    values = _read_declared(Recipe, {**data, "kind": kind}, build_table=own)
    return Recipe(name=name, file=file, **values, source=source)


def _check_relative_paths(file: Path, key: str, entries: Iterable[str], inside: str) -> None:
    """Each entry (``a|b`` alternatives) is a relative path without '..', as it is looked up
    below a folder (the ``inside``) and must never lead out of it."""
    for i, entry in enumerate(entries):
        for pattern in provides_alternatives(entry):
            if not pattern or pattern.startswith("/") or ".." in Path(pattern).parts:
                raise ConfigError(f"{file}: key '{key}[{i}]' must be a path inside the "
                                  f"{inside}, relative and without '..' (or several such "
                                  f"paths separated by '|'), got {entry!r}",
                                  tip=f"fix '{key}' in {file}")


def _check_gpu(file: Path, data: Mapping[str, Any]) -> None:
    """[gpu]: a known shape, libraries only where a library is named, and not both spellings
    (``gpu_code`` and [gpu]) saying different things."""
    gpu = data.get("gpu")
    if gpu is None:
        return
    shape = gpu.get("shape")
    if shape is None:
        raise ConfigError(f"{file}: [gpu] needs 'shape' (one of {', '.join(GPU_SHAPES)})",
                          tip=f'add shape = "bundles" (or another shape) under [gpu] in {file}')
    if shape not in GPU_SHAPES:
        raise ConfigError(f"{file}: key 'gpu.shape' must be one of {', '.join(GPU_SHAPES)}, "
                          f"got {shape!r}." + suggest(shape, list(GPU_SHAPES)),
                          tip=f"fix 'gpu.shape' in {file}")
    libraries = gpu.get("libraries", ())
    if shape == HEADERS and libraries:
        raise ConfigError(f"{file}: key 'gpu.libraries': a header-only component installs no "
                          "library to check", tip=f"remove 'gpu.libraries' from {file}")
    _check_relative_paths(file, "gpu.libraries", libraries, "prefix or base")
    if data.get("gpu_code") is True and shape != BUNDLES:
        raise ConfigError(f"{file}: 'gpu_code = true' says shape \"bundles\" but [gpu] says "
                          f"shape = {shape!r}", tip=f"remove 'gpu_code' from {file}: [gpu] "
                                                    "replaces it")


def _read_declared(cls: type, data: Mapping[str, Any], build_table: str | None = None
                   ) -> dict[str, Any]:
    """The declared fields of ``cls`` that ``data`` (validated) sets, by field name; a field
    it does not set keeps its declared default. ``<build>.`` keys are read from the build
    system's table (none for a source-only recipe)."""
    out: dict[str, Any] = {}
    for name, path, tag in _declared(cls):
        if tag is None:  # a nested table read by its own class (source)
            continue
        if path.startswith(BUILD_TABLE + "."):
            if build_table is None:
                continue
            path = build_table + path[len(BUILD_TABLE):]
        here: Any = data
        for part in path.split("."):
            here = here.get(part, _UNSET) if isinstance(here, Mapping) else _UNSET
        if here is not _UNSET:
            out[name] = here
    return out


_UNSET = object()


def load_recipes(folder: Path, overlay: Path | None = None) -> RecipeSet:
    """Load every ``*.toml`` in the folder, then those of ``overlay`` (the user's own: each
    replaces the recipe of its name, stack.toml the stack; a missing overlay is none);
    check names, dependencies and source owners."""
    folder = folder.absolute()
    if not folder.is_dir():
        raise ConfigError(f"{folder}: recipes folder not found",
                          tip="point --recipes (or ROCBUILD_RECIPES) at a folder with stack.toml")
    if overlay is not None and (overlay.absolute() == folder or not (
            overlay.is_dir() or (overlay.parent / "patches").is_dir())):
        overlay = None  # nothing of the user's: no recipes and no patches beside them
    mine = sorted(overlay.glob("*.toml")) if overlay is not None else []
    stack = load_stack_spec(overlay if overlay is not None and (overlay / STACK_FILE).is_file()
                            else folder)
    recipes = {f.stem: load_recipe(f) for f in sorted(folder.glob("*.toml"))
               if f.name != STACK_FILE}
    recipes.update({f.stem: load_recipe(f) for f in mine if f.name != STACK_FILE})
    overlaid = frozenset("stack" if f.name == STACK_FILE else f.stem for f in mine)
    names = sorted(recipes)
    for recipe in recipes.values():
        for dep in recipe.depends:
            if dep not in recipes:
                raise unknown_component(
                    dep, names, f"add recipes/{dep}.toml or fix 'depends' in {recipe.file}",
                    where=f"{recipe.file}: key 'depends': ")
            if dep == recipe.name:
                raise ConfigError(f"{recipe.file}: key 'depends': a component cannot depend on "
                                  "itself", tip=f"remove '{dep}' from 'depends' in {recipe.file}")
        for other in recipe.install_overwrites:
            if other not in recipes or other == recipe.name:
                raise ConfigError(
                    f"{recipe.file}: key 'install.overwrites': '{other}' is not another "
                    f"component (known: {', '.join(names)})." + suggest(other, names),
                    tip=f"fix 'install.overwrites' in {recipe.file}")
        owner = recipe.source.from_component
        if owner is not None:
            if owner not in recipes:
                raise unknown_component(owner, names, f"fix 'source.from' in {recipe.file}",
                                        where=f"{recipe.file}: key 'source.from': ")
            if recipes[owner].source.from_component is not None:
                raise ConfigError(
                    f"{recipe.file}: key 'source.from': '{owner}' itself reuses the checkout of "
                    f"'{recipes[owner].source.from_component}'; name that one instead",
                    tip=f"set from = \"{recipes[owner].source.from_component}\" in {recipe.file}")
    for key, listed in [("stack.components", stack.components),
                        *((f"profiles.{p.name}.components", p.components)
                          for p in stack.profiles.values())]:
        for name in (n for n in listed if n not in recipes):
            raise unknown_component(name, names, f"fix '{key}' in {stack.file}",
                                    where=f"{stack.file}: key '{key}': ")
    return RecipeSet(stack=stack, recipes=recipes, folder=folder, overlay=overlay,
                     overlaid=overlaid)
