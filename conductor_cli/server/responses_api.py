"""`POST /v1/responses` (OpenAI's Responses API, what Codex CLI speaks), plain and streamed,
over the one run path (server/agent_runs.py). The stream opens with `response.created` at
once and repeats `response.in_progress` while the conductor plans, so that a client's idle
timeout never fires before the answer starts."""

from __future__ import annotations

import threading
from http import HTTPStatus
from typing import Any

from conductor_cli.api import RunResult
from conductor_cli.errors import ConductorError
from conductor_cli.server.agent_runs import plan_line, serve_api, serve_turn
from conductor_cli.server.responses_shapes import (
    ResponsesRequest,
    call_item,
    message_item,
    new_id,
    output_items,
    parse_responses,
    response,
    sse,
)
from conductor_cli.server.routes import Api, Exchange, FinalText, Route, answer_stream

HEARTBEAT_S = 5.0  # between `response.in_progress` events until the answer starts
API = "responses"


def _run(ex: Exchange, request: ResponsesRequest, on_event: Any) -> RunResult:
    return serve_turn(ex, request, API, on_event)


def _extra(result: RunResult) -> dict[str, Any]:
    trace = result.trace_path.stem if result.trace_path else None
    return {
        "conductor_trace": trace,
        "conductor_plan": [s.to_dict() for s in result.workflow.steps],
    }


def _complete(ex: Exchange, request: ResponsesRequest) -> None:
    try:
        result = _run(ex, request, None)
    except ConductorError as e:
        ex.error(HTTPStatus.BAD_GATEWAY, str(e), "server_error")
        return
    except KeyboardInterrupt:
        return  # the client left (or the server stops)
    output = [item for _, item, _ in output_items(result.answer, result.tool_calls)]
    body = response(
        new_id("resp"), request, "completed", output, result.totals(), None, _extra(result)
    )
    trace = result.trace_path.stem if result.trace_path else ""
    ex.send_json(
        HTTPStatus.OK, body, {"x-conductor-trace": trace, "x-conductor-plan": plan_line(result)}
    )


class _Stream:
    """One streamed response: events in order, numbered, from the run's threads and the
    heartbeat, one at a time."""

    def __init__(self, ex: Exchange, request: ResponsesRequest) -> None:
        self.ex = ex
        self.request = request
        self.id = new_id("resp")
        self.lock = threading.Lock()
        self.seq = 0
        self.started = threading.Event()  # the answer (or the end) has begun
        self.final = FinalText(
            self._delta, answer=answer_stream(ex, request.question, request.agent is not None)
        )
        self.text_id: str | None = None  # the message item being streamed
        self.text = ""

    def send(self, event: dict[str, Any]) -> None:
        with self.lock:
            event["sequence_number"] = self.seq
            self.seq += 1
            self.ex.write(sse(event))

    def _heartbeat(self) -> None:
        while not self.started.wait(HEARTBEAT_S):
            try:
                self.send({"type": "response.in_progress", "response": self._state("in_progress")})
            except OSError:
                return

    def _state(self, status: str, output: list | None = None, **kw: Any) -> dict[str, Any]:
        return response(self.id, self.request, status, output or [], **kw)

    def _open_text(self) -> None:
        if self.text_id is not None:
            return
        self.started.set()
        self.text_id = new_id("msg")
        item = message_item(self.text_id, "", "in_progress")
        self.send({"type": "response.output_item.added", "output_index": 0, "item": item})
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        self.send(
            {
                "type": "response.content_part.added",
                "item_id": self.text_id,
                "output_index": 0,
                "content_index": 0,
                "part": part,
            }
        )

    def _delta(self, piece: str) -> None:
        if not piece:
            return
        self._open_text()
        self.text += piece
        self.send(
            {
                "type": "response.output_text.delta",
                "item_id": self.text_id,
                "output_index": 0,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
        )

    def run(self) -> None:
        self.ex.start_stream()
        self.send({"type": "response.created", "response": self._state("in_progress")})
        self.send({"type": "response.in_progress", "response": self._state("in_progress")})
        threading.Thread(target=self._heartbeat, daemon=True).start()
        try:
            result = _run(self.ex, self.request, self.final.on_event)
        except ConductorError as e:
            self.started.set()
            error = {"code": "server_error", "message": str(e)}
            self.send({"type": "response.failed", "response": self._state("failed", error=error)})
            return
        except KeyboardInterrupt:
            self.started.set()
            return  # the client left (or the server stops)
        finally:
            self.started.set()
        self._finish(result)

    def _finish(self, result: RunResult) -> None:
        self.final.finish(result.answer)
        output: list[dict[str, Any]] = []
        if self.text_id is not None or not result.tool_calls:
            self._open_text()
            assert self.text_id is not None
            item = message_item(self.text_id, self.text)
            part = item["content"][0]
            base = {"item_id": self.text_id, "output_index": 0, "content_index": 0}
            self.send(
                {"type": "response.output_text.done", **base, "text": self.text, "logprobs": []}
            )
            self.send({"type": "response.content_part.done", **base, "part": part})
            self.send({"type": "response.output_item.done", "output_index": 0, "item": item})
            output.append(item)
        for call in result.tool_calls:
            index, item_id = len(output), new_id("fc")
            opened = call_item(item_id, call, "in_progress")
            self.send({"type": "response.output_item.added", "output_index": index, "item": opened})
            base = {"item_id": item_id, "output_index": index}
            self.send(
                {"type": "response.function_call_arguments.delta", **base, "delta": call.arguments}
            )
            self.send(
                {
                    "type": "response.function_call_arguments.done",
                    **base,
                    "arguments": call.arguments,
                    "name": call.name,
                }
            )
            item = call_item(item_id, call)
            self.send({"type": "response.output_item.done", "output_index": index, "item": item})
            output.append(item)
        done = self._state("completed", output, totals=result.totals(), extra=_extra(result))
        self.send({"type": "response.completed", "response": done})


def _stream(ex: Exchange, request: ResponsesRequest) -> None:
    _Stream(ex, request).run()


RESPONSES = Api(API, parse_responses, _complete, _stream)
ROUTES = (Route("POST", "/v1/responses", lambda ex: serve_api(ex, RESPONSES)),)
