"""Tool calls in a local model's text, and an agent's conversation in the form a GGUF's chat
template reads. Models trained on the Hermes/Qwen format (Qwen2.5 and Qwen2.5-Coder among them)
call a tool by writing

    <tool_call>
    {"name": "exec_command", "arguments": {"cmd": "ls"}}
    </tool_call>

which llama.cpp returns as text: these functions turn it into tool calls, and a call that is
not well formed (not JSON, no name, a tool the request did not offer) into a count, left in the
text, so that the answer says what the model wrote. Small models often leave the tags out: a
reply that is only such an object, bare or in a ```json block, is a call too (Qwen2.5-Coder-1.5B
wrote 3 of 3 that way here, one wrapped in the template's own doubled braces "{{...}}"; counted
by bench/agent_tools.py)."""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from conductor_cli.backends.base import ToolCall, message_text

# How replies are read for tool calls: part of the cache key of every request with tools, so
# that a reply kept under older rules is read again (storage/cache.py).
PARSE_VERSION = 2
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


@dataclass(frozen=True)
class Parsed:
    text: str  # the reply without its well-formed calls
    calls: tuple[ToolCall, ...]
    malformed: int  # calls that could not be used (they stay in the text)
    tagged: bool = False  # the calls came in <tool_call> tags, as the template asks


def template_calls_tools(template: str | None) -> bool:
    """Whether a GGUF's chat template renders tools and the <tool_call> format."""
    return bool(template) and "tools" in template and "<tool_call>" in template


def parse_tool_calls(text: str, offered: Sequence[str]) -> Parsed:
    if "<tool_call>" in text:
        return _tagged(text, offered)
    fenced = _FENCED.findall(text)
    bodies = fenced if fenced and not _FENCED.sub("", text).strip() else [text.strip()]
    if not all(_looks_like_call(b) for b in bodies):
        return Parsed(text.strip(), (), 0)
    calls = [_call(b, offered) for b in bodies]
    if None in calls:
        return Parsed(text.strip(), (), len(bodies))
    return Parsed("", tuple(c for c in calls if c is not None), 0)


def _looks_like_call(body: str) -> bool:
    """A bare object with a name and arguments: what a model meant as a call, even one this
    request cannot take (that one counts as malformed); an answer that is other JSON is not."""
    body = _unwrap(body)
    return body.startswith("{") and '"name"' in body and '"arguments"' in body


def _unwrap(body: str) -> str:
    body = body.strip()
    if body.startswith("{{") and body.endswith("}}"):  # the template's doubled braces
        body = body[1:-1].strip()
    return body


def _tagged(text: str, offered: Sequence[str]) -> Parsed:
    calls: list[ToolCall] = []
    malformed = 0
    kept: list[str] = []
    end = 0
    for match in _CALL.finditer(text):
        call = _call(match.group(1), offered)
        if call is None:
            malformed += 1
            continue
        calls.append(call)
        kept.append(text[end : match.start()])
        end = match.end()
    kept.append(text[end:])
    return Parsed("".join(kept).strip(), tuple(calls), malformed, tagged=True)


def _call(body: str, offered: Sequence[str]) -> ToolCall | None:
    body = body.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    body = _unwrap(body)
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("name") not in offered:
        return None
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    text = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(f"call_{uuid.uuid4().hex[:24]}", value["name"], text)


def template_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """An agent's conversation as chat templates read it: every content a string, and each
    tool call's arguments an object (templates write them with `tojson`)."""
    out = []
    for m in messages:
        message = {k: v for k, v in m.items() if k != "content"}
        message["content"] = message_text(m)
        if m.get("tool_calls"):
            message["tool_calls"] = [_template_call(c) for c in m["tool_calls"]]
        out.append(message)
    return out


def _template_call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # else as the model (or client) wrote it
            function["arguments"] = json.loads(arguments)
    return {**call, "function": function}
