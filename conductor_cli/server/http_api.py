"""The OpenAI-compatible HTTP API over one long-lived Runtime (standard library server: the
client side and start-up never import a web framework)."""

from __future__ import annotations

import hmac
import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from conductor_cli.api import RunOptions, ask
from conductor_cli.config.settings import Config, with_conductor
from conductor_cli.errors import EXIT_USAGE, ConductorError
from conductor_cli.run.events import NestedEvent, PlanReady, StepFinished, StepToken
from conductor_cli.runtime import Runtime
from conductor_cli.server.openai_shapes import (
    MODEL,
    BadRequest,
    ChatRequest,
    chunk,
    completion,
    completion_id,
    error_body,
    models_list,
    parse_chat,
    usage,
)

MAX_BODY_BYTES = 8 << 20


class ConductorServer(ThreadingHTTPServer):
    """Serves runs on one Runtime: models, prompt states, litellm's helper and the cache stay
    loaded between requests."""

    daemon_threads = True

    def __init__(
        self, config: Config, host: str = "127.0.0.1", port: int = 8787, *, key: str | None = None
    ) -> None:
        self.config = config
        self.key = key
        self.runtime = Runtime(config)
        self.runs_served = 0
        self._count = threading.Lock()
        self.slots = threading.BoundedSemaphore(config.server.max_concurrent_runs)
        super().__init__((host, port), _Handler)

    def authorized(self, header: str | None) -> bool:
        if self.key is None:
            return True
        given = (header or "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), self.key.encode())  # constant time

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def trained_names(self) -> list[str]:
        from conductor_cli.train.registry import list_trained

        return [t.name for t in list_trained()]

    def config_for(self, model: str) -> Config:
        if model == MODEL:
            return self.config
        if model in self.trained_names():
            return with_conductor(self.config, model=model)
        raise BadRequest(
            f"model {model!r} does not exist: use {MODEL!r} or a trained conductor "
            "(GET /v1/models)",
            HTTPStatus.NOT_FOUND,
            "not_found_error",
        )

    def served(self) -> None:
        with self._count:
            self.runs_served += 1

    def server_close(self) -> None:
        super().server_close()
        self.runtime.close()


class _Handler(BaseHTTPRequestHandler):
    server: ConductorServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the server's own notes

    # --- plumbing -------------------------------------------------------------------------

    def _send_json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send_json(status, error_body(message, kind))

    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise BadRequest(
                f"the request body is over {MAX_BODY_BYTES >> 20} MB",
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            )
        raw = self.rfile.read(length)
        try:
            return json.loads(raw or b"null")
        except ValueError as e:
            raise BadRequest(f"the request body is not JSON: {e}") from None

    # --- routes ---------------------------------------------------------------------------

    def _allowed(self) -> bool:
        if self.server.authorized(self.headers.get("Authorization")):
            return True
        self._error(
            HTTPStatus.UNAUTHORIZED, "a valid bearer key is required", "authentication_error"
        )
        return False

    def do_GET(self) -> None:
        if not self._allowed():
            return
        if self.path.rstrip("/") == "/v1/models":
            self._send_json(HTTPStatus.OK, models_list(self.server.trained_names()))
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}", "not_found_error")

    def do_POST(self) -> None:
        if not self._allowed():
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}", "not_found_error")
            return
        try:
            request = parse_chat(self._read_json())
            config = self.server.config_for(request.model)
        except BadRequest as e:
            self._error(e.status, str(e), e.kind)
            return
        if not self.server.slots.acquire(blocking=False):
            limit = self.server.config.server.max_concurrent_runs
            self._send_json(
                HTTPStatus.TOO_MANY_REQUESTS,
                error_body(
                    f"{limit} runs are under way (server.max_concurrent_runs)", "rate_limit"
                ),
                {"Retry-After": "1"},
            )
            return
        try:
            if request.stream:
                self._stream(request, config)
            else:
                self._complete(request, config)
        finally:
            self.server.slots.release()

    def _run(self, request: ChatRequest, config: Config, on_event: Any, stream: bool) -> Any:
        result = ask(
            request.question,
            config=config,
            attachments=request.attachments,
            on_event=on_event,
            options=RunOptions(stream=stream, seed=request.seed),
            runtime=self.server.runtime,
        )
        self.server.served()
        return result

    def _complete(self, request: ChatRequest, config: Config) -> None:
        try:
            result = self._run(request, config, None, stream=False)
        except ConductorError as e:
            status = HTTPStatus.BAD_REQUEST if e.exit_code == EXIT_USAGE else HTTPStatus.BAD_GATEWAY
            self._error(status, str(e), "conductor_error")
            return
        trace = result.trace_path.stem if result.trace_path else None
        body = completion(request.model, result.answer, result.totals(), trace)
        self._send_json(HTTPStatus.OK, body, {"x-conductor-trace": trace or ""})

    def _stream(self, request: ChatRequest, config: Config) -> None:
        """Server-sent events: the final step's text as it is generated, then usage."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        cid = completion_id()
        lock = threading.Lock()  # steps report from their own threads
        final = [-1]
        sent = [""]

        def send(body: dict) -> None:
            self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
            self.wfile.flush()

        def on_event(event: object) -> None:
            if isinstance(event, NestedEvent):
                return  # a nested conductor's steps are not the answer
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
            result = self._run(request, config, on_event, stream=True)
        except ConductorError as e:
            send(error_body(str(e), "conductor_error"))
            self.wfile.write(b"data: [DONE]\n\n")
            return
        with lock:
            end = chunk(cid, request.model, {}, "stop")
            end["usage"] = usage(result.totals())
            end["conductor_trace"] = result.trace_path.stem if result.trace_path else None
            send(end)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
