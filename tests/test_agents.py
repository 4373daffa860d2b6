"""Agents on `conductor serve` (issue 42): a request's tools reach the worker that answers, its
tool calls come back as OpenAI sends them, and the request with the tool's result goes back to
that worker. Driven by the official openai SDK against the real server, with SmolLM2 really
planning; the worker that calls tools is FakeToolCallingWorker (a fake model server)."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.config.settings import load_config
from conductor_cli.run.agent import LOOP_TASK
from conductor_cli.server.http_api import ConductorServer

from .fake_tool_worker import FakeToolCallingWorker

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "exec_command",
            "description": "Run a shell command",
            "parameters": {
                "type": "object",
                "properties": {"cmd": {"type": "string"}},
                "required": ["cmd"],
            },
        },
    },
    {"type": "web_search"},  # a provider's built-in: left out, said once in the log
]
QUESTION = [{"role": "user", "content": "List the files here."}]


@pytest.fixture
def worker() -> Iterator[FakeToolCallingWorker]:
    fake = FakeToolCallingWorker()
    yield fake
    fake.close()


def _serve(config_path: Path) -> Iterator[ConductorServer]:
    srv = ConductorServer(load_config(config_path), port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def server(
    tmp_path: Path, gguf_path: Path, worker: FakeToolCallingWorker
) -> Iterator[ConductorServer]:
    config = tmp_path / "agent.toml"
    config.write_text(
        "[conductor]\nmax_steps = 1\n\n[[workers]]\n"
        f'name = "agent"\nmodel = "openai/fake-tools"\napi_base = "{worker.api_base}"\n'
        'description = "calls tools"\n',
        encoding="utf-8",
    )
    yield from _serve(config)


def client(server: ConductorServer):  # type: ignore[no-untyped-def]
    import openai

    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def _trace(home: Path, stem: str) -> dict:
    return json.loads((home / "data" / "conductor" / "traces" / f"{stem}.json").read_text())


def test_a_tool_call_round_trip(
    server: ConductorServer,
    worker: FakeToolCallingWorker,
    isolated_home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    c = client(server)
    raw = c.chat.completions.with_raw_response.create(
        model="conductor", messages=QUESTION, tools=TOOLS
    )
    first = raw.parse()
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "exec_command"
    assert json.loads(call.function.arguments) == {"cmd": "echo hi"}
    # The worker got the tools (functions only) and the conversation as the client sent it.
    sent = worker.requests[-1]
    assert [t["function"]["name"] for t in sent["tools"]] == ["exec_command"]
    assert sent["messages"][-1] == QUESTION[0]
    # The team is shown to a client that shows no tree, and kept in the trace.
    assert json.loads(raw.headers["x-conductor-plan"])[0]["worker"] == "agent"
    trace = _trace(isolated_home, raw.headers["x-conductor-trace"])
    assert trace["steps"][-1]["tool_calls"][0]["name"] == "exec_command"

    history = [
        *QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": [{"type": "text", "text": "a.py"}]},
    ]
    raw2 = c.chat.completions.with_raw_response.create(
        model="conductor", messages=history, tools=TOOLS
    )
    second = raw2.parse()
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "done: a.py"
    # The loop went back to the worker that called the tool, unplanned, the tool's result
    # intact (its id, its content as parts).
    trace2 = _trace(isolated_home, raw2.headers["x-conductor-trace"])
    assert [s["task"] for s in trace2["steps"]] == [LOOP_TASK]
    assert trace2.get("plan") is None
    assert worker.requests[-1]["messages"][-1]["tool_call_id"] == call.id
    err = capsys.readouterr().err
    assert err.count("'web_search' cannot run here") == 1


def test_streamed_tool_calls_arrive_as_openai_streams_them(
    server: ConductorServer, worker: FakeToolCallingWorker
) -> None:
    c = client(server)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for part in c.chat.completions.create(
        model="conductor", messages=QUESTION, tools=TOOLS, stream=True
    ):
        if not part.choices:
            continue
        for delta in part.choices[0].delta.tool_calls or ():
            entry = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] = delta.id or entry["id"]
            if delta.function and delta.function.name:
                entry["name"] = delta.function.name
            if delta.function and delta.function.arguments:
                entry["arguments"] += delta.function.arguments
        finish = part.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    assert list(calls) == [0]
    assert calls[0]["name"] == "exec_command" and calls[0]["id"].startswith("call_fake_")
    assert json.loads(calls[0]["arguments"]) == {"cmd": "echo hi"}


def test_bad_tool_input_is_a_400_naming_the_field(server: ConductorServer) -> None:
    import openai

    c = client(server)
    orphan = [*QUESTION, {"role": "tool", "tool_call_id": "call_nobody", "content": "x"}]
    with pytest.raises(openai.BadRequestError) as bad:
        c.chat.completions.create(model="conductor", messages=orphan, tools=TOOLS)
    assert bad.value.body["param"] == "messages[1].tool_call_id"
    with pytest.raises(openai.BadRequestError) as bad:
        c.chat.completions.create(
            model="conductor", messages=QUESTION, tools=[{"type": "function"}]
        )
    assert bad.value.body["param"] == "tools[0].function"
    # The server keeps serving.
    assert c.chat.completions.create(model="conductor", messages=QUESTION, tools=TOOLS)


def test_a_pool_that_cannot_call_tools_answers_with_text_and_says_so(
    fast_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for srv in _serve(fast_config):
        c = client(srv)
        for _ in range(2):
            done = c.chat.completions.create(model="conductor", messages=QUESTION, tools=TOOLS)
            assert done.choices[0].finish_reason == "stop" and done.choices[0].message.content
    err = capsys.readouterr().err
    assert err.count("worker local answered an agent's request but cannot call its tools") == 1


# --- the Responses API (Codex CLI's) -----------------------------------------------------------

RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Run a shell command",
        "parameters": TOOLS[0]["function"]["parameters"],
        "strict": False,
    },
    {"type": "web_search"},
]
CODEX_INPUT = [
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "Be brief."}],
    },
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "List the files here."}],
    },
]


def test_responses_a_tool_round_trip_streamed_as_codex_reads_it(
    server: ConductorServer,
    worker: FakeToolCallingWorker,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conductor_cli.server import responses_api

    # While the conductor plans, in_progress events keep a client's idle timeout from firing.
    monkeypatch.setattr(responses_api, "HEARTBEAT_S", 0.05)
    c = client(server)
    events = list(
        c.responses.create(
            model="conductor", input=CODEX_INPUT, tools=RESPONSES_TOOLS, stream=True, store=False
        )
    )
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert kinds.index("response.output_item.added") < kinds.index("response.output_item.done")
    first_output = kinds.index("response.output_item.added")
    assert kinds[:first_output].count("response.in_progress") >= 3, kinds
    done = events[-1].response
    (call,) = [item for item in done.output if item.type == "function_call"]
    assert call.name == "exec_command" and json.loads(call.arguments) == {"cmd": "echo hi"}
    # The developer message reached the worker as its system message.
    assert worker.requests[-1]["messages"][0] == {"role": "system", "content": "Be brief."}

    follow = [
        *CODEX_INPUT,
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": "a.py\nb.py"},
    ]
    second = c.responses.create(model="conductor", input=follow, tools=RESPONSES_TOOLS)
    assert second.status == "completed" and second.output_text == "done: a.py\nb.py"
    sent = worker.requests[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.call_id
    assert sent[-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "a.py\nb.py"}
    trace = _trace(isolated_home, second.model_extra["conductor_trace"])
    assert [s["task"] for s in trace["steps"]] == [LOOP_TASK]


def test_responses_text_streams_as_deltas_of_one_message(fast_config: Path) -> None:
    for srv in _serve(fast_config):
        c = client(srv)
        events = list(c.responses.create(model="conductor", input="Name a colour.", stream=True))
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        done = events[-1].response
        assert deltas.strip() and done.output_text == deltas
        assert done.usage.total_tokens > 0
        plain = c.responses.create(model="conductor", input="Name a colour.")
        assert plain.output_text == deltas  # cached: the same run


def test_responses_refuses_what_it_cannot_serve_naming_the_field(server: ConductorServer) -> None:
    import openai

    c = client(server)
    cases = [
        ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": [{"type": "local_shell_call"}]}, "input[0].type"),
        (
            {
                "input": [
                    *CODEX_INPUT,
                    {"type": "function_call_output", "call_id": "nobody", "output": "x"},
                ]
            },
            "input[2].call_id",
        ),
    ]
    for extra, param in cases:
        with pytest.raises(openai.BadRequestError) as bad:
            c.responses.create(model="conductor", **extra)
        assert bad.value.body["param"] == param, bad.value.body


# --- Anthropic's Messages API (Claude Code's) --------------------------------------------------

ANTHROPIC_TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    {"type": "web_search_20250305", "name": "web_search"},
]


def anthropic_client(server: ConductorServer):  # type: ignore[no-untyped-def]
    import anthropic

    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)


def test_messages_a_tool_round_trip_plain_and_streamed(
    server: ConductorServer, worker: FakeToolCallingWorker, isolated_home: Path
) -> None:
    worker.tool, worker.arguments = "Bash", json.dumps({"command": "ls"})
    c = anthropic_client(server)
    ask = [{"role": "user", "content": "List the files here."}]
    first = c.messages.create(
        model="conductor", max_tokens=512, system="Be brief.", messages=ask, tools=ANTHROPIC_TOOLS
    )
    assert first.stop_reason == "tool_use"
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "Bash" and use.input == {"command": "ls"}
    assert worker.requests[-1]["messages"][0] == {"role": "system", "content": "Be brief."}

    history = [
        *ask,
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": [{"type": "text", "text": "a.py"}],
                }
            ],
        },
    ]
    with c.messages.stream(
        model="conductor", max_tokens=512, messages=history, tools=ANTHROPIC_TOOLS
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "done: a.py" and final.stop_reason == "end_turn"
    sent = worker.requests[-1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": use.id, "content": "a.py"}
    # The last written: two traces of one second sort by their random suffix, not by time.
    traces = (isolated_home / "data" / "conductor" / "traces").glob("*.json")
    latest = max(traces, key=lambda p: p.stat().st_mtime_ns)
    trace = json.loads(latest.read_text())
    assert [s["task"] for s in trace["steps"]] == [LOOP_TASK]


def test_messages_streams_a_tool_call_as_claude_code_reads_it(
    server: ConductorServer, worker: FakeToolCallingWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conductor_cli.server import messages_api

    monkeypatch.setattr(messages_api, "HEARTBEAT_S", 0.05)  # pings while the conductor plans
    worker.tool, worker.arguments = "Bash", json.dumps({"command": "ls"})
    c = anthropic_client(server)
    with c.messages.stream(
        model="conductor",
        max_tokens=512,
        tools=ANTHROPIC_TOOLS,
        messages=[{"role": "user", "content": "List the files here."}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    # The SDK drops pings; on the wire they come before the first block.
    body = json.dumps(
        {
            "model": "conductor",
            "max_tokens": 64,
            "stream": True,
            "messages": [{"role": "user", "content": "Name a colour."}],
        }
    )
    request = urllib.request.Request(
        f"{server.url}/v1/messages", body.encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        wire = reply.read().decode()
    events = [
        line.removeprefix("event: ") for line in wire.splitlines() if line.startswith("event: ")
    ]
    assert events[: events.index("content_block_start")].count("ping") >= 3, events
    assert final.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "input", None)) for b in final.content] == [
        ("tool_use", {"command": "ls"})
    ]


def test_messages_counts_tokens_and_refuses_bad_input_in_anthropics_form(
    server: ConductorServer,
) -> None:
    import anthropic

    c = anthropic_client(server)
    counted = c.messages.count_tokens(
        model="conductor", messages=[{"role": "user", "content": "x" * 400}]
    )
    assert 100 <= counted.input_tokens <= 130
    orphan = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nobody"}]}]
    with pytest.raises(anthropic.BadRequestError) as bad:
        c.messages.create(model="conductor", max_tokens=10, messages=orphan)
    assert bad.value.body["type"] == "error"
    assert "messages[0].content[0].tool_use_id" in bad.value.body["error"]["message"]
    with pytest.raises(anthropic.NotFoundError):
        c.messages.create(
            model="claude-nope", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )


def test_a_key_may_come_as_x_api_key(fast_config: Path, gguf_path: Path) -> None:
    import anthropic

    srv = ConductorServer(load_config(fast_config), port=0, key="sekrit")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        ok = anthropic.Anthropic(base_url=srv.url, api_key="sekrit", max_retries=0)
        assert ok.messages.count_tokens(
            model="conductor", messages=[{"role": "user", "content": "hi"}]
        )
        wrong = anthropic.Anthropic(base_url=srv.url, api_key="wrong", max_retries=0)
        with pytest.raises(anthropic.AuthenticationError):
            wrong.messages.count_tokens(
                model="conductor", messages=[{"role": "user", "content": "hi"}]
            )
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_real_local_model_calls_the_tool_and_reads_its_result(
    tmp_path: Path, gguf_path: Path, coder_pulled: Path
) -> None:
    """Qwen2.5-Coder-1.5B (the default team's coder) in llama.cpp as the agent's worker: its
    tool call, read from its text, comes back as OpenAI's; the tool's result reaches it in its
    chat template (bench/agent_tools.py: 12 of 16 such requests get a well-formed call)."""
    config = tmp_path / "coder.toml"
    config.write_text(
        '[conductor]\nmax_steps = 1\n\n[[workers]]\nname = "coder"\n'
        'model = "gguf:qwen2.5-coder-1.5b-instruct"\ndescription = "writes code"\n',
        encoding="utf-8",
    )
    for srv in _serve(config):
        c = client(srv)
        ask = [{"role": "user", "content": "List the files in the current directory."}]
        first = c.chat.completions.create(model="conductor", messages=ask, tools=TOOLS[:1])
        assert first.choices[0].finish_reason == "tool_calls", first.choices[0].message
        (call,) = first.choices[0].message.tool_calls
        assert call.function.name == "exec_command"
        assert "ls" in json.loads(call.function.arguments)["cmd"]
        history = [
            *ask,
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "main.py\nREADME.md"},
        ]
        second = c.chat.completions.create(model="conductor", messages=history, tools=TOOLS[:1])
        assert second.choices[0].message.content or second.choices[0].message.tool_calls
