"""Reading a local model's tool calls from its text (backends/tool_calls.py), in the forms small
models write them (seen from Qwen2.5-Coder 0.5B and 1.5B in bench/agent_tools.py), and an
agent's conversation in the form a GGUF's chat template reads."""

from __future__ import annotations

import json

from conductor_cli.backends.tool_calls import (
    parse_tool_calls,
    template_calls_tools,
    template_messages,
)

OFFERED = ["exec_command", "read_file"]


def _one(text: str) -> tuple[str, dict]:
    parsed = parse_tool_calls(text, OFFERED)
    (call,) = parsed.calls
    assert parsed.text == "" and parsed.malformed == 0
    return call.name, json.loads(call.arguments)


def test_calls_in_every_form_a_small_model_writes_them() -> None:
    expected = ("exec_command", {"cmd": "ls -l"})
    assert (
        _one('<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "ls -l"}}\n</tool_call>')
        == expected
    )
    assert (
        _one('```json\n{\n  "name": "exec_command",\n  "arguments": {"cmd": "ls -l"}\n}\n```')
        == expected
    )
    # The template's own doubled braces, copied by the 1.5B.
    assert _one('{{"name": "exec_command", "arguments": {"cmd": "ls -l"}}}') == expected
    # Arguments given as a JSON string are read too.
    assert _one('{"name": "exec_command", "arguments": "{\\"cmd\\": \\"ls -l\\"}"}') == expected


def test_text_around_tagged_calls_stays_and_several_calls_keep_their_order() -> None:
    text = (
        'Let me look.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "ls"}}'
    )  # the second left unclosed (max_tokens)
    parsed = parse_tool_calls(text, OFFERED)
    assert [c.name for c in parsed.calls] == ["read_file", "exec_command"]
    assert parsed.text == "Let me look." and parsed.tagged
    assert len({c.id for c in parsed.calls}) == 2


def test_what_is_not_a_usable_call_stays_text_and_is_counted() -> None:
    answer = parse_tool_calls("The capital of France is Paris.", OFFERED)
    assert answer.calls == () and answer.malformed == 0 and answer.text.endswith("Paris.")
    data = parse_tool_calls('{"city": "Paris"}', OFFERED)  # an answer that is JSON
    assert data.calls == () and data.malformed == 0
    invented = parse_tool_calls('{"name": "delete_file", "arguments": {"path": "x"}}', OFFERED)
    assert invented.calls == () and invented.malformed == 1 and "delete_file" in invented.text
    broken = parse_tool_calls(
        '<tool_call>{"name": "exec_command", "arguments": {</tool_call>', OFFERED
    )
    assert broken.calls == () and broken.malformed == 1


def test_the_conversation_as_a_chat_template_reads_it() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "List."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "exec_command", "arguments": '{"cmd": "ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "a.py"}]},
    ]
    out = template_messages(messages)
    assert [m["content"] for m in out] == ["List.", "", "a.py"]
    assert out[1]["tool_calls"][0]["function"]["arguments"] == {"cmd": "ls"}
    assert out[2]["tool_call_id"] == "c1"
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"cmd": "ls"}'  # untouched


def test_which_templates_write_tool_calls() -> None:
    assert template_calls_tools("{%- if tools %}...<tool_call>...{% endif %}")
    assert not template_calls_tools("{{ messages }}") and not template_calls_tools(None)
