"""The pure parts of the OCI cache and of signing: references, tags, credentials, auth
challenges, reading SSH signatures and allowed_signers, and prune's selection. (Signing and
checking run ssh-keygen and a registry: tests/e2e/test_cache_oci.py.)"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from rocbuild.errors import ConfigError
from rocbuild.run.cache import cache_prune, oci, signing
from rocbuild.run.cache.cache_oci import tag_for

# made by `ssh-keygen -t ed25519` and `ssh-keygen -Y sign -n rocbuild-artifact` over {"a":1};
# `ssh-keygen -lf` printed the fingerprint
PUBLIC = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJYvj6J+cD7mQ+Tp94WDWPeZcSFpqS/c7ZNkEY1gNcDt "
          "alice")
FINGERPRINT = "SHA256:FQ9tMePYkFouADWZ2M5EUXGH0ZRbpytYEYfl6xoJ6tc"
SIGNATURE = """-----BEGIN SSH SIGNATURE-----
U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAgli+Pon5wPuZD5On3hYNY95lxIW
mpL9ztk2QRjWA1wO0AAAARcm9jYnVpbGQtYXJ0aWZhY3QAAAAAAAAABnNoYTUxMgAAAFMA
AAALc3NoLWVkMjU1MTkAAABAZey83Z/qfdzNFnv4Gc2TWRnK3i7na//stMn6OyDn5hYgrb
7aaePiKdYElcc+Byvoyr1AvDMxSzX6MNh9lnL+CQ==
-----END SSH SIGNATURE-----
"""


def test_references_pick_the_scheme_and_check_the_name() -> None:
    ghcr = oci.Reference.parse("oci://ghcr.io/me/rocm-gfx906")
    assert (ghcr.scheme, ghcr.host, ghcr.repository) == ("https", "ghcr.io", "me/rocm-gfx906")
    local = oci.Reference.parse("oci://127.0.0.1:5000/lab/stack/")
    assert (local.scheme, local.host, local.repository) == ("http", "127.0.0.1:5000",
                                                             "lab/stack")
    assert oci.Reference.parse("oci+http://lab:5000/a/b").scheme == "http"
    for bad in ("oci://ghcr.io/Me/Stack", "oci://ghcr.io", "http://x/y", "oci://h/a//b"):
        with pytest.raises(ConfigError):
            oci.Reference.parse(bad)


def test_tags_are_valid_oci_tags_that_name_the_component() -> None:
    key = "a" * 64
    assert tag_for("rocm-cmake", key) == f"rocm-cmake-{key}"
    assert tag_for("llama.cpp+x", key) == f"llama.cpp_x-{key}"
    long = tag_for("c" * 100, key)
    # the OCI distribution spec's tag grammar
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}", long) and long.endswith(key)


def test_credentials_come_from_the_env_override_then_the_docker_config(
        tmp_path: Path) -> None:
    assert oci.credentials_for("ghcr.io", {"DOCKER_CONFIG": str(tmp_path)}) is None
    auth = base64.b64encode(b"me:ghp_token").decode()
    (tmp_path / "config.json").write_text(json.dumps(
        {"auths": {"https://ghcr.io": {"auth": auth}, "lab:5000": {"identitytoken": "rt"}}}))
    env = {"DOCKER_CONFIG": str(tmp_path)}
    assert oci.credentials_for("ghcr.io", env) == oci.Credentials("me", "ghp_token")
    assert oci.credentials_for("lab:5000", env) == oci.Credentials(identity_token="rt")
    assert oci.credentials_for("other.io", env) is None
    override = {**env, oci.AUTH_ENV: "ci:secret:with:colons"}
    assert oci.credentials_for("ghcr.io", override) == oci.Credentials("ci",
                                                                        "secret:with:colons")
    with pytest.raises(ConfigError, match="USER:SECRET"):
        oci.credentials_for("ghcr.io", {oci.AUTH_ENV: "no-colon"})
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a readable Docker config"):
        oci.credentials_for("ghcr.io", env)


def test_a_bearer_challenge_is_read_into_its_parameters() -> None:
    kind, params = oci._challenge('Bearer realm="https://ghcr.io/token",service="ghcr.io",'
                                  'scope="repository:me/x:pull"')
    assert kind == "bearer" and params == {"realm": "https://ghcr.io/token",
                                           "service": "ghcr.io",
                                           "scope": "repository:me/x:pull"}
    assert oci._challenge('Basic realm="Registry"')[0] == "basic"


def test_an_ssh_signature_names_its_key_as_ssh_keygen_does() -> None:
    info = signing.parse_signature(SIGNATURE)
    assert info == signing.SignatureInfo("ssh-ed25519", FINGERPRINT, signing.NAMESPACE)
    assert signing.key_of(SIGNATURE) == FINGERPRINT
    assert signing.key_of("junk") == "" and signing.key_of(None) == ""
    with pytest.raises(ValueError):
        signing.parse_signature(SIGNATURE.replace("U1NIU0lH", "AAAAAAAA"))


def test_an_unsigned_or_malformed_signature_needs_no_ssh_keygen(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed_signers"
    assert signing.verify({"a": 1}, None, allowed).state == signing.UNSIGNED
    bad = signing.verify({"a": 1}, "-----BEGIN SSH SIGNATURE-----\n!!\n-----END SSH "
                                   "SIGNATURE-----", allowed)
    assert bad.state == signing.BAD and "malformed" in bad.reason


def test_trusted_signers_are_read_and_added_once(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    signer = signing.trust(PUBLIC, "alice", env)
    assert signer.fingerprint == FINGERPRINT
    assert signing.trust(PUBLIC, "other-name", env).principal == "alice"  # once
    text = signing.signers_file(env).read_text()
    assert text == f'alice namespaces="{signing.NAMESPACE}" {PUBLIC}\n'
    (tmp_path / "rocbuild" / "allowed_signers").write_text(
        text + "# a comment\nbob,carol cert-authority ssh-ed25519 AAAA bob@box\n")
    signers = signing.read_signers(signing.signers_file(env))
    assert [(s.principal, s.key, s.comment) for s in signers] == [
        ("alice", PUBLIC.split()[1], "alice"), ("bob,carol", "AAAA", "bob@box")]
    for bad in ("not a key", "ssh-ed25519 !!!", "ssh-rsa " + PUBLIC.split()[1]):
        with pytest.raises(ValueError):
            signing.parse_public_key(bad)
    with pytest.raises(ConfigError):
        signing.trust(PUBLIC.replace("IJYv", "IJYw"), "bad name with spaces", env)


def test_the_signed_form_of_a_manifest_does_not_depend_on_its_spelling() -> None:
    assert signing.canonical(json.loads('{"b": [1, 2], "a": "é"}')) == \
        signing.canonical({"a": "é", "b": [1, 2]}) == '{"a":"\\u00e9","b":[1,2]}'


def test_prune_selects_by_age_by_newest_per_component_and_by_current_keys() -> None:
    day = 86400.0
    now = 100 * day
    entries = [{"component": "a", "key": "a1", "created": now - 40 * day},
               {"component": "a", "key": "a2", "created": now - 2 * day},
               {"component": "a", "key": "a3", "created": now - 1 * day},
               {"component": "b", "key": "b1", "created": now - 5 * day}]

    def keys(rules: cache_prune.Rules) -> list[str]:
        return [e["key"] for e, _ in cache_prune.select(entries, rules, now)]

    assert keys(cache_prune.Rules(older_than_days=30)) == ["a1"]
    assert keys(cache_prune.Rules(keep_newest=1)) == ["a1", "a2"]
    assert keys(cache_prune.Rules(wanted_keys={"a3", "b1"})) == ["a1", "a2"]
    assert keys(cache_prune.Rules(older_than_days=3, keep_newest=2)) == ["a1", "b1"]
    assert not cache_prune.Rules().any
    ((_, why),) = cache_prune.select(entries, cache_prune.Rules(older_than_days=30), now)
    assert why == "40 days old"
