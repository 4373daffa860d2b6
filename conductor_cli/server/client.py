"""The CLI's side of a server: send a run, draw its events as they come, cancel on Ctrl-C.

Standard library plus our event records only: a client never imports litellm, llama_cpp or a
web framework, so `conductor ask` through a warm server starts as fast as `--help`.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from conductor_cli.errors import EXIT_INTERRUPTED, ConductorError
from conductor_cli.run.events import Subscriber, event_from_dict
from conductor_cli.wire import RUNS_PATH, STATUS_PATH, STOP_PATH, RunRequest

# Where a server elsewhere is (`CONDUCTOR_SERVER=http://box:8787`) and its bearer key.
SERVER_ENV = "CONDUCTOR_SERVER"
KEY_ENV = "CONDUCTOR_SERVER_KEY"
# How long a cancelled run may take to report its end before the client leaves anyway.
CANCEL_GRACE_S = 5.0


class ServerGone(Exception):
    """No server answered, or it stopped in the middle of the run: the CLI runs in-process."""


class RemoteError(ConductorError):
    """An error the server reported for the run, with the exit code it would have had."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True)
class Endpoint:
    """A local server's socket, or a server's URL (with the key it wants)."""

    socket: Path | None = None
    url: str | None = None
    key: str | None = None

    def describe(self) -> str:
        return str(self.socket) if self.socket is not None else str(self.url)

    def connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if self.socket is not None:
            return _UnixConnection(str(self.socket), timeout)
        parts = urlsplit(self.url or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConductorError(
                f"{SERVER_ENV}={self.url}: not an http(s) URL; e.g. http://box:8787"
            )
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return cls(parts.hostname, parts.port, timeout=timeout)

    def headers(self) -> dict[str, str]:
        out = {"Content-Type": "application/json"}
        if self.key:
            out["Authorization"] = f"Bearer {self.key}"
        return out


def remote_endpoint() -> Endpoint | None:
    """The server named by CONDUCTOR_SERVER, if any (its key from CONDUCTOR_SERVER_KEY)."""
    url = os.environ.get(SERVER_ENV, "").strip()
    if not url:
        return None
    return Endpoint(url=url.rstrip("/"), key=os.environ.get(KEY_ENV) or None)


@dataclass(frozen=True)
class RemoteResult:
    """A run's result as the server reported it (what `show_result` prints)."""

    doc: dict[str, Any]

    @property
    def answer(self) -> str:
        return str(self.doc.get("answer", ""))

    def to_dict(self) -> dict[str, Any]:
        return self.doc


def _refused(endpoint: Endpoint, status: int, body: bytes) -> ConductorError:
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", "replace").strip()[:200] or f"HTTP {status}"
    if status == 401:
        return ConductorError(
            f"the server at {endpoint.describe()} refused the key: set {KEY_ENV} to its "
            "--api-key-env value"
        )
    return ConductorError(f"the server at {endpoint.describe()} refused the run: {message}")


def run(
    endpoint: Endpoint,
    request: RunRequest,
    on_event: Subscriber | None,
    *,
    on_busy: Callable[[], None] = lambda: None,
) -> RemoteResult:
    """Run `request` on the server; events go to `on_event` as they arrive.

    Raises ServerGone when no server answers or it dies mid-run (nothing of the run is lost:
    its trace is on the server's disk), RemoteError with the run's own error and exit code,
    and KeyboardInterrupt after Ctrl-C once the server has ended the run as interrupted.
    """
    body = json.dumps(request.to_dict()).encode("utf-8")
    told_busy = False
    while True:
        conn = endpoint.connection(timeout=10.0)
        try:
            conn.request("POST", RUNS_PATH, body, endpoint.headers())
            sock = conn.sock  # getresponse() drops it from `conn` on "Connection: close"
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ServerGone(f"{endpoint.describe()}: {e}") from None
        if response.status == 429:  # the server's run slots are full: wait for one
            response.read()
            conn.close()
            if not told_busy:
                on_busy()
                told_busy = True
            time.sleep(float(response.getheader("Retry-After") or 1))
            continue
        if response.status != 200:
            data = response.read()
            conn.close()
            raise _refused(endpoint, response.status, data)
        break
    assert sock is not None
    sock.settimeout(None)  # a step may take minutes; Ctrl-C is the way out
    try:
        return _follow(sock, response, on_event)
    finally:
        response.close()
        conn.close()


def _follow(
    sock: socket.socket,
    response: http.client.HTTPResponse,
    on_event: Subscriber | None,
) -> RemoteResult:
    interrupted = False
    deadline = 0.0
    while True:
        try:
            try:
                line = response.readline()
            except (OSError, http.client.HTTPException) as e:
                if interrupted:
                    raise KeyboardInterrupt from None
                raise ServerGone(f"the server stopped during the run ({e})") from None
            if not line:
                if interrupted:
                    raise KeyboardInterrupt
                raise ServerGone("the server stopped during the run")
            try:
                record = json.loads(line)
            except ValueError:
                bad = line[:80]
                raise ServerGone(f"the server sent a line that is not JSON: {bad!r}") from None
            if "event" in record:
                if on_event is not None:
                    on_event(event_from_dict(record["event"]))
            elif "result" in record:
                return RemoteResult(record["result"])
            elif "error" in record:
                code = int(record.get("exit_code", 1))
                if code == EXIT_INTERRUPTED:
                    raise KeyboardInterrupt
                raise RemoteError(str(record["error"]), code)
            if interrupted and time.monotonic() > deadline:
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            if interrupted:
                raise  # the run's end arrived, the grace ran out, or a second Ctrl-C
            interrupted = True
            # Half-close: the server sees the hang-up, cancels the run and reports its end,
            # so the trace is marked interrupted before this process leaves.
            try:
                sock.shutdown(socket.SHUT_WR)
                sock.settimeout(CANCEL_GRACE_S)
            except OSError:
                raise KeyboardInterrupt from None
            deadline = time.monotonic() + CANCEL_GRACE_S


def status(endpoint: Endpoint, timeout: float = 5.0) -> dict[str, Any]:
    return _call(endpoint, "GET", STATUS_PATH, timeout)


def stop(endpoint: Endpoint, timeout: float = 5.0) -> dict[str, Any]:
    return _call(endpoint, "POST", STOP_PATH, timeout)


def _call(endpoint: Endpoint, method: str, path: str, timeout: float) -> dict[str, Any]:
    conn = endpoint.connection(timeout)
    try:
        conn.request(method, path, b"{}" if method == "POST" else None, endpoint.headers())
        response = conn.getresponse()
        data = response.read()
    except (OSError, http.client.HTTPException) as e:
        raise ServerGone(f"{endpoint.describe()}: {e}") from None
    finally:
        conn.close()
    if response.status != 200:
        raise _refused(endpoint, response.status, data)
    doc = json.loads(data)
    return doc if isinstance(doc, dict) else {}
