"""`rocbuild verify [PATH...]`: does every installed library carry code for the GPU targets,
and does every installed program find its libraries on its own?

Without PATH it checks the whole prefix (files with GPU code under lib/, lib64/, bin/, the
rocBLAS Tensile set, and the linkage of every host ELF file: each DT_NEEDED resolves with a
bare environment, none of the stack's own libraries from outside the prefix), then runs the
GPU smoke tests when this host has a GPU. With PATHs it checks just those files and folders.
Exit 0 when everything passes, 4 when verify found the result wrong (a missing or unreadable
code object, an incomplete Tensile set, a broken linkage, a failed smoke test), 2 for bad
input.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rocbuild.checks import basescan, linkage, shapes, smoke, verify
from rocbuild.checks.verify import (
    PASSING,
    FileResult,
    Verdict,
    VerifyReport,
    generic_uses,
    to_json,
    verify_paths,
    verify_prefix,
)
from rocbuild.cli.argerrors import path_arg
from rocbuild.cli.ui import console, print_json
from rocbuild.errors import (
    EXIT_OK,
    EXIT_VERIFY_FAILED,
    ConfigError,
    StateWriteError,
    notice,
)
from rocbuild.files import write_json_atomic
from rocbuild.model import wording
from rocbuild.model.base import multiarch_dirs
from rocbuild.model.codeaudit import CodeMemo
from rocbuild.model.graph import load_stack
from rocbuild.model.layout import INFO_DIR
from rocbuild.model.recipes import load_recipes
from rocbuild.model.settings import Settings
from rocbuild.model.targets import TargetId, parse_target_list
from rocbuild.model.workdir import Workdir, prefix_key, read_registry
from rocbuild.prefix import buildinfo, records
from rocbuild.prefix.buildinfo import read_build_info

_STYLE = {Verdict.PASS: "green", Verdict.FAIL: "bold red", Verdict.CORRUPT: "bold red",
          Verdict.UNKNOWN: "yellow", Verdict.HOST: "green", Verdict.RUNTIME: "green"}


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "verify", parents=parents,
        help="check that installed files carry code for the GPU targets",
        description="Scan ELF files for HIP offload bundles (every translation unit) and the "
                    "rocBLAS Tensile files, and check them against the GPU targets without a "
                    "GPU; check that every installed program and library finds its "
                    "libraries without LD_LIBRARY_PATH (and none of the stack's own from "
                    "outside the prefix); on a host with an AMD GPU, then run smoke tests. "
                    "Exit 0: all pass; 4: verify found a problem (a file lacks code for a "
                    "target or is broken or unreadable, the Tensile set is incomplete, a "
                    "library does not resolve or resolves outside the prefix, a smoke test "
                    "failed); 2: bad input.")
    parser.add_argument("paths", nargs="*", type=path_arg, metavar="PATH",
                        help="files or folders to check (default: the whole prefix)")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--model", type=path_arg, metavar="FILE",
                        help="GGUF model for a llama-bench smoke run (GPU hosts only)")
    parser.add_argument("--no-smoke", action="store_true", help="skip the GPU smoke tests")
    parser.add_argument("--gpu-root", type=path_arg, metavar="DIR", default=Path("/"),
                        help="read /dev/kfd and /sys/class/kfd below DIR (default: /)")
    parser.add_argument("--system-root", type=path_arg, metavar="DIR", default=Path("/"),
                        help="resolve system libraries (/etc/ld.so.conf, /lib, /usr/lib) "
                             "below DIR (default: /)")


def _targets_and_prefix(settings: Settings, need_prefix: bool,
                        ) -> tuple[tuple[TargetId, ...], Path | None]:
    """Flags first; the recipes' defaults only when a value is missing (loading them can
    fail on a broken recipe, which should not stop `verify --target X --prefix Y`)."""
    targets, prefix = settings.target, settings.prefix
    if targets is None or (prefix is None and need_prefix):
        stack = load_stack(settings)
        targets = targets or stack.targets
        prefix = prefix or stack.prefix
    return targets, prefix


def _duties(settings: Settings, prefix: Path) -> Mapping[str, verify.Duty] | None:
    """What each component of a prefix rocbuild built must carry: the components its
    build-info names whose recipe says a GPU shape. None (some file must carry GPU code) for
    a prefix without build-info or when the recipes do not load."""
    try:
        info = read_build_info(prefix)
        if info is None:
            return None
        recipes = load_recipes(settings.recipes, settings.overlay).recipes
    except ConfigError:
        return None
    return records.gpu_duties(prefix, (recipes[n] for n in info.components if n in recipes))


def _shape_index(settings: Settings) -> shapes.ShapeIndex | None:
    """The recipes' shapes, to tell a named host library from one that lost its code; None
    when the recipes do not load (every file is then judged by its code alone)."""
    try:
        return shapes.ShapeIndex.of(
            load_recipes(settings.recipes, settings.overlay).recipes.values())
    except ConfigError:
        return None


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.model is not None and args.paths:
        raise ConfigError("--model runs llama-bench from the prefix; it cannot be combined "
                          "with PATH arguments", tip="drop the PATHs, or drop --model")
    if args.model is not None and not args.model.is_file():
        raise ConfigError(f"--model {args.model}: no such file",
                          tip="pass the path of a GGUF model file")
    if not args.system_root.is_dir():
        raise ConfigError(f"--system-root {args.system_root}: no such folder",
                          tip="pass the folder that stands for / (default: /)")
    system = linkage.System(args.system_root.absolute())
    if len(args.paths) == 1 and is_rocbuild_prefix(args.paths[0]):
        # `rocbuild verify DIR` of a prefix rocbuild built: the prefix, as --prefix DIR
        settings = settings.with_value("prefix", args.paths[0].absolute(), "argument PATH")
        args.paths = []
    info = _build_info(settings.prefix) if not args.paths else None
    if info is not None and settings.target is None and info.targets:
        # the targets the prefix was built for (its build-info), not the recipes' default
        settings = settings.with_value("target", parse_target_list(list(info.targets)),
                                       f"build-info of {settings.prefix}")
    started = time.monotonic()
    targets, prefix = _targets_and_prefix(settings, need_prefix=not args.paths)
    if args.paths:
        known_prefix = prefix if prefix is not None and prefix.is_dir() else None
        report = verify_paths([p.absolute() for p in args.paths], targets, prefix=known_prefix,
                              system=system, index=_shape_index(settings))
        smoke_report = None
    else:
        assert prefix is not None
        base = base_to_scan(settings.base, prefix)
        report = verify_prefix(prefix, targets, system=system,
                               components=_duties(settings, prefix),
                               library_dirs=[base / "lib", *multiarch_dirs(base)] if base
                               else ())
        smoke_report = _smoke(args, report, prefix, targets, base)
    # findings on the base's own libraries, by plan's audit (what the last plan read of
    # them is reused); they inform, the prefix's report decides
    base_scan = None if args.paths else basescan.scan_for(
        base_to_scan(settings.base, prefix), targets, settings.recipes, settings.overlay,
        info.components if info is not None else None,
        CodeMemo.read(Workdir.shared(settings.workdir).code_memo))
    if args.json:
        doc = to_json(report)
        doc["smoke"] = smoke.to_json(smoke_report) if smoke_report else None
        doc["base"] = basescan.to_json(*base_scan) if base_scan else None
        print_json(doc)
    else:
        out = console()
        print_report(report, out)
        if base_scan is not None:
            print_base_scan(*base_scan, out)
        if smoke_report is not None:
            print_smoke(smoke_report, out)
    ok = report.ok and (smoke_report is None or smoke_report.ok)
    if not args.paths and prefix is not None:
        recorded = record_result(prefix, ok, targets, time.monotonic() - started)
        if recorded and not args.json:
            console().print(f"recorded in {escape(str(buildinfo.info_path(prefix)))}: "
                            f"{escape(recorded)}")
    # 4 (docs/exit-codes.md) for every wrong result: a broken linkage is as wrong as missing
    # GPU code (the program does not start, or runs another stack's library), and a cron wrapper
    # tells both from a failed build step (1), bad input (2) and a busy prefix (3)
    return EXIT_OK if ok else EXIT_VERIFY_FAILED


def is_rocbuild_prefix(path: Path) -> bool:
    """A folder rocbuild built (it holds rocbuild's own ``.rocbuild/`` records)."""
    return path.is_dir() and (path / INFO_DIR).is_dir()


def _build_info(prefix: Path | None) -> buildinfo.BuildInfo | None:
    if prefix is None:
        return None
    try:
        return buildinfo.read_build_info(prefix)
    except ConfigError:
        return None  # an unreadable one: verify the files; nothing is recorded


def record_result(prefix: Path, ok: bool, targets: tuple[TargetId, ...],
                  seconds: float) -> str | None:
    """Record this verify of a whole prefix rocbuild built as the build's own verify does:
    in its build-info (``verified`` when it passed for every target the prefix was built
    for, so `prefixes` and `activate` accept it) and, while that workdir still builds the
    prefix, in the configuration's record that `status` shows. Returns what the prefix now
    says, None when it has no build-info (or it cannot be written: a note says why)."""
    info = _build_info(prefix)
    if info is None:
        return None
    names = tuple(str(t) for t in targets)
    result = buildinfo.PASSED if ok else buildinfo.FAILED
    updated = buildinfo.with_verify(info, result, names)
    try:
        buildinfo.write_build_info(prefix, updated)
        _record_for_status(prefix, updated, ok, seconds)
    except (OSError, StateWriteError) as exc:
        # the result stands (it was printed, and the exit code says it); only its record is
        # missing: a prefix on a read-only file system (an NFS export, faults.py's
        # StateWriteError), another user's (run it as its owner), a full disk
        what = (f"{exc.filename}: {exc.strerror} (run it as the prefix's owner)"
                if isinstance(exc, OSError) else str(exc))
        notice(f"rocbuild: warning: this verify is not recorded: {what}; `prefixes` and "
               "`activate` go by the verify recorded before")
        return None
    if updated.verified:
        return "verified"
    if not info.complete:
        return f"verify {'passed' if ok else 'failed'}; the build is not complete"
    return f"complete, unproven: {buildinfo.unproven_why(updated)}"


def _record_for_status(prefix: Path, info: buildinfo.BuildInfo, ok: bool,
                       seconds: float) -> None:
    """The verify row of `rocbuild status` in the workdir and configuration that filled the
    prefix (its build-info says which), while that workdir still has the prefix."""
    root, folder = info.extra.get("workdir"), info.extra.get("configuration")
    if not isinstance(root, str) or not isinstance(folder, str):
        return
    if prefix_key(prefix) not in read_registry(Path(root)):
        return
    work = Workdir(Path(root), Path(root) / folder)
    write_json_atomic(work.verify_record, {
        "prefix": str(prefix), "ok": ok, "when": time.time(), "seconds": round(seconds, 1),
        "summary": "" if ok else "`rocbuild verify` failed (run it to see what is wrong)"})


def _smoke(args: argparse.Namespace, report: VerifyReport, prefix: Path,
           targets: tuple[TargetId, ...], base: Path | None) -> smoke.SmokeReport:
    if args.no_smoke:
        return smoke.SmokeReport(skipped="smoke tests skipped: --no-smoke")
    if not report.ok:
        return smoke.SmokeReport(skipped="smoke tests not run: fix the problems above first")
    if not about_gpu_code(report):  # nothing to run on a GPU: no AMD GPU is not the reason
        return smoke.SmokeReport(skipped="no smoke tests: no GPU code expected here")
    return smoke.run_smoke(prefix, targets, args.model, root=args.gpu_root, echo=notice,
                           base=base)


def _shown(path: Path, prefix: Path | None) -> str:
    if prefix is not None and path.is_relative_to(prefix):
        return str(path.relative_to(prefix))
    return str(path)


def _verdict_cell(result: FileResult) -> str:
    style = _STYLE.get(result.verdict, "dim")
    text = result.verdict.label
    if result.note:
        text += f" ({result.note})"
    return f"[{style}]{escape(text)}[/]"


def _bundles_cell(result: FileResult) -> str:
    if not result.bundles:
        return "-"
    methods = sorted({b.compression for b in result.bundles if b.compression})
    return str(len(result.bundles)) + (f" ({', '.join(methods)})" if methods else "")


def _linkage_cell(result: FileResult, links: dict[Path, linkage.FileLinkage]) -> str:
    found = links.get(result.path)
    if found is None:
        return "-"
    if found.ok:
        return f"[green]ok[/] ({len(found.needed)})"
    return f"[bold red]{len(found.problems)} of {len(found.needed)} broken[/]"


def _needed_cell(needed: linkage.Needed, prefix: Path | None) -> str:
    if needed.resolved is None:
        text = linkage.NOT_FOUND
        if needed.own_copy is not None:
            text += (f" (the prefix has {_shown(needed.own_copy, prefix)}: a RUNPATH such "
                     "as $ORIGIN/../lib finds it)")
        return text
    return (f"{needed.resolved} — {linkage.OUTSIDE} ({_shown(needed.own_copy, prefix)})"
            if needed.own_copy is not None else str(needed.resolved))


def print_linkage(report: VerifyReport, out: Console) -> None:
    links = report.linkage
    if links is None:
        return
    failing = links.failing
    if failing:
        table = Table(title="linkage (bare environment, no LD_LIBRARY_PATH)",
                      title_justify="left")
        for column in ("file", "needs", "resolves to", "search path"):
            table.add_column(column, overflow="fold")
        for result in failing:
            shown = escape(_shown(result.path, report.prefix))
            search = escape(f"RUNPATH {result.runpath}" if result.runpath is not None else
                            f"RPATH {result.rpath}" if result.rpath is not None else
                            "no RPATH/RUNPATH")
            if result.error:
                table.add_row(shown, "-", f"[red]{escape(result.error)}[/]", search)
            for needed in result.problems:
                table.add_row(shown, escape(needed.name),
                              f"[red]{escape(_needed_cell(needed, report.prefix))}[/]", search)
        out.print(table)
    for result in links.files:
        if result.exempt is not None and not all(n.ok for n in result.needed):
            out.print(f"[yellow]![/] linkage of {escape(_shown(result.path, report.prefix))} not "
                      f"checked: its recipe opts out of the RUNPATH ({escape(result.exempt)})")
    resolved = sum(len(f.needed) for f in links.files)
    if links.ok:
        files = wording.count(len(links.files), "program or library", "programs and libraries")
        out.print(f"[green]✓[/] linkage: {files}, "
                  f"{wording.count(resolved, 'needed library', 'needed libraries')}, all "
                  "resolve without LD_LIBRARY_PATH")
    else:
        broken = sum(len(f.problems) + bool(f.error) for f in failing)
        out.print(f"  [red]✗[/] linkage: {len(failing)} of {len(links.files)} programs and "
                  f"libraries do not find {broken} needed librar"
                  f"{'y' if broken == 1 else 'ies'} as they should")


def about_gpu_code(report: VerifyReport) -> bool:
    """Whether the report is about GPU code: a component with a GPU shape, a file with GPU
    code (or named by the user), a Tensile set or a problem with them. A stack of other
    projects has none, and verify checks its linkage only."""
    return bool(report.shapes or report.files or report.tensile or report.problems)


def print_report(report: VerifyReport, out: Console) -> None:
    targets = ", ".join(str(t) for t in report.targets)
    where = f" in {escape(str(report.prefix))}" if report.prefix else ""
    if about_gpu_code(report):
        out.print(f"[bold]rocbuild verify[/] — code objects for [bold]{escape(targets)}[/]"
                  f"{where}")
    else:  # no recipe expects GPU code and none was found: the targets are not the subject
        out.print(f"[bold]rocbuild verify[/] — linkage{where} (no GPU code expected)")
    links = {f.path: f for f in report.linkage.files} if report.linkage else {}
    if report.files:
        table = Table(title_justify="left")
        for column in ("file", "bundles", "targets found", "linkage", "verdict"):
            table.add_column(column, overflow="fold")
        for result in report.files:
            table.add_row(escape(_shown(result.path, report.prefix)), _bundles_cell(result),
                          escape(", ".join(result.targets_found) or "-"),
                          _linkage_cell(result, links), _verdict_cell(result))
        out.print(table)
    if report.skipped:
        out.print(f"[dim]{wording.count(report.skipped, 'other file')} "
                  f"hold{'s' if report.skipped == 1 else ''} no GPU code[/]")
    if report.other_targets:
        out.print(f"[dim]{wording.count(report.other_targets, 'code object file')} "
                  f"for other processors (another target's part of a Tensile set)[/]")
    for result in report.files:
        for problem in result.problems:
            # one line each, never wrapped, so it can be grepped
            out.print(f"  [red]✗[/] {escape(_shown(result.path, report.prefix))}: "
                      f"{escape(problem)}", soft_wrap=True)
    print_generic_uses(report, out)
    for tensile in report.tensile:
        where = escape(_shown(tensile.library, report.prefix))
        if tensile.ok:
            count = tensile.code_objects
            out.print(f"[green]✓[/] Tensile {tensile.processor} ({where}): complete, "
                      f"{count} code object file{'' if count == 1 else 's'}")
        else:
            out.print(f"  [red]✗[/] Tensile {tensile.processor} ({where}): missing "
                      f"{escape(', '.join(tensile.missing))}")
    for problem in report.problems:
        out.print(f"  [red]✗[/] {escape(problem)}")
    print_shapes(report, out)
    print_linkage(report, out)
    out.print(_summary(report))


def print_generic_uses(report: VerifyReport, out: Console) -> None:
    """A passing file whose code for a target is a generic processor's (Debian's rocSOLVER:
    gfx9-generic for gfx906) says so, one line each."""
    for result in report.files:
        if result.verdict is not Verdict.PASS:
            continue
        gpu = [b for b in result.bundles if b.amdgcn]
        for request, generic, count in generic_uses(gpu, report.targets):
            where = ("its embedded code objects" if gpu[0].embedded else
                     f"{count} of {len(gpu)} bundle{'' if len(gpu) == 1 else 's'}")
            out.print(f"[green]✓[/] {escape(_shown(result.path, report.prefix))}: "
                      f"{escape(str(request))} via {escape(generic)} in {escape(where)} (the "
                      f"ROCm 6.4 runtime loads a {escape(generic)} code object on a "
                      f"{escape(request.processor)} that has none of its own)", soft_wrap=True)


def print_shapes(report: VerifyReport, out: Console) -> None:
    """One line per component with a [gpu] shape: what its shape asked, and what held or not
    (each on one line, never wrapped, so it can be grepped)."""
    for result in report.shapes:
        head = f"{result.component} ({result.shape})"
        if result.ok:
            out.print(f"[green]✓[/] {escape(head)}: {escape('; '.join(result.checked))}",
                      soft_wrap=True)
        for problem in result.problems:
            out.print(f"  [red]✗[/] {escape(problem)}", soft_wrap=True)


def _summary(report: VerifyReport) -> str:
    bad = [f for f in report.files if f.verdict not in PASSING]
    coded = [f for f in report.files if f.verdict is Verdict.PASS]
    targets = ", ".join(str(t) for t in report.targets)
    if report.ok and not coded:  # a stack (or a host library) no recipe expects GPU code of
        return ("[bold green]verify: PASS[/] — no GPU code expected and none found; the "
                "linkage is what was checked")
    if report.ok:
        return (f"[bold green]verify: PASS[/] — {wording.count(len(coded), 'file')} "
                "with GPU code, "
                f"each translation unit carries {escape(targets)}")
    parts = []
    if bad:
        parts.append(f"{len(bad)} of {len(report.files)} files fail")
    missing_sets = [t for t in report.tensile if not t.ok]
    if missing_sets:
        parts.append("Tensile set incomplete for "
                     + ", ".join(t.processor for t in missing_sets))
    parts += [p.split(":")[0] for p in report.problems]
    for shape in report.shapes:
        if not shape.ok:
            first = shape.problems[0].split(":")[0]
            parts.append(first if first != shape.component else
                         f"{shape.component} lacks what its [gpu] shape ({shape.shape}) needs")
    if report.linkage is not None and not report.linkage.ok:
        count = len(report.linkage.failing)
        parts.append(f"{count} file{'' if count == 1 else 's'} with broken linkage")
    return f"[bold red]verify: FAIL[/] — {escape('; '.join(parts))}"


def print_base_scan(base: Path, findings: list[basescan.BaseFinding], out: Console) -> None:
    if not findings:
        out.print(f"[green]✓[/] base {escape(str(base))}: every library carries the targets")
    for finding in findings:
        mark = "[yellow]![/]" if finding.buildable else "[red]![/]"
        out.print(f"  {mark} {escape(finding.text())}", soft_wrap=True)  # one line for grep


def print_smoke(report: smoke.SmokeReport, out: Console) -> None:
    if report.skipped:
        out.print(escape(report.skipped))
        return
    for result in report.results:
        mark = "[green]✓[/]" if result.ok else "[red]✗[/]"
        out.print(f"{mark} smoke {result.name}: {escape(result.detail)}")
        if not result.ok:
            out.print(f"    command: {escape(result.command)}", soft_wrap=True)  # to paste


def base_to_scan(flag: Path | None, prefix: Path | None) -> Path | None:
    """--base when given, else the base the prefix was built on (its build-info)."""
    if flag is not None:
        return flag
    info = read_build_info(prefix) if prefix is not None and prefix.is_dir() else None
    base = info.extra.get("base") if info else None
    return Path(base["path"]) if isinstance(base, dict) and base.get("path") else None
