"""Signatures over artifact manifests, made and checked with OpenSSH's ``ssh-keygen -Y``.

Why OpenSSH rather than Ed25519 through the ``cryptography`` package: the keys are the ones
people already have and publish (``~/.ssh/id_ed25519``, the SSH keys GitHub lists for every
account), the signature is OpenSSH's documented SSHSIG format and the trust list is its
``allowed_signers`` file, the same one git uses for SSH-signed commits, so a team can reuse
theirs; a key in ssh-agent (passphrase, hardware token) signs without rocbuild ever reading
it; and rocbuild gains no Python dependency (``ssh-keygen`` ships with openssh-client, which
nearly every Linux box has). The price: one short ``ssh-keygen`` run per check.

What is signed: the manifest document in a canonical form (sorted keys, no spaces, ASCII),
under the namespace ``rocbuild-artifact`` (a signature made for git or anything else does
not verify here). The manifest pins the archive's sha256 and every file's, so a good
signature covers every byte that is installed. The check runs on the manifest that is then
used, before any archive is downloaded or unpacked.

Where keys live (``$XDG_CONFIG_HOME/rocbuild``, default ``~/.config/rocbuild``):

    keys/<name>, keys/<name>.pub     keys made by `rocbuild cache keys new NAME`
    allowed_signers                  the keys this user trusts (OpenSSH allowed_signers)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild import proc
from rocbuild.errors import BuildFailed, ConfigError
from rocbuild.model.settings import user_config_dir

NAMESPACE = "rocbuild-artifact"
SIGNERS_FILE = "allowed_signers"
KEYS_DIR = "keys"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
_TIMEOUT = 30.0

# verdicts: a good signature by a trusted key, none at all, one by a key not trusted here,
# one that does not verify (the manifest changed after signing, or it was made for another)
GOOD, UNSIGNED, UNTRUSTED, BAD = "good", "unsigned", "untrusted", "bad"


def signers_file(env: Mapping[str, str] | None = None) -> Path:
    return user_config_dir(os.environ if env is None else env) / SIGNERS_FILE


def keys_dir(env: Mapping[str, str] | None = None) -> Path:
    return user_config_dir(os.environ if env is None else env) / KEYS_DIR


def canonical(doc: Mapping[str, Any]) -> str:
    """The bytes a signature covers: one spelling of the document, whatever store kept it."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise ConfigError("ssh-keygen is not installed; it signs and checks binary cache "
                          "artifacts", tip="sudo apt-get install openssh-client (or give "
                          "--allow-unsigned to install unsigned artifacts)")
    return found


# --- reading an SSHSIG blob (to name the key when it is not trusted) ------------------------
@dataclass(frozen=True)
class SignatureInfo:
    key_type: str  # e.g. ssh-ed25519
    fingerprint: str  # SHA256:… as ssh-keygen -l prints it
    namespace: str


def _strings(blob: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(blob):
        if at + 4 > len(blob):
            raise ValueError("truncated")
        (n,) = struct.unpack(">I", blob[at:at + 4])
        at += 4
        if at + n > len(blob):
            raise ValueError("truncated")
        out.append(blob[at:at + n])
        at += n
    return out


def fingerprint(public_blob: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(public_blob).digest()).decode().rstrip("=")


def parse_signature(text: str) -> SignatureInfo:
    """The key and namespace of an armored SSH signature (PROTOCOL.sshsig). ValueError when
    it is not one."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    if len(lines) < 3 or lines[0] != "-----BEGIN SSH SIGNATURE-----" or \
            lines[-1] != "-----END SSH SIGNATURE-----":
        raise ValueError("not an armored SSH signature")
    try:
        blob = base64.b64decode("".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the signature is not valid base64") from None
    if not blob.startswith(b"SSHSIG") or len(blob) < 10:
        raise ValueError("not an SSHSIG blob")
    fields = _strings(blob[10:])  # after the magic and the uint32 version
    if len(fields) != 5:
        raise ValueError("an SSHSIG blob has five fields")
    public, namespace = fields[0], fields[1]
    key_type = _strings(public)[0].decode("ascii", "replace") if public else "?"
    return SignatureInfo(key_type, fingerprint(public), namespace.decode("utf-8", "replace"))


def key_of(signature: str | None) -> str:
    """The fingerprint of the key a signature names ("" for none or an unreadable one): what
    an index shows; trust is decided by ``verify`` alone."""
    if not signature:
        return ""
    try:
        return parse_signature(signature).fingerprint
    except ValueError:
        return ""


def key_name(signature: str | None) -> str:
    """The key a signature names, as users know it: "NAME (SHA256:…)", NAME being the
    trusted signer's or one of this user's own keys (`cache keys new NAME`); else the
    fingerprint alone ("" for none)."""
    fp = key_of(signature)
    if not fp:
        return ""
    names = [s.principal for s in read_signers(signers_file()) if s.fingerprint == fp]
    for pub in sorted(keys_dir().glob("*.pub")) if not names else ():
        try:
            if Signer("", "", parse_public_key(pub.read_text())[1]).fingerprint == fp:
                names.append(pub.stem)
        except (OSError, ValueError):
            continue
    return f"{names[0]} ({fp})" if names else fp


# --- the trust list --------------------------------------------------------------------------
@dataclass(frozen=True)
class Signer:
    """One line of allowed_signers."""

    principal: str
    key_type: str
    key: str  # base64 public key blob
    comment: str = ""

    @property
    def fingerprint(self) -> str:
        return fingerprint(base64.b64decode(self.key))


def read_signers(path: Path) -> list[Signer]:
    """The signers of an allowed_signers file (options such as namespaces= are skipped)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        rest = words[1:]
        while rest and not rest[0].startswith(("ssh-", "ecdsa-", "sk-")):
            rest = rest[1:]  # options: namespaces="…", cert-authority, valid-after=…
        if len(rest) >= 2:
            out.append(Signer(words[0], rest[0], rest[1], " ".join(rest[2:])))
    return out


def parse_public_key(text: str) -> tuple[str, str, str]:
    """(type, base64 blob, comment) of an OpenSSH public key line. ValueError if it is not."""
    words = text.strip().split()
    if len(words) < 2 or not words[0].startswith(("ssh-", "ecdsa-", "sk-")):
        raise ValueError("not an OpenSSH public key line ('ssh-ed25519 AAAA… comment')")
    try:
        blob = base64.b64decode(words[1], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the key is not valid base64") from None
    if _strings(blob)[0].decode("ascii", "replace") != words[0]:
        raise ValueError(f"the key data is not a {words[0]} key")
    return words[0], words[1], " ".join(words[2:])


def check_name(name: str, what: str = "key name") -> str:
    if not _NAME_RE.match(name):
        raise ConfigError(f"'{name}' is not a usable {what}",
                          tip="use letters, digits and . _ @ - (at most 64), starting with a "
                              "letter or digit")
    return name


def trust(public_line: str, name: str, env: Mapping[str, str] | None = None) -> Signer:
    """Add a public key to this user's allowed_signers, for rocbuild's namespace only."""
    key_type, key, comment = parse_public_key(public_line)
    path = signers_file(env)
    for signer in read_signers(path):
        if signer.key == key:
            return signer  # trusted already (under whatever name it was given)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = f'{check_name(name, "signer name")} namespaces="{NAMESPACE}" {key_type} {key}'
    with path.open("a") as f:
        f.write(line + (f" {comment}" if comment else "") + "\n")
    return Signer(name, key_type, key, comment)


# --- keys of one's own ---------------------------------------------------------------------
def key_path(ref: str, env: Mapping[str, str] | None = None) -> Path:
    """The private key a --sign value names: a name made by `cache keys new`, or a path to
    any OpenSSH private key (~/.ssh/id_ed25519; a .pub when the key is in ssh-agent)."""
    own = keys_dir(env) / ref
    if "/" not in ref and own.is_file():
        return own
    path = Path(os.path.expanduser(ref))
    if path.is_file():
        return path.absolute()
    made = sorted(p.name for p in keys_dir(env).glob("*") if p.suffix != ".pub")
    raise ConfigError(f"--sign {ref}: no such key (neither a file nor one of "
                      f"{keys_dir(env)}: {', '.join(made) or 'none yet'})",
                      tip="make one with `rocbuild cache keys new NAME`, or give the path of "
                          "an OpenSSH private key such as ~/.ssh/id_ed25519")


def new_key(name: str, env: Mapping[str, str] | None = None) -> Path:
    """An Ed25519 key pair in the key folder (no passphrase: it signs unattended on a build
    box; keep the folder private), trusted by this user at once."""
    folder = keys_dir(env)
    path = folder / check_name(name)
    if path.exists():
        raise ConfigError(f"the key {path} exists already",
                          tip="pick another name, or remove the old key first")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    made = proc.run_capture([_ssh_keygen(), "-q", "-t", "ed25519", "-N", "", "-C", name,
                             "-f", str(path)], timeout=_TIMEOUT)
    if not made.ok:
        raise BuildFailed(f"ssh-keygen could not make {path}: {made.stderr.strip()}")
    trust(path.with_name(name + ".pub").read_text(), name, env)
    return path


def sign(doc: Mapping[str, Any], key: Path) -> str:
    """The armored signature of the manifest ``doc`` made with the private key ``key``."""
    made = proc.run_capture([_ssh_keygen(), "-q", "-Y", "sign", "-n", NAMESPACE, "-f", str(key)],
                            input=canonical(doc), timeout=_TIMEOUT)
    if not made.ok or "BEGIN SSH SIGNATURE" not in made.stdout:
        why = made.stderr.strip() or "no signature"
        raise BuildFailed(f"cannot sign with {key}: {why}",
                          tip="a key with a passphrase signs from ssh-agent: `ssh-add KEY`, "
                              "then --sign KEY.pub")
    return made.stdout


# --- checking ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SignatureVerdict:
    """What a signature says about a manifest: ``state`` is GOOD, UNSIGNED, UNTRUSTED or BAD;
    ``signer`` the trusted name (GOOD) and ``key`` the key's fingerprint when known."""

    state: str
    signer: str = ""
    key: str = ""
    reason: str = ""

    @property
    def good(self) -> bool:
        return self.state == GOOD

    def who(self) -> str:
        return f"{self.signer} ({self.key})" if self.signer else self.key


def verify(doc: Mapping[str, Any], signature: str | None, allowed: Path | None
           ) -> SignatureVerdict:
    """Check ``signature`` over ``doc`` against the trust list ``allowed`` (None: no key is
    trusted)."""
    if not signature:
        return SignatureVerdict(UNSIGNED, reason="it is not signed")
    try:
        info = parse_signature(signature)
    except ValueError as exc:
        return SignatureVerdict(BAD, reason=f"its signature is malformed ({exc})")
    if info.namespace != NAMESPACE:
        return SignatureVerdict(BAD, key=info.fingerprint,
                       reason=f"its signature was made for '{info.namespace}', not for "
                              "rocbuild artifacts")
    tool = _ssh_keygen()
    message = canonical(doc)
    with tempfile.TemporaryDirectory(prefix="rocbuild-sig-") as tmp:
        sig_file = Path(tmp) / "manifest.sig"
        sig_file.write_text(signature)
        principal = _trusted_principal(tool, sig_file, allowed, info)
        if principal is None:
            valid = proc.run_capture([tool, "-Y", "check-novalidate", "-n", NAMESPACE,
                                      "-s", str(sig_file)], input=message, timeout=_TIMEOUT)
            if not valid.ok:
                return SignatureVerdict(BAD, key=info.fingerprint,
                               reason="its signature does not match its manifest (the "
                                      "manifest was changed, or the signature is another's)")
            return SignatureVerdict(UNTRUSTED, key=info.fingerprint,
                           reason=f"it is signed by the {info.key_type} key {info.fingerprint}"
                                  ", which you do not trust")
        checked = proc.run_capture([tool, "-Y", "verify", "-f", str(allowed), "-I", principal,
                                    "-n", NAMESPACE, "-s", str(sig_file)], input=message,
                                   timeout=_TIMEOUT)
    if not checked.ok:
        return SignatureVerdict(BAD, signer=principal, key=info.fingerprint,
                       reason=f"its signature by {principal}'s key does not match its manifest "
                              "(the manifest was changed, or the signature is another's)")
    return SignatureVerdict(GOOD, signer=principal, key=info.fingerprint)


def _trusted_principal(tool: str, sig_file: Path, allowed: Path | None,
                       info: SignatureInfo) -> str | None:
    if allowed is None or not allowed.is_file():
        return None
    found = proc.run_capture([tool, "-Y", "find-principals", "-s", str(sig_file),
                              "-f", str(allowed)], timeout=_TIMEOUT)
    return found.stdout.split()[0] if found.ok and found.stdout.strip() else None
