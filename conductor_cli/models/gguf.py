"""Read a GGUF file's header: its metadata and tensor shapes, without loading any weights.

Pure Python and a few kilobytes of reading, so `conductor models info` is instant and a file
that is not GGUF (or is cut short) gets a clear error before llama.cpp ever sees it.
Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from conductor_cli.errors import ModelError

MAGIC = b"GGUF"
# Value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array,
# 10 u64, 11 i64, 12 f64.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q"}
_SCALARS |= {11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_ARRAY_KEPT = 16  # token lists run to 100k entries: count them, keep only the first few

# llama.cpp's general.file_type values (enum llama_ftype) for the usual quantizations.
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
}  # fmt: skip


@dataclass(frozen=True)
class GGUFInfo:
    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: int
    parameters: int

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    @property
    def quantization(self) -> str:
        file_type = self.metadata.get("general.file_type")
        if file_type is None:
            return "unknown"
        return FILE_TYPES.get(int(file_type), f"type {file_type}")

    @property
    def context_length(self) -> int | None:
        value = self.metadata.get(f"{self.architecture}.context_length")
        return int(value) if value is not None else None

    @property
    def chat_template(self) -> bool:
        return bool(self.metadata.get("tokenizer.chat_template"))

    def summary(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "name": self.metadata.get("general.name"),
            "architecture": self.architecture,
            "parameters": self.parameters,
            "quantization": self.quantization,
            "context_length": self.context_length,
            "chat_template": self.chat_template,
            "gguf_version": self.version,
            "tensors": self.tensors,
            "size": self.path.stat().st_size,
        }


class _Reader:
    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f = f
        self.path = path

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise ModelError(
                f"{self.path}: the GGUF file ends early (truncated download?). "
                "Fetch it again with `conductor models pull NAME`."
            )
        return data

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.scalar("<Q")
        if n > 1 << 24:  # no metadata string is 16 MB; a wild length means a damaged file
            raise ModelError(f"{self.path}: damaged GGUF header (a {n}-byte string).")
        return self.take(n).decode("utf-8", errors="replace")

    def skip(self, kind: int, count: int) -> None:
        """Pass over `count` values without decoding them (vocabularies are 100k strings)."""
        if kind in _SCALARS:
            self.f.seek(struct.calcsize(_SCALARS[kind]) * count, 1)
        elif kind == _STRING:
            for _ in range(count):
                self.f.seek(self.scalar("<Q"), 1)
        else:
            for _ in range(count):
                self.value(kind)

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item_kind, count = self.scalar("<I"), self.scalar("<Q")
            items = [self.value(item_kind) for _ in range(min(count, _MAX_ARRAY_KEPT))]
            if count > _MAX_ARRAY_KEPT:
                self.skip(item_kind, count - _MAX_ARRAY_KEPT)
                items.append(f"... {count} in all")
            return items
        raise ModelError(f"{self.path}: damaged GGUF header (unknown value type {kind}).")


def read_gguf(path: Path) -> GGUFInfo:
    """Metadata and parameter count of a GGUF file; ModelError (one line) for anything else."""
    try:
        with path.open("rb") as f:
            r = _Reader(f, path)
            if r.take(4) != MAGIC:
                raise ModelError(
                    f"{path}: not a GGUF file (no GGUF magic bytes); conductor runs GGUF models."
                )
            version = r.scalar("<I")
            if version < 2:
                raise ModelError(f"{path}: GGUF version {version} is too old for llama.cpp.")
            n_tensors, n_kv = r.scalar("<Q"), r.scalar("<Q")
            metadata = {}
            for _ in range(n_kv):
                key = r.string()
                metadata[key] = r.value(r.scalar("<I"))
            parameters = 0
            for _ in range(n_tensors):
                r.string()  # the tensor's name
                dims = [r.scalar("<Q") for _ in range(r.scalar("<I"))]
                r.scalar("<I")  # its ggml type
                r.scalar("<Q")  # its offset in the data section
                parameters += math.prod(dims)
    except OSError as e:
        raise ModelError(f"{path}: cannot read the model file: {e.strerror}.") from None
    return GGUFInfo(path, version, metadata, n_tensors, parameters)
