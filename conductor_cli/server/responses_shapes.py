"""OpenAI's Responses API wire format (what Codex CLI speaks), as pure functions: a request's
input items to our question, attachments and agent turn (in the chat form the workers take),
and a run to a response object or its stream of events. Stateless: the client sends the whole
history each turn (`store: false`), so `previous_response_id` is refused."""

from __future__ import annotations

import json
import time
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

# Item types that carry nothing a worker can use (a model's own reasoning): left out.
SKIPPED_ITEMS = ("reasoning",)
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")
_ROLES = ("user", "assistant", "system", "developer")


@dataclass(frozen=True)
class ResponsesRequest:
    model: str
    question: str
    attachments: tuple[Attachment, ...]
    stream: bool
    agent: AgentTurn | None
    tool_types: tuple[str, ...]  # tool types that are not functions (left out, said once)
    echo: dict[str, Any]  # request fields a response repeats (tools, tool_choice, ...)


def _content_text(content: Any, where: str) -> str:
    return parts_text(content, where, _TEXT_PARTS, null=False, parts="content parts")


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's instructions and input items as chat messages: a `function_call` joins
    the assistant message before it as a tool call, a `function_call_output` is a tool result
    answering a call made earlier."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _invalid("instructions", "a string", instructions)
        messages.append({"role": "system", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise _invalid("input", "a string or a non-empty list of input items", items)
    called: set[str] = set()
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise _invalid(where, "an input item object", item)
        kind = item.get("type", "message")
        if kind in SKIPPED_ITEMS:
            continue
        reader = _ITEM_READERS.get(kind)
        if reader is None:
            taken = ", ".join([*_ITEM_READERS, *SKIPPED_ITEMS])
            raise BadRequest(
                f"{where}.type {_shown(kind)} is not an input item this server takes ({taken})",
                param=f"{where}.type",
            )
        reader(item, where, messages, called)
    return messages


def _message_item(
    item: dict[str, Any], where: str, messages: list[dict[str, Any]], called: set[str]
) -> None:
    role = item.get("role")
    if role not in _ROLES:
        raise _invalid(f"{where}.role", "one of " + ", ".join(_ROLES), role)
    messages.append({"role": role, "content": _content_text(item.get("content"), where)})


def _function_call_item(
    item: dict[str, Any], where: str, messages: list[dict[str, Any]], called: set[str]
) -> None:
    """A call the model made: joins the assistant message before it as a tool call."""
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise _invalid(f"{where}.call_id", "a non-empty string", call_id)
    if not isinstance(name, str) or not name:
        raise _invalid(f"{where}.name", "a non-empty string", name)
    arguments = item.get("arguments", "")
    if not isinstance(arguments, str):
        raise _invalid(f"{where}.arguments", "a string of JSON", arguments)
    call = ToolCall(call_id, name, arguments).to_openai()
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    called.add(call_id)


def _function_call_output_item(
    item: dict[str, Any], where: str, messages: list[dict[str, Any]], called: set[str]
) -> None:
    """A tool's result, answering a call made earlier in the input."""
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or call_id not in called:
        raise BadRequest(
            f"{where}.call_id {_shown(call_id)} answers no function_call earlier in the input",
            param=f"{where}.call_id",
        )
    output = item.get("output")
    text = output if isinstance(output, str) else _content_text(output, where)
    messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


# Each input item type this server reads, and its reader (item, where, messages, call ids so
# far): a new item type is one function and one entry.
_ITEM_READERS = {
    "message": _message_item,
    "function_call": _function_call_item,
    "function_call_output": _function_call_output_item,
}


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    """A function tool ({"type": "function", "name", "parameters"}) as a chat function."""
    return {k: v for k, v in tool.items() if k in ("name", "description", "parameters")}


def _tool_choice(choice: Any) -> Any:
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name"):
        return {"type": "function", "function": {"name": choice["name"]}}
    if isinstance(choice, dict):  # a built-in tool type: nothing here to force
        return "auto"
    raise _invalid("tool_choice", '"auto", "none", "required" or a function', choice)


def parse_responses(body: Any) -> ResponsesRequest:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if body.get("previous_response_id") is not None:
        raise BadRequest(
            "previous_response_id: this server keeps no responses (it is stateless, as with "
            "store: false); send the whole conversation in input",
            param="previous_response_id",
        )
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model", 'a model\'s name (e.g. "conductor")', model)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _invalid("stream", "a boolean", stream)
    messages = chat_messages(body)
    texts = [(m["role"], m.get("content") or "") for m in messages]
    last = max((i for i, (role, _) in enumerate(texts) if role == "user"), default=None)
    if last is None or not texts[last][1].strip():
        raise BadRequest("no user message with a question in input", param="input")
    attachments = tuple(
        Attachment(f"{role} message {i}", text)
        for i, (role, text) in enumerate(texts)
        if i != last and text.strip()
    )
    tools, others = read_tools(body, "function", _function)
    choice = _tool_choice(body.get("tool_choice"))
    agent = AgentTurn(tools, tuple(messages), choice) if tools and choice != "none" else None
    echo = {
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto",
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
    }
    return ResponsesRequest(model, texts[last][1], attachments, stream, agent, others, echo)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": content if status == "completed" else [],
    }


def call_item(item_id: str, call: ToolCall, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments if status == "completed" else "",
        "status": status,
    }


def usage(totals: dict[str, Any]) -> dict[str, Any]:
    prompt, reply = int(totals.get("tokens_in", 0)), int(totals.get("tokens_out", 0))
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + reply,
    }


def response(
    response_id: str,
    request: ResponsesRequest,
    status: str,
    output: list[dict[str, Any]],
    totals: dict[str, Any] | None = None,
    error: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": request.model,
        "output": output,
        "usage": usage(totals) if totals is not None else None,
        "error": error,
        "incomplete_details": None,
        "text": {"format": {"type": "text"}},
        "temperature": None,
        "top_p": None,
        "store": False,
        **request.echo,
        **(extra or {}),
    }


def output_items(
    answer: str, calls: tuple[ToolCall, ...]
) -> list[tuple[str, dict[str, Any], ToolCall | None]]:
    """The run's output as (item id, finished item, its call) in order: the answer's text as
    a message (when there is text), then one function_call item per tool call."""
    items: list[tuple[str, dict[str, Any], ToolCall | None]] = []
    if answer or not calls:
        item_id = new_id("msg")
        items.append((item_id, message_item(item_id, answer), None))
    for call in calls:
        item_id = new_id("fc")
        items.append((item_id, call_item(item_id, call), call))
    return items


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
