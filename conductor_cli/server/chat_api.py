"""`POST /v1/chat/completions` (OpenAI's chat completions, what most clients and qwen-code
speak), plain and streamed, with tool calls, over the one run path (server/agent_runs.py)."""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from typing import Any

from conductor_cli.api import RunResult
from conductor_cli.errors import EXIT_USAGE, ConductorError
from conductor_cli.run.events import PlanReady, StepFinished, StepToken
from conductor_cli.server.agent_runs import (
    config_for,
    plan_line,
    serve_turn,
)
from conductor_cli.server.openai_shapes import (
    BadRequest,
    ChatRequest,
    chunk,
    completion,
    completion_id,
    error_body,
    parse_chat,
    tool_call_deltas,
    usage,
)

API = "chat completions"
# `handler` below: server/http_api's request handler (its wfile, _send_json, _refuse, ...).


def answer(handler: Any, body: Any) -> None:
    try:
        request = parse_chat(body)
        config_for(handler.app.config, request.model)  # 404 before any run
    except BadRequest as e:
        handler._refuse(e)
        return
    if not handler._take_slot():
        return
    try:
        if request.stream:
            _stream(handler, request)
        else:
            _complete(handler, request)
    finally:
        handler.app.slots.release()


def _run(handler: Any, request: ChatRequest, on_event: Any) -> RunResult:
    return serve_turn(handler, request, API, on_event, seed=request.seed)


def _complete(handler: Any, request: ChatRequest) -> None:
    try:
        result = _run(handler, request, None)
    except BadRequest as e:
        handler._refuse(e)
        return
    except ConductorError as e:
        status = HTTPStatus.BAD_REQUEST if e.exit_code == EXIT_USAGE else HTTPStatus.BAD_GATEWAY
        handler._error(status, str(e), "conductor_error")
        return
    except KeyboardInterrupt:
        return  # the client left (or the server stops): nobody to answer
    trace = result.trace_path.stem if result.trace_path else None
    calls = result.tool_calls
    body = completion(request.model, result.answer, result.totals(), trace, calls)
    headers = {"x-conductor-trace": trace or "", "x-conductor-plan": plan_line(result)}
    handler._send_json(HTTPStatus.OK, body, headers)


def _stream(handler: Any, request: ChatRequest) -> None:
    """Server-sent events: the final step's text as it is generated, then usage."""
    handler.send_response(HTTPStatus.OK)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True
    cid = completion_id()
    lock = threading.Lock()  # steps report from their own threads
    final = [-1]
    sent = [""]

    def send(body: dict) -> None:
        handler.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
        handler.wfile.flush()

    def on_event(event: object) -> None:
        with lock:
            if isinstance(event, PlanReady):
                final[0] = len(event.workflow.steps) - 1
                send(chunk(cid, request.model, {"role": "assistant", "content": ""}))
            elif isinstance(event, StepToken) and event.index == final[0]:
                sent[0] += event.text
                send(chunk(cid, request.model, {"content": event.text}))
            elif isinstance(event, StepFinished) and event.index == final[0]:
                # A cached or non-streaming step reports its text only here.
                rest = event.output[len(sent[0]) :] if event.output.startswith(sent[0]) else ""
                if rest:
                    sent[0] += rest
                    send(chunk(cid, request.model, {"content": rest}))

    try:
        result = _run(handler, request, on_event)
    except (ConductorError, BadRequest) as e:
        send(error_body(str(e), "conductor_error"))
        handler.wfile.write(b"data: [DONE]\n\n")
        return
    except KeyboardInterrupt:
        return  # the client left (or the server stops)
    with lock:
        for delta in tool_call_deltas(result.tool_calls):
            send(chunk(cid, request.model, delta))
        end = chunk(cid, request.model, {}, "tool_calls" if result.tool_calls else "stop")
        end["usage"] = usage(result.totals())
        end["conductor_plan"] = json.loads(plan_line(result))
        end["conductor_trace"] = result.trace_path.stem if result.trace_path else None
        send(end)
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
