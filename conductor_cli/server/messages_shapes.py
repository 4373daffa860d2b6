"""Anthropic's Messages API wire format (what Claude Code speaks), as pure functions: a request's
system prompt, messages and content blocks to our question, attachments and agent turn (in the
chat form the workers take), and a run to a message or its stream of events."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from conductor_cli.backends.base import ToolCall
from conductor_cli.run.agent import AgentTurn
from conductor_cli.run.inputs import Attachment
from conductor_cli.server.openai_shapes import (
    BadRequest,
    _invalid,
    _shown,
    parts_text,
    read_tools,
)

# Blocks a worker cannot read (images, documents, a model's own thinking): left out.
SKIPPED_BLOCKS = ("image", "document", "thinking", "redacted_thinking", "search_result")


@dataclass(frozen=True)
class MessagesRequest:
    model: str
    question: str
    attachments: tuple[Attachment, ...]
    stream: bool
    agent: AgentTurn | None
    tool_types: tuple[str, ...]  # server tools (web search, ...) that cannot run here


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _invalid(f"{where}.content", "a string or a list of content blocks", content)
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _invalid(f"{where}.content[{j}]", "an object with a 'type'", block)
    return content


def _result_text(content: Any, where: str) -> str:
    return parts_text(content, where, parts="content blocks")


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The system prompt and messages as chat messages: an assistant's `tool_use` blocks are
    its tool calls, a user's `tool_result` blocks tool results answering calls made earlier."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        text = _result_text(system, "system") if not isinstance(system, str) else system
        messages.append({"role": "system", "content": text})
    items = body.get("messages")
    if not isinstance(items, list) or not items:
        raise _invalid("messages", "a non-empty list of messages", items)
    called: set[str] = set()
    for i, m in enumerate(items):
        where = f"messages[{i}]"
        # Claude Code also sends "system" messages between the turns (its reminders).
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "system"):
            role = m.get("role") if isinstance(m, dict) else m
            raise _invalid(f"{where}.role", '"user", "assistant" or "system"', role)
        if m["role"] == "system":
            messages.append({"role": "system", "content": _result_text(m.get("content"), where)})
            continue
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for j, block in enumerate(_blocks(m.get("content"), where)):
            at = f"{where}.content[{j}]"
            kind = block["type"]
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use" and m["role"] == "assistant":
                call_id, name = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not isinstance(name, str):
                    raise _invalid(at, "a tool_use block with an id and a name", block)
                arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
                calls.append(ToolCall(call_id, name, arguments).to_openai())
                called.add(call_id)
            elif kind == "tool_result" and m["role"] == "user":
                call_id = block.get("tool_use_id")
                if not isinstance(call_id, str) or call_id not in called:
                    raise BadRequest(
                        f"{at}.tool_use_id {_shown(call_id)} answers no tool_use block of an "
                        "earlier assistant message"
                    )
                text = _result_text(block.get("content"), at)
                if block.get("is_error"):
                    text = f"(the tool failed) {text}"
                messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
            elif kind not in SKIPPED_BLOCKS:
                raise BadRequest(
                    f"{at}.type {_shown(kind)} is not a block this server takes in a "
                    f"{m['role']} message"
                )
        text = "\n".join(t for t in texts if t)
        if m["role"] == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
        elif text:
            messages.append({"role": "user", "content": text})
    return messages


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    """A client tool ({"name", "description", "input_schema"}) as a chat function."""
    function = {"name": tool.get("name"), "parameters": tool.get("input_schema")}
    if tool.get("description"):
        function["description"] = tool["description"]
    return function


def _tool_choice(choice: Any) -> Any:
    if choice is None:
        return None
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "tool" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    mapped = {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))
    if mapped is None:
        raise _invalid("tool_choice", 'an object of type "auto", "any", "tool" or "none"', choice)
    return mapped


def parse_messages(body: Any) -> MessagesRequest:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model", "a model's name", model)
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _invalid("max_tokens", "an integer of at least 1", max_tokens)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _invalid("stream", "a boolean", stream)
    messages = chat_messages(body)
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if last is None or not str(messages[last]["content"]).strip():
        raise BadRequest("no user message with a question in messages")
    attachments = tuple(
        Attachment(f"{m['role']} message {i}", str(m["content"]))
        for i, m in enumerate(messages)
        if i != last and isinstance(m.get("content"), str) and m["content"].strip()
    )
    tools, others = read_tools(body, "custom", _function, default_type="custom")
    choice = _tool_choice(body.get("tool_choice"))
    agent = AgentTurn(tools, tuple(messages), choice) if tools and choice != "none" else None
    return MessagesRequest(
        model, str(messages[last]["content"]), attachments, stream, agent, others
    )


def new_id(prefix: str = "msg") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def tool_input(call: ToolCall) -> dict[str, Any] | None:
    """A call's arguments as the object a tool_use block holds; None when they are not a
    JSON object (the answer then says so in text)."""
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def content_blocks(answer: str, calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    bad = [c for c in calls if tool_input(c) is None]
    text = answer
    if bad:
        said = "; ".join(f"{c.name} with {_shown(c.arguments)}" for c in bad)
        text = (answer + "\n\n" if answer else "") + (
            f"(conductor: the worker called {said}: arguments that are not a JSON object, so "
            "the call was not passed on)"
        )
    if text or not calls:
        blocks.append({"type": "text", "text": text})
    for call in calls:
        value = tool_input(call)
        if value is not None:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": value})
    return blocks


def stop_reason(blocks: list[dict[str, Any]]) -> str:
    return "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"


def usage(totals: dict[str, Any] | None) -> dict[str, int]:
    totals = totals or {}
    return {
        "input_tokens": int(totals.get("tokens_in", 0)),
        "output_tokens": int(totals.get("tokens_out", 0)),
    }


def message(
    message_id: str,
    model: str,
    blocks: list[dict[str, Any]],
    totals: dict[str, Any] | None,
    reason: str | None,
) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": reason,
        "stop_sequence": None,
        "usage": usage(totals),
    }


def count_tokens(body: Any) -> dict[str, int]:
    """An estimate of the request's input tokens (about 4 characters a token): the team's
    models each count their own, and no single tokenizer is the team's."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise _invalid("messages", "a list of messages", body)
    parts = [body.get("system"), body.get("messages"), body.get("tools")]
    chars = sum(len(json.dumps(p, ensure_ascii=False)) for p in parts if p is not None)
    return {"input_tokens": max(1, chars // 4)}


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
