"""The workdir's layout, declared once (as model/layout.py does for the prefix).

One workdir can build several configurations side by side, e.g. a Radeon VII prefix and an
MI50 prefix, or the same recipes into two prefixes. A configuration is named by its prefix:
a prefix holds one build, so the targets and base a configuration was built for are what
its prefix holds, and building other targets into the same prefix replaces that build (its
build trees are reconfigured). The parts:

- shared by every configuration: the checkouts (``src/``), the git, compiler and artifact
  caches (``cache/``), the build venv and wheelhouse, saved checkouts (``saved/``), and in
  ``state/``: the run lock, the processes of a run, job caps, the remembered base, the
  stamps and logs of the source steps (fetch, patch: a checkout is the same whatever it is
  built for, so a second configuration never fetches again) and of the build venv, and the
  list of configurations (``state/configs.json``);
- kept apart per configuration, in its folder: build trees (``build/``), the stamps and
  failure records of the build steps, their logs, doit's DB, the last build's command and
  verify's record.

The folder of a configuration is the workdir itself for the first configuration a workdir
builds (so a workdir of an earlier rocbuild, which held one configuration there, keeps its
build trees and stamps: the next run adopts them and rebuilds nothing), and
``configs/<hash of the prefix>`` for each further one. ``state/configs.json`` records which
prefix owns which folder; it is written when a build starts (run/state/workdirs.py), read here.
Nothing here writes.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild.errors import ConfigError
from rocbuild.files import read_json

STATE = "state"
CONFIGS_FILE = "configs.json"
CONFIGS_DIR = "configs"
ROOT_CONFIG = "."  # the registry's folder of the configuration that lives in the workdir
# the steps whose output every configuration shares: the source steps (a checkout is the
# same whatever it is built for) and the run-wide build venv (stamped and logged as "venv");
# tests/unit/test_workdir.py keeps this equal to the step table's source and run-wide kinds
SHARED_STEPS = frozenset({"fetch", "patch", "python-venv", "venv"})


def prefix_key(prefix: Path) -> str:
    """The registry's name of a configuration: its prefix, absolute."""
    return os.path.abspath(prefix)


def registry_path(root: Path) -> Path:
    return root / STATE / CONFIGS_FILE


def read_registry(root: Path) -> dict[str, dict[str, Any]]:
    """The workdir's configurations, by prefix; {} for a new workdir or one of an earlier
    rocbuild (and for an unreadable file: the first configuration then lives in the root,
    as it did before the registry existed)."""
    doc = read_json(registry_path(root)) or {}  # only a regular file: a FIFO never blocks
    configs = doc.get("configurations")
    if not isinstance(configs, dict):
        return {}
    return {k: v for k, v in configs.items()
            if isinstance(v, dict) and isinstance(v.get("dir"), str)}


def stack_name_of(recipes: Path) -> str | None:
    """The name of the stack in the recipes folder (stack.toml's ``[stack] name``), which a
    workdir's records are kept by; None when the folder cannot be read (its refusal comes
    when the stack is loaded)."""
    from rocbuild.model.recipes import load_stack_spec  # the recipes' modules: only here

    try:
        return load_stack_spec(recipes).name
    except (ConfigError, OSError):
        return None


def same_stack(entry: dict[str, Any], stack: str | None, recipes: Path) -> bool:
    """Whether a workdir's record (a configuration of configs.json, the remembered base) is
    of this stack: the default workdir is shared by every stack a user builds, and what the
    last build of another stack did says nothing of this one. By the stack's name (an
    upgrade of rocbuild moves the shipped recipes, not the stack); a record of an earlier
    rocbuild by its recipes folder, or, naming neither, of any stack (it is adopted)."""
    if isinstance(entry.get("stack"), str):
        return stack is None or entry["stack"] == stack
    if isinstance(entry.get("recipes"), str):
        return os.path.abspath(entry["recipes"]) == os.path.abspath(recipes)
    return True


def made_by_rocbuild(root: Path) -> bool:
    """``root`` is a workdir a build has used: its state holds the list of configurations
    (every build's preflight writes it) or step stamps (a workdir of a rocbuild before that
    list). `clean` removes nothing from any other folder (a user's own project may have
    ``src/`` and ``build/`` too). The run lock alone proves nothing (`clean` itself takes it)."""
    state = root / STATE
    return _is(state / CONFIGS_FILE, stat.S_ISREG) or _is(state / "stamps", stat.S_ISDIR)


def _is(path: Path, kind: Callable[[int], bool]) -> bool:
    try:
        return kind(os.lstat(path).st_mode)
    except OSError:
        return False


def config_dir_name(root: Path, prefix: Path) -> str:
    """The folder (relative to the workdir) of the configuration building into ``prefix``:
    its recorded folder, else the workdir itself while no configuration holds it, else
    ``configs/<hash>``."""
    registry = read_registry(root)
    key = prefix_key(prefix)
    if key in registry:
        return str(registry[key]["dir"])
    if not any(entry["dir"] == ROOT_CONFIG for entry in registry.values()):
        return ROOT_CONFIG
    return f"{CONFIGS_DIR}/{hashlib.sha256(key.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class Workdir:
    """Every path rocbuild uses in a workdir, for one configuration (``config``: its folder,
    the workdir itself or ``configs/<hash>``)."""

    root: Path
    config: Path

    @classmethod
    def shared(cls, root: Path) -> Workdir:
        """For the parts every configuration shares (no configuration is meant)."""
        return cls(root, root)

    @classmethod
    def for_prefix(cls, root: Path, prefix: Path) -> Workdir:
        name = config_dir_name(root, prefix)
        return cls(root, root if name == ROOT_CONFIG else root / name)

    @property
    def is_root_config(self) -> bool:
        return self.config == self.root

    # --- shared by every configuration --------------------------------------------------
    @property
    def src(self) -> Path:
        return self.root / "src"

    def checkout(self, owner: str) -> Path:
        return self.src / owner

    @property
    def caches(self) -> Path:
        return self.root / "cache"

    @property
    def git_cache(self) -> Path:
        return self.caches / "git"

    @property
    def ccache(self) -> Path:
        return self.caches / "ccache"

    @property
    def artifacts(self) -> Path:
        """Binary-cache artifacts downloaded from a remote store."""
        return self.caches / "artifacts"

    @property
    def push_staging(self) -> Path:
        return self.caches / "push"

    @property
    def venv(self) -> Path:
        """The build venv rocbuild manages for the recipes' Python needs (never the system's)."""
        return self.root / "venv"

    @property
    def wheels(self) -> Path:
        """Wheels fetched ahead for builds that pip-install by themselves (rocBLAS' Tensile)."""
        return self.root / "wheels"

    def saved(self, checkout: str) -> Path:
        """Where a checkout with the user's edits is kept before a fetch replaces it."""
        return self.root / "saved" / checkout

    @property
    def state(self) -> Path:
        """The shared state: lock, running processes, caps, base memo, source stamps."""
        return self.root / STATE

    @property
    def lock(self) -> Path:
        return self.state / "lock"

    @property
    def trash(self) -> Path:
        """Where `clean` moves what it removes first (run/state/trash.py), so a kill leaves
        each folder whole or gone, never half of a checkout."""
        return self.state / "trash"

    @property
    def running(self) -> Path:
        return self.state / "running"

    @property
    def steps_running(self) -> Path:
        return self.state / "steps-running"

    def caps(self, name: str) -> Path:
        return self.state / "caps" / f"{name}.json"

    @property
    def base_memo(self) -> Path:
        return self.state / "base.json"

    @property
    def code_memo(self) -> Path:
        """What the base audit read of each base library, by file identity (codeaudit.py)."""
        return self.state / "code-audit.json"

    @property
    def probes(self) -> Path:
        """The kept answers of host probes (proc.run_probe: tool versions, dpkg-query)."""
        return self.state / "probes.json"

    @property
    def registry(self) -> Path:
        return registry_path(self.root)

    # --- per configuration --------------------------------------------------------------
    @property
    def config_state(self) -> Path:
        return self.config / STATE

    @property
    def builds(self) -> Path:
        return self.config / "build"

    def build_dir(self, component: str) -> Path:
        return self.builds / component

    def _holder(self, step: str) -> Path:
        """Where a step's stamp and log live: shared for the source steps."""
        return self.root if step in SHARED_STEPS else self.config

    def stamp(self, component: str, step: str) -> Path:
        return self._holder(step) / STATE / "stamps" / component / f"{step}.json"

    def attempts(self, component: str, step: str) -> Path:
        """The time of a step's attempts that did not finish (failed, interrupted, killed)
        since its last success: its next stamp adds them up (run/state/state.py)."""
        return self._holder(step) / STATE / "attempts" / component / f"{step}.json"

    @property
    def failures(self) -> Path:
        """This configuration's failure records, one per component (or run-wide step)."""
        return self.config_state / "failures"

    def failure(self, component: str) -> Path:
        return self.failures / f"{component}.json"

    def log(self, folder: str, step: str, name: str | None = None) -> Path:
        """``logs/<folder>/<name or step>.log``: of the workdir for a source step, else of
        the configuration."""
        return self._holder(step) / "logs" / folder / f"{name or step}.log"

    def logs(self, component: str) -> list[Path]:
        """The log folders of a component (shared first, then this configuration's)."""
        folders = [self.root / "logs" / component, self.config / "logs" / component]
        return folders[:1] if self.is_root_config else folders

    @property
    def doit_db(self) -> Path:
        return self.config_state / "doit.sqlite"

    @property
    def last_build(self) -> Path:
        return self.config_state / "last-build.json"

    @property
    def verify_record(self) -> Path:
        return self.config_state / "verify.json"
