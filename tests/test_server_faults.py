"""`conductor serve` under bad input and load (issue 32): a burst of clients, a body nested
100,000 deep, parameters OpenAI's API refuses, broken framing. Every request gets an HTTP
answer, never a reset. No model is loaded: the runs go to a fake pool (a conductor that plans
one step, a slow worker), so the run slots are busy long enough for a burst to meet them."""

from __future__ import annotations

import collections
import http.client
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conductor_cli.config.settings import Config, load_config
from conductor_cli.run.pool import Pool
from conductor_cli.runtime import RunScope, Runtime
from conductor_cli.server import app as app_module
from conductor_cli.server import http_api
from conductor_cli.server.app import ServerApp
from conductor_cli.server.http_api import ConductorServer, LocalSocketServer
from conductor_cli.testing.fake_backend import FakeBackend, fake_worker
from conductor_cli.wire import RUNS_PATH

PLAN = json.dumps({"steps": [{"worker": "w", "task": "answer the question", "sees": []}]})
WORKER_DELAY_S = 1.0  # how long each run holds its slot
BURST = 64


class SlowFakePoolRuntime(Runtime):
    """Fault injection: a Runtime whose conductor always plans one step for worker "w" and
    whose worker is a FakeBackend that takes WORKER_DELAY_S to answer. Nothing is downloaded
    or loaded, and no litellm helper starts."""

    def pull_missing(self, config: Config | None = None, *, conductor: bool = True) -> list[str]:
        return []

    def pool(self, scope: RunScope, config: Config | None = None) -> Pool:
        slow = FakeBackend(reply="fake answer", delay=WORKER_DELAY_S)
        return Pool((fake_worker("w", slow),))

    def conductor(self, scope: RunScope, config: Config | None = None) -> FakeBackend:
        return FakeBackend(reply=PLAN, name="conductor")


def _start(server: Any) -> None:
    threading.Thread(target=server.serve_forever, daemon=True).start()


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerApp]:
    monkeypatch.setattr(app_module, "Runtime", SlowFakePoolRuntime)
    path = tmp_path / "fake-pool.toml"
    path.write_text(
        '[server]\nmax_concurrent_runs = 2\n\n[[workers]]\nname = "w"\nmodel = "openai/w"\n',
        encoding="utf-8",
    )
    shared = ServerApp(load_config(path))
    yield shared
    shared.close()


@pytest.fixture
def server(app: ServerApp) -> Iterator[ConductorServer]:
    srv = ConductorServer(host="127.0.0.1", port=0, app=app)
    _start(srv)
    yield srv
    srv.shutdown()
    srv.server_close()


def _ask(question: str = "What is 2 + 2?", **fields: Any) -> dict[str, Any]:
    return {"model": "conductor", "messages": [{"role": "user", "content": question}], **fields}


def _post(
    conn: http.client.HTTPConnection,
    path: str,
    body: bytes,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    conn.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})
    answer = conn.getresponse()
    return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()


def _tcp(server: ConductorServer) -> http.client.HTTPConnection:
    host, port = server.server_address[:2]
    return http.client.HTTPConnection(str(host), int(port), timeout=30)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def _burst(connect: Any, path: str, body_for: Any) -> list[tuple[Any, str | None]]:
    """BURST clients at once, each on its own connection: (status or exception name,
    Retry-After)."""
    results: list[tuple[Any, str | None]] = [("not run", None)] * BURST
    start = threading.Barrier(BURST)

    def one(i: int) -> None:
        conn = connect()
        try:
            start.wait()
            status, headers, _ = _post(conn, path, body_for(i))
            results[i] = (status, headers.get("retry-after"))
        except Exception as e:  # a reset, a refused connect: what this test is about
            results[i] = (type(e).__name__, None)
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(BURST)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def _assert_answered(results: list[tuple[Any, str | None]]) -> None:
    counts = collections.Counter(status for status, _ in results)
    assert set(counts) <= {200, 429}, counts  # no ConnectionResetError, no RemoteDisconnected
    assert counts[200] >= 1, counts
    assert all(after == "1" for status, after in results if status == 429), results


def test_a_burst_of_64_clients_gets_answers_not_resets(server: ConductorServer) -> None:
    nonce = time.time()  # questions of their own: no answer comes from an earlier run's cache
    body = lambda i: json.dumps(_ask(f"Question {nonce} {i}?")).encode()  # noqa: E731
    _assert_answered(_burst(lambda: _tcp(server), "/v1/chat/completions", body))


def test_a_burst_on_the_local_socket_gets_answers_not_refusals(app: ServerApp) -> None:
    path = Path(os.environ["CONDUCTOR_RUNTIME_DIR"]) / "faults.sock"  # short enough
    local = LocalSocketServer(path, app)
    _start(local)
    try:
        nonce = time.time()
        body = lambda i: json.dumps(  # noqa: E731
            {"question": f"Question {nonce} {i}?", "cache_mode": "off"}
        ).encode()
        _assert_answered(_burst(lambda: _UnixConnection(str(path)), RUNS_PATH, body))
    finally:
        local.shutdown()
        local.server_close()


def _error_of(status: int, raw: bytes) -> dict[str, Any]:
    error = json.loads(raw)["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    return error


def test_a_body_nested_100000_deep_gets_400_on_every_json_route(server: ConductorServer) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    # Parses, but deeper than any real request: refused before anything walks it.
    workflow = {"question": "q", "workflow": json.loads("[" * 200 + "]" * 200)}
    for path, body in [
        ("/v1/chat/completions", deep),
        (RUNS_PATH, deep),
        (RUNS_PATH, json.dumps(workflow).encode()),
    ]:
        status, _, raw = _post(_tcp(server), path, body)
        assert status == 400, (path, raw)
        error = _error_of(status, raw)
        assert error["type"] == "invalid_request_error" and "nests deeper" in error["message"]
    assert server.runs_served == 0


BAD_PARAMETERS: list[tuple[str, Any, str]] = [
    # (field, bad value, what the message says is allowed)
    ("model", 5, "a model's name"),
    ("model", None, "a model's name"),
    ("messages", "hi", "list"),
    ("messages", [], "list"),
    ("messages", ["hi"], "object"),
    ("messages", [{"role": "robot", "content": "hi"}], "one of"),
    ("messages", [{"role": "user", "content": 5}], "string"),
    ("messages", [{"role": "user", "content": [{"type": "text", "text": 5}]}], "string"),
    ("stream", "yes", "boolean"),
    ("seed", 1.5, "integer"),
    ("seed", True, "integer"),
    ("temperature", "hot", "number from 0 to 2"),
    ("temperature", 2.5, "number from 0 to 2"),
    ("temperature", True, "number from 0 to 2"),
    ("top_p", 1.5, "number from 0 to 1"),
    ("max_tokens", -5, "at least 1"),
    ("max_tokens", 0, "at least 1"),
    ("max_tokens", 10.0, "at least 1"),
    ("max_completion_tokens", 0, "at least 1"),
    ("n", 2, "1"),
    ("stop", 5, "list of strings"),
    ("stop", ["end", 1], "list of strings"),
    ("presence_penalty", 3, "from -2 to 2"),
    ("frequency_penalty", -2.5, "from -2 to 2"),
    ("user", 5, "string"),
]


def test_each_bad_chat_parameter_gets_400_naming_it(server: ConductorServer) -> None:
    conn = _tcp(server)  # one connection: a refusal leaves it usable
    for field, value, allowed in BAD_PARAMETERS:
        body = json.dumps(_ask(**{field: value})).encode()
        status, _, raw = _post(conn, "/v1/chat/completions", body)
        assert status == 400, (field, value, raw)
        error = _error_of(status, raw)
        assert error["type"] == "invalid_request_error", error
        assert error["param"].startswith(field), (field, value, error)
        assert error["param"] in error["message"] and allowed in error["message"], error
    assert server.runs_served == 0


def test_a_valid_request_with_those_parameters_set_still_gets_200(
    server: ConductorServer,
) -> None:
    sensible = {
        "stream": False,
        "seed": 3,
        "temperature": 0.7,
        "top_p": 1,
        "max_tokens": 200,
        "max_completion_tokens": 200,
        "n": 1,
        "stop": ["\n\nQuestion:"],
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "user": "someone",
        "logit_bias": None,  # null is allowed for each, as in OpenAI's API
        "some_newer_field": {"clients": "send many"},  # unknown fields stay accepted
    }
    body = _ask(f"Sensible {time.time()}?", **sensible)
    body["messages"] = [
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "user", "content": [{"type": "text", "text": body["messages"][0]["content"]}]},
    ]
    status, headers, raw = _post(_tcp(server), "/v1/chat/completions", json.dumps(body).encode())
    assert status == 200, raw
    assert json.loads(raw)["choices"][0]["message"]["content"] == "fake answer"
    body["stream"] = True
    status, headers, raw = _post(_tcp(server), "/v1/chat/completions", json.dumps(body).encode())
    assert status == 200 and headers["content-type"] == "text/event-stream", raw
    assert raw.endswith(b"data: [DONE]\n\n") and b'"finish_reason": "stop"' in raw


def _raw_exchange(server: ConductorServer, request: bytes) -> bytes:
    """Send bytes as they are (http.client would fix the framing) and read the whole answer."""
    with socket.create_connection(server.server_address[:2], timeout=10) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(1 << 16):
            received += chunk
    return received


def test_broken_framing_gets_an_answer_not_a_dropped_connection(server: ConductorServer) -> None:
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\n"
    )
    for extra, status in [
        (b"Content-Length: -5\r\n\r\n{}", b"400"),
        (b"Content-Length: lots\r\n\r\n{}", b"400"),
        (b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", b"411"),
        (b"Content-Length: 9000000\r\n\r\n{}", b"413"),
    ]:
        answer = _raw_exchange(server, head + extra)
        assert answer.startswith(b"HTTP/1.1 " + status), (extra, answer)
        assert b'"invalid_request_error"' in answer
    answer = _raw_exchange(server, b"PUT /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 501") and b'"error"' in answer, answer
    # A refused request's body is read: the connection's next request is answered.
    conn = _tcp(server)
    status, _, _ = _post(conn, "/v1/no-such-route", b'{"a": 1}')
    assert status == 404
    conn.request("GET", "/v1/models")
    assert conn.getresponse().status == 200


def test_a_fault_in_a_route_is_a_500_in_openais_form(
    server: ConductorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_models_list_fake(trained: list[str]) -> dict:
        raise RuntimeError("injected fault")

    monkeypatch.setattr(http_api, "models_list", broken_models_list_fake)
    conn = _tcp(server)
    conn.request("GET", "/v1/models")
    answer = conn.getresponse()
    error = _error_of(answer.status, answer.read())
    assert answer.status == 500 and error["type"] == "server_error"
    assert "injected fault" in error["message"]


def test_a_client_that_stops_sending_is_let_go(
    server: ConductorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request cut off in its headers (slowloris) does not hold a thread for ever: the
    connection closes after the read timeout; the server keeps answering others."""
    monkeypatch.setattr(http_api._Handler, "timeout", 1.0)
    host, port = server.server_address[:2]
    stalled = socket.create_connection((host, port), timeout=10)
    stalled.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    assert stalled.recv(1024) == b""  # closed by the server (else recv times out: an error)
    stalled.close()
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/v1/models")
    assert conn.getresponse().status == 200
