"""Traces: one JSON file per run, written atomically as the run goes, loadable and replayable.

The file is rewritten (temp file + rename) after the plan and after every step, so an
interrupted or crashed run still leaves a valid trace holding every finished step. Secrets
(the values of the environment variables named by `api_key_env`) are scrubbed before writing.
"""

from __future__ import annotations

import json
import os
import secrets as random_ids
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conductor_cli.config.settings import Config
from conductor_cli.disk import paths
from conductor_cli.disk.atomic import atomic_write
from conductor_cli.errors import TraceError
from conductor_cli.run.events import (
    RunFailed,
    RunFinished,
    StepToken,
    event_from_dict,
    event_to_dict,
    innermost,
)
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.state import RunState, StepState

VERSION = 1
REDACTED = "[REDACTED]"


def traces_dir() -> Path:
    return paths.data_dir() / "traces"


def new_trace_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{random_ids.token_hex(3)}"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")


def config_secrets(config: Config) -> list[str]:
    """The values of every API key the config points at, to scrub from anything written."""
    names = {w.api_key_env for w in config.workers if w.api_key_env}
    if config.conductor.api_key_env:
        names.add(config.conductor.api_key_env)
    values = [os.environ.get(n, "") for n in sorted(names)]
    return [v for v in values if len(v) >= 6]


def redact_text(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
        escaped = json.dumps(secret)[1:-1]
        if escaped != secret:
            text = text.replace(escaped, REDACTED)
    return text


def pool_record(config: Config) -> list[dict[str, Any]]:
    # Worker settings hold no secrets: api_key_env is the variable's name, never its value.
    return [{k: v for k, v in asdict(w).items() if v is not None} for w in config.workers]


class TraceWriter:
    """Subscribes to a run's events and keeps its trace file current.

    The run's events are folded into a `RunState`; the file is written from that state and
    from what the events do not say (id, inputs, conductor, pool, plan, totals, extras).
    """

    def __init__(
        self,
        *,
        question: str,
        attachments: Sequence[Attachment],
        config: Config,
        conductor_identity: str,
        secrets: Sequence[str] = (),
        directory: Path | None = None,
        trace_id: str | None = None,
        extra: dict[str, Any] | None = None,
        base: dict[str, Any] | None = None,
    ) -> None:
        self.secrets = list(secrets)
        # The file is first written for the run's first event, which the run emits inside
        # the block that marks it interrupted on Ctrl-C: a file on disk never stays "running".
        self.written = False
        # Set once the run's last event is on disk; see __call__.
        self.ended = False
        if base is not None:  # resuming: keep writing into the interrupted trace
            self.path = Path(base["_path"])
            self.header = {k: v for k, v in base.items() if k != "_path"}
            self.events: list[dict[str, Any]] = list(base.get("events") or [])
            self.state = resumed_state(base)
            self.state.status, self.state.error = "running", None
            return
        self.id = trace_id or new_trace_id()
        self.path = (directory or traces_dir()) / f"{self.id}.json"
        c = config.conductor
        self.events = []
        self.state = RunState(question=question)
        # The keys in the order the file has always had them; the run's own are filled in
        # from the state at each write.
        self.header: dict[str, Any] = {
            "version": VERSION,
            "id": self.id,
            "status": "running",
            "started_at": _iso(time.time()),
            "finished_at": None,
            "question": question,
            "inputs": [{"name": a.name, "size": a.size, "text": a.text} for a in attachments],
            "conductor": {
                "model": c.model,
                "identity": conductor_identity,
                "temperature": c.temperature,
                "seed": c.seed,
                "max_steps": c.max_steps,
                "max_rounds": c.max_rounds,  # resume continues up to it (older traces: 1)
            },
            "pool": pool_record(config),
            "workflow": None,
            "plan": None,
            "events": [],
            "steps": [],
            "answer": None,
            "error": None,
            "totals": {},
            **(extra or {}),
        }

    def record(self) -> dict[str, Any]:
        """The trace as the file holds it after the events so far."""
        return {**self.header, "events": self.events, **run_record(self.state)}

    def _write(self) -> None:
        paths.private_dir(self.path.parent)
        text = json.dumps(self.record(), ensure_ascii=False, indent=1)
        atomic_write(self.path, redact_text(text, self.secrets).encode("utf-8"))
        self.written = True

    def set_plan(self, plan: dict[str, Any]) -> None:
        self.header["plan"] = plan

    def set_totals(self, totals: dict[str, Any]) -> None:
        self.header["totals"] = totals

    def __call__(self, event: Any) -> None:
        if isinstance(innermost(event), StepToken):
            return
        if self.ended:
            # After Ctrl-C a step's thread may still report, e.g. that its model was closed
            # under it: the trace already says where the run stopped, and resume reruns it.
            return
        self.events.append(event_to_dict(event))
        if self.state.apply(event) or not self.written:
            self._write()
        # Only once written: Ctrl-C during the write of "done" must still get "interrupted"
        # onto the disk, or the file would say "running" for ever.
        self.ended = isinstance(event, (RunFinished, RunFailed))


def annotate_trace(path: Path, key: str, value: Any) -> None:
    """Add one top-level key to a finished trace (eval writes the reward once it is scored)."""
    record = json.loads(path.read_text(encoding="utf-8"))
    record[key] = value
    atomic_write(path, json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8"))


# How the trace names a step's status: it has never told retrying from running, nor a step
# cut off by a failed run from one that failed itself.
_TRACE_STEP_STATUS: dict[str, str] = {"retrying": "running", "stopped": "failed"}


def run_record(state: RunState) -> dict[str, Any]:
    """A run's own keys of its trace: status, finished_at, workflow, steps, answer, error."""
    return {
        "status": state.status,
        "finished_at": None if state.finished_at is None else _iso(state.finished_at),
        "workflow": None if state.workflow is None else state.workflow.to_dict(),
        "steps": [step_record(s) for s in state.steps],
        "answer": state.answer,
        "error": state.error,
        **(
            {"rounds": [round_record(k, r) for k, r in enumerate(state.rounds, 2)]}
            if state.rounds
            else {}
        ),
    }


def round_record(number: int, state: RunState) -> dict[str, Any]:
    """A later round: its workflow (no steps: the answer was kept), steps and answer."""
    return {
        "round": number,
        "status": state.status,
        "decision": _decision(state),
        "workflow": None if state.workflow is None else state.workflow.to_dict(),
        "steps": [step_record(s) for s in state.steps],
        "answer": state.answer,
        "error": state.error,
    }


def _decision(state: RunState) -> str | None:
    """As RunResult says it: kept, corrected, failed; None while running or interrupted."""
    if state.kept:
        return "kept"
    return {"done": "corrected", "failed": "failed"}.get(state.status)


def nested_record(state: RunState) -> dict[str, Any]:
    """A nested run as its step's `nested` key holds it (finished_at only once it ended)."""
    out: dict[str, Any] = {
        "question": state.question,
        "status": state.status,
        "workflow": None if state.workflow is None else state.workflow.to_dict(),
        "steps": [step_record(s) for s in state.steps],
        "answer": state.answer,
        "error": state.error,
    }
    if state.finished_at is not None:
        out["finished_at"] = _iso(state.finished_at)
    return out


def step_record(step: StepState) -> dict[str, Any]:
    """A step as the trace holds it: each group of keys only once its event happened."""
    out: dict[str, Any] = {
        "index": step.index,
        "worker": step.worker,
        "task": step.task,
        "sees": list(step.sees),
        "status": _TRACE_STEP_STATUS.get(step.status, step.status),
    }
    if step.messages is not None:
        out["messages"] = list(step.messages)
    if step.last_error is not None:
        out["retries"] = step.retries
        out["last_error"] = step.last_error
    if step.fallback is not None:
        out["fallback"] = step.fallback
    if step.nested is not None:
        out["nested"] = nested_record(step.nested)
    if step.source is not None:
        out["output"] = step.output
        out["tokens_in"] = step.tokens_in
        out["tokens_out"] = step.tokens_out
        out["cost"] = step.cost
        out["seconds"] = None if step.seconds is None else round(step.seconds, 3)
        out["source"] = step.source
        if step.finish is not None:  # not known for steps of older traces
            out["finish_reason"] = step.finish
        if step.confinement is not None:  # a tool that ran a program, and how confined
            out["confinement"] = step.confinement
        if step.tool_calls:  # the agent's tools the worker called (the client runs them)
            out["tool_calls"] = list(step.tool_calls)
    # A finished step says error null; a failed or skipped one the reason; one never ended
    # has no error key.
    if step.source is not None or step.error is not None:
        out["error"] = step.error
    return out


def resumed_state(record: dict[str, Any]) -> RunState:
    """The state of a recorded run, folded again from its events (to resume writing it).

    Events are recorded without the prompts the steps were sent, so each step's messages are
    taken from its record.
    """
    state = RunState(question=record.get("question"))
    for raw in record.get("events") or []:
        try:
            state.apply(event_from_dict(raw))
        except (ValueError, TypeError, KeyError) as e:
            raise TraceError(f"{record.get('_path')}: a recorded event is damaged ({e}).") from None
    _restore_messages(state, record.get("steps"))
    return state


def _restore_messages(state: RunState, records: Any) -> None:
    for raw in records if isinstance(records, list) else []:
        index = raw.get("index") if isinstance(raw, dict) else None
        if not isinstance(index, int) or not 0 <= index < len(state.steps):
            continue
        step = state.steps[index]
        if isinstance(raw.get("messages"), list):
            step.messages = tuple(raw["messages"])
        nested = raw.get("nested")
        if step.nested is not None and isinstance(nested, dict):
            _restore_messages(step.nested, nested.get("steps"))


def resolve_trace_path(ref: str) -> Path:
    """A trace by path, by id, or by a unique id prefix."""
    as_path = Path(ref).expanduser()
    if as_path.suffix == ".json" or os.sep in ref:
        if not as_path.exists():
            raise TraceError(f"{as_path}: no such trace file.")
        return as_path
    directory = traces_dir()
    exact = directory / f"{ref}.json"
    if exact.exists():
        return exact
    matches = sorted(directory.glob(f"{ref}*.json")) if directory.exists() else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise TraceError(f"trace id {ref!r} is ambiguous ({len(matches)} traces); give more of it.")
    raise TraceError(f"no trace {ref!r} in {directory}; see `conductor traces list`.")


def load_trace(ref: str | Path) -> dict[str, Any]:
    path = ref if isinstance(ref, Path) else resolve_trace_path(ref)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise TraceError(f"{path}: cannot read trace: {e.strerror}.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceError(
            f"{path}: not a valid trace (damaged or truncated JSON: {e}). "
            "It cannot be replayed; remove it with `conductor traces rm`."
        ) from None
    if not isinstance(record, dict) or "version" not in record or "question" not in record:
        raise TraceError(f"{path}: not a conductor trace (no version or question).")
    if not isinstance(record["version"], int) or record["version"] > VERSION:
        raise TraceError(
            f"{path}: trace version {record['version']} is newer than this conductor reads "
            f"({VERSION}); upgrade conductor."
        )
    problem = _shape_problem(record)
    if problem:
        raise TraceError(
            f"{path}: damaged trace ({problem}); remove it with `conductor traces rm`."
        )
    record["_path"] = str(path)
    return record


def _list_of_dicts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, dict) for x in value)


# What the readers of a trace rely on: key -> (check, what it should be).
_SHAPE: dict[str, tuple[Any, str]] = {
    "id": (lambda v: isinstance(v, str), "a string"),
    "question": (lambda v: isinstance(v, str), "a string"),
    "status": (lambda v: isinstance(v, str), "a string"),
    "answer": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "events": (_list_of_dicts, "a list of objects"),
    "steps": (_list_of_dicts, "a list of objects"),
    "inputs": (
        lambda v: (
            _list_of_dicts(v)
            and all(
                isinstance(i.get("name"), str) and isinstance(i.get("text", ""), str) for i in v
            )
        ),
        "a list of named inputs",
    ),
    "workflow": (lambda v: v is None or isinstance(v, dict), "an object"),
    "totals": (lambda v: v is None or isinstance(v, dict), "an object"),
    "plan": (lambda v: v is None or isinstance(v, dict), "an object"),
}


def _shape_problem(record: dict[str, Any]) -> str | None:
    for key, (check, expected) in _SHAPE.items():
        if key in record and not check(record[key]):
            return f"{key!r} should be {expected}"
    return None


def trace_summary(record: dict[str, Any]) -> dict[str, Any]:
    steps = record.get("steps") or []
    return {
        "id": record.get("id"),
        "time": record.get("started_at"),
        "question": record.get("question"),
        "steps": len(steps),
        "steps_done": sum(1 for s in steps if s.get("status") == "done"),
        "duration": (record.get("totals") or {}).get("seconds"),
        "status": record.get("status"),
        "path": record.get("_path"),
    }


def list_traces(directory: Path | None = None) -> list[dict[str, Any]]:
    """Every trace, newest first; a damaged file is listed as such, never skipped silently."""
    folder = directory or traces_dir()
    rows = []
    for path in folder.glob("*.json") if folder.exists() else []:
        try:
            rows.append(trace_summary(load_trace(path)))
        except TraceError:
            rows.append(
                {
                    "id": path.stem,
                    "time": None,
                    "question": None,
                    "steps": 0,
                    "steps_done": 0,
                    "duration": None,
                    "status": "damaged",
                    "path": str(path),
                }
            )
    return sorted(rows, key=lambda r: (r["time"] or "", r["id"] or ""), reverse=True)
