"""Whether an artifact may be installed instead of a build, and how (the same prefix, or
relocated): its signature first (whose keys this user trusts, Trust), then its manifest
against this build's key inputs, the commit fetched here, the branch rule (cache.py) and
rocbuild's own files in the prefix. Only the manifest and its signature are read; the archive
is checked file by file when it is installed (unpack.py)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild.checks.trust import host_trust
from rocbuild.errors import notice
from rocbuild.model import layout
from rocbuild.model.fingerprint import artifact_key
from rocbuild.model.graph import Component, Stack
from rocbuild.model.resources import format_bytes
from rocbuild.run.cache import artifacts, signing
from rocbuild.run.cache.artifacts import ArtifactRefused, Manifest
from rocbuild.run.cache.cache import PINNED_KINDS, artifact_inputs, source_commit
from rocbuild.run.cache.stores import ReadStore
from rocbuild.run.state.state import StateDir

# plan/--json words for what the cache does with a component
FROM_CACHE, RELOCATE, NO_ARTIFACT, REFUSED = "from cache", "from cache, relocated", "", "refused"


@dataclass(frozen=True)
class Trust:
    """Whose signatures this user accepts (an OpenSSH allowed_signers file, signing.py) and
    whether an unsigned or untrusted artifact may be installed anyway (--allow-unsigned). A
    signature that does not verify is refused either way: it means the manifest changed."""

    allowed: Path
    allow_unsigned: bool = False
    refused: str = ""  # why ``allowed`` is not used: others could write it (model/trust.py)

    @classmethod
    def default(cls, allow_unsigned: bool = False) -> Trust:
        """This user's trust list, used only when nobody else could have written it: a
        signer list another user can change makes their artifacts install as this user
        (root, with a home folder's XDG_CONFIG_HOME of theirs)."""
        allowed = signing.signers_file()
        why = host_trust(os.environ).why_not(allowed)
        if why is None:
            return cls(allowed, allow_unsigned)
        refused = (f"{allowed} is not used: {why}; the keys you trust must be yours alone "
                   "(chown, chmod go-w)")
        _warn_once(refused)
        return cls(allowed, allow_unsigned, refused)

    @property
    def signers(self) -> Path | None:
        """The allowed_signers file to check against; None when it is not used."""
        return None if self.refused else self.allowed


@functools.cache
def _warn_once(text: str) -> None:
    notice(f"rocbuild: warning: {text}")


ALLOW_UNSIGNED_TIP = ("trust the signer's key with `rocbuild cache keys trust KEY.pub`, or "
                      "give --allow-unsigned")
# an artifact without a signature has no signer to trust: it is signed when pushed
UNSIGNED_TIP = ("push it signed (`rocbuild cache push --sign NAME`, with a key of `rocbuild "
                "cache keys new NAME` that this machine trusts), or give --allow-unsigned")


@dataclass(frozen=True)
class Choice:
    """What the cache offers for one component: ``use`` is FROM_CACHE or RELOCATE when the
    artifact may be installed, else NO_ARTIFACT or REFUSED with ``reason``."""

    component: str
    key: str
    use: str
    reason: str = ""
    manifest: Manifest | None = None
    source_only: bool = False  # then "fetched", not "built", without the cache
    location: str = ""  # the store's
    signed: str = ""  # "signed by NAME (SHA256:…)", or why it is installed unsigned

    @property
    def usable(self) -> bool:
        return self.use in (FROM_CACHE, RELOCATE)

    @property
    def download(self) -> int:
        return self.manifest.archive_size if self.manifest and self.usable else 0

    def describe(self) -> str:
        """One line for plan."""
        if self.usable:
            assert self.manifest is not None
            where = (f" ({self.location}, {self.signed}, "
                     f"{format_bytes(self.manifest.archive_size)})")
            if self.use == FROM_CACHE:
                return "from cache" + where
            return f"from cache, relocated from {self.manifest.prefix}" + where
        otherwise = "fetched" if self.source_only else "built"
        if self.use == REFUSED:
            return f"cache refused: {self.reason}; {otherwise} instead"
        return f"not in the cache: {otherwise}"


def _differences(have: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [f"{name} (artifact: {have.get(name)!r}, this build: {want.get(name)!r})"
            for name in sorted(set(have) | set(want)) if have.get(name) != want.get(name)]


def check_signature(store: ReadStore, doc: dict[str, Any], component: str, key: str,
                    trust: Trust) -> tuple[str, str]:
    """(why the artifact is refused or "", how it is signed) for its manifest ``doc``: the
    check that comes before anything of the artifact is used."""
    verdict = signing.verify(doc, store.read_signature(component, key), trust.signers)
    if verdict.good:
        return "", f"signed by {verdict.who()}"
    if verdict.state == signing.BAD:
        return verdict.reason, ""
    if trust.allow_unsigned:
        return "", ("unsigned" if verdict.state == signing.UNSIGNED
                    else f"untrusted key {verdict.key}") + ", allowed by --allow-unsigned"
    tip = UNSIGNED_TIP if verdict.state == signing.UNSIGNED else ALLOW_UNSIGNED_TIP
    if trust.refused and verdict.state == signing.UNTRUSTED:
        return f"{verdict.reason} ({trust.refused})", ""
    return f"{verdict.reason}; {tip}", ""


def choose(store: ReadStore, stack: Stack, state: StateDir, comp: Component,
           trust: Trust | None = None) -> Choice:
    """Whether the artifact for ``comp``'s key may be installed into this prefix. Reads only
    the manifest and its signature (checked first, against ``trust``); the archive itself is
    checked file by file against that manifest when it is installed."""
    trust = trust or Trust.default()
    inputs = artifact_inputs(stack, comp)
    key = artifact_key(inputs)

    def refuse(reason: str) -> Choice:
        return Choice(comp.name, key, REFUSED, reason, source_only=not comp.builds,
                      location=store.location)

    try:
        doc = store.read_manifest(comp.name, key)
    except ArtifactRefused as exc:  # one damaged manifest: only this component is built
        return refuse(str(exc))
    if doc is None:
        return Choice(comp.name, key, NO_ARTIFACT, source_only=not comp.builds)
    refused, signed = check_signature(store, doc, comp.name, key, trust)
    if refused:
        return refuse(refused)

    try:
        manifest = Manifest.from_json(doc)
        if manifest.component != comp.name or manifest.key != key:
            return refuse(f"its manifest names {manifest.component} {manifest.key[:12]}")
        if artifact_key(dict(manifest.inputs)) != key or manifest.inputs != inputs:
            differ = _differences(dict(manifest.inputs), inputs)
            return refuse("its inputs do not match this build's: " + ", ".join(differ or
                          ["the recorded inputs do not hash to the key"]))
        if manifest.ref_kind not in PINNED_KINDS:
            return refuse(f"it was built from a branch (ref kind '{manifest.ref_kind}')")
        fetched = source_commit(state, comp)
        if fetched is not None and fetched != manifest.commit:
            return refuse(f"it was built from commit {manifest.commit[:12]} but the source here "
                          f"is {fetched[:12]}")
        artifacts.check_entries(manifest.files, manifest.prefix)
        reserved = layout.reserved_roots(stack.recipes.stack.name)
        for entry in manifest.files:
            if layout.reserved_by(entry.path, reserved):
                return refuse(f"it holds {entry.path}, one of rocbuild's own files in the "
                              "prefix")
    except ArtifactRefused as exc:
        return refuse(str(exc))
    if manifest.prefix == str(stack.prefix):
        return Choice(comp.name, key, FROM_CACHE, manifest=manifest, location=store.location,
                      signed=signed)
    problems = artifacts.relocation_problems(manifest.files, manifest.prefix)
    if problems:
        return refuse(f"it was built for the prefix {manifest.prefix} and cannot be relocated "
                      f"to {stack.prefix}: {problems[0]}"
                      + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return Choice(comp.name, key, RELOCATE, manifest=manifest, location=store.location,
                  signed=signed)
