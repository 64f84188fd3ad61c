"""`rocbuild cache push [COMPONENT...] --to DIR|oci://… [--sign KEY]`, `cache list`, `cache
prune` and `cache keys new/list/trust`: store built components in a binary cache, see and trim
what a cache holds, and manage the keys that sign artifacts (cache.py has the rules,
signing.py the keys)."""

from __future__ import annotations

import argparse
import datetime
import shutil
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from rocbuild.cli.output import FittedOutput, Output
from rocbuild.cli.ui import console, print_json, print_row
from rocbuild.errors import BuildFailed, ConfigError
from rocbuild.model import wording
from rocbuild.model.graph import Component, load_stack
from rocbuild.model.resources import format_bytes
from rocbuild.model.settings import Settings
from rocbuild.model.steptable import steps_of
from rocbuild.run.cache import cache, cache_prune, signing, stores
from rocbuild.run.cache.artifacts import ArtifactRefused, Manifest
from rocbuild.run.cache.cache_store import CacheUnavailable, ProgressLine
from rocbuild.run.engine import continuation
from rocbuild.run.engine.build import BuildContext


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "cache", parents=parents, help="store built components in a binary cache, list one",
        description="A binary cache holds built components (their installed files and a "
                    "manifest) so other machines install them instead of building: "
                    "`rocbuild build --cache DIR_OR_URL`.")
    actions = parser.add_subparsers(dest="cache_command", metavar="ACTION")
    actions.required = True
    push = actions.add_parser(
        "push", parents=parents, help="store built components in a cache folder",
        description="Pack each built component (default: the whole stack) and store it in a "
                    "cache folder; serve that folder over HTTP for machines without the mount.")
    push.add_argument("components", nargs="*", metavar="COMPONENT",
                      help="components to store (default: every built one of the stack)")
    push.add_argument("--to", metavar="DIR_OR_OCI", default=None,
                      help="the cache folder or oci://REGISTRY/NAMESPACE/NAME (default: the "
                           "cache setting, when it is one of those)")
    push.add_argument("--sign", metavar="KEY", default=None,
                      help="sign each artifact's manifest with this key: a name from `cache "
                           "keys new`, or an OpenSSH private key such as ~/.ssh/id_ed25519")
    push.set_defaults(func=run_push)
    listing = actions.add_parser("list", parents=parents, help="list what a cache holds",
                                 description="List the artifacts of a cache: a folder, an "
                                             "HTTP URL or an oci:// repository (the argument, "
                                             "else --cache).")
    _cache_argument(listing)
    listing.add_argument("--json", action="store_true", help="print a JSON document")
    listing.set_defaults(func=run_list)
    prune = actions.add_parser(
        "prune", parents=parents, help="remove old or unused artifacts from a cache",
        description="Remove artifacts from a cache (a folder or an oci:// repository: the "
                    "argument, else --cache) that match any of the rules given. A registry "
                    "frees the "
                    "space when its own garbage collection runs.")
    _cache_argument(prune)
    prune.add_argument("--older-than", metavar="DAYS", type=float, default=None,
                       help="artifacts stored more than DAYS days ago")
    prune.add_argument("--keep", metavar="N", type=int, default=None,
                       help="all but the newest N artifacts of each component")
    prune.add_argument("--unused", action="store_true",
                       help="artifacts whose key the current recipes (with these settings: "
                            "targets, CPU) no longer produce")
    prune.add_argument("--dry-run", action="store_true",
                       help="only print what would be removed")
    prune.set_defaults(func=run_prune)
    keys = actions.add_parser("keys", parents=parents, help="keys that sign artifacts",
                              description="Make signing keys, list them, and trust the keys "
                                          "of others (OpenSSH keys; the trusted ones are "
                                          "in an allowed_signers file).")
    key_actions = keys.add_subparsers(dest="keys_command", metavar="ACTION")
    key_actions.required = True
    new = key_actions.add_parser("new", parents=parents, help="make an Ed25519 signing key",
                                 description="Make an Ed25519 key pair for `cache push --sign "
                                             "NAME` (trusted on this machine at once).")
    new.add_argument("name", metavar="NAME")
    new.set_defaults(func=run_keys_new)
    key_list = key_actions.add_parser("list", parents=parents,
                                      help="list own keys and trusted keys")
    key_list.set_defaults(func=run_keys_list)
    trusting = key_actions.add_parser(
        "trust", parents=parents, help="trust a public key's signatures",
        description="Accept artifacts signed by this key: a .pub file or a public key line "
                    "('ssh-ed25519 AAAA… comment').")
    trusting.add_argument("key", metavar="PUBKEY")
    trusting.add_argument("--name", default=None,
                          help="the name to show for this signer (default: the key's comment "
                               "or file name)")
    trusting.set_defaults(func=run_keys_trust)


def run_push(args: argparse.Namespace, settings: Settings) -> int:
    target = args.to or settings.cache
    if not target:
        raise ConfigError("cache push needs a folder or a registry: --to DIR_OR_OCI",
                          tip="rocbuild cache push --to /srv/rocbuild-cache, or --to "
                              "oci://ghcr.io/me/rocm-gfx906")
    store = stores.open_writer(target, "push to")
    key_file = signing.key_path(args.sign) if args.sign else None
    stack = load_stack(settings, args.components)
    # plain lines in a pipe; on a terminal fitted to its width, never cut inside a word
    output = FittedOutput(sys.stdout) if sys.stdout.isatty() else Output(sys.stdout)
    ctx = BuildContext.start(stack=stack, settings=settings, output=output)
    wanted = args.components or list(stack.order)
    comps = [stack.components[n] for n in stack.order if n in wanted]
    staging = stack.work.push_staging
    failed = 0
    missing: list[Component] = []
    ctx.ensure_ready()  # the workdir and prefix locks: nobody installs while the prefix is read
    for path in store.clear_temps():  # what a killed push left there
        ctx.output.say(f"removed a temp file a killed push left in the cache: {path}")
    # the default is "every built one": a component the workdir never built (no stamp of its
    # last step) is named once below, not a failure, unless nothing at all is built (then
    # each is a ✘ and the TIP gives the one build command). A named one must be built, and a
    # built one changed since (its last stamp stale) fails: its files are not what its key says.
    own = [c for c in comps if steps_of(c)]
    unbuilt = {c.name for c in own if ctx.state.read_stamp(c.name, steps_of(c)[-1]) is None}
    if args.components or len(unbuilt) == len(own):
        unbuilt = set()
    try:
        for comp in comps:
            steps = steps_of(comp)
            if not steps or comp.name in unbuilt:  # nothing of its own, or not built
                continue
            if not all(ctx.is_current(comp, step) for step in steps):
                done = "fetched" if not comp.builds else "built"
                ctx.output.say(f"✘ {comp.name}: not {done}, or changed since it was {done}")
                missing.append(comp)
                failed += 1
                continue
            key = cache.component_key(stack, comp)
            try:
                try:
                    existing = store.read_manifest(comp.name, key)
                except ArtifactRefused:
                    existing = None  # a damaged manifest there: this push replaces it
                if existing is not None:
                    _already(ctx, store, comp.name, key, existing, key_file)
                    continue
                manifest, archive = cache.make_artifact(
                    stack, ctx.state, comp, staging,
                    ProgressLine(ctx.output.say, f"{comp.name}: packing"))
                signature = signing.sign(manifest.to_json(), key_file) if key_file else None
                store.push(manifest, archive, ProgressLine(ctx.output.say,
                                                           f"{comp.name}: storing"),
                           signature=signature)
            except (BuildFailed, CacheUnavailable) as exc:
                ctx.output.say(f"✘ {exc}" + (f"\n  TIP: {exc.tip}" if exc.tip else ""))
                failed += 1
                continue
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            signed = f", signed by {signing.key_name(signature)}" if signature else ", unsigned"
            if not comp.builds:  # no files: the record that lets its users come from the cache
                ctx.output.say(f"✔ {comp.name}: source only, no files: the record of commit "
                               f"{(manifest.commit or '?')[:12]} that lets what reads it be "
                               f"installed without its source ({key[:12]}{signed})")
                continue
            ctx.output.say(f"✔ {comp.name}: {wording.count(len(manifest.files), 'file')}, "
                           f"{format_bytes(manifest.size)} packed to "
                           f"{format_bytes(manifest.archive_size)} ({key[:12]}{signed})")
    finally:
        ctx.release()
    # source-only ones are left out of both lines: the build of what uses them fetches them
    shown = [c.name for c in own if c.name in unbuilt and c.builds]
    if shown:
        ctx.output.say(f"not built, so not stored: {', '.join(shown)}")
    if missing:  # one command for all of them, with this run's flags
        names = [c.name for c in missing if c.builds] or [c.name for c in missing]
        ctx.output.say("TIP: build them first, then push again: "
                       + continuation.fallback(settings, names))
    return 1 if failed else 0


def _already(ctx: BuildContext, store: stores.WriteStore, name: str,
             key: str, existing: dict[str, Any], key_file: Any) -> None:
    """An artifact that is in the store already: signed now when --sign is given and it has
    no signature yet (one that has one keeps it: its signer made it)."""
    signature = store.read_signature(name, key)
    if key_file is None or signature:
        how = f"signed by {signing.key_name(signature)}" if signature else "unsigned"
        ctx.output.say(f"= {name}: already in {store.location} ({key[:12]}, {how})")
        return
    try:
        manifest = Manifest.from_json(existing)
    except ArtifactRefused as exc:
        raise BuildFailed(f"{name}: the artifact in {store.location} is unreadable: {exc}",
                          tip="remove it (`rocbuild cache prune`) and push again") from None
    if manifest.to_json() != existing:
        raise BuildFailed(f"{name}: the artifact in {store.location} was written by another "
                          "rocbuild version; it is not signed here",
                          tip="remove it and push again")
    signature = signing.sign(existing, key_file)
    store.write_signature(manifest, signature)
    ctx.output.say(f"✔ {name}: already in {store.location} ({key[:12]}), now signed by "
                   f"{signing.key_name(signature)}")


def _when(created: Any) -> str:
    try:
        return datetime.datetime.fromtimestamp(float(created)).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def _cache_argument(parser: argparse.ArgumentParser) -> None:
    """``cache list DIR``: the cache as an argument, the same as ``--cache DIR``
    (main.positional_settings)."""
    parser.add_argument("cache_at", nargs="?", metavar="CACHE", default=None,
                        help="the cache: a folder, an http(s):// URL or "
                             "oci://REGISTRY/NAMESPACE/NAME (default: --cache)")
    parser.set_defaults(setting_args={"cache_at": "cache"})


def run_list(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.cache:
        raise ConfigError("cache list needs a cache: a folder, URL or oci:// reference "
                          "(or --cache, ROCBUILD_CACHE)",
                          tip="rocbuild cache list /srv/rocbuild-cache")
    store = stores.open_reader(settings.cache)
    # anyone who may write the store writes its index: an entry that is not a table is
    # none, and a field of the wrong type is shown as text (a signature is checked on install)
    entries = [e for e in store.index() if isinstance(e, dict)]
    if args.json:
        print_json({"cache": store.location, "artifacts": entries})
        return 0
    out = console()
    if not entries:
        out.print(f"{escape(store.location)}: no artifacts")
        return 0
    trusted = {s.fingerprint: s.principal
               for s in signing.read_signers(signing.signers_file())}
    out.print(f"{escape(store.location)}: {wording.count(len(entries), 'artifact')}")
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("component", "key", "targets", "size", "download", "signer", "stored"):
        table.add_column(column, no_wrap=column != "component")
    signers: dict[str, str] = {}  # fingerprint -> how the table names it, told once below
    for e in entries:
        fingerprint = str(e.get("signer") or "")
        signer = signers.get(fingerprint) or _signer(fingerprint, trusted, len(signers) + 1)
        if fingerprint:
            signers[fingerprint] = signer
        targets = e.get("targets", [])
        table.add_row(escape(str(e.get("component"))), escape(str(e.get("key", ""))[:12]),
                      escape(",".join(map(str, targets)) if isinstance(targets, list)
                             else str(targets)),
                      format_bytes(_size(e.get("size"))),
                      format_bytes(_size(e.get("archive_size"))),
                      escape(signer), escape(_when(e.get("created"))[:10]))
    out.print(table)
    for fingerprint, signer in signers.items():  # the fingerprints, whole, for comparing
        out.print(f"  {escape(signer)} ({escape(fingerprint)})", soft_wrap=True)
    return 0


def _size(value: Any) -> float:
    """An index entry's size in bytes; 0 for anything that is not a number."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 0.0


def _signer(fingerprint: str, trusted: dict[str, str], number: int) -> str:
    """Who signed, as the index says (the signature itself is checked on install): the
    trusted name, "untrusted key N" (its fingerprint is listed below the table), or
    "unsigned"."""
    return (trusted.get(fingerprint) or f"untrusted key {number}") if fingerprint else "unsigned"


def _open_for_prune(settings: Settings) -> stores.WriteStore:
    if not settings.cache:
        raise ConfigError("cache prune needs a cache: a folder or oci:// reference (or "
                          "--cache, ROCBUILD_CACHE)",
                          tip="rocbuild cache prune /srv/rocbuild-cache --keep 2")
    return stores.open_writer(settings.cache, "prune")


def run_prune(args: argparse.Namespace, settings: Settings) -> int:
    if args.keep is not None and args.keep < 1:
        raise ConfigError(f"--keep {args.keep}: keep at least 1 artifact per component",
                          tip="to empty the cache, remove its folder or repository")
    if args.older_than is not None and args.older_than < 0:
        raise ConfigError(f"--older-than {args.older_than}: days cannot be negative",
                          tip="e.g. --older-than 30")
    wanted = None
    if args.unused:
        stack = load_stack(settings)
        wanted = {cache.component_key(stack, stack.components[n]) for n in stack.order}
    rules = cache_prune.Rules(args.older_than, args.keep, wanted)
    if not rules.any:
        raise ConfigError("cache prune needs a rule: --older-than DAYS, --keep N or --unused",
                          tip="rocbuild cache prune --keep 2 --dry-run")
    store = _open_for_prune(settings)
    chosen = cache_prune.select(store.index(), rules)
    out = console()
    verb = "would remove" if args.dry_run else "removing"
    for entry, why in chosen:
        out.print(f"{verb} {escape(str(entry.get('component')))} "
                  f"{str(entry.get('key', ''))[:12]} "
                  f"({format_bytes(float(entry.get('archive_size', 0)))}, "
                  f"{_when(entry.get('created'))}): {escape(why)}")
    total = sum(float(e.get("archive_size", 0)) for e, _ in chosen)
    if args.dry_run or not chosen:
        out.print(f"{len(chosen)} artifact(s), {format_bytes(total)}"
                  + (" (dry run: nothing removed)" if args.dry_run else ": nothing to remove"))
        return 0
    problems = store.remove([e for e, _ in chosen])
    for problem in problems:
        out.print(f"✘ {escape(problem)}")
    out.print(f"removed {len(chosen) - len(problems)} artifact(s), {format_bytes(total)} from "
              f"{escape(store.location)}")
    return 1 if problems else 0


def run_keys_new(args: argparse.Namespace, settings: Settings) -> int:
    path = signing.new_key(args.name)
    public = path.with_name(path.name + ".pub")
    out = console()
    out.print(f"made the key {escape(str(path))} (trusted on this machine)")
    out.print("sign with:", soft_wrap=True)  # commands to paste: each a whole line
    out.print(f"  rocbuild cache push --sign {escape(args.name)} --to …", soft_wrap=True)
    out.print("on the machines that install, trust it:")
    out.print(f"  rocbuild cache keys trust {escape(str(public))}", soft_wrap=True)
    out.print("public key:")
    out.print(f"  {escape(public.read_text().strip())}", soft_wrap=True)
    return 0


def run_keys_list(args: argparse.Namespace, settings: Settings) -> int:
    out = console()
    own = sorted(p for p in signing.keys_dir().glob("*.pub"))
    out.print(f"own keys ({escape(str(signing.keys_dir()))}):" if own else
              "own keys: none (`rocbuild cache keys new NAME`)")
    for pub in own:
        try:
            _, blob, _ = signing.parse_public_key(pub.read_text())
            fp = signing.Signer("", "", blob).fingerprint
        except (OSError, ValueError):
            fp = "unreadable"
        print_row(out, f"  {escape(pub.stem):<20} {fp}", 23)
    signers = signing.read_signers(signing.signers_file())
    out.print(f"trusted signers ({escape(str(signing.signers_file()))}):" if signers else
              f"trusted signers: none ({escape(str(signing.signers_file()))})")
    for s in signers:
        # the type with the name, the fingerprint in its column
        print_row(out, f"  {escape(s.principal):<20} {escape(s.key_type)} {s.fingerprint}", 23)
    return 0


def run_keys_trust(args: argparse.Namespace, settings: Settings) -> int:
    text, default_name = args.key, ""
    path = Path(args.key).expanduser()
    if not args.key.startswith(("ssh-", "ecdsa-", "sk-")):
        if not path.is_file():
            raise ConfigError(f"{args.key}: no such public key file",
                              tip="give a .pub file or a line 'ssh-ed25519 AAAA… name'")
        text, default_name = path.read_text(), path.name.removesuffix(".pub")
    try:
        _, _, comment = signing.parse_public_key(text)
    except ValueError as exc:
        raise ConfigError(f"{args.key}: {exc}",
                          tip="give a .pub file or a line 'ssh-ed25519 AAAA… name'") from None
    name = args.name or _as_name(comment) or default_name or "signer"
    signer = signing.trust(text, name)
    console().print(f"trusted {escape(signer.principal)} ({signer.fingerprint}) in "
                    f"{escape(str(signing.signers_file()))}")
    return 0


def _as_name(comment: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "._@-" else "-" for c in comment.strip())
    return cleaned.strip("-.")[:64]
