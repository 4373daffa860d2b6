"""The conductor's hidden state after a planning prompt, kept on disk between runs.

A trained head decides from that state (policy/features.py), and the same prompts come back:
training again on the same questions (`--force`, `--resume`, rounds, a pool that gained a
worker), `conductor eval` of a trained conductor on questions its training held out, the same
question asked again. Each costs llama.cpp a decode of the prompt (about 1.7 s for a process's
first on 2 cores, 50 ms after). A file is named by a hash of the model's sha256, the llama.cpp
build and the prompt's tokens, and holds that hash again before the float32 numbers: a stale,
truncated or foreign file is ignored, never read as features. Derived data kept for speed
only, under the state folder, the newest `keep` files; `conductor cache clear` removes them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from conductor_cli.disk import kept_files, paths

FORMAT_VERSION = 1
SUFFIX = ".features"
_DIGEST = 32  # bytes of the sha256 a file starts with


def features_key(model_sha256: str, build: str, tokens: Sequence[int]) -> str:
    canonical = json.dumps(
        {"v": FORMAT_VERSION, "model": model_sha256, "build": build, "tokens": list(tokens)},
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class FeatureStore:
    directory: Path
    keep: int = 20_000  # files (2.3 KB each for SmolLM2's 576 numbers)
    _saved: int = field(default=0, repr=False)  # saves since the last prune

    @classmethod
    def default(cls) -> FeatureStore:
        return cls(paths.state_dir() / "features")

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}{SUFFIX}"

    def load(self, key: str, size: int) -> np.ndarray | None:
        """The `size` numbers kept under `key`, or None when absent or not exactly them."""
        try:
            data = self._path(key).read_bytes()
        except OSError:
            return None
        if len(data) != _DIGEST + 4 * size or data[:_DIGEST] != bytes.fromhex(key):
            return None
        return np.frombuffer(data[_DIGEST:], dtype="<f4").astype(np.float32)

    def save(self, key: str, vector: np.ndarray) -> None:
        """Written whole or not at all; a failure (a full disk) only costs the speed-up."""
        from conductor_cli.disk.atomic import atomic_write

        data = bytes.fromhex(key) + np.asarray(vector, dtype="<f4").tobytes()
        try:
            paths.private_dir(self.directory)
            atomic_write(self._path(key), data)
        except OSError:
            return
        self._saved += 1
        if self._saved >= 256:  # a listing a save would cost more than the save
            self._saved = 0
            self.prune()

    def files(self) -> list[Path]:
        return kept_files.listed(self.directory, SUFFIX)

    def prune(self) -> None:
        kept_files.keep_newest(self.files(), self.keep)

    def clear(self) -> int:
        return kept_files.remove(self.files())
