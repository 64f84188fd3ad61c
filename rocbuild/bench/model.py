"""The GGUF model header, for the record: name, architecture, quantisation, size.

A reader of our own (the format is a fixed little-endian header followed by typed key/value
pairs, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) rather than the ``gguf``
package: that package pulls numpy, PyYAML, requests and tqdm into every install to read four
values. The tests write real models with the ``gguf`` package and read them back here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from rocbuild.errors import ConfigError

MAGIC = b"GGUF"

# GGUF value types (gguf.md "GGUFMetadataValueType") -> struct format of a scalar
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9

# llama.cpp's llama_ftype (include/llama.h), the value of general.file_type
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4",
}

# the keys kept; everything else (tokenizer arrays above all) is skipped without building it
_WANTED = ("general.name", "general.architecture", "general.file_type", "general.size_label",
           "general.basename")


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    size: int  # bytes on disk
    version: int  # GGUF format version
    tensors: int
    name: str | None
    architecture: str | None
    file_type: int | None
    size_label: str | None  # "7B", when the converter wrote one

    @property
    def quant(self) -> str | None:
        if self.file_type is None:
            return None
        return FILE_TYPES.get(self.file_type, f"type {self.file_type}")

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "file": self.path.name, "size_bytes": self.size,
                "gguf_version": self.version, "tensors": self.tensors, "name": self.name,
                "architecture": self.architecture, "file_type": self.file_type,
                "quant": self.quant, "size_label": self.size_label}


class _Reader:
    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        data = self.handle.read(size)
        if len(data) != size:
            raise ValueError("the file ends inside its header")
        return struct.unpack(fmt, data)[0]

    def string(self) -> str:
        length = self.take("<Q")
        if length > 1 << 20:
            raise ValueError(f"a header string claims {length} bytes")
        data = self.handle.read(length)
        if len(data) != length:
            raise ValueError("the file ends inside its header")
        return data.decode("utf-8", "replace")

    def value(self, kind: int, keep: bool) -> Any:
        if kind in _SCALAR:
            return self.take(_SCALAR[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item_kind, count = self.take("<I"), self.take("<Q")
            if item_kind in _SCALAR and not keep:  # skip fixed-size items in one seek
                self.handle.seek(struct.calcsize(_SCALAR[item_kind]) * count, 1)
                return None
            items = [self.value(item_kind, keep) for _ in range(count)]
            return items if keep else None
        raise ValueError(f"unknown value type {kind}")


def read_model(path: Path) -> ModelInfo:
    """The header of the GGUF file at ``path``; ConfigError (exit 2) naming the file when it
    is missing or not a GGUF model."""
    try:
        size = path.stat().st_size
        handle = path.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"model {path}: no such file",
                          tip="pass the path of a .gguf model file") from None
    except OSError as exc:
        raise ConfigError(f"model {path}: cannot read: {exc.strerror}") from None
    if path.is_dir():
        raise ConfigError(f"model {path}: is a folder, not a .gguf file")
    with handle:
        reader = _Reader(handle)
        try:
            if handle.read(4) != MAGIC:
                raise ValueError("it does not start with the GGUF magic")
            version = reader.take("<I")
            if version < 2:
                raise ValueError(f"GGUF version {version} (llama.cpp reads 2 and 3)")
            tensors, count = reader.take("<Q"), reader.take("<Q")
            found: dict[str, Any] = {}
            for _ in range(count):
                key = reader.string()
                kind = reader.take("<I")
                value = reader.value(kind, keep=False)
                if key in _WANTED:
                    found[key] = value
        except (ValueError, struct.error, OSError) as exc:
            raise ConfigError(f"model {path}: not a GGUF model ({exc})",
                              tip="pass a .gguf file as llama.cpp's convert scripts write "
                                  "them") from None
    file_type = found.get("general.file_type")
    return ModelInfo(path=path, size=size, version=version, tensors=tensors,
                     name=found.get("general.name"),
                     architecture=found.get("general.architecture"),
                     file_type=int(file_type) if isinstance(file_type, int) else None,
                     size_label=found.get("general.size_label"))
