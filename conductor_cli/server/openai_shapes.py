"""OpenAI's chat-completion wire format, as pure functions: a request's messages to our
question and attachments, a run to a completion or stream chunks, an error to OpenAI's body."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from conductor_cli.run.inputs import Attachment

MODEL = "conductor"


class BadRequest(Exception):
    """A request the client must fix: HTTP `status`, OpenAI error `kind`, one-line message."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass(frozen=True)
class ChatRequest:
    model: str
    question: str
    attachments: tuple[Attachment, ...]
    stream: bool
    seed: int | None


def _text(content: Any, where: str) -> str:
    """A message's content: a string, or OpenAI's list of parts (text parts are kept)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return "\n".join(str(p) for p in parts)
    raise BadRequest(f"{where}.content must be a string or a list of parts")


def parse_chat(body: Any) -> ChatRequest:
    """The last user message is the question; every earlier message goes in as an attachment."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required (e.g. \"conductor\")")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    texts = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a 'role'")
        texts.append((m["role"], _text(m.get("content", ""), f"messages[{i}]")))
    last = max((i for i, (role, _) in enumerate(texts) if role == "user"), default=None)
    if last is None or not texts[last][1].strip():
        raise BadRequest("no user message with a question")
    attachments = tuple(
        Attachment(f"{role} message {i}", text)
        for i, (role, text) in enumerate(texts)
        if i != last and text.strip()
    )
    seed = body.get("seed")
    if seed is not None and not isinstance(seed, int):
        raise BadRequest("'seed' must be an integer")
    return ChatRequest(model, texts[last][1], attachments, bool(body.get("stream")), seed)


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def completion(model: str, answer: str, totals: dict[str, Any], trace: str | None) -> dict:
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
            }
        ],
        "usage": usage(totals),
        "conductor_trace": trace,
    }


def usage(totals: dict[str, Any]) -> dict[str, int]:
    prompt, reply = int(totals.get("tokens_in", 0)), int(totals.get("tokens_out", 0))
    return {"prompt_tokens": prompt, "completion_tokens": reply, "total_tokens": prompt + reply}


def chunk(cid: str, model: str, delta: dict[str, str], finish: str | None = None) -> dict:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def models_list(trained: list[str]) -> dict:
    created = int(time.time())
    names = [MODEL, *trained]
    return {
        "object": "list",
        "data": [
            {"id": n, "object": "model", "created": created, "owned_by": "conductor"} for n in names
        ],
    }
