"""`POST /v1/chat/completions` (OpenAI's chat completions, what most clients and qwen-code
speak), plain and streamed, with tool calls, over the one run path (server/agent_runs.py)."""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from typing import Any

from conductor_cli.api import RunResult
from conductor_cli.errors import EXIT_USAGE, ConductorError
from conductor_cli.server.agent_runs import plan_line, serve_api, serve_turn
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
from conductor_cli.server.routes import Api, Exchange, FinalText, Route, answer_stream

API = "chat completions"


def _run(ex: Exchange, request: ChatRequest, on_event: Any) -> RunResult:
    return serve_turn(ex, request, API, on_event, seed=request.seed)


def _complete(ex: Exchange, request: ChatRequest) -> None:
    try:
        result = _run(ex, request, None)
    except BadRequest as e:
        ex.refuse(e)
        return
    except ConductorError as e:
        status = HTTPStatus.BAD_REQUEST if e.exit_code == EXIT_USAGE else HTTPStatus.BAD_GATEWAY
        ex.error(status, str(e), "conductor_error")
        return
    except KeyboardInterrupt:
        return  # the client left (or the server stops): nobody to answer
    trace = result.trace_path.stem if result.trace_path else None
    calls = result.tool_calls
    body = completion(request.model, result.answer, result.totals(), trace, calls)
    headers = {"x-conductor-trace": trace or "", "x-conductor-plan": plan_line(result)}
    ex.send_json(HTTPStatus.OK, body, headers)


def _stream(ex: Exchange, request: ChatRequest) -> None:
    """Server-sent events: the run's answer as the final step generates it, then usage."""
    ex.start_stream()
    cid = completion_id()
    lock = threading.Lock()  # steps report from their own threads

    def send(body: dict) -> None:
        ex.write(f"data: {json.dumps(body)}\n\n".encode())

    final = FinalText(
        lambda piece: send(chunk(cid, request.model, {"content": piece})),
        lambda: send(chunk(cid, request.model, {"role": "assistant", "content": ""})),
        answer=answer_stream(ex, request.question, request.agent is not None),
    )

    def on_event(event: object) -> None:
        with lock:
            final.on_event(event)

    try:
        result = _run(ex, request, on_event)
    except (ConductorError, BadRequest) as e:
        send(error_body(str(e), "conductor_error"))
        ex.write(b"data: [DONE]\n\n")
        return
    except KeyboardInterrupt:
        return  # the client left (or the server stops)
    with lock:
        final.finish(result.answer)
        for delta in tool_call_deltas(result.tool_calls):
            send(chunk(cid, request.model, delta))
        end = chunk(cid, request.model, {}, "tool_calls" if result.tool_calls else "stop")
        end["usage"] = usage(result.totals())
        end["conductor_plan"] = json.loads(plan_line(result))
        end["conductor_trace"] = result.trace_path.stem if result.trace_path else None
        send(end)
        ex.write(b"data: [DONE]\n\n")


CHAT = Api(API, parse_chat, _complete, _stream)
ROUTES = (Route("POST", "/v1/chat/completions", lambda ex: serve_api(ex, CHAT)),)
