"""Everything that shapes an output's key, in one place: a component's fingerprint (its stamps'
input: a new one builds it and all after it again; build-info keeps it) and the binary cache's
artifact key. Values that change only the speed (job counts, compiler launchers) are in
neither. Pure functions of the rendered Stack: the CPU is passed in (the model reads no host).

The artifact key hashes named inputs: the portable fingerprint (the fingerprint with the
prefix and workdir paths taken out: equal on two machines that build the same recipes into
other folders), the configure command rocbuild runs (the same way), the GPU targets, the CPU
architecture and the artifact format. All are known from the recipes alone, so an --offline
machine with an empty source cache can look its artifacts up before fetching anything. For a
ref that is a tag or a full commit, url + ref name one source tree and the rest of what shapes
the output is in the fingerprint: two builds with equal keys are the same build, as far as
rocbuild's own stamps can tell (the host's compilers are outside both, as for a rebuild).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rocbuild.errors import redact
from rocbuild.model import buildsystems

if TYPE_CHECKING:  # graph renders components with this module; only the types are needed
    from rocbuild.model.graph import Component, Stack

ARTIFACT_FORMAT = 1  # the artifact manifest's format (run/cache/artifacts.py), in every key


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def portable_text(stack: Stack, text: str) -> str:
    """``text`` with the workdir and prefix paths as placeholders: what two machines that
    build the same thing into other folders have in common (the binary cache's key)."""
    # a configuration's own folder in the workdir counts as the workdir: a prefix built as
    # a workdir's second configuration has the key of the same build as its first
    places = {str(stack.work.config): "<workdir>", str(stack.workdir): "<workdir>",
              str(stack.prefix): "<prefix>"}
    for path in sorted(places, key=len, reverse=True):  # one folder may hold the other
        text = text.replace(path, places[path])
    return text


def fingerprints(stack: Stack, comp: Component, subdir: str,
                 deps: Mapping[str, Component]) -> tuple[str, str]:
    """(fingerprint, portable fingerprint) of the rendered ``comp``: its source, arguments,
    environment, install tables, Python needs, patches, prefix, the base it builds on and,
    recursively, the same fingerprint of each dependency (``deps``: by name)."""
    recipe = comp.recipe
    # "cmake_args" is the key earlier rocbuilds hashed (Component.build_args today): renamed,
    # every stamp and artifact key would change and everything would be built again; a URL's
    # password is a credential, not a source: out (errors.redact)
    doc: dict[str, Any] = {
        "name": recipe.name, "kind": recipe.kind, "url": redact(comp.url) if comp.url else comp.url,
        "ref": comp.ref, "submodules": comp.submodules, "checkout": comp.checkout,
        "subdir": subdir, "cmake_args": comp.build_args, "build_type": comp.build_type,
        "env": comp.env, "prefix": str(stack.prefix), "install_prefix": str(comp.install_prefix),
        "install_links": comp.install_links, "install_files": comp.install_files,
        "python": [recipe.python_packages, recipe.python_wheels],
        "patches": [(p.path.name, p.sha256) for p in comp.patches],
        "deps": {d: deps[d].fingerprint for d in comp.depends},
    }
    if stack.base is not None:  # what is taken from it shapes every output built on it
        doc["base"] = stack.base.key()
    portable = portable_text(stack, json.dumps(
        {**doc, "deps": {d: deps[d].portable_fingerprint for d in comp.depends}},
        sort_keys=True))
    return sha256_text(json.dumps(doc, sort_keys=True)), sha256_text(portable)


def command_key(stack: Stack, comp: Component, portable: bool = False) -> str:
    """The configure command as an input: the arguments rocbuild adds (generator, prefix,
    RUNPATH) change the result as much as the recipe's, so a new rule in rocbuild
    reconfigures; the job counts and the compiler launchers are left out (they change only
    the speed). ``portable``: with the prefix and workdir paths taken out (the cache's)."""
    text = buildsystems.configure_key(stack, comp)
    return sha256_text(portable_text(stack, text) if portable else text)


def artifact_inputs(stack: Stack, comp: Component, machine: str) -> dict[str, Any]:
    """The named inputs the artifact key hashes (the module says why these); ``machine``:
    the CPU architecture (``platform.machine()`` of the host that builds or installs)."""
    return {"recipe": comp.portable_fingerprint,
            "command": command_key(stack, comp, portable=True) if comp.builds else None,
            "targets": [str(t) for t in stack.targets], "machine": machine,
            "format": ARTIFACT_FORMAT}


def artifact_key(inputs: dict[str, Any]) -> str:
    return sha256_text(json.dumps(inputs, sort_keys=True))
