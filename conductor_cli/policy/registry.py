"""Trained conductors on disk: `DATA_DIR/conductors/NAME/` with `record.json` and the trained
part (`head.json` for the head method). `conductor.model = "NAME"` plans with the record's base
GGUF and that part. Reads files only: pool building may call it without loading anything.

A few trained conductors ship with conductor (models/conductors/ in the source tree, inside the
package in a wheel; `coder-team-1.5b-public` plans the embedded default team, `coder-team-1.5b`
planned it before issue 57 (configs written then name it), `coder-team` the one
`config init --preset small-team` writes): read-only, found
after the user's own, so training one under the same name (`--out NAME`) takes its place for
that user (a folder of that name in the working directory comes after both).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conductor_cli.disk import paths
from conductor_cli.errors import InputError, ModelError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RECORD = "record.json"
HEAD = "head.json"
ROUND_HEAD = "round_head.json"  # `train --rounds N`: keep or correct, from the re-planning prompt
FAMILIAR = "familiar.npz"  # what its training questions were like (policy/familiar.py)
ADAPTER = "adapter.gguf"  # the LoRA methods: what llama.cpp applies to the base GGUF


def worker_fingerprint(worker: Any) -> str:
    """What a worker's answers depend on: its model, where it is served and the settings that
    change a reply (not its name or description: a renamed worker answers as before); for a
    built-in tool also its behaviour version (rewards measured with an older tool are not
    this one's)."""
    answers: list[Any] = [
        worker.model,
        worker.api_base or "",
        worker.max_tokens,
        worker.temperature,
        worker.context_tokens,
        worker.stop_loops,
        worker.fallback or "",
    ]
    if worker.spec.kind == "tool":  # a built-in tool's behaviour has a version
        from conductor_cli.tools import tool_version

        answers.append(tool_version(worker.spec.name))
    return hashlib.sha256(json.dumps(answers).encode()).hexdigest()[:16]


def pool_fingerprint(workers: Sequence[Any]) -> str:
    """What a trained conductor learned about: each worker's name and description (what the
    conductor reads) and what its answers depend on (`worker_fingerprint`)."""
    pool = [[w.name, w.description, worker_fingerprint(w)] for w in workers]
    return hashlib.sha256(json.dumps(pool).encode()).hexdigest()


def conductors_dir() -> Path:
    return paths.data_dir() / "conductors"


def packaged_dir() -> Path:
    """The trained conductors shipped with conductor: in the package (a wheel's force-include),
    else the source tree's models/conductors."""
    here = Path(__file__).resolve().parents[1] / "models" / "conductors"
    return here if here.is_dir() else Path(__file__).resolve().parents[2] / "models" / "conductors"


def check_name(name: str) -> str:
    if not NAME_RE.match(name) or name.endswith(".gguf"):
        raise InputError(
            f"--out {name!r}: a conductor's name is letters, digits, '.', '_' and '-' "
            "(at most 64, not ending in .gguf), e.g. --out my-conductor"
        )
    return name


@dataclass(frozen=True)
class TrainedConductor:
    name: str
    directory: Path
    record: dict[str, Any]

    @property
    def base_model(self) -> str:
        return str(self.record["base_model"])

    @property
    def method(self) -> str:
        return str(self.record.get("method", "head"))

    @property
    def head_path(self) -> Path:
        return self.directory / HEAD

    @property
    def round_head_path(self) -> Path | None:
        """The head that decides later rounds, for a head trained with --rounds >= 2."""
        path = self.directory / ROUND_HEAD
        return path if path.is_file() else None

    @property
    def familiar_path(self) -> Path | None:
        """What its training questions were like, for a head trained with their kinds."""
        path = self.directory / FAMILIAR
        return path if path.is_file() else None

    @property
    def rounds(self) -> int:
        """The rounds it was trained for (1 unless trained with --rounds)."""
        return int(self.record.get("hyperparameters", {}).get("rounds", 1))

    @property
    def adapter_path(self) -> Path | None:
        """The LoRA adapter in GGUF, for the LoRA methods; None for a head."""
        path = self.directory / ADAPTER
        return path if self.method != "head" else None

    def adapter_sha256(self) -> str:
        """Of the adapter's bytes: part of the cache key of every reply planned with it."""
        assert self.adapter_path is not None
        return hashlib.sha256(self.adapter_path.read_bytes()).hexdigest()

    def identity(self) -> str:
        """sha256 of its record and its trained part: changes when it is trained again."""
        digest = hashlib.sha256()
        parts = (RECORD, HEAD, ROUND_HEAD, FAMILIAR, ADAPTER)
        for part in (self.directory / p for p in parts):
            if part.is_file():
                digest.update(part.name.encode() + b"\0" + part.read_bytes())
        return digest.hexdigest()[:16]

    @property
    def pool(self) -> list[str]:
        return [str(w["name"]) for w in self.record.get("pool", [])]

    def unmeasured(self, workers: Sequence[Any]) -> list[str]:
        """Workers of this pool its training never measured: new ones, or retuned (another
        model, endpoint or reply setting than when trained)."""
        known = self.record.get("worker_fingerprints")
        if not isinstance(known, dict):  # trained before fingerprints were kept: by name
            return [w.name for w in workers if w.name not in self.pool]
        return [w.name for w in workers if known.get(w.name) != worker_fingerprint(w)]

    def renamed(self, missing: str, workers: Sequence[Any]) -> str | None:
        """The worker of this pool that answers as `missing` did when trained (a rename)."""
        known = self.record.get("worker_fingerprints") or {}
        old = known.get(missing)
        for w in workers:
            if old is not None and w.name not in known and worker_fingerprint(w) == old:
                return w.name
        return None

    def unmeasured_note(self, workers: Sequence[Any]) -> str | None:
        """One line for `ask`, `serve` and `eval` when the pool has workers it never measured."""
        new = self.unmeasured(workers)
        if not new:
            return None
        return (
            f"conductor.model {self.name!r} was trained before {', '.join(new)} joined the pool "
            "or changed: it plans as trained and does not choose them; train it again "
            f"(conductor train ... --out {self.name} --force) to measure them: only their "
            "workflows are called, the other runs are reused; or plan untrained with its base "
            f'model (conductor config set conductor.model "{self.base_model}")'
        )


def find(name: str) -> TrainedConductor | None:
    """The trained conductor called `name`, or in the directory `name` (one copied elsewhere,
    or a training's intermediate one); None if there is none (a catalog name, a GGUF path)."""
    if NAME_RE.match(name) and (conductors_dir() / name / RECORD).is_file():
        directory = conductors_dir() / name
    elif NAME_RE.match(name) and (packaged_dir() / name / RECORD).is_file():
        directory = packaged_dir() / name
    elif not name.endswith(".gguf") and (Path(name).expanduser() / RECORD).is_file():
        directory = Path(name).expanduser()
    else:
        return None
    record_file = directory / RECORD
    try:
        record = json.loads(record_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelError(
            f"{record_file}: unreadable training record ({e}); train it again"
        ) from None
    if not isinstance(record, dict) or "base_model" not in record:
        raise ModelError(f"{record_file}: not a training record (no base_model); train it again")
    return TrainedConductor(directory.name, directory, record)


def list_trained(shipped: bool = True) -> list[TrainedConductor]:
    """The user's trained conductors and (with `shipped`) the shipped ones they do not shadow,
    by name."""
    names = set()
    for root in (conductors_dir(), packaged_dir()) if shipped else (conductors_dir(),):
        if root.is_dir():
            names.update(d.name for d in root.iterdir() if (d / RECORD).is_file())
    found = []
    for name in sorted(names):
        try:
            trained = find(name)
        except ModelError:
            continue
        if trained is not None:
            found.append(trained)
    return found


def pool_note(config: Any) -> str | None:
    """The unmeasured-worker note of the trained conductor `config` plans with, if any."""
    try:
        trained = find(config.conductor.model)
    except ModelError:
        return None  # planning says what is wrong with it
    return trained.unmeasured_note(config.workers) if trained is not None else None
