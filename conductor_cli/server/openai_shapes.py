"""OpenAI's chat-completion wire format, as pure functions: a request's messages to our
question and attachments, a run to a completion or stream chunks, an error to OpenAI's body."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conductor_cli.backends.base import ToolCall
from conductor_cli.run.agent import AgentTurn
from conductor_cli.run.inputs import Attachment

MODEL = "conductor"


class BadRequest(Exception):
    """A request the client must fix: HTTP `status`, OpenAI error `kind`, one-line message,
    and the field at fault (`param` in OpenAI's error body; None: the request as a whole)."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        kind: str = "invalid_request_error",
        param: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.param = param


@dataclass(frozen=True)
class ChatRequest:
    model: str
    question: str
    attachments: tuple[Attachment, ...]
    stream: bool
    seed: int | None
    agent: AgentTurn | None = None  # the client sent tools: an agent's turn
    tool_types: tuple[str, ...] = ()  # the types of its tools that are not functions


# The roles OpenAI's API knows; any other is a 400 there, so it is here too.
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
INT64 = 1 << 63


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # True is an int in Python


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_in(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: _is_number(v) and low <= v <= high  # NaN and infinities fail too


def _int_in(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: _is_int(v) and low <= v <= high


def _is_stop(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(s, str) for s in value)
    )


# The parameters OpenAI's API defines that a client may send us, with what it allows (null is
# allowed for each, as there). A bad one is a 400 naming it, as OpenAI answers, rather than a
# run that silently ignores it. Only `stream` and `seed` change a run: how the models sample
# is the conductor's config. Fields not named here are accepted and ignored (clients send
# many, and newer ones than we know).
PARAMETERS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "stream": (lambda v: isinstance(v, bool), "a boolean"),
    "seed": (_int_in(-INT64, INT64 - 1), "an integer (64-bit)"),
    "temperature": (_number_in(0, 2), "a number from 0 to 2"),
    "top_p": (_number_in(0, 1), "a number from 0 to 1"),
    "max_tokens": (_int_in(1, INT64 - 1), "an integer of at least 1"),
    "max_completion_tokens": (_int_in(1, INT64 - 1), "an integer of at least 1"),
    "n": (_int_in(1, 1), "1 (this server gives one choice)"),
    "stop": (_is_stop, "a string or a list of strings"),
    "presence_penalty": (_number_in(-2, 2), "a number from -2 to 2"),
    "frequency_penalty": (_number_in(-2, 2), "a number from -2 to 2"),
    "user": (lambda v: isinstance(v, str), "a string"),
    "stream_options": (lambda v: isinstance(v, dict), "an object"),
    "logprobs": (lambda v: isinstance(v, bool), "a boolean"),
    "top_logprobs": (_int_in(0, 20), "an integer from 0 to 20"),
    "logit_bias": (lambda v: isinstance(v, dict), "an object"),
    "response_format": (lambda v: isinstance(v, dict), "an object"),
    "tools": (lambda v: isinstance(v, list), "a list"),
    "tool_choice": (
        lambda v: v in ("none", "auto", "required") or isinstance(v, dict),
        '"none", "auto", "required" or an object naming a function',
    ),
    "parallel_tool_calls": (lambda v: isinstance(v, bool), "a boolean"),
}


def _shown(value: Any) -> str:
    """A bad value as the client sent it, cut short (it goes into a one-line message)."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _invalid(param: str, allowed: str, value: Any) -> BadRequest:
    return BadRequest(f"'{param}' must be {allowed}; got {_shown(value)}", param=param)


def check_parameters(body: dict[str, Any]) -> None:
    """Every known parameter the body sets holds a value OpenAI's API allows."""
    for name, (valid, allowed) in PARAMETERS.items():
        value = body.get(name)
        if value is not None and not valid(value):
            raise _invalid(name, allowed, value)


def parts_text(
    content: Any,
    where: str,
    text_types: tuple[str, ...] = ("text",),
    *,
    null: bool = True,
    parts: str = "parts",
) -> str:
    """A message's content as text, read the same way for every API: a string, or a list of
    parts (objects with a 'type'; those of `text_types` give their 'text', the others are
    skipped); `null`: null is empty content (an assistant message that only called tools).
    `parts` is what the API calls its parts, for the one-line refusal."""
    if isinstance(content, str):
        return content
    if content is None and null:
        return ""
    if not isinstance(content, list):
        allowed = f"a string or a list of {parts}"
        if null:
            allowed = f"a string, a list of {parts} or null"
        raise _invalid(f"{where}.content", allowed, content)
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise _invalid(f"{where}.content[{j}]", "an object with a 'type'", part)
        if part["type"] in text_types:
            text = part.get("text")
            if not isinstance(text, str):
                raise _invalid(f"{where}.content[{j}].text", "a string", text)
            texts.append(text)
    return "\n".join(texts)


def _messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    """Each message's role and text, checked as OpenAI's API checks them (tool calls and
    tool results too: a result answers a call made earlier in the conversation)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages", "a non-empty list of messages", messages)
    texts = []
    called: set[str] = set()
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise _invalid(where, "an object with a 'role'", m)
        role = m.get("role")
        if role not in ROLES:
            raise _invalid(f"{where}.role", "one of " + ", ".join(ROLES), role)
        if role == "assistant" and m.get("tool_calls") is not None:
            called.update(_tool_calls(m["tool_calls"], f"{where}.tool_calls"))
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise _invalid(f"{where}.tool_call_id", "the id of a tool call", call_id)
            if call_id not in called:
                raise BadRequest(
                    f"{where}.tool_call_id {_shown(call_id)} answers no tool call of an "
                    "earlier assistant message",
                    param=f"{where}.tool_call_id",
                )
        texts.append((role, parts_text(m.get("content"), where)))
    return texts


def _tool_calls(calls: Any, where: str) -> list[str]:
    """An assistant message's tool calls, checked; their ids."""
    if not isinstance(calls, list):
        raise _invalid(where, "a list of tool calls", calls)
    ids = []
    for j, call in enumerate(calls):
        at = f"{where}[{j}]"
        if not isinstance(call, dict):
            raise _invalid(at, "an object with an id and a function", call)
        function = call.get("function")
        if not isinstance(call.get("id"), str):
            raise _invalid(f"{at}.id", "a string", call.get("id"))
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise _invalid(f"{at}.function.name", "a string", function)
        if not isinstance(function.get("arguments", ""), str):
            raise _invalid(f"{at}.function.arguments", "a string of JSON", function["arguments"])
        ids.append(call["id"])
    return ids


def function_tools(tools: Any, where: str = "tools") -> tuple[dict[str, Any], ...]:
    """The request's function tools in OpenAI's chat form, checked; a tool of another type
    (a provider's built-in such as web_search) cannot run here and is left out."""
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise _invalid(where, "a list of tools", tools)
    kept = []
    for i, tool in enumerate(tools):
        at = f"{where}[{i}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _invalid(at, "an object with a 'type'", tool)
        if tool["type"] != "function":
            continue
        function = tool.get("function")
        if not isinstance(function, dict):
            raise _invalid(f"{at}.function", "an object with the function's name", function)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _invalid(f"{at}.function.name", "a non-empty string", name)
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise _invalid(f"{at}.function.parameters", "a JSON Schema object", parameters)
        kept.append({"type": "function", "function": function})
    return tuple(kept)


def read_tools(
    body: dict[str, Any],
    function_type: str,
    to_function: Callable[[dict[str, Any]], dict[str, Any]],
    default_type: str | None = None,
) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """An API's `tools` (the Messages and Responses APIs): the client's own tools (type
    `function_type`, or untyped where `default_type` says so) in the chat form that
    `to_function` makes of each, checked as chat completions checks them; and the other
    types' names (a provider's built-ins: web search, code execution), which cannot run
    here."""
    tools = body.get("tools")
    if tools is None:
        return (), ()
    if not isinstance(tools, list):
        raise _invalid("tools", "a list of tools", tools)
    chat, others = [], set()
    for i, tool in enumerate(tools):
        kind = tool.get("type", default_type) if isinstance(tool, dict) else None
        if not isinstance(kind, str):
            raise _invalid(f"tools[{i}]", "an object with a 'type'", tool)
        if kind != function_type:
            others.add(kind)
            continue
        chat.append({"type": "function", "function": to_function(tool)})
    return function_tools(chat), tuple(sorted(others))


def other_tool_types(tools: Any) -> list[str]:
    """The types of the request's tools that are not functions (left out, said in the log)."""
    if not isinstance(tools, list):
        return []
    return sorted({str(t.get("type")) for t in tools if isinstance(t, dict)} - {"function"})


def parse_chat(body: Any) -> ChatRequest:
    """The last user message is the question; every earlier message goes in as an attachment."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model", 'a model\'s name (e.g. "conductor")', model)
    texts = _messages(body)
    check_parameters(body)
    last = max((i for i, (role, _) in enumerate(texts) if role == "user"), default=None)
    if last is None or not texts[last][1].strip():
        raise BadRequest("no user message with a question", param="messages")
    attachments = tuple(
        Attachment(f"{role} message {i}", text)
        for i, (role, text) in enumerate(texts)
        if i != last and text.strip()
    )
    tools = function_tools(body.get("tools"))
    agent = None
    if tools and body.get("tool_choice") != "none":
        agent = AgentTurn(tools, tuple(body["messages"]), body.get("tool_choice"))
    return ChatRequest(
        model,
        texts[last][1],
        attachments,
        bool(body.get("stream")),
        body.get("seed"),
        agent,
        tuple(other_tool_types(body.get("tools"))),
    )


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def completion(
    model: str,
    answer: str,
    totals: dict[str, Any],
    trace: str | None,
    calls: tuple[ToolCall, ...] = (),
) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": answer}
    if calls:
        message = {
            "role": "assistant",
            "content": answer or None,
            "tool_calls": [c.to_openai() for c in calls],
        }
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": usage(totals),
        "conductor_trace": trace,
    }


def tool_call_deltas(calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    """Streamed tool calls as OpenAI streams them: per call, a delta with its index, id and
    name and empty arguments, then one with the arguments."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        head = {"name": call.name, "arguments": ""}
        deltas.append(
            {"tool_calls": [{"index": index, "id": call.id, "type": "function", "function": head}]}
        )
        if call.arguments:
            deltas.append(
                {"tool_calls": [{"index": index, "function": {"arguments": call.arguments}}]}
            )
    return deltas


def usage(totals: dict[str, Any]) -> dict[str, int]:
    prompt, reply = int(totals.get("tokens_in", 0)), int(totals.get("tokens_out", 0))
    return {"prompt_tokens": prompt, "completion_tokens": reply, "total_tokens": prompt + reply}


def chunk(cid: str, model: str, delta: dict[str, Any], finish: str | None = None) -> dict:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def error_body(
    message: str,
    kind: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def models_list(trained: list[str]) -> dict:
    created = int(time.time())
    names = [MODEL, *trained]
    return {
        "object": "list",
        "data": [
            {"id": n, "object": "model", "created": created, "owned_by": "conductor"} for n in names
        ],
    }
