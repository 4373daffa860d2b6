"""One request of any of the server's APIs (chat completions, responses, messages) as a run:
an agent's tool loop kept by the worker that called the tool (run/agent.py), the plan said in
a header and the server's log, and what cannot be served said once in that log."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol

from conductor_cli.api import RunOptions, RunResult, execute
from conductor_cli.config.settings import Config, with_conductor
from conductor_cli.run.agent import LOOP_TASK, AgentTurn
from conductor_cli.run.events import Subscriber
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.server.app import ServerApp
from conductor_cli.server.openai_shapes import MODEL, BadRequest
from conductor_cli.server.tool_loops import ToolLoops

if TYPE_CHECKING:
    from conductor_cli.server.routes import Api, Exchange


def trained_names() -> list[str]:
    """The user's own trained conductors; a shipped one is planned for its own pool (the
    embedded default team), which is then the served `conductor` itself."""
    from conductor_cli.policy.registry import list_trained

    return [t.name for t in list_trained(shipped=False)]


def config_for(config: Config, model: str) -> Config:
    if model == MODEL:
        return config
    if model in trained_names():
        return with_conductor(config, model=model)
    raise BadRequest(
        f"model {model!r} does not exist: use {MODEL!r} or a trained conductor (GET /v1/models)",
        HTTPStatus.NOT_FOUND,
        "not_found_error",
    )


def run_turn(
    app: ServerApp,
    config_of: Callable[[Config], Config],
    question: str,
    attachments: Sequence[Attachment],
    agent: AgentTurn | None,
    on_event: Subscriber | None,
    cancel: threading.Event,
    *,
    stream: bool,
    seed: int | None = None,
) -> RunResult:
    """Run one request on the server's warm runtime. `config_of(config)` is the config the
    request's model names. A request that brings the results of tool calls a worker made goes
    to that worker, unplanned; any other is planned by the conductor."""
    loops: ToolLoops = app.tool_loops
    with app.lease(cancel) as (config, runtime):
        config = config_of(config)
        workflow = None
        if agent is not None and agent.open_calls():
            worker = loops.worker_for(agent, [w.name for w in config.workers])
            if worker is not None:
                workflow = Workflow((Step(worker, LOOP_TASK, ()),))
        result = execute(
            question,
            config=config,
            attachments=attachments,
            workflow=workflow,
            on_event=on_event,
            options=RunOptions(stream=stream, seed=seed, cancel=cancel, agent=agent),
            runtime=runtime,
        )
    loops.remember(result)
    last = result.steps[-1]
    if agent is not None and not last.offered_tools:
        loops.note_once(
            f"no-tools:{last.worker}",
            f"worker {last.worker} answered an agent's request but cannot call its tools "
            "(a built-in tool, or a model without tool calls): it answered with text",
        )
    return result


def serve_api(ex: Exchange, api: Api) -> None:
    """One request of `api`: parsed, its model checked (a 404 before any run), a run slot
    taken for it (a 429 where none is free), answered complete or streamed; every refusal
    in the API's own form."""
    try:
        request = api.parse(ex.read_json())
        config_for(ex.app.config, request.model)
    except BadRequest as e:
        if api.refuse is not None:
            api.refuse(ex, e)
        else:
            ex.refuse(e)
        return
    busy = (lambda said: api.busy(ex, said)) if api.busy is not None else None
    with ex.slot(busy) as taken:
        if taken:
            (api.stream if request.stream else api.complete)(ex, request)


class ApiRequest(Protocol):
    """What serve_turn reads of a parsed request of any of the three APIs."""

    @property
    def model(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def attachments(self) -> Sequence[Attachment]: ...
    @property
    def agent(self) -> AgentTurn | None: ...
    @property
    def tool_types(self) -> Sequence[str]: ...


def serve_turn(
    handler: Exchange,
    request: ApiRequest,
    api: str,
    on_event: Subscriber | None,
    seed: int | None = None,
) -> RunResult:
    """One parsed request of any of the three APIs (its model, question, attachments, agent
    turn and tool types) run for `handler`'s client: a hang-up cancels it, and the tool types it
    cannot serve and its plan are said in the log. Streamed when there is someone to stream to."""
    if request.agent is not None:
        note_tool_types(handler.app, request.tool_types, api)
    with handler.watched() as cancel:
        result = run_turn(
            handler.app,
            lambda config: config_for(config, request.model),
            request.question,
            request.attachments,
            request.agent,
            on_event,
            cancel,
            stream=on_event is not None,
            seed=seed,
        )
    log_plan(result, api)
    return result


def note_tool_types(app: ServerApp, types: Sequence[str], api: str) -> None:
    """Tools of types the server cannot run (a provider's built-ins), said once each."""
    for kind in types:
        app.tool_loops.note_once(
            f"tool-type:{kind}",
            f"{api}: tools of type {kind!r} cannot run here; the workers are offered only the "
            "client's function tools",
        )


def plan_line(result: RunResult) -> str:
    """The run's team in one line of JSON (ASCII: it goes in a header): each step's worker,
    task and the steps it saw, as a client that shows no tree may still show."""
    steps = [{"worker": s.worker, "task": s.task, "sees": list(s.sees)} for s in result.steps]
    return json.dumps(steps, ensure_ascii=True, separators=(",", ":"))


def log_plan(result: RunResult, api: str) -> None:
    """The team's plan in the server's log, one line per request."""
    team = " > ".join(f"{s.worker}" for s in result.steps)
    trace = result.trace_path.stem if result.trace_path else "-"
    calls = f", {len(result.tool_calls)} tool call(s)" if result.tool_calls else ""
    sys.stderr.write(f"conductor: {api}: {team}{calls} (trace {trace})\n")
    sys.stderr.flush()
