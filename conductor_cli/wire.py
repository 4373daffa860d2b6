"""The CLI's own protocol with a server: one run request in, its events out as JSON lines.

`POST /conductor/v1/runs` takes a `RunRequest` as JSON and answers 200 with one JSON object
per line: `{"event": ...}` (an event as `event_to_dict` writes it) as the run goes, then one
`{"result": ...}` (RunResult.to_dict) or `{"error": ..., "exit_code": N, "interrupted": B}`.
The client half-closing its side of the connection cancels the run (Ctrl-C). Pure data: both
sides import it, and it loads no model code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

RUNS_PATH = "/conductor/v1/runs"
STATUS_PATH = "/conductor/v1/status"
STOP_PATH = "/conductor/v1/stop"


@dataclass(frozen=True)
class Overrides:
    """The command line's changes to the server's config, applied on the server."""

    conductor: str | None = None
    workers: tuple[str, ...] = ()
    max_steps: int | None = None
    seed: int | None = None
    max_rounds: int | None = None

    def changes_pool(self) -> str | None:
        """The field that changes the conductor or the workers (so may load or fetch a
        model), or None."""
        return "conductor" if self.conductor else "workers" if self.workers else None


@dataclass(frozen=True)
class RunRequest:
    question: str
    attachments: tuple[tuple[str, str], ...] = ()  # (name, text)
    workflow: dict[str, Any] | None = None  # None: the conductor plans
    overrides: Overrides = field(default_factory=Overrides)
    cache_mode: str = "use"
    stream: bool = False
    max_cost: float | None = None
    max_calls: int | None = None
    source: str = "model"  # where the given workflow came from: "model" or "trace" (replay)
    replay_of: str | None = None  # the trace a `replay --live` runs again
    # `replay --live` of a trace with rounds: each later round's recorded workflow (2, 3, ...)
    rounds: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Any) -> RunRequest:
        """Checked field by field: the body comes off a socket."""
        if not isinstance(raw, dict):
            raise ValueError("the run request must be a JSON object")
        question = raw.get("question")
        if not isinstance(question, str):
            raise ValueError("'question' must be a string")
        items = raw.get("attachments") or []
        if not isinstance(items, list):
            raise ValueError("'attachments' must be a list of [name, text] pairs")
        attachments = []
        for item in items:
            if not (
                isinstance(item, list | tuple)
                and len(item) == 2
                and all(isinstance(x, str) for x in item)
            ):
                raise ValueError("'attachments' must be [name, text] pairs")
            attachments.append((item[0], item[1]))
        workflow = raw.get("workflow")
        if workflow is not None and not isinstance(workflow, dict):
            raise ValueError("'workflow' must be an object or null")
        o = raw.get("overrides") or {}
        if not isinstance(o, dict):
            raise ValueError("'overrides' must be an object")
        workers = o.get("workers") or []
        if not isinstance(workers, list) or not all(isinstance(w, str) for w in workers):
            raise ValueError("'overrides.workers' must be a list of names")
        if o.get("max_depth"):
            raise ValueError(
                "'overrides.max_depth': the nested conductor step became rounds; send max_rounds"
            )
        overrides = Overrides(
            _opt(o, "conductor", str),
            tuple(workers),
            _opt(o, "max_steps", int),
            _opt(o, "seed", int),
            _opt(o, "max_rounds", int),
        )
        mode = raw.get("cache_mode", "use")
        if mode not in ("use", "refresh", "off"):
            raise ValueError("'cache_mode' must be use, refresh or off")
        max_cost = raw.get("max_cost")
        if max_cost is not None and (
            not isinstance(max_cost, int | float) or isinstance(max_cost, bool)
        ):
            raise ValueError("'max_cost' must be a number")
        stream = raw.get("stream", False)
        if not isinstance(stream, bool):
            raise ValueError("'stream' must be true or false")
        source = raw.get("source", "model")
        if source not in ("model", "trace"):
            raise ValueError("'source' must be model or trace")
        rounds = raw.get("rounds") or []
        if not isinstance(rounds, list) or not all(isinstance(r, dict) for r in rounds):
            raise ValueError("'rounds' must be a list of workflow objects")
        return cls(
            question,
            tuple(attachments),
            workflow,
            overrides,
            mode,
            stream,
            None if max_cost is None else float(max_cost),
            _opt(raw, "max_calls", int),
            source,
            _opt(raw, "replay_of", str),
            tuple(rounds),
        )


def _opt(raw: dict[str, Any], key: str, kind: type) -> Any:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"'{key}' must be {kind.__name__} or null")
    return value
