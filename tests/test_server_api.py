"""`conductor serve`'s OpenAI-compatible API, called by clients we did not write (the openai
SDK, litellm), on the real embedded model (work in progress: issue 18)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.config.settings import load_config
from conductor_cli.server.http_api import ConductorServer


@pytest.fixture
def server(fast_config: Path) -> Iterator[ConductorServer]:
    srv = ConductorServer(load_config(fast_config), port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def client(server: ConductorServer):  # type: ignore[no-untyped-def]
    import openai

    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def test_the_openai_sdk_lists_and_asks_the_conductor(server: ConductorServer) -> None:
    c = client(server)
    assert [m.id for m in c.models.list().data] == ["conductor"]
    raw = c.chat.completions.with_raw_response.create(
        model="conductor", messages=[{"role": "user", "content": "What is 2 + 2?"}]
    )
    done = raw.parse()
    answer = done.choices[0].message.content
    assert answer and done.choices[0].finish_reason == "stop"
    assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens > 0
    trace = raw.headers["x-conductor-trace"]
    assert trace and done.model_extra["conductor_trace"] == trace
    # The same question again: the warm runtime answers from the cache, the same answer.
    again = c.chat.completions.create(
        model="conductor", messages=[{"role": "user", "content": "What is 2 + 2?"}]
    )
    assert again.choices[0].message.content == answer
    assert server.runs_served == 2


def test_streaming_sends_the_final_steps_text_then_usage(server: ConductorServer) -> None:
    c = client(server)
    pieces, usage = [], None
    for part in c.chat.completions.create(
        model="conductor",
        messages=[{"role": "user", "content": "Name a colour."}],
        stream=True,
    ):
        if part.choices and part.choices[0].delta.content:
            pieces.append(part.choices[0].delta.content)
        if getattr(part, "usage", None):
            usage = part.usage
    assert "".join(pieces).strip()
    assert usage is not None and usage.total_tokens > 0
    # The streamed text is the answer a plain request gets (the run is cached now).
    plain = c.chat.completions.create(
        model="conductor", messages=[{"role": "user", "content": "Name a colour."}]
    )
    assert plain.choices[0].message.content == "".join(pieces)


def test_litellm_reaches_it_as_an_openai_model(server: ConductorServer) -> None:
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    reply = litellm.completion(
        model="openai/conductor",
        api_base=f"{server.url}/v1",
        api_key="unused",
        messages=[{"role": "user", "content": "What is 2 + 2?"}],
    )
    assert reply.choices[0].message.content


def test_bad_requests_get_openai_error_bodies(server: ConductorServer) -> None:
    import openai

    c = client(server)
    with pytest.raises(openai.NotFoundError) as unknown:
        c.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert "gpt-9" in unknown.value.message
    with pytest.raises(openai.BadRequestError) as empty:
        c.chat.completions.create(model="conductor", messages=[{"role": "system", "content": "x"}])
    assert "no user message" in empty.value.message
    import json
    import urllib.error
    import urllib.request

    bad = urllib.request.Request(
        f"{server.url}/v1/chat/completions",
        data=b"{not json",
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(bad)
    assert raised.value.code == 400
    assert json.loads(raised.value.read())["error"]["type"] == "invalid_request_error"
    assert server.runs_served == 0


def test_conductor_serve_answers_until_ctrl_c(fast_config: Path) -> None:
    import json
    import re
    import signal
    import urllib.request

    from .conftest import start_cli

    proc = start_cli("serve", "--port", "0", "--config", str(fast_config))
    try:
        assert proc.stderr is not None
        line = ""
        while "serving" not in line:
            line = proc.stderr.readline()
            assert line, proc.communicate()
        url = re.search(r"http://\S+/v1", line).group(0)  # type: ignore[union-attr]
        with urllib.request.urlopen(f"{url}/models", timeout=30) as answer:
            assert [m["id"] for m in json.load(answer)["data"]] == ["conductor"]
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err


def test_serve_refuses_a_non_loopback_address(fast_config: Path) -> None:
    from .conftest import assert_one_line_error, run_cli

    proc = run_cli("serve", "--host", "0.0.0.0", "--config", str(fast_config))
    assert_one_line_error(proc, 2, "--host 0.0.0.0", "--api-key-env")
    proc = run_cli("serve", "--host", "0.0.0.0", "--api-key-env", "NO_SUCH_KEY_VAR")
    assert_one_line_error(proc, 2, "NO_SUCH_KEY_VAR", "unset")


def test_with_a_key_every_request_must_carry_it(fast_config: Path) -> None:
    import openai

    key = "k3y-" + "x" * 28
    srv = ConductorServer(load_config(fast_config), port=0, key=key)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"{srv.url}/v1"
        wrong = openai.OpenAI(base_url=url, api_key="k3y-" + "y" * 28, max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()
        with pytest.raises(openai.AuthenticationError):
            wrong.chat.completions.create(
                model="conductor", messages=[{"role": "user", "content": "hi"}]
            )
        right = openai.OpenAI(base_url=url, api_key=key, max_retries=0)
        assert [m.id for m in right.models.list().data] == ["conductor"]
        assert srv.runs_served == 0
    finally:
        srv.shutdown()
        srv.server_close()


def test_one_run_over_the_limit_gets_429_with_retry_after(tmp_path: Path, gguf_path: Path) -> None:
    import time

    import openai

    from conductor_cli.testing.fake_openai import FakeOpenAIServer

    slow = FakeOpenAIServer(["slow"], delay=4.0)
    config = tmp_path / "one.toml"
    config.write_text(
        "[conductor]\nmax_steps = 1\n\n[server]\nmax_concurrent_runs = 1\n\n"
        f'[[workers]]\nname = "w"\nmodel = "openai/w"\napi_base = "{slow.api_base}"\n'
        "retries = 0\n",
        encoding="utf-8",
    )
    srv = ConductorServer(load_config(config), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    c = client(srv)
    first: list[object] = []
    ask = {"model": "conductor", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}
    runner = threading.Thread(target=lambda: first.append(c.chat.completions.create(**ask)))
    try:
        runner.start()
        deadline = time.monotonic() + 120
        while not slow.requests:  # the first run is at its worker, holding the only slot
            assert time.monotonic() < deadline and runner.is_alive()
            time.sleep(0.05)
        with pytest.raises(openai.RateLimitError) as limited:
            c.chat.completions.create(**ask)
        assert limited.value.response.headers["retry-after"] == "1"
        runner.join(timeout=120)
        assert first and srv.runs_served == 1  # the first run was not disturbed
        assert c.chat.completions.create(**ask).choices[0].message.content  # the slot is free
    finally:
        srv.shutdown()
        srv.server_close()
        slow.close()


def test_server_settings_are_checked_naming_the_key(tmp_path: Path) -> None:
    from .conftest import assert_one_line_error, run_cli

    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nmax_concurrent_runs = 0\n", encoding="utf-8")
    proc = run_cli("serve", "--config", str(bad))
    assert_one_line_error(proc, 2, "server.max_concurrent_runs", "at least 1")
