"""`POST /v1/messages` and `/v1/messages/count_tokens` (Anthropic's Messages API, what Claude
Code speaks with ANTHROPIC_BASE_URL), plain and streamed, over the one run path
(server/agent_runs.py). Errors come in Anthropic's form. The stream sends `message_start` at
once and `ping` while the conductor plans."""

from __future__ import annotations

import threading
from http import HTTPStatus
from typing import Any

from conductor_cli.api import RunResult
from conductor_cli.errors import ConductorError
from conductor_cli.server.agent_runs import plan_line, serve_api, serve_turn
from conductor_cli.server.messages_shapes import (
    MessagesRequest,
    content_blocks,
    count_tokens,
    error_body,
    message,
    new_id,
    parse_messages,
    sse,
    stop_reason,
    tool_input,
    usage,
)
from conductor_cli.server.openai_shapes import BadRequest
from conductor_cli.server.routes import Api, Exchange, FinalText, Route, answer_stream

HEARTBEAT_S = 5.0
API = "messages"


def _refuse(ex: Exchange, e: BadRequest) -> None:
    """A refusal in Anthropic's form."""
    kind = "not_found_error" if e.status == HTTPStatus.NOT_FOUND else "invalid_request_error"
    close = None if ex.body_read else {"Connection": "close"}
    ex.send_json(e.status, error_body(str(e), kind), close)


def _busy(ex: Exchange, said: str) -> None:
    """Every run slot taken, in Anthropic's form."""
    ex.send_json(
        HTTPStatus.TOO_MANY_REQUESTS, error_body(said, "rate_limit_error"), {"Retry-After": "1"}
    )


def tokens(ex: Exchange) -> None:
    try:
        ex.send_json(HTTPStatus.OK, count_tokens(ex.read_json()))
    except BadRequest as e:
        _refuse(ex, e)


def _run(ex: Exchange, request: MessagesRequest, on_event: Any) -> RunResult:
    return serve_turn(ex, request, API, on_event)


def _complete(ex: Exchange, request: MessagesRequest) -> None:
    try:
        result = _run(ex, request, None)
    except ConductorError as e:
        ex.send_json(HTTPStatus.BAD_GATEWAY, error_body(str(e), "api_error"))
        return
    except KeyboardInterrupt:
        return
    blocks = content_blocks(result.answer, result.tool_calls)
    body = message(new_id(), request.model, blocks, result.totals(), stop_reason(blocks))
    trace = result.trace_path.stem if result.trace_path else ""
    body["conductor_trace"] = trace or None
    ex.send_json(
        HTTPStatus.OK, body, {"x-conductor-trace": trace, "x-conductor-plan": plan_line(result)}
    )


class _Stream:
    def __init__(self, ex: Exchange, request: MessagesRequest) -> None:
        self.ex = ex
        self.request = request
        self.lock = threading.Lock()
        self.started = threading.Event()
        self.final = FinalText(
            self._delta, answer=answer_stream(ex, request.question, request.agent is not None)
        )
        self.text_open = False
        self.text = ""
        self.blocks = 0

    def send(self, event: dict[str, Any]) -> None:
        with self.lock:
            self.ex.write(sse(event))

    def _heartbeat(self) -> None:
        while not self.started.wait(HEARTBEAT_S):
            try:
                self.send({"type": "ping"})
            except OSError:
                return

    def _delta(self, piece: str) -> None:
        if not piece:
            return
        self.started.set()
        if not self.text_open:
            self.text_open = True
            block = {"type": "text", "text": ""}
            self.send({"type": "content_block_start", "index": 0, "content_block": block})
            self.blocks = 1
        self.text += piece
        delta = {"type": "text_delta", "text": piece}
        self.send({"type": "content_block_delta", "index": 0, "delta": delta})

    def run(self) -> None:
        self.ex.start_stream()
        start = message(new_id(), self.request.model, [], None, None)
        self.send({"type": "message_start", "message": start})
        threading.Thread(target=self._heartbeat, daemon=True).start()
        try:
            result = _run(self.ex, self.request, self.final.on_event)
        except ConductorError as e:
            self.send(error_body(str(e), "api_error"))
            return
        except KeyboardInterrupt:
            return
        finally:
            self.started.set()
        self._finish(result)

    def _finish(self, result: RunResult) -> None:
        self.final.finish(result.answer)
        blocks = content_blocks(result.answer, result.tool_calls)
        said = blocks[0]["text"] if blocks and blocks[0]["type"] == "text" else ""
        # Text the stream has not carried yet (a note on a call that could not be passed on).
        if said.startswith(self.text) and said != self.text:
            self._delta(said[len(self.text) :])
        passed = [c for c in result.tool_calls if tool_input(c) is not None]
        if not self.text_open and not passed:  # an empty answer is still one text block
            block = {"type": "text", "text": ""}
            self.send({"type": "content_block_start", "index": 0, "content_block": block})
            self.text_open, self.blocks = True, 1
        if self.text_open:
            self.send({"type": "content_block_stop", "index": 0})
        index = self.blocks
        for call in passed:
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            self.send({"type": "content_block_start", "index": index, "content_block": block})
            delta = {"type": "input_json_delta", "partial_json": call.arguments}
            self.send({"type": "content_block_delta", "index": index, "delta": delta})
            self.send({"type": "content_block_stop", "index": index})
            index += 1
        reason = stop_reason(blocks)
        self.send(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": usage(result.totals()),
                "conductor_trace": result.trace_path.stem if result.trace_path else None,
            }
        )
        self.send({"type": "message_stop"})


def _stream(ex: Exchange, request: MessagesRequest) -> None:
    _Stream(ex, request).run()


MESSAGES = Api(API, parse_messages, _complete, _stream, refuse=_refuse, busy=_busy)
ROUTES = (
    Route("POST", "/v1/messages", lambda ex: serve_api(ex, MESSAGES)),
    Route("POST", "/v1/messages/count_tokens", tokens),
)
