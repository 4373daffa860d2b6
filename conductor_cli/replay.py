"""Replaying traces: play the recorded run offline, or run its workflow again.

- `play`: re-emits the recorded events (no model, no network, no workers needed), optionally
  at the recorded pace.
- `rerun`: runs the recorded workflow again: `live` calls every worker anew, `from_step=K`
  keeps steps before K and recomputes from K, `resume` runs only the steps that never finished
  and writes them into the same trace.

A trace with rounds (`ask --rounds N`): `live` and `from_step` run every recorded round's
workflow again in turn (a round that kept the answer keeps it again; none is re-planned), and
`resume` keeps every finished round and step, re-plans a round that stopped while planning, and
goes on up to the run's recorded `max_rounds`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from conductor_cli.api import PriorRound, RunOptions, RunResult, TraceOptions, execute
from conductor_cli.config.settings import Config
from conductor_cli.errors import TraceError, WorkflowError
from conductor_cli.run.engine import StepResult
from conductor_cli.run.events import PlanReady, StepFinished, Subscriber, event_from_dict
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.storage.cache import CacheMode

if TYPE_CHECKING:
    from conductor_cli.runtime import Runtime
    from conductor_cli.wire import RunRequest


def trace_workflow(record: dict[str, Any], path: Any = None) -> Workflow | None:
    wf = record.get("workflow")
    if not wf:
        return None
    try:
        return Workflow(tuple(Step(s["worker"], s["task"], tuple(s["sees"])) for s in wf["steps"]))
    except (KeyError, TypeError) as e:
        raise TraceError(
            f"{path or record.get('_path')}: the recorded workflow is damaged ({e})."
        ) from None


def _done_steps(record: dict[str, Any]) -> dict[int, StepResult]:
    return {
        int(s["index"]): StepResult.from_trace(s)
        for s in record.get("steps") or []
        if s.get("status") == "done"
    }


def trace_rounds(record: dict[str, Any]) -> list[PriorRound]:
    """The later rounds a trace recorded (2, 3, ...), each with its finished steps."""
    rounds = record.get("rounds") or []
    if not isinstance(rounds, list) or not all(isinstance(r, dict) for r in rounds):
        raise TraceError(f"{record.get('_path')}: the recorded rounds are damaged.")
    try:
        return [PriorRound(trace_workflow(r, record.get("_path")), _done_steps(r)) for r in rounds]
    except (KeyError, TypeError, ValueError) as e:
        raise TraceError(f"{record.get('_path')}: a recorded round is damaged ({e}).") from None


def recorded_max_rounds(record: dict[str, Any]) -> int:
    """The run's max_rounds (traces before rounds: 1, or as many rounds as they hold)."""
    recorded = (record.get("conductor") or {}).get("max_rounds")
    rounds = 1 + len(record.get("rounds") or [])
    return max(recorded, rounds) if isinstance(recorded, int) else rounds


def _replayable(prior: list[PriorRound], worker_map: Mapping[str, str]) -> list[PriorRound]:
    """The rounds a replay runs again: those up to the first with no recorded workflow, with
    no step kept (every worker is called anew)."""
    out = []
    for r in prior:
        if r.workflow is None:
            break
        out.append(PriorRound(remap(r.workflow, worker_map)))
    return out


def _with_rounds(config: Config, max_rounds: int) -> Config:
    return dataclasses.replace(
        config, conductor=dataclasses.replace(config.conductor, max_rounds=max_rounds)
    )


def trace_attachments(record: dict[str, Any]) -> list[Attachment]:
    return [Attachment(i["name"], i.get("text", "")) for i in record.get("inputs") or []]


def play(
    record: dict[str, Any],
    emit: Subscriber,
    *,
    speed: float = 0.0,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Re-emit a trace's events; `speed` 1 is the recorded pace, 2 twice as fast, 0 instant.

    Returns the recorded answer, or None when the run never finished.
    """
    previous: float | None = None
    for raw in record.get("events") or []:
        try:
            event = event_from_dict(raw)
        except (ValueError, TypeError, KeyError) as e:
            raise TraceError(f"{record.get('_path')}: a recorded event is damaged ({e}).") from None
        if speed > 0 and previous is not None:
            sleep(max(0.0, (event.at - previous) / speed))
        previous = event.at
        if isinstance(event, StepFinished | PlanReady):
            event = dataclasses.replace(event, source="trace")
        emit(event)
    return record.get("answer") if record.get("status") == "done" else None


def remap(workflow: Workflow, mapping: Mapping[str, str]) -> Workflow:
    """Send each step of worker OLD to NEW ('*' maps every worker)."""
    if not mapping:
        return workflow
    steps = tuple(
        dataclasses.replace(s, worker=mapping.get(s.worker, mapping.get("*", s.worker)))
        for s in workflow.steps
    )
    return Workflow(steps)


def parse_worker_map(values: list[str]) -> dict[str, str]:
    """`--worker OLD=NEW` pairs; a lone `NEW` sends every step to that worker."""
    mapping: dict[str, str] = {}
    for value in values:
        old, sep, new = value.partition("=")
        if not sep:
            old, new = "*", value
        if not old.strip() or not new.strip():
            raise WorkflowError(f"--worker {value!r}: expected OLD=NEW or a worker name.")
        mapping[old.strip()] = new.strip()
    return mapping


def live_request(
    record: dict[str, Any], config: Config, worker_map: Mapping[str, str]
) -> RunRequest:
    """`replay --live` as a request to a server: the recorded workflow, every worker called
    again (the cache refreshed), the recorded seed."""
    from conductor_cli.wire import Overrides, RunRequest

    workflow = trace_workflow(record)
    if workflow is None:
        raise TraceError(
            f"trace {record.get('id')} has no workflow (it stopped while planning); "
            "use --resume to plan and run it."
        )
    seed = int((record.get("conductor") or {}).get("seed", config.conductor.seed))
    later = _replayable(trace_rounds(record), worker_map)
    return RunRequest(
        str(record["question"]),
        tuple((a.name, a.text) for a in trace_attachments(record)),
        remap(workflow, worker_map).to_dict(),
        Overrides(seed=seed, max_rounds=1 + len(later)),
        CacheMode.REFRESH.value,
        source="trace",
        replay_of=record.get("id"),
        rounds=tuple(r.workflow.to_dict() for r in later if r.workflow is not None),
    )


def rerun(
    record: dict[str, Any],
    *,
    config: Config,
    live: bool = False,
    from_step: int | None = None,
    resume: bool = False,
    worker_map: Mapping[str, str] | None = None,
    on_event: Subscriber | None = None,
    stream: bool = False,
    runtime: Runtime | None = None,
) -> RunResult:
    question = str(record["question"])
    attachments = trace_attachments(record)
    workflow = trace_workflow(record)
    seed = int((record.get("conductor") or {}).get("seed", config.conductor.seed))
    recorded = _done_steps(record)
    prior = trace_rounds(record)
    mapping = worker_map or {}
    if resume:
        if record.get("status") == "done":
            raise TraceError(f"trace {record.get('id')} is already complete; nothing to resume.")
        # Keep every finished step and round; run the rest (and the plan, if it never
        # finished), up to the rounds the run was asked for.
        later = [
            PriorRound(remap(r.workflow, mapping) if r.workflow else None, r.keep) for r in prior
        ]
        return execute(
            question,
            config=_with_rounds(config, recorded_max_rounds(record)),
            prior_rounds=later,
            attachments=attachments,
            workflow=remap(workflow, mapping) if workflow else None,
            keep=recorded if workflow else {},
            on_event=on_event,
            options=RunOptions(seed=seed, stream=stream),
            trace=TraceOptions(base=record),
            workflow_source="trace",
            runtime=runtime,
        )
    if workflow is None:
        raise TraceError(
            f"trace {record.get('id')} has no workflow (it stopped while planning); "
            "use --resume to plan and run it."
        )
    if from_step is None:
        # A fresh run of the recorded workflow: the request a server would get (one road).
        from dataclasses import replace

        from conductor_cli.api import execute_request

        request = replace(live_request(record, config, mapping), stream=stream)
        return execute_request(request, config=config, on_event=on_event, runtime=runtime)
    if not 0 <= from_step < len(workflow.steps):
        raise WorkflowError(
            f"--from-step {from_step}: the workflow has steps 0..{len(workflow.steps) - 1}."
        )
    missing = [i for i in range(from_step) if i not in recorded]
    if missing:
        raise TraceError(f"--from-step {from_step}: steps {missing} never finished in the trace.")
    keep = {i: recorded[i] for i in range(from_step)}
    later = _replayable(prior, mapping)
    return execute(
        question,
        config=_with_rounds(config, 1 + len(later)),
        prior_rounds=later,
        attachments=attachments,
        workflow=remap(workflow, mapping),
        keep=keep,
        on_event=on_event,
        options=RunOptions(CacheMode.REFRESH, stream=stream, seed=seed),
        trace=TraceOptions(extra={"replay_of": record.get("id")}),
        workflow_source="trace",
        runtime=runtime,
    )
