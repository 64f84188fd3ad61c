"""The Stack: the requested components and everything they need, in a deterministic build
order, each with its rendered configuration and a fingerprint of everything that shapes its
output (docs/architecture.md, The Stack). Knows nothing of doit and runs nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rocbuild.errors import ConfigError
from rocbuild.model import (
    buildsystems,
    envtext,
    inputcheck,
    launchers,
    layout,
    patchseries,
)
from rocbuild.model.base import Base, fetch_sources, llvm_home, load_base, restricted_to
from rocbuild.model.codeaudit import CodeMemo
from rocbuild.model.fingerprint import fingerprints
from rocbuild.model.patchseries import Patch
from rocbuild.model.recipes import Recipe, RecipeSet, load_recipes, suggest, unknown_component
from rocbuild.model.render import NotTheTemplates, render
from rocbuild.model.settings import Settings, rewrite_url
from rocbuild.model.targets import TargetError, TargetId, looks_like_target, parse_target_list
from rocbuild.model.workdir import Workdir


@dataclass(frozen=True)
class Component:
    """One component of a Stack, rendered for the chosen targets and prefix."""

    recipe: Recipe
    depends: tuple[str, ...]  # direct, including the owner of a reused checkout
    checkout: str  # the component whose git checkout holds this source (itself, or its owner)
    url: str | None  # as written in the recipe, rendered; None for a reused checkout
    fetch_url: str | None  # after mirror rules
    ref: str | None
    submodules: bool
    checkout_dir: Path
    source_dir: Path
    build_dir: Path
    build_args: tuple[str, ...]
    build_type: str
    env: tuple[tuple[str, str], ...]
    patches: tuple[Patch, ...]
    fingerprint: str  # the whole rendered configuration plus dependency fingerprints
    # the same with the prefix and workdir paths taken out: the binary cache's key (cache.py),
    # equal on two machines that build the same recipes into other folders
    portable_fingerprint: str = ""
    install_prefix: Path = Path("/")
    install_links: tuple[tuple[str, str], ...] = ()  # (path in prefix, link target)
    install_files: tuple[tuple[str, str], ...] = ()  # (path in prefix, text)
    job_args: tuple[str, ...] = ()  # templates: rendered with `jobs` when configure starts
    context: Mapping[str, Any] = field(default_factory=dict)  # what job_args render with

    def render_job_args(self, jobs: Mapping[str, int]) -> list[str]:
        ctx = {**self.context, "jobs": dict(jobs)}
        return [render(a, ctx, file=self.recipe.file, key=f"{self.recipe.table}.job_args[{i}]")
                for i, a in enumerate(self.job_args)]

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def builds(self) -> bool:
        return self.recipe.builds

    @property
    def owns_checkout(self) -> bool:
        return self.checkout == self.name


@dataclass(frozen=True)
class Stack:
    recipes: RecipeSet
    version: str
    series: str
    targets: tuple[TargetId, ...]
    prefix: Path
    workdir: Path
    components: Mapping[str, Component] = field(default_factory=dict)
    order: tuple[str, ...] = ()  # the selected closure, dependencies first
    # ccache/distcc: speed only, never fingerprinted; None until a run resolves them
    # (checks/launchtools.launching), so a stack that only plans or reports has none
    launch: launchers.Launch | None = None
    base: Base | None = None  # an installed ROCm whose components are taken, not built
    config_dir: Path | None = None  # this prefix's part of the workdir (model/workdir.py)
    # the profile of stack.toml whose set a bare build takes (None: the stack has none)
    profile: str | None = None

    @property
    def work(self) -> Workdir:
        """The workdir's layout for this stack's configuration (its prefix)."""
        return Workdir(self.workdir, self.config_dir or self.workdir)

    @property
    def rocm_root(self) -> Path:
        """The ROCm that builds compile against (compilers, HIP): the base, else the prefix."""
        return self.base.path if self.base else self.prefix

    @property
    def llvm_root(self) -> Path:
        """The LLVM builds compile with (``{{ llvm }}`` in recipes): the prefix's lib/llvm,
        or the base's (lib/llvm in AMD's layout, lib/llvm-<N> in Debian's)."""
        return llvm_home(self.base) if self.base else self.prefix / "lib" / "llvm"

    @property
    def search_prefixes(self) -> tuple[Path, ...]:
        """Where dependencies are looked for: the prefix first, then the base."""
        return (self.prefix, self.base.path) if self.base else (self.prefix,)

    @property
    def search_dirs(self) -> tuple[Path, ...]:
        """The trees for a build's include and library search variables (``rocm_dirs``):
        the prefix, then the base unless it is the system's own (``Base.search_dirs``)."""
        return (self.prefix, *self.base.search_dirs) if self.base else (self.prefix,)

    def selected(self) -> list[Component]:
        return [self.components[n] for n in self.order]

    def closure(self, name: str) -> list[str]:
        """``name`` and everything it depends on, directly or not, in build order."""
        seen = reachable([name], lambda n: self.components[n].depends)
        return [n for n in self.order if n in seen] or [name]

    def python_needs(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(packages for the build venv, wheels for the wheelhouse) of the selected
        components, sorted and without repeats."""
        packages = sorted({p for c in self.selected() for p in c.recipe.python_packages})
        wheels = sorted({w for c in self.selected() for w in c.recipe.python_wheels})
        return tuple(packages), tuple(wheels)


def direct_deps(recipe: Recipe) -> tuple[str, ...]:
    owner = recipe.source.from_component
    extra = (owner,) if owner and owner not in recipe.depends else ()
    return extra + recipe.depends


def _find_cycle(graph: Mapping[str, tuple[str, ...]], nodes: Iterable[str]) -> list[str]:
    """A dependency cycle among ``nodes`` as [a, b, ..., a]."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in graph[node]:
            if state.get(dep) == 1:
                return [*stack[stack.index(dep):], dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(nodes):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def reachable(start: Iterable[str], deps_of: Callable[[str], Iterable[str]]) -> set[str]:
    """``start`` and everything it depends on, directly or not: the one dependency walk
    (Stack.closure, build_order and the source folders a recipe may name use it)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(deps_of(current))
    return seen


def build_order(recipes: RecipeSet, requested: Iterable[str],
                taken: Iterable[str] = ()) -> tuple[str, ...]:
    """The closure of ``requested`` in dependency order. Ties go by the order of
    ``stack.components`` in stack.toml, then by name, so the order never depends on the
    filesystem. A cycle is a ConfigError that prints it. Components in ``taken`` (from a
    base) are left out with everything only they need."""
    cut = set(taken)
    graph = {name: tuple(d for d in direct_deps(r) if d not in cut)
             for name, r in recipes.recipes.items()}
    requested = [n for n in requested if n not in cut]
    closure = reachable(requested, graph.__getitem__)
    rank = {name: i for i, name in enumerate(recipes.stack.components)}

    def key(name: str) -> tuple[int, str]:
        return (rank.get(name, len(rank)), name)

    waiting = {n: sum(1 for d in graph[n] if d in closure) for n in closure}
    users: dict[str, list[str]] = {n: [] for n in closure}
    for name in closure:
        for dep in graph[name]:
            users[dep].append(name)
    ready = [key(n) for n, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        for user in users[name]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, key(user))
    if len(order) != len(closure):
        cycle = _find_cycle(graph, closure - set(order))
        files = ", ".join(str(recipes.recipes[n].file) for n in cycle[:-1])
        raise ConfigError(f"dependency cycle: {' -> '.join(cycle)} (in 'depends' of {files})",
                          tip="remove one of these dependencies to break the cycle")
    return tuple(order)


def default_request(recipes: RecipeSet, profile: str | None = None) -> list[str]:
    """What a bare `rocbuild build` builds: the profile's components (``profile``, else the
    one stack.toml names), else stack.components, else every recipe."""
    name = profile or recipes.stack.profile
    if name:
        return list(recipes.stack.profiles[name].components)
    return list(recipes.stack.components) or sorted(recipes.recipes)


def resolve_profile(recipes: RecipeSet, settings: Settings) -> str | None:
    """The profile in force: the ``profile`` setting, checked against stack.toml's
    [profiles] (an unknown name is bad input naming the known ones), else the one stack.toml
    names, else None."""
    name = settings.profile
    known = list(recipes.stack.profiles)
    if name is None:
        return recipes.stack.profile or None
    if name not in known:
        where = settings.source("profile")
        declared = (f"known: {', '.join(known)}" if known
                    else f"{recipes.stack.file} declares no [profiles]")
        raise ConfigError(f"{where}: unknown profile '{name}' ({declared})." + suggest(name, known),
                          tip="`rocbuild plan --profile NAME` shows a profile's components and "
                              "cost" if known else f"add [profiles.{name}] to {recipes.stack.file}")
    return name


def profile_components(recipes: RecipeSet) -> set[str]:
    """Every component some profile (or stack.components) needs, with its dependencies: what
    a prefix may hold after builds of several profiles (finish.py keeps them all)."""
    named = {n for p in recipes.stack.profiles.values() for n in p.components}
    named |= set(recipes.stack.components)
    return reachable(named, lambda n: direct_deps(recipes.recipes[n]))


def profile_sets(recipes: RecipeSet) -> dict[str, frozenset[str]]:
    """Each profile's components with their dependencies: the set a build of it may build
    (the base audit names the profile that builds a library outside the run)."""
    return {name: frozenset(reachable(profile.components,
                                      lambda n: direct_deps(recipes.recipes[n])))
            for name, profile in recipes.stack.profiles.items()}


def drop_unused_sources(recipes: RecipeSet, order: tuple[str, ...]) -> tuple[str, ...]:
    """Leave out source-only components nothing in ``order`` needs (on a base, the LLVM
    checkout once the compilers come from the base)."""
    needed = {d for n in order for d in direct_deps(recipes.recipes[n])}
    return tuple(n for n in order if recipes.recipes[n].builds or n in needed)


def sources_read(recipes: RecipeSet, order: Iterable[str],
                 taken: Iterable[str]) -> dict[str, str]:
    """Source-only components in ``taken`` that a component built in ``order`` depends on
    (name -> that component): the base has their headers, not the checkout the recipe names
    as ``src.<name>`` (clr's HIP_COMMON_DIR), so they must be fetched after all."""
    cut = set(taken)
    readers: dict[str, str] = {}
    for name in order:
        recipe = recipes.recipes[name]
        if recipe.builds:
            for dep in direct_deps(recipe):
                if dep in cut and not recipes.recipes[dep].builds:
                    readers.setdefault(dep, name)
    return readers


class RoadCut(NotTheTemplates):
    """A recipe read ``src.<x>`` or ``build.<x>`` of a dependency the road took from the
    base: rocbuild's decision, explained as such (graph turns it into a ConfigError naming
    the file and key), never jinja's "undefined variable" shown as the recipe's mistake."""

    def __init__(self, table: str, name: str, why: str) -> None:
        super().__init__(f"{table}.{name}")
        self.table, self.name, self.why = table, name, why


class _Folders(dict[str, str]):
    """``src`` / ``build`` of a template context: a missing name the road cut (taken from
    the base) raises RoadCut; any other stays jinja's undefined name (the recipe's typo)."""

    def __init__(self, table: str, folders: Mapping[str, str], cut: Mapping[str, str]) -> None:
        super().__init__(folders)
        # underscored: a template's `src.<name>` never reaches them (component names cannot
        # start with '_', and the sandbox refuses such attributes)
        self._table, self._cut = table, dict(cut)

    def __missing__(self, name: str) -> str:
        if name in self._cut:
            raise RoadCut(self._table, name, self._cut[name])
        raise KeyError(name)


def find_patches(recipes: RecipeSet, name: str) -> tuple[Patch, ...]:
    """``patches/<name>/*.patch`` in name order; anything else there is an error."""
    return patchseries.read_series(recipes.patches_dir_of(name), name)


def recipe_set(settings: Settings) -> RecipeSet:
    """The recipes of ``settings``: the recipes folder with the user's overlay over it
    (``Settings.overlay``)."""
    return load_recipes(settings.recipes, settings.overlay)


def _resolve_targets(recipes: RecipeSet, settings: Settings) -> tuple[TargetId, ...]:
    if settings.target is not None:
        return settings.target
    try:
        return parse_target_list(recipes.stack.targets)
    except TargetError as exc:
        raise ConfigError(f"{recipes.stack.file}: key 'stack.targets': {exc}",
                          tip=f"fix 'stack.targets' in {recipes.stack.file}") from None


def prefix_problem(prefix: Path) -> str | None:
    """Why ``prefix`` would fail at the end of a build, or None. A ':' splits PATH,
    LD_LIBRARY_PATH and CMAKE_PREFIX_PATH-style lists (env files refuse it after the
    compile); whitespace breaks unquoted uses in the generated scripts and build files."""
    text = str(prefix)
    if ":" in text:
        return "contains ':', which PATH and LD_LIBRARY_PATH use as a separator"
    if any(ch.isspace() or ord(ch) < 32 for ch in text):
        return "contains whitespace or a control character"
    return None


def check_from_source(settings: Settings, recipes: Mapping[str, Recipe]) -> None:
    """``--from-source`` names known components that a base may provide: an unknown name is
    refused with the closest one, and so is a component the base must provide (compilers, HIP
    runtime, ROCr: a stack built on a base runs on the base's, never on a second copy)."""
    where = settings.source("from_source")
    for name in settings.from_source:
        if name not in recipes:
            raise unknown_component(name, recipes, where=f"{where}: ",
                                    tip="run `rocbuild plan` to see the components")
        if recipes[name].base_required:
            raise ConfigError(f"{where}: {name} is always the base's (the compilers, the HIP "
                              "runtime and ROCr are what a build on a base runs on), so it "
                              "cannot be built from source on a base",
                              tip=f"drop {name} from --from-source, or build without --base "
                                  "(--base none) to build the whole stack from source")


def load_stack(settings: Settings, requested: Iterable[str] = ()) -> Stack:
    """Load recipes and resolve the Stack for ``requested`` components (default: the
    components listed in stack.toml, or every recipe when it lists none)."""
    recipes = recipe_set(settings)
    for patches in (recipes.patches_dir, recipes.overlay_patches_dir):  # none is skipped
        if patches is not None:
            patchseries.check_folder(patches, recipes.recipes)
    spec = recipes.stack
    explicit = bool(list(requested))
    profile = resolve_profile(recipes, settings)
    requested = list(requested) or default_request(recipes, profile)
    for name in requested:
        if name not in recipes.recipes and looks_like_target(name):
            raise ConfigError(f"'{name}' is a GPU target, not a component: to build for "
                              "several targets, separate them with commas",
                              tip="--target gfx906,gfx90a (one argument, no spaces)")
        if name not in recipes.recipes:
            raise unknown_component(name, recipes.recipes,
                                    tip="run `rocbuild plan` to see them all")
    check_from_source(settings, recipes.recipes)
    targets = _resolve_targets(recipes, settings)
    target_names = [str(t) for t in targets]
    order = build_order(recipes, requested)
    version, rocm_base = spec.version, None
    if settings.base is not None:
        # the base is judged over every recipe, not only what this run asked for: a base
        # without a required component is refused by `plan X` as by `build X` (which also
        # loads the whole set), and its content key is the same for every request
        every = build_order(recipes, sorted(recipes.recipes))
        asked = {n: settings.source("from_source") for n in settings.from_source}
        try:
            memo = CodeMemo.read(Workdir.shared(settings.workdir).code_memo)
            rocm_base = restricted_to(load_base(settings.base, spec.series, recipes.recipes, every,
                                         {n: direct_deps(recipes.recipes[n]) for n in every},
                                         targets, memo, asked), order)
        except ConfigError as exc:
            where = settings.source("base")
            if not where.startswith("workdir "):  # not remembered (run/state/basememo.py)
                raise
            raise ConfigError(f"{exc} (the base of the last build in this workdir, recorded "
                              f"in {where[len('workdir '):]})",
                              tip="give --base PATH for another base, or --base none to build "
                                  "from source") from None
        version = rocm_base.version  # a 6.4.1 base builds what it lacks at rocm-6.4.1
        order = build_order(recipes, requested, taken=rocm_base.taken)
        readers = sources_read(recipes, order, rocm_base.taken)
        while readers:  # a source-only component taken while a user of it is built
            rocm_base = fetch_sources(rocm_base, readers)
            order = build_order(recipes, requested, taken=rocm_base.taken)
            readers = sources_read(recipes, order, rocm_base.taken)
        if not explicit:
            order = drop_unused_sources(recipes, order)
    base = {"version": version, "series": spec.series, "targets": target_names}
    if settings.prefix is not None:
        prefix = settings.prefix
        where, fix = f"the prefix from {settings.source('prefix')}", "give another --prefix"
    else:
        prefix = Path(render(spec.prefix, base, file=spec.file, key="stack.prefix"))
        if not prefix.is_absolute():
            raise ConfigError(f"{spec.file}: key 'stack.prefix' must render to an absolute "
                              f"path, got '{prefix}'", tip=f"fix 'stack.prefix' in {spec.file}")
        where = f"{spec.file}: key 'stack.prefix' (for targets {','.join(target_names)})"
        fix = (f"pass the targets through | pathsafe in 'stack.prefix' of {spec.file}, or "
               "give --prefix")
    bad = prefix_problem(prefix)
    if bad:
        # refused here, so `plan` shows it and `build` stops before the first fetch
        raise ConfigError(f"{where}: {prefix} {bad}", tip=fix)
    if rocm_base is not None and prefix.absolute() == rocm_base.path:
        raise ConfigError(f"the prefix {prefix} is the base itself; rocbuild never writes into "
                          "an installed ROCm", tip="pass another --prefix (the default is "
                          "versioned, e.g. /opt/rocm-6.4-gfx906)")
    workdir: Path = settings.workdir
    config_dir = Workdir.for_prefix(workdir, prefix).config
    stack = Stack(recipes=recipes, version=version, series=spec.series, targets=targets,
                  prefix=prefix, workdir=workdir, base=rocm_base, config_dir=config_dir,
                  profile=profile)
    components: dict[str, Component] = {}
    for name in order:
        components[name] = _render_component(stack, recipes.recipes[name], components, settings)
    # no launchers yet: they depend on the host's programs, probed when a run starts
    # (checks/launchtools.py), so loading a stack runs nothing
    stack = replace(stack, components=components, order=order)
    envtext.check(stack)  # what the env files will say, rendered now: not after the builds
    return stack


def _render_component(stack: Stack, recipe: Recipe, done: Mapping[str, Component],
                      settings: Settings) -> Component:
    """``recipe`` rendered for ``stack`` (``done``: the components rendered before it, its
    dependencies among them), every rendered value checked, and its fingerprints."""
    taken = stack.base.taken if stack.base else {}
    deps = tuple(d for d in direct_deps(recipe) if d not in taken)
    owner = recipe.source.from_component or recipe.name
    checkout_dir = stack.work.checkout(owner)
    where = str(recipe.file)
    stack_ctx = _stack_context(stack, recipe)
    subdir = inputcheck.subdir_inside(where, "source.subdir", render(
        recipe.source.subdir, stack_ctx, file=recipe.file, key="source.subdir"))
    source_dir = checkout_dir / subdir if subdir else checkout_dir
    build_dir = stack.work.build_dir(recipe.name)
    context = {**stack_ctx, **_folders_context(stack, recipe, deps, done, source_dir, build_dir)}
    r = _renderer(recipe, context)
    url, ref, fetch_url = _source(stack, recipe, r, settings)
    table = recipe.table  # [cmake] for cmake: the build system's options
    inputcheck.arg_list(where, f"{table}.args", recipe.build_args)
    inputcheck.arg_list(where, f"{table}.job_args", recipe.job_args)
    if ref is not None:
        context["ref"] = ref  # e.g. llama.cpp's build number comes from its release tag
    args = tuple(r(a, f"{table}.args[{i}]") for i, a in enumerate(recipe.build_args))
    inputcheck.arg_list(where, f"{table}.args", args)
    # undefined names in job_args fail now, not at hour 3; they go on the configure command
    # line too, so they are judged as the args are
    probe = {**context, "jobs": {"compile": 1, "link": 1, "tensile": 1}}
    job_args = tuple(r(t, f"{table}.job_args[{i}]", probe) for i, t in enumerate(recipe.job_args))
    if recipe.builds:
        system = buildsystems.for_kind(recipe.kind)
        system.check_args(recipe.file, f"{table}.args", args)
        system.check_args(recipe.file, f"{table}.job_args", job_args)
    env = tuple(sorted((k, inputcheck.env_value(where, f"env.{k}", k, r(v, f"env.{k}")))
                       for k, v in recipe.env.items()))
    inputcheck.env_total(where, env)
    build_type = inputcheck.no_nul(where, f"{table}.build_type",
                                   r(recipe.build_type, f"{table}.build_type"))
    install_prefix, links, files = _install_tables(stack, recipe, r)
    patches = find_patches(stack.recipes, recipe.name)
    if patches and recipe.source.from_component:
        raise ConfigError(
            f"{patches[0].path.parent}: '{recipe.name}' reuses the checkout of '{owner}', so its "
            f"patches belong in patches/{owner}/", tip=f"move the files to patches/{owner}/")
    comp = Component(
        recipe=recipe, depends=deps, checkout=owner, url=url, fetch_url=fetch_url, ref=ref,
        submodules=recipe.source.submodules, checkout_dir=checkout_dir, source_dir=source_dir,
        build_dir=build_dir, build_args=args, build_type=build_type, env=env, patches=patches,
        fingerprint="", install_prefix=install_prefix, install_links=links,
        install_files=files, job_args=recipe.job_args, context=context)
    fingerprint, portable = fingerprints(stack, comp, subdir, done)
    return replace(comp, fingerprint=fingerprint, portable_fingerprint=portable)


def _stack_context(stack: Stack, recipe: Recipe) -> dict[str, Any]:
    """What every template of ``recipe`` may read of the stack (source.subdir only this)."""
    return {"version": stack.version, "series": stack.series, "name": recipe.name,
            "targets": [str(t) for t in stack.targets], "prefix": str(stack.prefix),
            # the ROCm to build against (compilers, HIP): the base, else the prefix; and
            # every installed tree to search, the prefix first
            "rocm": str(stack.rocm_root),
            "llvm": str(stack.llvm_root),
            "rocm_dirs": [str(p) for p in stack.search_dirs]}


def _folders_context(stack: Stack, recipe: Recipe, deps: tuple[str, ...],
                     done: Mapping[str, Component], source_dir: Path, build_dir: Path
                     ) -> dict[str, Any]:
    """The folders a template of ``recipe`` may name: its own, the workdir's and (``src.x``,
    ``build.x``) those of everything it depends on, directly or not; ``src.x`` of an unrelated
    component is undefined, so a missing dependency shows."""
    below = {d: done[d] for d in reachable(deps, lambda d: done[d].depends)}
    taken = stack.base.taken if stack.base else {}
    # what the recipe could name without the base: the base's decision, not a typo
    everything = reachable(direct_deps(recipe), lambda d: direct_deps(stack.recipes.recipes[d]))
    cut = {d: f"{d} is taken from the base {stack.base.path} (ROCm {stack.base.version})"
           for d in everything if d in taken and stack.base is not None}
    return {
        "source_dir": str(source_dir),
        "build_dir": str(build_dir),
        "workdir": str(stack.workdir),
        "venv": str(stack.work.venv),
        "python": str(stack.work.venv / "bin" / "python"),
        "wheelhouse": str(stack.work.wheels),
        "src": _Folders("src", {**{n: str(c.source_dir) for n, c in below.items()},
                                recipe.name: str(source_dir)}, cut),
        "build": _Folders("build", {n: str(c.build_dir) for n, c in below.items()}, cut),
    }


Renderer = Callable[..., str]  # (template, key[, context]) -> the rendered text


def _renderer(recipe: Recipe, context: Mapping[str, Any]) -> Renderer:
    """Render one of ``recipe``'s templates, naming its key; a folder the --base road cut is
    explained as rocbuild's decision (RoadCut)."""
    def r(text: str, key: str, ctx: Mapping[str, Any] = context) -> str:
        try:
            return render(text, ctx, file=recipe.file, key=key)
        except RoadCut as exc:
            kind = "source" if exc.table == "src" else "build"
            raise ConfigError(
                f"{recipe.file}: key '{key}' reads {exc.table}.{exc.name}, but {exc.why}, so "
                f"rocbuild has no {kind} folder of {exc.name}: a decision of the --base road, "
                "not a mistake in the recipe",
                tip=f"build without --base, or drop {exc.name}'s [base] table so it is built "
                    "too") from None
    return r


def _source(stack: Stack, recipe: Recipe, r: Renderer, settings: Settings
            ) -> tuple[str | None, str | None, str | None]:
    """(url, ref, fetch_url after the --mirror rules) of a recipe with a git source, checked;
    all None for a component that reuses another's checkout."""
    if recipe.source.git is None:
        return None, None, None
    where = str(recipe.file)
    pinned = recipe.source.ref_for(stack.version)
    if pinned is None:
        raise ConfigError(
            f"{recipe.file}: key 'source.refs' has no entry for ROCm {stack.version} "
            f"(pinned: {', '.join(sorted(recipe.source.refs))})",
            tip=f"add \"{stack.version}\" = \"<commit>\" under [source.refs] in {recipe.file}")
    url = inputcheck.git_url(where, "source.git", r(recipe.source.git, "source.git"))
    ref_key = ("source.ref" if stack.version not in recipe.source.refs
               else f'source.refs."{stack.version}"')
    ref = inputcheck.git_ref(where, ref_key, r(pinned, ref_key))
    return url, ref, inputcheck.git_url(where, "source.git (after --mirror rules)",
                                        rewrite_url(url, settings.mirror))


def _install_tables(stack: Stack, recipe: Recipe, r: Renderer
                    ) -> tuple[Path, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(install prefix, [install.links], [install.files]) rendered: inside the prefix, no
    link chain leading out, none on rocbuild's own files."""
    where, table = str(recipe.file), recipe.table
    install_prefix = inputcheck.install_prefix_inside(
        where, f"{table}.install_prefix", stack.prefix,
        Path(r(recipe.install_prefix, f"{table}.install_prefix")
             if recipe.install_prefix else str(stack.prefix)))
    links = tuple(sorted((path, inputcheck.link_target_inside(
                              where, f'install.links."{path}"', stack.prefix, path,
                              r(target, f"install.links.{path}")))
                         for path, target in recipe.install_links.items()))
    files = tuple(sorted((path, r(text, f"install.files.{path}"))
                         for path, text in recipe.install_files.items()))
    inputcheck.links_chain_inside(where, stack.prefix, links, files)
    reserved_roots = layout.reserved_roots(stack.recipes.stack.name)
    for kind, paths in (("links", links), ("files", files)):
        for path, _ in paths:
            inputcheck.not_reserved(where, f'install.{kind}."{path}"', path, reserved_roots)
    return install_prefix, links, files
