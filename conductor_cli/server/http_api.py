"""The listeners over one long-lived Runtime and their routes: OpenAI's chat completions and
Responses API, Anthropic's Messages API (each in its own module, listing its routes), models,
status and the CLI's run stream (standard library server: the client side and start-up never
import a web framework). Routes are looked up in one table (server/routes.py)."""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn, UnixStreamServer
from typing import Any
from urllib.parse import urlsplit

from conductor_cli.api import RunResult, execute_request
from conductor_cli.config.settings import Config
from conductor_cli.errors import EXIT_INTERRUPTED, ConductorError, is_interrupt
from conductor_cli.run.events import (
    Subscriber,
    event_to_dict,
)
from conductor_cli.server.agent_runs import trained_names
from conductor_cli.server.app import ServerApp
from conductor_cli.server.guard import ALLOWED_METHODS, CORS_HEADERS, RequestPolicy, refusal
from conductor_cli.server.openai_shapes import (
    BadRequest,
    error_body,
    models_list,
)
from conductor_cli.server.routes import SSE, Exchange, Route, table
from conductor_cli.wire import RUNS_PATH, STATUS_PATH, STOP_PATH, RunRequest

MAX_BODY_BYTES = 8 << 20
# Far deeper than any request of OpenAI's API or ours; a body nested deeper is refused before
# code that walks it recursively (json.dumps of a workflow, a repr) fails in the middle of a run.
MAX_JSON_DEPTH = 100
# How long a connection closed with part of its request unread keeps reading (and dropping) what
# the client still sends: closing with unread data sends a reset, which can reach the client
# before the answer it should read (Apache's "lingering close").
LINGER_S = 2.0
READ_TIMEOUT_S = 60.0


class _Listener:
    """What both listeners share: the app, the bearer key (None: none needed) and quiet
    handling of failed requests."""

    app: ServerApp
    key: str | None
    bound: str | None  # the TCP address it listens on; None: the local socket
    # The standard library's backlog of 5 reset (TCP) or refused (the local socket) 25 to 56
    # of a burst of 64 clients before any could be answered, even with a 429; the kernel caps
    # this at net.core.somaxconn.
    request_queue_size = socket.SOMAXCONN
    routes: dict[tuple[str, str], Route]

    def authorized(self, header: str | None) -> bool:
        if self.key is None:
            return True
        given = (header or "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), self.key.encode())  # constant time

    def policy(self) -> RequestPolicy:
        """Read from the config each request: an edit the server reloads applies at once."""
        settings = self.app.config.server
        return RequestPolicy.for_listener(
            self.bound, self.key is not None, settings.allowed_hosts, settings.allowed_origins
        )

    @property
    def overrides_allowed(self) -> bool:
        """Whether a run request may change the conductor or the pool (load a model, fetch
        one the catalog has): the local socket's user is the server's own; on TCP only where
        the operator said so ([server] allow_overrides)."""
        return self.bound is None or self.app.config.server.allow_overrides

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
        self.bound = host
        self.routes = route_table()
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
        self.bound = None
        self.routes = route_table()
        old = os.umask(0o177)  # born 0600: no moment where others could connect
        try:
            super().__init__(str(path), _Handler)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)


def run_request(
    app: ServerApp, request: RunRequest, on_event: Subscriber, cancel: threading.Event
) -> RunResult:
    """Carry out a CLI's run request as `conductor ask`/`run` would in-process (the same road,
    api.execute_request), on the server's warm runtime."""
    with app.lease(cancel) as (config, runtime):
        return execute_request(
            request, config=config, runtime=runtime, on_event=on_event, cancel=cancel
        )


def nesting_depth(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value (iterative: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((x, depth + 1) for x in item)
    return deepest


def parse_body(raw: bytes) -> Any:
    """A request body as JSON; anything a client could send that is not usable JSON is a 400."""
    try:
        body = json.loads(raw or b"null")
    except RecursionError:  # the standard library's parser recurses per bracket
        raise BadRequest(f"the request body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as e:
        raise BadRequest(f"the request body is not JSON: {e}") from None
    if nesting_depth(body) > MAX_JSON_DEPTH:
        raise BadRequest(f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    return body


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
    # Each read and write on the connection: a client that stops sending in the middle of a
    # request, or leaves a kept-alive connection idle, is let go instead of holding a thread.
    timeout = READ_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the server's own notes

    @property
    def app(self) -> ServerApp:
        return self.server.app

    # --- plumbing -------------------------------------------------------------------------

    _answered = False  # this request's status line is sent
    _body_read = False  # this request's body is read
    _linger = False  # the connection closes with part of the request unread

    def send_response(self, code: int, message: str | None = None) -> None:
        self._answered = True
        super().send_response(code, message)
        origin = self._header("Origin")
        if origin is not None and self.server.policy().origin_allowed(origin):
            # A page the operator allowed ([server] allowed_origins) may read the answer.
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Vary", "Origin")

    def _header(self, name: str) -> str | None:
        """A request header; None before the headers are read (a malformed request line)."""
        headers = getattr(self, "headers", None)
        return None if headers is None else headers.get(name)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (a malformed request line, an unknown method,
        headers too long) in OpenAI's error form; the connection closes, as there."""
        self._linger = True
        if self.command == "HEAD":  # an answer to HEAD has no body
            self.send_response(code, message)
            self.send_header("Connection", "close")
            self.end_headers()
            return
        text = message or HTTPStatus(code).phrase
        self.send_json(code, error_body(text), {"Connection": "close"})

    def _answer(self, route: Callable[[], None]) -> None:
        """One request: its route, an answer even when the route fails, and its body settled
        so that the connection's next request (or its close) starts clean."""
        self._answered = self._body_read = False
        try:
            route()
        except Exception as e:
            if not self._answered:  # a fault of ours: the client still gets an answer
                message = f"internal error: {type(e).__name__}: {e}"
                with contextlib.suppress(OSError):
                    self.send_json(
                        HTTPStatus.INTERNAL_SERVER_ERROR,
                        error_body(message, "server_error"),
                        {"Connection": "close"},
                    )
            raise  # and a line in the server's log (handle_error)
        finally:
            self._settle_body()

    def _settle_body(self) -> None:
        """Read what a refused request sent (401, 404) so the connection stays usable; a body
        too big or of no known length ends the connection instead."""
        length = self.headers.get("Content-Length")
        chunked = bool(self.headers.get("Transfer-Encoding"))
        if self._body_read or (length is None and not chunked):
            return
        if chunked or not _is_length(length) or int(length) > MAX_BODY_BYTES:
            self.close_connection = self._linger = True
            return
        with contextlib.suppress(OSError):
            self.rfile.read(int(length))
        self._body_read = True

    def finish(self) -> None:
        super().finish()
        if self._linger:
            linger(self.connection)

    def send_json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":  # an answer to HEAD has no body
            self.wfile.write(data)

    def error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self.send_json(status, error_body(message, kind))

    def refuse(self, e: BadRequest) -> None:
        # A body refused unread (too big, of no known length) ends the connection.
        close = None if self._body_read else {"Connection": "close"}
        self.send_json(e.status, error_body(str(e), e.kind, param=e.param), close)

    def read_json(self) -> Any:
        if self.headers.get("Transfer-Encoding"):
            raise BadRequest(
                "send the body with a Content-Length (a chunked body is not read)",
                HTTPStatus.LENGTH_REQUIRED,
            )
        length = self.headers.get("Content-Length") or "0"
        if not _is_length(length):
            raise BadRequest(f"Content-Length {length!r} is not a number of bytes")
        if int(length) > MAX_BODY_BYTES:
            raise BadRequest(
                f"the request body is over {MAX_BODY_BYTES >> 20} MB",
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            )
        raw = self.rfile.read(int(length))
        self._body_read = True
        return parse_body(raw)

    @contextlib.contextmanager
    def slot(self, busy: Callable[[str], None] | None = None) -> Iterator[bool]:
        if not self.app.slots.acquire(blocking=False):
            said = f"{self.app.max_runs} runs are under way (server.max_concurrent_runs)"
            if busy is not None:
                busy(said)
            else:
                headers = {"Retry-After": "1"}
                self.send_json(
                    HTTPStatus.TOO_MANY_REQUESTS, error_body(said, "rate_limit"), headers
                )
            yield False
            return
        try:
            yield True
        finally:
            self.app.slots.release()

    @contextlib.contextmanager
    def watched(self) -> Iterator[threading.Event]:
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

    def _admitted(self) -> bool:
        """Whether this request is served at all: a page's request (a foreign Host or Origin,
        a POST that is not JSON) is refused before anything else (server/guard.py)."""
        self.app.touch()
        headers = {h: self._header(h) for h in ("host", "origin", "content-type")}
        refused = refusal(self.server.policy(), self.command, headers)
        if refused is None:
            return True
        self.error(refused.status, refused.message, "permission_error")
        return False

    def _allowed(self) -> bool:
        if not self._admitted():
            return False
        # Anthropic's clients send the key as x-api-key (Claude Code: ANTHROPIC_API_KEY).
        key = self.headers.get("x-api-key")
        given = self.headers.get("Authorization") or (f"Bearer {key}" if key else None)
        if self.server.authorized(given):
            return True
        self.error(
            HTTPStatus.UNAUTHORIZED, "a valid bearer key is required", "authentication_error"
        )
        return False

    def _route(self) -> str:
        """The request's path, without its query (Claude Code adds `?beta=true`)."""
        return urlsplit(self.path).path.rstrip("/")

    def do_GET(self) -> None:
        self._answer(self._dispatch)

    def do_HEAD(self) -> None:
        """A client's reachability probe (Claude Code sends HEAD /): the headers alone, to
        whoever may send any other request."""
        self._answer(self._head)

    def _head(self) -> None:
        if not self._allowed():
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self._answer(self._dispatch)

    def do_OPTIONS(self) -> None:
        self._answer(self._options)

    def _options(self) -> None:
        """A browser's preflight: allowed only for a page of [server] allowed_origins (a
        foreign Origin was refused by _admitted); without an Origin, the methods served."""
        if not self._admitted():
            return
        self.send_response(HTTPStatus.NO_CONTENT)
        self.send_header("Allow", ALLOWED_METHODS)
        if self._header("Origin") is not None:
            self.send_header("Access-Control-Allow-Methods", ALLOWED_METHODS)
            self.send_header("Access-Control-Allow-Headers", CORS_HEADERS)
            self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _dispatch(self) -> None:
        if not self._allowed():
            return
        path = self._route()
        route = self.server.routes.get((self.command, path))
        if route is not None:
            route.answer(self)
            return
        methods = sorted(m for m, p in self.server.routes if p == path)
        if methods:  # a known path asked with another method
            self.send_json(
                HTTPStatus.METHOD_NOT_ALLOWED,
                error_body(f"{self.command} {path}: use {' or '.join(methods)}"),
                {"Allow": ", ".join(methods)},
            )
            return
        self.error(HTTPStatus.NOT_FOUND, f"no route {self.path}", "not_found_error")

    # --- what a route may use (server/routes.Exchange) ---------------------------------------

    @property
    def body_read(self) -> bool:
        return self._body_read

    @property
    def overrides_allowed(self) -> bool:
        return self.server.overrides_allowed

    def start_stream(self, content_type: str = SSE) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", content_type)
        if content_type == SSE:
            self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def write(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()


# --- this module's routes: models, status, stop and the CLI's runs ---------------------------


def _models(ex: Exchange) -> None:
    ex.send_json(HTTPStatus.OK, models_list(trained_names()))


def _status(ex: Exchange) -> None:
    ex.send_json(HTTPStatus.OK, ex.app.status())


def _stop(ex: Exchange) -> None:
    ex.send_json(HTTPStatus.OK, {"stopping": True, "pid": os.getpid()})
    ex.app.stop_requested.set()


def _cli_run(ex: Exchange) -> None:
    """The CLI's run (`conductor ask` through a server): its events as JSON lines, then the
    result or the error, as the CLI would have printed them in-process."""
    try:
        request = RunRequest.from_dict(ex.read_json())
    except BadRequest as e:
        ex.refuse(e)
        return
    except ValueError as e:
        ex.error(HTTPStatus.BAD_REQUEST, str(e))
        return
    changes = request.overrides.changes_pool()
    if changes and not ex.overrides_allowed:
        ex.error(
            HTTPStatus.FORBIDDEN,
            f"'overrides.{changes}' changes what this server runs, which requests may not do "
            "here; the server's operator allows it with [server] allow_overrides = true",
            "permission_error",
        )
        return
    with ex.slot() as taken:
        if not taken:
            return
        ex.start_stream("application/x-ndjson")
        lock = threading.Lock()

        def send(line: dict[str, Any]) -> None:
            data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
            with lock:
                try:
                    ex.write(data)
                except OSError:
                    cancel.set()  # the client is gone: stop spending on its run

        with ex.watched() as cancel:
            try:
                result = run_request(
                    ex.app, request, lambda e: send({"event": event_to_dict(e)}), cancel
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


ROUTES = (
    Route("GET", "/v1/models", _models),
    Route("GET", STATUS_PATH, _status),
    Route("POST", RUNS_PATH, _cli_run),
    Route("POST", STOP_PATH, _stop),
)


def route_table() -> dict[tuple[str, str], Route]:
    """Every route the server answers: this module's and each API module's (one line an API)."""
    from conductor_cli.server import chat_api, messages_api, responses_api

    return table(ROUTES, chat_api.ROUTES, responses_api.ROUTES, messages_api.ROUTES)


def _is_length(text: str | None) -> bool:
    """A Content-Length: ASCII digits only (int() also takes "-5", " 5", other digits)."""
    return text is not None and text.isascii() and text.isdigit()


def linger(conn: socket.socket) -> None:
    """Close our side, then drop what the client still sends, for at most LINGER_S: a close
    with unread data would reset the connection under the answer it has not read yet."""
    deadline = time.monotonic() + LINGER_S
    try:
        conn.shutdown(socket.SHUT_WR)
        while (left := deadline - time.monotonic()) > 0:
            conn.settimeout(left)
            if not conn.recv(1 << 16):
                return
    except OSError:  # timed out, or the client already left
        return
