"""llama.cpp's state after a prompt's fixed prefix, kept on disk between runs.

The conductor's system prompt (instructions, the pool's descriptions, examples) is the same for
every question asked of the same pool, and reading it is most of planning's cost on a CPU. After
the first run its KV state is written here; later runs load it instead of reading it again.

A file is named by a hash of everything that determines the state: the model's sha256, the
llama.cpp build, the context size and the prefix's tokens. The header repeats the tokens and
the blob's sha256, both checked before llama.cpp is handed the bytes, so a stale, truncated or
tampered file is ignored, never loaded. Plain bytes and JSON: nothing here is unpickled.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conductor_cli.disk import kept_files, paths

MAGIC = b"conductor-kv-state\n"
FORMAT_VERSION = 1
SUFFIX = ".kvstate"
_LEN = struct.Struct("<Q")


def state_key(model_sha256: str, build: str, n_ctx: int, tokens: Sequence[int]) -> str:
    canonical = json.dumps(
        {
            "v": FORMAT_VERSION,
            "model": model_sha256,
            "build": build,
            "n_ctx": n_ctx,
            "tokens": list(tokens),
        },
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class PrefixStateStore:
    directory: Path
    keep: int = 8  # newest files kept; each is ~23 KB per token for the default model

    @classmethod
    def default(cls) -> PrefixStateStore:
        return cls(paths.state_dir())

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}{SUFFIX}"

    def load(self, key: str, tokens: Sequence[int]) -> bytes | None:
        """The state blob for `key`, or None when absent or not exactly what was saved."""
        path = self._path(key)
        try:
            with path.open("rb") as f:
                if f.read(len(MAGIC)) != MAGIC:
                    return None
                (n,) = _LEN.unpack(f.read(_LEN.size))
                if n > os.fstat(f.fileno()).st_size:
                    return None  # a damaged length: never read as asked
                header = json.loads(f.read(n))
                blob = f.read()
        except (OSError, ValueError, struct.error):
            return None
        if (
            not isinstance(header, dict)
            or header.get("v") != FORMAT_VERSION
            or header.get("tokens") != list(tokens)
            or header.get("size") != len(blob)
            or header.get("sha256") != hashlib.sha256(blob).hexdigest()
        ):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: kept longest
        return blob

    def save(self, key: str, tokens: Sequence[int], blob: bytes) -> None:
        """Write atomically (temp file, then rename); a failure only costs the speed-up."""
        header = json.dumps(
            {
                "v": FORMAT_VERSION,
                "tokens": list(tokens),
                "size": len(blob),
                "sha256": hashlib.sha256(blob).hexdigest(),
            }
        ).encode()
        target = self._path(key)
        # Per thread too: two choosers of one server may save the same prefix at once.
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            paths.private_dir(self.directory)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + _LEN.pack(len(header)) + header)
                f.write(blob)
            os.replace(tmp, target)
        except OSError:
            tmp.unlink(missing_ok=True)
            return
        self.prune()

    def files(self) -> list[Path]:
        return kept_files.listed(self.directory, SUFFIX)

    def prune(self) -> None:
        kept_files.keep_newest(self.files(), self.keep)

    def size_bytes(self) -> int:
        total = 0
        for p in self.files():
            with contextlib.suppress(OSError):
                total += p.stat().st_size
        return total

    def clear(self) -> int:
        return kept_files.remove(self.files())
