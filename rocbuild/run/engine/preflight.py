"""Checks made before any long step: each refusal here costs seconds, not the night.

Free disk for the workdir and the prefix against the recipes' estimates, a prefix this user
can write (rocbuild never runs sudo or chown itself: it prints the command to run once), the
tools the recipes need, every source available when --offline, and every patch series that
can already be checked. All problems are reported together, each with its fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rocbuild.checks import hostreqs, launchtools
from rocbuild.errors import BuildFailed, PreflightError
from rocbuild.model import cost
from rocbuild.model.gitcache import is_local
from rocbuild.model.resources import format_gib
from rocbuild.model.steps import step_env
from rocbuild.model.steptable import steps_of
from rocbuild.prefix import buildinfo
from rocbuild.run.engine import actions, cache_install
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.sources import sources
from rocbuild.run.state import basememo, workdirs


@dataclass(frozen=True)
class Problem:
    what: str
    fix: str


def disk_needed(ctx: BuildContext) -> cost.DiskNeed:
    served = cache_install.served(ctx)  # installed from the binary cache: no build tree
    runs = ctx.rule.next_runs(ctx.stack.selected())
    pending = [c.name for c in cost.pending_components(ctx.stack, runs)
               if c.name not in served]
    return cost.disk_needed(ctx.stack, pending)


def check_disk(ctx: BuildContext) -> list[Problem]:
    need = disk_needed(ctx)
    wants = [("workdir", ctx.stack.workdir, need.workdir),
             ("prefix", ctx.stack.prefix, need.prefix)]
    return [Problem(f"{use.names}: {format_gib(use.free)} free, the pending components need "
                    f"about {format_gib(use.need)} there (recipes' [resources] disk estimates)",
                    f"free space on {use.base}'s filesystem, or use --workdir/--prefix on a "
                    "larger one")
            for use in hostreqs.disk_by_filesystem(wants) if use.short]


def host_findings(ctx: BuildContext) -> list[hostreqs.Finding]:
    """The prefix, the tools and every system package, exactly as `doctor` checks them."""
    selected = ctx.stack.selected()
    env = step_env(ctx.stack, selected[0], os.environ) if selected else dict(os.environ)
    probe = hostreqs.Probe(path=env.get("PATH", os.defpath), env=env,
                           run=hostreqs.kept_run_tool(ctx.stack.work.probes))
    user = os.environ.get("USER") or "$USER"
    return hostreqs.host_findings(hostreqs.requirements(ctx.stack), probe, ctx.stack.prefix,
                                  user)


def check_offline_sources(ctx: BuildContext) -> list[Problem]:
    problems = []
    for comp in ctx.stack.selected():
        if (not comp.owns_checkout or ctx.is_current(comp, "fetch")
                or cache_install.is_served(ctx, comp.name)):  # --cache installs it
            continue
        assert comp.fetch_url is not None and comp.ref is not None
        if is_local(comp.fetch_url):  # a file:// mirror: fetched without the network
            continue
        cache = sources.cache_dir(ctx.stack.work.git_cache, comp.fetch_url)
        if sources.cached_commit(cache, comp.ref, ctx.registry()) is None:  # None: no cache
            problems.append(Problem(f"{comp.name}: {comp.ref} of {comp.fetch_url} is not in the "
                                    "source cache and --offline forbids downloading it",
                                    "run once without --offline, or give a --mirror that has it"))
    return problems


def check_patches(ctx: BuildContext) -> list[Problem]:
    problems = []
    for comp in ctx.stack.selected():
        if comp.owns_checkout and "patch" in steps_of(comp) and ctx.is_current(comp, "fetch"):
            try:
                actions.check_patches(ctx, comp)
            except BuildFailed as exc:
                problems.append(Problem(str(exc), exc.tip or "refresh the patch"))
    return problems


def check_owner(ctx: BuildContext) -> list[Problem]:
    """The prefix was filled from another workdir that still builds it (run/state/workdirs.py)."""
    prefix = ctx.stack.prefix
    owner = workdirs.other_owner(ctx.stack, buildinfo.read_build_info_lenient(prefix,
                                                                               ctx.output.say))
    if owner is None:
        return []
    return [Problem(
        f"{prefix} was filled from the workdir {owner}; building into it from "
        f"{ctx.stack.workdir} too would mix two builds in one prefix (each workdir's status "
        "would trust its own records while the prefix holds the other's files)",
        f"build it from that workdir (--workdir {owner}), give this build another --prefix, "
        f"or hand the prefix over (removes only rocbuild's own files there): rocbuild clean "
        f"--all --no-builds --prefix-files --workdir {owner} --prefix {prefix}")]


def run(ctx: BuildContext) -> None:
    """Raise PreflightError listing every problem found; print one line when all is well."""
    found = host_findings(ctx)
    problems = [Problem(f.what, f.fix) for f in found if f.level == hostreqs.FAIL]
    problems += [*check_owner(ctx), *check_disk(ctx), *check_patches(ctx),
                 *(Problem(what, fix) for what, fix in
                   launchtools.preflight_problems(ctx.stack.launch, ctx.output.say))]
    if ctx.offline:
        problems += check_offline_sources(ctx)
    if problems:
        lines = [f"  - {p.what}\n    fix: {p.fix}" for p in problems]
        install = hostreqs.one_install_line(found)
        if install and sum(bool(f.installs) for f in found if f.level == hostreqs.FAIL) > 1:
            lines.append(f"  all the packages at once: {install}")
        raise PreflightError(
            f"preflight found {len(problems)} problem{'s' if len(problems) > 1 else ''}; "
            "nothing was built:\n" + "\n".join(lines),
            tip="fix these, then run the same command again")
    for f in found:
        if f.level == hostreqs.WARN:
            ctx.output.say(f"preflight: warning: {f.what}; {f.fix}")
    # later runs of this stack without --base use it
    basememo.write(ctx.stack.workdir, ctx.stack.base, ctx.stack.recipes.stack.name)
    workdirs.claim(ctx.stack, ctx.settings)  # later runs, status and plan find this prefix's state
    need = disk_needed(ctx)
    ctx.output.say(f"preflight: ok (prefix writable, tools and system packages found, about "
                   f"{format_gib(need.workdir)} of build space needed)")
