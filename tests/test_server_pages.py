"""A web page the user visits cannot drive `conductor serve` (issue 67): the requests a page
can make of 127.0.0.1 without the user's say (a form, a `text/plain` or bodiless fetch that
needs no preflight, a DNS-rebinding page under a name of its own, a preflight for anything
else) are refused on every route, judged from outside: the python tool never ran a program,
no run was served, the server still answers. A local client's requests (the same bytes with
a loopback Host, no Origin, `application/json`) are served: the control that shows the
refused ones would have run."""

from __future__ import annotations

import http.client
import json
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.config.settings import load_config
from conductor_cli.server.http_api import ConductorServer, route_table
from conductor_cli.wire import RUNS_PATH, STOP_PATH

MARK = f"ran-{secrets.token_hex(4)}"
# A run the python tool carries out on its own: the step's task is the program.
RUN = {
    "question": "q",
    "workflow": {"steps": [{"worker": "py", "task": f"print({MARK!r})", "sees": []}]},
    "cache_mode": "off",
}
TOOL_CONFIG = """
[conductor]
max_steps = 2

[[workers]]
name = "py"
model = "tool:python"
description = "runs Python"
"""
FOREIGN = "http://evil.example"
# What a page can send without a preflight, and the Host a rebinding page brings.
PAGE_ATTACKS = {
    "foreign origin, json": {"Origin": FOREIGN, "Content-Type": "application/json"},
    "text/plain fetch": {"Origin": FOREIGN, "Content-Type": "text/plain;charset=UTF-8"},
    "form, text/plain": {"Content-Type": "text/plain"},
    "form, urlencoded": {"Content-Type": "application/x-www-form-urlencoded"},
    "form, multipart": {"Content-Type": "multipart/form-data; boundary=x"},
    "bodiless post": {},
    "sandboxed page": {"Origin": "null", "Content-Type": "application/json"},
    "dns rebinding": {"Host": "rebind.example:8787", "Content-Type": "application/json"},
}


def _serve(config: Path, **kwargs: object) -> ConductorServer:
    server = ConductorServer(load_config(config), port=0, **kwargs)  # type: ignore[arg-type]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def tool_config(tmp_path: Path) -> Path:
    path = tmp_path / "tool.toml"
    path.write_text(TOOL_CONFIG, encoding="utf-8")
    return path


@pytest.fixture
def server(tool_config: Path, isolated_home: Path) -> Iterator[ConductorServer]:
    srv = _serve(tool_config)
    yield srv
    srv.shutdown()
    srv.server_close()


def _request(
    server: ConductorServer,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None = None,
) -> tuple[int, dict[str, str], bytes]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        # skip_host: the Host header is the test's to give (or to leave at the loopback one).
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", headers.get("Host", f"127.0.0.1:{port}"))
        for name, value in headers.items():
            if name != "Host":
                conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(body or b"")))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_a_local_clients_run_is_served(server: ConductorServer) -> None:
    """The control: these bytes, sent as a local client sends them, run the python tool."""
    status, _, body = _request(
        server, "POST", RUNS_PATH, {"Content-Type": "application/json"}, json.dumps(RUN).encode()
    )
    assert status == 200, body
    result = json.loads(body.decode().strip().splitlines()[-1])
    assert MARK in result["result"]["answer"], body
    assert server.runs_served == 1


@pytest.mark.parametrize("attack", list(PAGE_ATTACKS), ids=list(PAGE_ATTACKS))
def test_a_pages_requests_are_refused_on_every_route(server: ConductorServer, attack: str) -> None:
    headers = PAGE_ATTACKS[attack]
    routes = sorted(route_table())
    assert (("POST", RUNS_PATH)) in routes and ("POST", STOP_PATH) in routes
    for method, path in [*routes, ("HEAD", "/"), ("OPTIONS", RUNS_PATH)]:
        body = json.dumps(RUN).encode() if method == "POST" else None
        get_like = method in ("GET", "HEAD", "OPTIONS")
        if get_like and "Origin" not in headers and "Host" not in headers:
            continue  # a page's GET without either is no request a page can read
        status, answer_headers, answer = _request(server, method, path, headers, body)
        assert status in (403, 415), (method, path, status, answer)
        assert "Access-Control-Allow-Origin" not in answer_headers
        if method != "HEAD":
            error = json.loads(answer)["error"]
            assert error["type"] == "permission_error" or status == 415, error
    # Judged from outside: nothing ran, nothing stopped.
    assert server.runs_served == 0
    assert not server.app.stop_requested.is_set()
    status, _, _ = _request(server, "GET", "/v1/models", {})
    assert status == 200


def test_loopback_names_and_configured_hosts_are_served(
    tool_config: Path, isolated_home: Path
) -> None:
    text = tool_config.read_text(encoding="utf-8")
    tool_config.write_text(text + '\n[server]\nallowed_hosts = ["box.lan"]\n', encoding="utf-8")
    srv = _serve(tool_config)
    try:
        port = srv.server_address[1]
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "127.0.0.1", f"box.lan:{port}"):
            status, _, body = _request(srv, "GET", "/v1/models", {"Host": host})
            assert status == 200, (host, body)
        for host in (f"box.lan.evil.example:{port}", f"10.0.0.1:{port}", "", "a b"):
            status, _, _ = _request(srv, "GET", "/v1/models", {"Host": host})
            assert status == 403, host
    finally:
        srv.shutdown()
        srv.server_close()
    # Where requests must carry a key, it is the guard, and any name reaches the server.
    key = "k3y-" + "h" * 28
    keyed = _serve(tool_config, key=key)
    try:
        auth = {"Authorization": f"Bearer {key}"}
        status, _, _ = _request(keyed, "GET", "/v1/models", {**auth, "Host": "box:8787"})
        assert status == 200
        status, _, _ = _request(keyed, "GET", "/v1/models", {"Host": "box:8787"})
        assert status == 401
    finally:
        keyed.shutdown()
        keyed.server_close()


def test_a_preflight_allows_nothing_foreign_and_an_allowed_page_is_served(
    tool_config: Path, isolated_home: Path
) -> None:
    page = "http://localhost:3000"
    text = tool_config.read_text(encoding="utf-8")
    tool_config.write_text(text + f'\n[server]\nallowed_origins = ["{page}"]\n', encoding="utf-8")
    srv = _serve(tool_config)
    try:
        preflight = {
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        }
        status, headers, _ = _request(srv, "OPTIONS", RUNS_PATH, {**preflight, "Origin": FOREIGN})
        assert status == 403 and "Access-Control-Allow-Origin" not in headers
        status, headers, _ = _request(srv, "OPTIONS", RUNS_PATH, {**preflight, "Origin": page})
        assert status == 204
        assert headers["Access-Control-Allow-Origin"] == page
        assert "POST" in headers["Access-Control-Allow-Methods"]
        status, headers, _ = _request(srv, "OPTIONS", RUNS_PATH, {})  # not a browser's
        assert status == 204 and "Access-Control-Allow-Origin" not in headers
        body = json.dumps(RUN).encode()
        json_from_page = {"Origin": page, "Content-Type": "application/json"}
        status, headers, answer = _request(srv, "POST", RUNS_PATH, json_from_page, body)
        assert status == 200 and headers["Access-Control-Allow-Origin"] == page
        assert MARK in answer.decode()
    finally:
        srv.shutdown()
        srv.server_close()


def test_with_a_key_head_and_every_route_need_it(tool_config: Path, isolated_home: Path) -> None:
    key = "k3y-" + "z" * 28
    srv = _serve(tool_config, key=key)
    try:
        for method, path in [*sorted(route_table()), ("HEAD", "/")]:
            body = json.dumps(RUN).encode() if method == "POST" else None
            json_body = {"Content-Type": "application/json"} if body else {}
            status, _, _ = _request(srv, method, path, json_body, body)
            assert status == 401, (method, path)
        status, _, _ = _request(srv, "HEAD", "/", {"Authorization": f"Bearer {key}"})
        assert status == 200
        status, _, _ = _request(srv, "HEAD", "/", {"x-api-key": key})
        assert status == 200
        assert srv.runs_served == 0 and not srv.app.stop_requested.is_set()
    finally:
        srv.shutdown()
        srv.server_close()


def test_overrides_that_change_the_pool_need_the_operators_leave(
    tool_config: Path, isolated_home: Path
) -> None:
    json_type = {"Content-Type": "application/json"}
    for change in ({"conductor": "qwen2.5-coder-0.5b-instruct"}, {"workers": ["py"]}):
        request = json.dumps({**RUN, "overrides": change}).encode()
        srv = _serve(tool_config)
        try:
            status, _, body = _request(srv, "POST", RUNS_PATH, json_type, request)
            assert status == 403, body
            assert "allow_overrides" in json.loads(body)["error"]["message"]
            # Seed and step counts change nothing the server loads: still served.
            seeded = json.dumps({**RUN, "overrides": {"seed": 3}}).encode()
            status, _, body = _request(srv, "POST", RUNS_PATH, json_type, seeded)
            assert status == 200 and MARK in body.decode()
        finally:
            srv.shutdown()
            srv.server_close()
    text = tool_config.read_text(encoding="utf-8")
    tool_config.write_text(text + "\n[server]\nallow_overrides = true\n", encoding="utf-8")
    srv = _serve(tool_config)
    try:
        request = json.dumps({**RUN, "overrides": {"workers": ["py"]}}).encode()
        status, _, body = _request(srv, "POST", RUNS_PATH, json_type, request)
        assert status == 200 and MARK in body.decode()
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_known_path_asked_with_another_method_is_405(server: ConductorServer) -> None:
    status, headers, body = _request(server, "GET", RUNS_PATH, {})
    assert status == 405 and headers["Allow"] == "POST", body
    status, _, _ = _request(server, "GET", "/no/such/path", {})
    assert status == 404
