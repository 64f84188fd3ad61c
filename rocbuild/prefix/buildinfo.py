"""``<prefix>/.rocbuild/build-info.json``: what was built into a prefix, from which sources,
and whether the build finished (``complete``) and passed ``rocbuild verify`` (``verified``).

An install into a complete prefix first rewrites it with complete = false (mark_incomplete),
and the build writes it again when the last component is installed; ``activate`` refuses a
prefix whose file is missing or not complete, and ``prefixes`` lists the prefixes that have
one. Writes are atomic (temp file + rename in the same folder), so a reader never sees half a
document, even after a crash.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rocbuild import __version__
from rocbuild.errors import ConfigError
from rocbuild.files import parse_json, read_regular, write_text_atomic
from rocbuild.model.graph import Stack
from rocbuild.model.layout import info_path, recorded_components
from rocbuild.prefix import registry

PREFIX_FILE_MODE = 0o644  # files rocbuild writes into the prefix are read by every user

SCHEMA = 1


def now() -> str:
    """UTC, ISO 8601 to the second: sortable and unambiguous across hosts."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


@dataclass(frozen=True)
class ComponentInfo:
    ref: str | None
    commit: str | None  # the resolved source commit; None until fetched
    fingerprint: str


@dataclass(frozen=True)
class BuildInfo:
    rocbuild_version: str
    stack: str  # stack name, "rocm"
    version: str  # the ROCm release, "6.4.3"
    series: str  # "6.4"
    targets: tuple[str, ...]
    prefix: str
    recipe_fingerprint: str
    components: Mapping[str, ComponentInfo]
    started: str
    finished: str | None = None
    complete: bool = False
    verified: bool = False
    schema: int = SCHEMA
    extra: Mapping[str, Any] = field(default_factory=dict)  # fields of a newer rocbuild, kept

    def finish(self, *, verified: bool = False, when: str | None = None) -> BuildInfo:
        """The same record marked complete (every component installed)."""
        return replace(self, finished=when or now(), complete=True, verified=verified)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        extra = doc.pop("extra")
        doc["targets"] = list(self.targets)
        return {**extra, **doc}


# the last verify of the prefix, in build-info's "verify" field: the build's own (finish.py)
# or a later `rocbuild verify` of the prefix, each recorded the same way
VERIFY_FIELD = "verify"
PASSED, FAILED, SKIPPED = "pass", "fail", "skipped"


def with_verify(info: BuildInfo, result: str, targets: tuple[str, ...],
                when: str | None = None) -> BuildInfo:
    """``info`` with the verify ``result`` (PASSED, FAILED or SKIPPED) of ``targets``
    recorded; ``verified`` only when it passed for every target the prefix was built for
    (a verify of fewer targets proves less than the build claims) and the build completed."""
    record = {"result": result, "when": when or now(), "targets": list(targets)}
    verified = (result == PASSED and info.complete
                and set(info.targets) <= set(targets))
    return replace(info, verified=verified, extra={**info.extra, VERIFY_FIELD: record})


def title_of(info: BuildInfo) -> str:
    """What the prefix's stack is called ("ROCm"; a build-info of an earlier rocbuild, which
    built only ROCm, has no title)."""
    title = info.extra.get("title")
    return title if isinstance(title, str) and title else "ROCm"


def has_gpu_code(info: BuildInfo) -> bool:
    """Whether a recipe of the prefix's stack says its files carry GPU code (``gpu_code``):
    then verify proves code for the targets, else only that the programs find their
    libraries. A build-info of an earlier rocbuild (ROCm only) has no such field."""
    value = info.extra.get("gpu_code")
    return value if isinstance(value, bool) else True


def what_verify_proves(info: BuildInfo) -> str:
    """What a passing verify shows of the prefix, in a few words (activate's refusal)."""
    if has_gpu_code(info):
        return f"the libraries carry code for {', '.join(info.targets) or 'the targets'}"
    return "every program finds its libraries"


def verify_result(info: BuildInfo) -> str | None:
    """The result of the prefix's last recorded verify, None when none is recorded (a
    build-info of an earlier rocbuild)."""
    record = info.extra.get(VERIFY_FIELD)
    result = record.get("result") if isinstance(record, dict) else None
    return result if result in (PASSED, FAILED, SKIPPED) else None


def unproven_why(info: BuildInfo) -> str:
    """Why a complete prefix is not verified, in a few words for `prefixes` and `activate`."""
    result = verify_result(info)
    if result == SKIPPED:
        return "not verified (skipped with --no-verify)"
    if result == FAILED:
        record = info.extra[VERIFY_FIELD]
        return f"verify did not pass ({record.get('when') or 'last run'})"
    if result == PASSED:  # passed for fewer targets than the prefix was built for
        return (f"verify passed only for {', '.join(info.extra[VERIFY_FIELD]['targets'])}, "
                f"not for {', '.join(info.targets)}")
    return "not verified"


def recipe_fingerprint(stack: Stack) -> str:
    """One hash over every selected component's fingerprint (which already covers the
    rendered recipe, patches and dependencies, graph.py), so two prefixes built from the
    same recipes and settings share it."""
    doc = {name: stack.components[name].fingerprint for name in stack.order}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def new_build_info(stack: Stack, *, commits: Mapping[str, str] | None = None,
                   started: str | None = None) -> BuildInfo:
    """The record for a build of ``stack`` that starts now (complete = False)."""
    commits = commits or {}
    components = {
        c.name: ComponentInfo(ref=c.ref, commit=commits.get(c.checkout), fingerprint=c.fingerprint)
        for c in stack.selected()
    }
    return BuildInfo(rocbuild_version=__version__, stack=stack.recipes.stack.name,
                     version=stack.version, series=stack.series,
                     targets=tuple(str(t) for t in stack.targets), prefix=str(stack.prefix),
                     recipe_fingerprint=recipe_fingerprint(stack), components=components,
                     started=started or now(),
                     extra={**base_record(stack), **filled_from(stack),
                            "title": stack.recipes.stack.display_title,
                            "gpu_code": stack.recipes.gpu_code})


def filled_from(stack: Stack) -> dict[str, Any]:
    """Which workdir and which of its configurations (model/workdir.py) filled the prefix:
    a build from another workdir is refused (run/state/workdirs.py), `prefixes` shows it."""
    work = stack.work
    folder = "." if work.is_root_config else str(work.config.relative_to(work.root))
    return {"workdir": str(work.root), "configuration": folder}


def base_record(stack: Stack) -> dict[str, Any]:
    """``{"base": {path, version, taken}}`` for a stack built on an installed ROCm: the prefix
    is then only the top of a stack (activate reads this), else nothing."""
    if stack.base is None:
        return {}
    return {"base": {"path": str(stack.base.path), "version": stack.base.version,
                     "taken": sorted(stack.base.taken)}}


def write_build_info(prefix: Path, info: BuildInfo,
                     warn: Callable[[str], None] | None = None) -> Path:
    """Write the prefix's build-info and add the prefix to the user's registry; a registry
    that cannot be written (outside the prefix: $XDG_STATE_HOME) is a line through ``warn``,
    never a failure."""
    path = info_path(prefix)
    if path.is_dir() and not path.is_symlink():  # rocbuild's own file: read as absent, so
        shutil.rmtree(path)  # a folder in its place is replaced (the rename cannot)
    write_text_atomic(path, json.dumps(info.to_json(), indent=2, sort_keys=True) + "\n",
                      mode=PREFIX_FILE_MODE)
    problem = registry.note_built(prefix)  # `rocbuild prefixes` lists every prefix built
    if problem is not None and warn is not None:
        warn(problem)
    return path


_FIELDS = {"rocbuild_version", "stack", "version", "series", "targets", "prefix",
           "recipe_fingerprint", "components", "started", "finished", "complete", "verified",
           "schema"}


def _from_json(path: Path, doc: Any) -> BuildInfo:
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    missing = sorted({"version", "targets", "components", "started", "complete"} - set(doc))
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    components = {
        name: ComponentInfo(ref=c.get("ref"), commit=c.get("commit"),
                            fingerprint=c.get("fingerprint", ""))
        for name, c in doc["components"].items()
    }
    return BuildInfo(
        rocbuild_version=str(doc.get("rocbuild_version", "")), stack=str(doc.get("stack", "rocm")),
        version=str(doc["version"]), series=str(doc.get("series", "")),
        targets=tuple(str(t) for t in doc["targets"]), prefix=str(doc.get("prefix", "")),
        recipe_fingerprint=str(doc.get("recipe_fingerprint", "")), components=components,
        started=str(doc["started"]), finished=doc.get("finished"),
        complete=doc["complete"] is True, verified=doc.get("verified") is True,
        schema=int(doc.get("schema", SCHEMA)),
        extra={k: v for k, v in doc.items() if k not in _FIELDS})


def read_build_info(prefix: Path) -> BuildInfo | None:
    """The prefix's record, or None when it has none. A file that exists but cannot be read
    is a ConfigError naming it: silently treating it as "no build" could hide a good prefix."""
    path = info_path(prefix)
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:  # not UTF-8 or nested past reading is damage like any other
        return _from_json(path, parse_json(data.decode("utf-8")))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: not a rocbuild build-info file ({exc})",
                          tip=f"rebuild into {prefix}, or remove {path} if the prefix is not "
                              "rocbuild's") from None


def read_build_info_lenient(prefix: Path, warn: Callable[[str], None]) -> BuildInfo | None:
    """For a build that is about to write the record again: an unreadable one counts as
    absent (with a warning), since the build's own result replaces it."""
    try:
        return read_build_info(prefix)
    except ConfigError as exc:
        warn(f"warning: {exc}; it is treated as absent and written again")
        return None


def mark_incomplete(prefix: Path) -> None:
    """Before an install replaces files in a complete prefix: the prefix no longer claims to
    be complete (``activate`` refuses it) until the build finishes again."""
    try:
        info = read_build_info(prefix)
    except ConfigError:
        info = None  # unreadable already counts as not complete
    if info is not None and (info.complete or info.verified):
        write_build_info(prefix, replace(info, complete=False, verified=False, finished=None))


@dataclass(frozen=True)
class FoundPrefix:
    path: Path
    info: BuildInfo | None
    error: str | None = None  # a build-info file that exists but cannot be read


def scan_prefixes(search_dir: Path = Path("/opt"),
                  extra: tuple[Path, ...] = ()) -> list[FoundPrefix]:
    """Prefixes that hold a build-info file, or install records of a first build that has
    not ended yet (being built: ``info`` None): ``<search_dir>/rocm-*`` plus ``extra`` (the
    configured prefix), each once, sorted by path. Folders without either are skipped: a
    packaged /opt/rocm-6.2.0 is not ours to list."""
    candidates = {Path(os.path.abspath(p)) for p in (*search_dir.glob("rocm-*"), *extra)}
    found = []
    for path in sorted(candidates):
        if not info_path(path).exists():
            if recorded_components(path):
                found.append(FoundPrefix(path, None))
            continue
        try:
            found.append(FoundPrefix(path, read_build_info(path)))
        except ConfigError as exc:
            found.append(FoundPrefix(path, None, str(exc)))
    return found
