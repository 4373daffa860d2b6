"""An OpenAI-compatible endpoint reached directly: `openai/NAME` with an `api_base` (llama.cpp's
server, vLLM, Ollama's /v1, LM Studio, a gateway), over the standard library's HTTP.

litellm translates for providers that do not speak OpenAI's API; an endpoint that does needs
no translation, and importing litellm (3-7 s on 2 cores, in its helper process) made the first
remote call after every start wait that long (issue 71). Such a worker is answered here from
its first call, with the same identity (its cache entries and a trained head's measurements
stay valid), the same request (model, messages, max_tokens, temperature, seed, an agent's
tools) and the same failures: a refused connection, a timeout, 429 and 5xx, a body that is
not JSON and a stream cut short are retryable; other 4xx are not. Proxies come from the
environment (HTTPS_PROXY, NO_PROXY), as urllib reads them.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.error
import urllib.request
from typing import Any

from conductor_cli.backends.base import Completion, Request, TextSink
from conductor_cli.backends.litellm import LiteLLMBackend, completion_of
from conductor_cli.errors import WorkerError

PREFIX = "openai/"
PLACEHOLDER_KEY = "sk-no-key-needed"  # local servers need none; a client sends one anyway
# What an HTTP status says, as litellm's exception types name it (a retry note shows it).
_STATUS_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "Timeout",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
}


def served_directly(model: str, api_base: str | None) -> bool:
    """Whether a `litellm:` model is an OpenAI-compatible endpoint this module reaches
    without litellm: `openai/NAME` at a given `api_base`. OpenAI's own API (no api_base)
    keeps litellm, which adapts parameters per model (a reasoning model's max tokens)."""
    return model.startswith(PREFIX) and bool(api_base)


class _Failed(Exception):
    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class OpenAICompatBackend(LiteLLMBackend):
    """A LiteLLMBackend in all it says of itself (identity, fingerprint, tools, the key's
    check); only the call is made here instead of in litellm's helper."""

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        self._check_key()
        try:
            done = self._call(request, on_text)
        except _Failed as e:
            raise WorkerError(
                f"{self.model} at {self.api_base}: {e}", retryable=e.retryable
            ) from None
        return completion_of(self.model, done)

    def _body(self, request: Request, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model.removeprefix(PREFIX),
            "messages": list(request.messages),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        if request.tools is not None:
            body["tools"] = json.loads(request.tools)
            if request.tool_choice is not None:
                body["tool_choice"] = json.loads(request.tool_choice)
        return body

    def _call(self, request: Request, on_text: TextSink | None) -> dict[str, Any]:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        data = json.dumps(self._body(request, on_text is not None)).encode("utf-8")
        url = str(self.api_base).rstrip("/") + "/chat/completions"
        http_request = urllib.request.Request(
            url,
            data=data,
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {key or PLACEHOLDER_KEY}",
            },
            method="POST",
        )
        try:
            response = urllib.request.urlopen(http_request, timeout=self.timeout_s)
        except urllib.error.HTTPError as e:
            raise _status_failure(e) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise _connection_failure(e) from None
        with response:  # closed whatever happens: a server sees a cancelled stream end
            try:
                if on_text is None:
                    return _whole(response.read())
                return _streamed(response, on_text)
            except (OSError, http.client.HTTPException) as e:
                raise _connection_failure(e) from None


def _connection_failure(error: BaseException) -> _Failed:
    reason = getattr(error, "reason", error)
    if isinstance(reason, socket.timeout | TimeoutError):
        return _Failed(f"Timeout: {reason}", retryable=True)
    said = str(reason) or type(reason).__name__
    return _Failed(f"APIConnectionError: Connection error. ({said})", retryable=True)


def _status_failure(error: urllib.error.HTTPError) -> _Failed:
    status = error.code
    try:
        said = json.loads(error.read() or b"{}").get("error", {})
        detail = said.get("message") if isinstance(said, dict) else str(said)
    except (ValueError, OSError, AttributeError):
        detail = None
    name = _STATUS_NAMES.get(status, "InternalServerError" if status >= 500 else "APIError")
    message = f"{name}: HTTP {status}" + (f": {detail}" if detail else "")
    return _Failed(message[:300], retryable=status in (408, 429) or status >= 500)


def _whole(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
        choice = body["choices"][0]
        message = choice.get("message") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise _Failed("APIError: the server's answer is not a chat completion", True) from None
    usage = body.get("usage") or {}
    return {
        "text": message.get("content") or "",
        "tokens_in": int(usage.get("prompt_tokens") or 0),
        "tokens_out": int(usage.get("completion_tokens") or 0),
        "finish_reason": choice.get("finish_reason") or "stop",
        "tool_calls": [_call(c) for c in message.get("tool_calls") or ()],
    }


def _call(call: dict[str, Any]) -> dict[str, str]:
    function = call.get("function") or {}
    return {
        "id": str(call.get("id") or ""),
        "name": str(function.get("name") or ""),
        "arguments": str(function.get("arguments") or ""),
    }


def _streamed(response: Any, on_text: TextSink) -> dict[str, Any]:
    """Server-sent events: each piece to `on_text` (which raises where the run was
    cancelled: the response is then closed by the caller), tool calls put together from
    their fragments, the usage from the last chunk. A stream that ends before the server's
    finish reason is a failure: part of an answer must never pass for the whole."""
    parts: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish: str | None = None
    tokens_in = tokens_out = 0
    for raw in response:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line.removeprefix("data:").strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            raise _Failed("APIError: a streamed piece is not JSON", True) from None
        usage = chunk.get("usage") or {}
        if usage:
            tokens_in = int(usage.get("prompt_tokens") or 0)
            tokens_out = int(usage.get("completion_tokens") or 0)
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if piece := delta.get("content"):
                parts.append(piece)
                on_text(piece)
            for fragment in delta.get("tool_calls") or ():
                _add_fragment(calls, fragment)
            finish = choice.get("finish_reason") or finish
    if finish is None:
        raise _Failed(
            f"APIConnectionError: the stream ended after {len(''.join(parts))} characters, "
            "before the answer was complete",
            retryable=True,
        )
    return {
        "text": "".join(parts),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "finish_reason": finish,
        "tool_calls": [calls[i] for i in sorted(calls)],
    }


def _add_fragment(calls: dict[int, dict[str, str]], fragment: dict[str, Any]) -> None:
    """One streamed piece of a tool call: the first names it, later ones add arguments."""
    call = calls.setdefault(
        int(fragment.get("index") or 0), {"id": "", "name": "", "arguments": ""}
    )
    function = fragment.get("function") or {}
    if fragment.get("id"):
        call["id"] = str(fragment["id"])
    if function.get("name"):
        call["name"] = str(function["name"])
    if function.get("arguments"):
        call["arguments"] += str(function["arguments"])
