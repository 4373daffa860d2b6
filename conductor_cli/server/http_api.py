"""The OpenAI-compatible HTTP API over one long-lived Runtime (standard library server: the
client side and start-up never import a web framework)."""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import select
import socket
import sys
import threading
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn, UnixStreamServer
from typing import Any

from conductor_cli.api import PriorRound, RunOptions, RunResult, TraceOptions, execute
from conductor_cli.config.settings import (
    MAX_STEPS_LIMIT,
    Config,
    restrict_workers,
    with_conductor,
)
from conductor_cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, ConductorError, is_interrupt
from conductor_cli.run.events import (
    PlanReady,
    StepFinished,
    StepToken,
    Subscriber,
    event_to_dict,
)
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.workflow import parse_workflow
from conductor_cli.server.app import ServerApp
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
from conductor_cli.server.wire import RUNS_PATH, STATUS_PATH, STOP_PATH, RunRequest
from conductor_cli.storage.cache import CacheMode

MAX_BODY_BYTES = 8 << 20


class _Listener:
    """What both listeners share: the app, the bearer key (None: none needed) and quiet
    handling of failed requests."""

    app: ServerApp
    key: str | None

    def authorized(self, header: str | None) -> bool:
        if self.key is None:
            return True
        given = (header or "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), self.key.encode())  # constant time

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a liveness probe, a Ctrl-C'd CLI) is normal; anything else
        is one line in the server's log, not a traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            return
        sys.stderr.write(f"conductor: a request failed: {type(error).__name__}: {error}\n")
        sys.stderr.flush()


class ConductorServer(_Listener, ThreadingHTTPServer):
    """The TCP listener: OpenAI's API (and the CLI's) for whoever holds the key, if one is set.
    Serves runs on one ServerApp: models, prompt states, litellm's helper and the cache stay
    loaded between requests."""

    daemon_threads = True

    def __init__(
        self,
        config: Config | None = None,
        host: str = "127.0.0.1",
        port: int = 8787,
        *,
        key: str | None = None,
        app: ServerApp | None = None,
    ) -> None:
        self._own_app = app is None
        self.app = app or ServerApp(config or Config())
        self.key = key
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def runs_served(self) -> int:
        return self.app.runs_served

    def server_close(self) -> None:
        super().server_close()
        if self._own_app:
            self.app.close()


class LocalSocketServer(_Listener, ThreadingMixIn, UnixStreamServer):
    """The local socket (0600 in a 0700 directory): the file's permissions are the key."""

    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, path: Path, app: ServerApp) -> None:
        self.app = app
        self.key = None
        old = os.umask(0o177)  # born 0600: no moment where others could connect
        try:
            super().__init__(str(path), _Handler)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)


def trained_names() -> list[str]:
    from conductor_cli.train.registry import list_trained

    return [t.name for t in list_trained()]


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


def run_request(
    app: ServerApp, request: RunRequest, on_event: Subscriber, cancel: threading.Event
) -> RunResult:
    """Carry out a CLI's run request as `conductor ask`/`run` would in-process."""
    with app.lease(cancel) as (config, runtime):
        o = request.overrides
        config = restrict_workers(config, list(o.workers))
        config = with_conductor(
            config,
            model=o.conductor,
            max_steps=o.max_steps,
            max_rounds=o.max_rounds,
            seed=o.seed,
        )
        workflow = None
        names = [w.name for w in config.workers]
        if request.workflow is not None:
            workflow = parse_workflow(json.dumps(request.workflow), names, MAX_STEPS_LIMIT)
        prior = [
            PriorRound(parse_workflow(json.dumps(r), names, MAX_STEPS_LIMIT, allow_empty=True))
            for r in request.rounds
        ]
        options = RunOptions(
            CacheMode(request.cache_mode),
            stream=request.stream,
            max_cost=request.max_cost,
            max_calls=request.max_calls,
            cancel=cancel,
        )
        extra = {"replay_of": request.replay_of} if request.replay_of else None
        return execute(
            request.question,
            config=config,
            attachments=[Attachment(n, t) for n, t in request.attachments],
            workflow=workflow,
            on_event=on_event,
            options=options,
            trace=TraceOptions(extra=extra),
            workflow_source=request.source,  # type: ignore[arg-type]
            runtime=runtime,
            prior_rounds=prior,
        )


def watch_hangup(conn: socket.socket, cancel: threading.Event, done: threading.Event) -> None:
    """Set `cancel` when the client closes its side (Ctrl-C in the CLI, a client that left)."""
    while not done.is_set():
        try:
            readable, _, _ = select.select([conn], [], [], 0.2)
            if not readable:
                continue
            data = conn.recv(1, socket.MSG_PEEK)
        except (OSError, ValueError):
            data = b""
        if not data:
            cancel.set()
        return  # a hang-up, or the client sent more: nothing further to watch


class _Handler(BaseHTTPRequestHandler):
    server: ConductorServer | LocalSocketServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the server's own notes

    @property
    def app(self) -> ServerApp:
        return self.server.app

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

    def _take_slot(self) -> bool:
        if self.app.slots.acquire(blocking=False):
            return True
        self._send_json(
            HTTPStatus.TOO_MANY_REQUESTS,
            error_body(
                f"{self.app.max_runs} runs are under way (server.max_concurrent_runs)",
                "rate_limit",
            ),
            {"Retry-After": "1"},
        )
        return False

    @contextlib.contextmanager
    def _watched(self) -> Iterator[threading.Event]:
        """A cancel flag the client sets by hanging up, for one run."""
        cancel, done = threading.Event(), threading.Event()
        watcher = threading.Thread(
            target=watch_hangup, args=(self.connection, cancel, done), daemon=True
        )
        watcher.start()
        try:
            yield cancel
        finally:
            done.set()

    # --- routes ---------------------------------------------------------------------------

    def _allowed(self) -> bool:
        self.app.touch()
        if self.server.authorized(self.headers.get("Authorization")):
            return True
        self._error(
            HTTPStatus.UNAUTHORIZED, "a valid bearer key is required", "authentication_error"
        )
        return False

    def do_GET(self) -> None:
        if not self._allowed():
            return
        path = self.path.rstrip("/")
        if path == "/v1/models":
            self._send_json(HTTPStatus.OK, models_list(trained_names()))
        elif path == STATUS_PATH:
            self._send_json(HTTPStatus.OK, self.app.status())
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}", "not_found_error")

    def do_POST(self) -> None:
        if not self._allowed():
            return
        path = self.path.rstrip("/")
        if path == "/v1/chat/completions":
            self._chat()
        elif path == RUNS_PATH:
            self._cli_run()
        elif path == STOP_PATH:
            self._send_json(HTTPStatus.OK, {"stopping": True, "pid": os.getpid()})
            self.app.stop_requested.set()
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}", "not_found_error")

    # --- the CLI's runs -------------------------------------------------------------------

    def _cli_run(self) -> None:
        try:
            request = RunRequest.from_dict(self._read_json())
        except BadRequest as e:
            self._error(e.status, str(e), e.kind)
            return
        except ValueError as e:
            self._error(HTTPStatus.BAD_REQUEST, str(e))
            return
        if not self._take_slot():
            return
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            lock = threading.Lock()

            def send(line: dict[str, Any]) -> None:
                data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
                with lock:
                    try:
                        self.wfile.write(data)
                        self.wfile.flush()
                    except OSError:
                        cancel.set()  # the client is gone: stop spending on its run

            with self._watched() as cancel:
                try:
                    result = run_request(
                        self.app, request, lambda e: send({"event": event_to_dict(e)}), cancel
                    )
                except ConductorError as e:
                    send({"error": str(e), "exit_code": e.exit_code})
                except BaseException as e:
                    if not is_interrupt(e):
                        send({"error": f"internal error: {type(e).__name__}: {e}", "exit_code": 1})
                        raise
                    send({"error": "interrupted", "exit_code": EXIT_INTERRUPTED})
                else:
                    send({"result": result.to_dict()})
        finally:
            self.app.slots.release()

    # --- OpenAI's chat completions ----------------------------------------------------------

    def _chat(self) -> None:
        try:
            request = parse_chat(self._read_json())
            config_for(self.app.config, request.model)  # 404 before any run
        except BadRequest as e:
            self._error(e.status, str(e), e.kind)
            return
        if not self._take_slot():
            return
        try:
            if request.stream:
                self._stream(request)
            else:
                self._complete(request)
        finally:
            self.app.slots.release()

    def _run(self, request: ChatRequest, on_event: Any, stream: bool) -> RunResult:
        with self._watched() as cancel, self.app.lease(cancel) as (config, runtime):
            return execute(
                request.question,
                config=config_for(config, request.model),
                attachments=request.attachments,
                on_event=on_event,
                options=RunOptions(stream=stream, seed=request.seed, cancel=cancel),
                runtime=runtime,
            )

    def _complete(self, request: ChatRequest) -> None:
        try:
            result = self._run(request, None, stream=False)
        except BadRequest as e:
            self._error(e.status, str(e), e.kind)
            return
        except ConductorError as e:
            status = HTTPStatus.BAD_REQUEST if e.exit_code == EXIT_USAGE else HTTPStatus.BAD_GATEWAY
            self._error(status, str(e), "conductor_error")
            return
        except KeyboardInterrupt:
            return  # the client left (or the server stops): nobody to answer
        trace = result.trace_path.stem if result.trace_path else None
        body = completion(request.model, result.answer, result.totals(), trace)
        self._send_json(HTTPStatus.OK, body, {"x-conductor-trace": trace or ""})

    def _stream(self, request: ChatRequest) -> None:
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
            result = self._run(request, on_event, stream=True)
        except (ConductorError, BadRequest) as e:
            send(error_body(str(e), "conductor_error"))
            self.wfile.write(b"data: [DONE]\n\n")
            return
        except KeyboardInterrupt:
            return  # the client left (or the server stops)
        with lock:
            end = chunk(cid, request.model, {}, "stop")
            end["usage"] = usage(result.totals())
            end["conductor_trace"] = result.trace_path.stem if result.trace_path else None
            send(end)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
