"""The environment files of an installed prefix: ``env.sh`` (bash, zsh), ``env.fish``, an
Lmod modulefile ``modulefiles/<stack>/<series>-<targets>.lua`` and the same module in Tcl,
``modulefiles/<stack>/<series>-<targets>``, for sites on Environment Modules (which cannot
read Lua). The module is named after the stack (stack.toml ``name``): ``rocm/6.4-gfx906``.
Both modulefiles sit in one folder: Lmod prefers the ``.lua`` file when both exist, and
Environment Modules skips files without its ``#%Module`` header, so each tool finds its own.

One list of variables (``variables``) feeds the jinja2 templates in ``rocbuild/templates``,
so the files cannot drift apart. Values are quoted for each language by a filter, never
pasted raw. The files never set HSA_OVERRIDE_GFX_VERSION: the stack carries native code for
its targets, and an override for a natively supported GPU causes memory faults
(docs/architecture.md, Facts); instead each file warns when one is set.

``write_env_files`` is what the install step calls; ``rocbuild env`` prints ``render``.
"""

from __future__ import annotations

import contextlib
import functools
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jinja2

from rocbuild import __version__
from rocbuild.errors import ConfigError, printable
from rocbuild.model import envtext
from rocbuild.model.base import device_lib_dir
from rocbuild.model.graph import Stack
from rocbuild.model.inputcheck import system_dir
from rocbuild.model.provides import DEVICE_LIB_VAR, Provided, provided_by
from rocbuild.prefix import keepedits
from rocbuild.prefix.buildinfo import PREFIX_FILE_MODE

SHELLS = ("bash", "zsh", "fish", "lmod", "tcl")
_TEMPLATES = Path(__file__).resolve().parent / "templates"
_TEMPLATE_OF = {"bash": "env.sh.j2", "zsh": "env.sh.j2", "fish": "env.fish.j2",
                "lmod": "modulefile.lua.j2", "tcl": "modulefile.tcl.j2"}


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    kind: str  # "set" replaces the value; "prepend" adds a path entry in front, once
    comment: str
    # a path inside the prefix ("bin", "" for the prefix itself): each file computes the
    # prefix from where it lies, so a copied or moved prefix works as it is; None: ``value``
    # is used as written (a --base, which does not move with the prefix, or a plain value)
    in_prefix: str | None = None


# Runtime knobs of the HIP and ROCr runtimes, offered only with --tune. What each does is
# AMD's documentation (TUNE_SOURCE); their effect on gfx906 is not measured, so they are A/B
# candidates for llama-bench, not defaults.
TUNE_SOURCE = "https://rocm.docs.amd.com/projects/HIP/en/docs-6.4.0/reference/env_variables.html"
TUNE_VARIABLES: tuple[EnvVar, ...] = (
    EnvVar("HSA_FORCE_FINE_GRAIN_PCIE", "1", "set",
           "fine-grained (coherent) host memory over PCIe, for multi-GPU and split-model "
           "transfers"),
    EnvVar("AMD_DIRECT_DISPATCH", "1", "set",
           "HIP runtime submits kernels from the calling thread, to cut launch latency"),
    EnvVar("GPU_MAX_HW_QUEUES", "8", "set",
           "hardware queues per device for the HIP runtime; 8 for concurrent (MoE) work"),
    EnvVar("HSA_ENABLE_SDMA", "1", "set",
           "use the SDMA copy engines (ROCr's default is already 1; set 0 to fall back to "
           "blit kernels when copies hang)"),
    EnvVar("HIP_FORCE_DEV_KERNARG", "1", "set",
           "kernel arguments in device memory, a latency tweak"),
)


@dataclass(frozen=True)
class EnvSpec:
    """What the files describe: one installed prefix of one stack."""

    prefix: Path
    version: str
    series: str
    targets: tuple[str, ...]
    tune: bool = False
    base: Path | None = None  # an installed ROCm the prefix was built on (--base)
    # the base's device bitcode folder, where its device-libs showed (Debian:
    # /usr/lib/llvm-21/lib/clang/21/amdgcn/bitcode, not /usr/amdgcn/bitcode)
    base_bitcode: Path | None = None
    name: str = "rocm"  # the stack's name (stack.toml), the module's first part
    # (component, reason) of recipes with install.runpath = false: their programs need
    # LD_LIBRARY_PATH, which the files otherwise leave alone (every other binary finds its
    # libraries through its RUNPATH, and a global LD_LIBRARY_PATH leaks into every program)
    runpath_opt_outs: tuple[tuple[str, str], ...] = ()
    # what the recipes set for users (provided_by) and what the files call the stack
    provided: tuple[Provided, ...] = ()
    title: str = ""  # "ROCm"; the stack's name when empty
    summary: str = ""  # the modulefiles' help; "<title> <version>" when empty
    # a recipe of the stack says its files carry GPU code (``gpu_code``): only then do the
    # files speak of native code for the targets and warn about HSA_OVERRIDE_GFX_VERSION
    gpu_code: bool = True
    programs: str = ""  # what bin/ holds, the PATH comment (stack.toml ``programs``)
    cmake_packages: str = ""  # what find_package finds here (stack.toml ``cmake_packages``)

    @property
    def display_title(self) -> str:
        return self.title or self.name

    @property
    def display_summary(self) -> str:
        return self.summary or f"{self.display_title} {self.version}"

    @property
    def module_name(self) -> str:
        """``rocm/6.4-gfx906``: what ``module load`` takes after ``module use``."""
        return f"{self.name}/{self.module_version}"

    @property
    def module_version(self) -> str:
        """The module's version, after ``<stack>/``: the prefix's folder name without a
        leading ``<stack>-`` (``/opt/rocm-6.4-gfx906`` -> ``6.4-gfx906``), so two prefixes
        built for the same targets (``/opt/rocm-6.4-gfx906-test``) are told apart in `module
        list`. A folder named like the stack (``~/opt/mystack``) gives the series, and the
        targets of a stack with GPU code (``mystack/1.0``, not ``mystack/mystack``).
        Characters a module name should not hold (':' of gfx906:xnack-, spaces) become '_',
        and so does a leading '.' or '-' (a hidden file Lmod skips, an option to ``module
        load``; ``..`` of a prefix given as ``/x/..`` the folder above)."""
        folder = self.prefix.name
        if folder.startswith(f"{self.name}-") and len(folder) > len(self.name) + 1:
            folder = folder[len(self.name) + 1:]
        elif folder == self.name:
            folder = "-".join([self.series, *(self.targets if self.gpu_code else ())])
        return re.sub(r"^[.-]", "_", re.sub(r"[^A-Za-z0-9._+-]", "_", folder)) or "_"

    @property
    def path_comment(self) -> str:
        return self.programs or f"the programs of {self.display_title}"

    @property
    def cmake_comment(self) -> str:
        return f"find_package({self.cmake_packages}) finds this prefix first" \
            if self.cmake_packages else f"find_package finds {self.display_title}'s " \
            "packages in this prefix first"


def spec_for(stack: Stack, *, tune: bool = False) -> EnvSpec:
    prefix = stack.prefix
    if ":" in str(prefix):
        # PATH-like variables split on ':', so such a prefix would be cut in two
        raise ConfigError(f"prefix {prefix} contains ':', which PATH and LD_LIBRARY_PATH use "
                          "as a separator", tip="choose a prefix without ':' (--prefix PATH)")
    if any(ord(ch) < 32 for ch in str(prefix)):
        # a newline would end a comment line in the generated files and run the rest
        raise ConfigError(f"prefix {str(prefix)!r} contains a control character",
                          tip="choose a plain prefix (--prefix PATH)")
    return EnvSpec(prefix=prefix, version=stack.version, series=stack.series,
                   targets=tuple(str(t) for t in stack.targets), tune=tune,
                   base=stack.base.path if stack.base else None,
                   base_bitcode=device_lib_dir(stack.base) if stack.base else None,
                   name=stack.recipes.stack.name,
                   runpath_opt_outs=tuple((c.name, c.recipe.runpath_reason)
                                          for c in stack.selected()
                                          if c.builds and not c.recipe.runpath),
                   provided=provided_by(stack), title=stack.recipes.stack.display_title,
                   summary=envtext.summary(stack),
                   gpu_code=stack.recipes.gpu_code,
                   programs=stack.recipes.stack.programs,
                   cmake_packages=stack.recipes.stack.cmake_packages)


def _tree_var(spec: EnvSpec, name: str, tree: Path | None, rel: str, kind: str,
              comment: str) -> EnvVar:
    """A variable under ``tree``: the prefix (None, found where the file lies) or a base."""
    if tree is None:
        return EnvVar(name, _join(str(spec.prefix), rel), kind, comment, in_prefix=rel)
    return EnvVar(name, _join(str(tree), rel), kind, comment)


def _join(root: str, rel: str) -> str:
    return f"{root}/{rel}" if rel else root


def variables(spec: EnvSpec) -> list[EnvVar]:
    """First what the recipes provide (``spec.provided``: ROCM_PATH, HIP_PATH, ... of the
    ROCm recipes, in the tree each component is installed in, so on a base the compilers and
    HIP are the base's); then each path list gets the base's entry first and the prefix's in
    front of it, so the prefix wins. No LD_LIBRARY_PATH: every installed program finds its
    libraries through its RUNPATH (docs/architecture.md, Contracts), except those of a
    recipe that opted out, which the file names."""
    trees: list[Path | None] = [spec.base, None] if spec.base else [None]  # prefix ends first
    out = [
        *(EnvVar(p.name, str(spec.base_bitcode), "set", p.comment)
          if p.name == DEVICE_LIB_VAR and p.on_base and spec.base_bitcode else
          EnvVar(p.name, p.value, "set", p.comment) if p.in_tree is None else
          _tree_var(spec, p.name, spec.base if p.on_base else None, p.in_tree, "set",
                    p.comment) for p in spec.provided),
        *(_tree_var(spec, "PATH", t, "bin", "prepend", spec.path_comment) for t in trees),
    ]
    if spec.runpath_opt_outs:
        who = "; ".join(f"{name} ({reason})" for name, reason in spec.runpath_opt_outs)
        # never a system folder (a distribution's base, /usr/lib): the loader searches it
        # anyway, and named here it would go before the user's own LD_LIBRARY_PATH
        out += [_tree_var(spec, "LD_LIBRARY_PATH", t, "lib", "prepend",
                          f"only for the programs of recipes built without a RUNPATH: {who}")
                for t in trees if t is None or not system_dir(f"{t}/lib")]
    out += [_tree_var(spec, "CMAKE_PREFIX_PATH", t, "", "prepend", spec.cmake_comment)
            for t in trees]
    return out


# per language: how a value under the prefix is written, given its "/rel" part ("" for the
# prefix itself). Each file computes the prefix from where it lies (see the templates).
_UNDER_PREFIX = {
    "sh": lambda tail: '"$_rocbuild_prefix"' + tail,  # "$_rocbuild_prefix"/bin
    "fish": lambda tail: '"$_rocbuild_prefix"' + tail,
    "lua": lambda tail: "prefix" + (f' .. "{tail}"' if tail else ""),  # prefix .. "/bin"
    "tcl": lambda tail: '"${rocbuild_prefix}' + tail + '"',  # "${rocbuild_prefix}/bin"
}


def _value_filter(language: str, quote: Callable[[str], str]) -> Callable[[EnvVar], str]:
    """The template filter writing ``var``'s value in ``language``: quoted as written, or
    relative to the prefix the file computes."""
    def write(var: EnvVar) -> str:
        if var.in_prefix is None:
            return quote(var.value)
        # the relative parts are rocbuild's own constants; say so loudly if one is not
        if not re.fullmatch(r"[A-Za-z0-9/_.+-]*", var.in_prefix):
            raise ValueError(f"not a plain relative path: {var.in_prefix!r}")
        return _UNDER_PREFIX[language](f"/{var.in_prefix}" if var.in_prefix else "")
    return write


def relative_path(spec: EnvSpec, shell: str) -> Path:
    """Where the file for ``shell`` lives inside the prefix."""
    if shell in ("bash", "zsh"):
        return Path("env.sh")
    if shell == "fish":
        return Path("env.fish")
    if shell == "lmod":
        return Path("modulefiles") / spec.name / f"{spec.module_version}.lua"
    if shell == "tcl":
        return Path("modulefiles") / spec.name / spec.module_version
    raise ConfigError(f"unknown shell '{shell}' (known: {', '.join(SHELLS)})",
                      tip="use --shell bash, zsh, fish, lmod or tcl")


# --- quoting filters ---------------------------------------------------------------------------
def quote_sh(value: str) -> str:
    return shlex.quote(value)


def quote_fish(value: str) -> str:
    """fish single quotes: only backslash and the quote itself are special inside."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_lua(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def quote_tcl(value: str) -> str:
    """Tcl braces keep everything literal, but only when the braces inside balance and no
    backslash sits before one; otherwise escape the specials inside double quotes."""
    depth = 0
    for ch in value:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth == 0 and "\\" not in value and "\n" not in value:
        return "{" + value + "}"
    return '"' + re.sub(r'([\\"$\[\]{}])', r"\\\1", value).replace("\n", "\\n") + '"'


@functools.cache
def _environment(compiled: Path | None = None) -> jinja2.Environment:
    """The templates' environment; ``compiled``: a folder where jinja2 keeps each template's
    compiled code (checked against the template's text), so a run does not compile the four
    templates again (a no-op build spent most of its finish phase there: perf/noop.py)."""
    cache = None
    if compiled is not None:
        with contextlib.suppress(OSError):  # no folder: compile as before
            compiled.mkdir(parents=True, exist_ok=True)
            cache = jinja2.FileSystemBytecodeCache(str(compiled))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
                             undefined=jinja2.StrictUndefined, autoescape=False,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             bytecode_cache=cache)
    quotes = {"sh": quote_sh, "fish": quote_fish, "lua": quote_lua, "tcl": quote_tcl}
    env.filters.update(quotes)
    # a comment line stays one line whatever a recipe's comment holds (recipes.one_line
    # refuses a control character at load; this keeps the file safe if a check is missed)
    env.filters["comment"] = printable
    env.filters.update({f"{language}_value": _value_filter(language, quote)
                        for language, quote in quotes.items()})
    return env


def render(spec: EnvSpec, shell: str, compiled: Path | None = None) -> str:
    """The text of the file for ``shell`` (bash, zsh, fish or lmod); ``compiled``: where the
    compiled templates are kept (``_environment``)."""
    relative_path(spec, shell)  # validates the shell name
    template = _environment(compiled).get_template(_TEMPLATE_OF[shell])
    return template.render(prefix=str(spec.prefix), version=spec.version,
                           targets=list(spec.targets), module_version=spec.module_version,
                           module_name=spec.module_name, stack_name=spec.name,
                           title=spec.display_title, summary=spec.display_summary,
                           rocbuild_version=__version__, variables=variables(spec),
                           tune=spec.tune, tune_variables=TUNE_VARIABLES,
                           tune_source=TUNE_SOURCE, gpu_code=spec.gpu_code)


def write_env_files(spec: EnvSpec, say: Callable[[str], None] | None = None,
                    compiled: Path | None = None) -> list[Path]:
    """Write env.sh, env.fish and the Lmod and Tcl modulefiles into the prefix (atomically,
    so a shell sourcing them meanwhile sees a whole file); a user's edit of one is kept aside
    first and ``say`` tells where (keepedits.py). Returns the paths written."""
    written = []
    for shell in ("bash", "fish", "lmod", "tcl"):
        rel = relative_path(spec, shell)
        keepedits.write(spec.prefix, rel.as_posix(), render(spec, shell, compiled),
                       PREFIX_FILE_MODE, say)
        written.append(spec.prefix / rel)
    return written
