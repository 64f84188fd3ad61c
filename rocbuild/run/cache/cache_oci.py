"""The binary cache in an OCI registry: ``--cache oci://registry/namespace/name``.

Each component artifact is one OCI artifact in that repository, tagged ``<component>-<key>``:

    config   application/vnd.rocbuild.manifest.v1+json   the artifact manifest (artifacts.py)
    layer    application/vnd.rocbuild.files.v1.tar+zstd  the .tar.zst; its digest is the
                                                          manifest's archive sha256
    annotations  dev.rocbuild.component, dev.rocbuild.key, dev.rocbuild.signature (the SSH
                 signature over the manifest, signing.py), org.opencontainers.image.created

and the tag ``rocbuild-index`` is an OCI image index listing them all, each entry annotated
with what `rocbuild cache list` shows (so a listing is one request). A push uploads the
layer and the config first and tags the artifact last, so a reader never finds a tag whose
blobs are missing; the index is rewritten after that (pushes to one repository should not
run at the same time: the last index written wins, though every artifact stays reachable by
its tag). ``cache prune`` deletes artifacts by digest (the registry must allow deletes) and
the registry's own garbage collection frees their blobs.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocbuild.errors import CacheUnavailable
from rocbuild.files import parse_json
from rocbuild.run.cache import oci
from rocbuild.run.cache.artifacts import ArtifactRefused, Manifest, Progress
from rocbuild.run.cache.cache_store import index_entry

ARTIFACT_TYPE = "application/vnd.rocbuild.artifact.v1"
CONFIG_TYPE = "application/vnd.rocbuild.manifest.v1+json"
LAYER_TYPE = "application/vnd.rocbuild.files.v1.tar+zstd"
INDEX_ARTIFACT_TYPE = "application/vnd.rocbuild.index.v1"
INDEX_TAG = "rocbuild-index"
SIGNATURE = "dev.rocbuild.signature"
ENTRY = "dev.rocbuild.entry"


def tag_for(component: str, key: str) -> str:
    """``<component>-<key>``: a valid OCI tag (component names are kept readable; any other
    character becomes '_', and the manifest inside still names the component exactly)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", component).lstrip(".-") or "_"
    return f"{name[:127 - len(key) - 1]}-{key}"


class OciStore:
    def __init__(self, text: str, client: oci.Client | None = None) -> None:
        ref = oci.Reference.parse(text)
        self.location = text
        self.client = client or oci.Client(ref, oci.credentials_for(ref.host))
        self._artifacts: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}

    # reading
    def _artifact(self, component: str, key: str
                  ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(the OCI manifest, the rocbuild manifest in its config) of one artifact."""
        if (component, key) in self._artifacts:
            return self._artifacts[(component, key)]
        found = self.client.get_manifest(tag_for(component, key))
        if found is None:
            return None
        # whatever is wrong with one tag is that artifact's (ArtifactRefused: the others
        # still serve), as a damaged manifest in a folder store is
        tag = tag_for(component, key)
        try:
            outer = parse_json(found[0])
            config = outer["config"]
            if config.get("mediaType") != CONFIG_TYPE:
                raise ArtifactRefused(f"the tag {tag} in {self.location} is not a rocbuild "
                                      "artifact")
            doc = parse_json(self.client.get_blob(str(config["digest"])))
        except oci.BlobDamaged as exc:
            raise ArtifactRefused(f"its manifest (the config blob of {tag}) cannot be used: "
                                  f"{exc}") from None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ArtifactRefused(f"its manifest (the config blob of {tag} in {self.location}) "
                                  "is not a readable JSON document") from None
        if not isinstance(doc, dict):
            doc = {}
        self._artifacts[(component, key)] = (outer, doc)
        return outer, doc

    def read_manifest(self, component: str, key: str) -> dict[str, Any] | None:
        found = self._artifact(component, key)
        return found[1] if found else None

    def read_signature(self, component: str, key: str) -> str | None:
        found = self._artifact(component, key)
        if found is None:
            return None
        value = (found[0].get("annotations") or {}).get(SIGNATURE)
        return str(value) if value else None

    def _index(self) -> list[dict[str, Any]]:
        found = self.client.get_manifest(INDEX_TAG)
        if found is None:
            return []
        try:
            doc = parse_json(found[0])
            return [d for d in doc.get("manifests", []) if isinstance(d, dict)]
        except (ValueError, AttributeError, RecursionError):
            raise CacheUnavailable(f"{self.location}: the tag {INDEX_TAG} is not readable",
                                   tip="push a component again to rewrite it") from None

    def index(self) -> list[dict[str, Any]]:
        out = []
        for desc in self._index():
            try:
                entry = parse_json((desc.get("annotations") or {}).get(ENTRY, "{}"))
            except (ValueError, AttributeError, TypeError):
                continue  # anyone who may push can write an index entry: one is skipped
            if isinstance(entry, dict):
                out.append({**entry, "digest": desc.get("digest")})
        return out

    def open_archive(self, component: str, key: str, offset: int
                     ) -> tuple[Iterator[bytes], int]:
        doc = self.read_manifest(component, key)
        if doc is None:
            raise CacheUnavailable(f"{self.location}: {tag_for(component, key)} is gone",
                                   tip="run the build again")
        return self.client.open_blob("sha256:" + str(doc["archive"]["sha256"]), offset)

    # writing
    def push(self, manifest: Manifest, archive: Path, progress: Progress | None = None,
             signature: str | None = None) -> None:
        digest = "sha256:" + manifest.archive_sha256
        self.client.push_blob(archive, digest, manifest.archive_size, progress)
        self._tag(manifest.to_json(), signature)

    def write_signature(self, manifest: Manifest, signature: str) -> None:
        """Sign an artifact that is in the registry already (its tag is rewritten)."""
        self._tag(manifest.to_json(), signature)

    def _tag(self, doc: dict[str, Any], signature: str | None) -> None:
        config = json.dumps(doc, sort_keys=True).encode()
        config_digest = self.client.push_bytes(config)
        manifest = Manifest.from_json(doc)
        annotations = {"dev.rocbuild.component": manifest.component,
                       "dev.rocbuild.key": manifest.key,
                       "org.opencontainers.image.created": time.strftime(
                           "%Y-%m-%dT%H:%M:%SZ", time.gmtime(manifest.created or time.time()))}
        if signature:
            annotations[SIGNATURE] = signature
        outer = {"schemaVersion": 2, "mediaType": oci.MANIFEST_TYPE,
                 "artifactType": ARTIFACT_TYPE,
                 "config": {"mediaType": CONFIG_TYPE, "digest": config_digest,
                            "size": len(config)},
                 "layers": [{"mediaType": LAYER_TYPE,
                             "digest": "sha256:" + manifest.archive_sha256,
                             "size": manifest.archive_size,
                             "annotations": {"org.opencontainers.image.title":
                                             manifest.archive_name}}],
                 "annotations": annotations}
        data = json.dumps(outer, sort_keys=True).encode()
        digest = self.client.put_manifest(tag_for(manifest.component, manifest.key), data,
                                          oci.MANIFEST_TYPE)
        self._artifacts.pop((manifest.component, manifest.key), None)
        entry = index_entry(manifest, signature)
        kept = [d for d in self._index()
                if _entry_of(d).get("key") != manifest.key
                or _entry_of(d).get("component") != manifest.component]
        kept.append({"mediaType": oci.MANIFEST_TYPE, "digest": digest, "size": len(data),
                     "artifactType": ARTIFACT_TYPE,
                     "annotations": {ENTRY: json.dumps(entry, sort_keys=True)}})
        self._write_index(kept)

    def _write_index(self, descriptors: list[dict[str, Any]]) -> None:
        descriptors.sort(key=lambda d: (str(_entry_of(d).get("component")),
                                        -float(_entry_of(d).get("created", 0))))
        index = {"schemaVersion": 2, "mediaType": oci.INDEX_TYPE,
                 "artifactType": INDEX_ARTIFACT_TYPE, "manifests": descriptors}
        self.client.put_manifest(INDEX_TAG, json.dumps(index, sort_keys=True).encode(),
                                 oci.INDEX_TYPE)

    def clear_temps(self) -> list[str]:
        return []  # a push leaves nothing in a registry until its tag names it

    def remove(self, entries: list[dict[str, Any]]) -> list[str]:
        """Delete these index entries' artifacts; returns the problems (empty: all gone)."""
        problems = []
        gone = set()
        for entry in entries:
            digest = str(entry.get("digest") or "")
            if not digest:
                continue
            if self.client.delete_manifest(digest):
                gone.add(digest)
            else:
                problems.append(f"{self.location} does not allow deleting {digest[:19]}… "
                                "(the reference registry needs storage.delete.enabled)")
        if gone:
            self._write_index([d for d in self._index() if d.get("digest") not in gone])
        return problems


def _entry_of(desc: dict[str, Any]) -> dict[str, Any]:
    try:
        entry = parse_json((desc.get("annotations") or {}).get(ENTRY, "{}"))
    except (ValueError, AttributeError, TypeError):
        return {}
    return entry if isinstance(entry, dict) else {}

