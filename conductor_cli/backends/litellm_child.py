"""The helper process that makes every litellm call: python -m conductor_cli.backends.litellm_child

Importing litellm takes 3-7 s of Python that holds the GIL in long stretches; in conductor's own
process it stalled planning (which needs the GIL after every llama.cpp call) for its whole
length. In this process it runs on another core, in parallel, from the moment the pool is known.

Protocol: one JSON object per line. Requests on stdin:
  {"id": 1, "op": "complete", "model", "messages", "max_tokens", "temperature", "seed",
   "timeout", "api_base", "api_key_env", "stream", and an agent's "tools", "tool_choice"}
  {"id": 2, "op": "rates", "model"}
  {"id": 1, "op": "cancel"}: the caller left request 1; its stream is closed at the next piece
  (the connection with it, so that the server stops generating) and its reply dropped
Replies on stdout: {"id", "text"} pieces while streaming, then {"id", "done": {...}} (with
"tool_calls": [{"id", "name", "arguments"}] when the model called the agent's tools) or
{"id", "error": {"message", "retryable"}}; {"id", "rates": [in, out] | null} (USD per token).
API keys are read here from the environment, by name: they never cross the pipe.
The process ignores Ctrl-C (the parent handles it) and exits when its stdin closes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

PLACEHOLDER_KEY = "sk-no-key-needed"  # local OpenAI-compatible servers need none; the client does

_RETRYABLE_TYPES = (
    "Timeout",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
    "APIConnectionError",
    "APIError",
)


def import_litellm() -> Any:
    # Without this, importing litellm first fetches a price list from the internet.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def is_retryable(error: BaseException) -> bool:
    """Classify by type and by cause: litellm reports a refused local connection as an
    InternalServerError("Connection error."), not as an APIConnectionError."""
    for cls in type(error).__mro__:
        if cls.__name__ in _RETRYABLE_TYPES:
            return True
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and (status == 429 or status >= 500):
        return True
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ConnectionError | TimeoutError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def short_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text.removeprefix("litellm.").strip()[:300]


def _usage(obj: Any) -> tuple[int, int]:
    usage = getattr(obj, "usage", None)
    return (
        int(getattr(usage, "prompt_tokens", 0) or 0),
        int(getattr(usage, "completion_tokens", 0) or 0),
    )


class Cancelled(Exception):
    pass


def complete(
    litellm: Any,
    req: dict[str, Any],
    send_text: Callable[[str], None],
    cancelled: Callable[[], bool] = lambda: False,
) -> dict:
    kwargs: dict[str, Any] = {}
    if req.get("api_base"):
        kwargs["api_base"] = req["api_base"]
    key_env = req.get("api_key_env")
    key = os.environ.get(key_env) if key_env else None
    if key or req.get("api_base"):
        kwargs["api_key"] = key or PLACEHOLDER_KEY
    if req.get("stream"):
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
    if req.get("tools"):
        kwargs["tools"] = req["tools"]
        if req.get("tool_choice") is not None:
            kwargs["tool_choice"] = req["tool_choice"]
    response = litellm.completion(
        model=req["model"],
        messages=req["messages"],
        max_tokens=req["max_tokens"],
        temperature=req["temperature"],
        seed=req["seed"],
        timeout=req["timeout"],
        num_retries=0,
        max_retries=0,  # the OpenAI client retries on its own otherwise; conductor counts its own
        drop_params=True,
        **kwargs,
    )
    if not req.get("stream"):
        choice = response.choices[0]
        tokens_in, tokens_out = _usage(response)
        return {
            "text": choice.message.content or "",
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "finish_reason": choice.finish_reason or "stop",
            "tool_calls": [_call(c) for c in getattr(choice.message, "tool_calls", None) or ()],
        }
    parts: list[str] = []
    calls: dict[int, dict[str, str]] = {}  # streamed tool calls, by index: id, name, arguments
    finish = "stop"
    tokens_in = tokens_out = 0
    for chunk in response:
        if cancelled():
            _close(response)
            raise Cancelled("the caller left")
        if getattr(chunk, "usage", None):
            tokens_in, tokens_out = _usage(chunk)
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        piece = getattr(choice.delta, "content", None)
        if piece:
            parts.append(piece)
            send_text(piece)
        for delta in getattr(choice.delta, "tool_calls", None) or ():
            _add_fragment(calls, delta)
        finish = choice.finish_reason or finish
    # A complete stream ends with the server's finish reason; litellm makes one up ("stop")
    # when the connection closes early, and keeps what the server really sent here (litellm
    # is pinned: see pyproject). Part of an answer must never pass for the whole.
    if getattr(response, "received_finish_reason", "stop") is None:
        raise ConnectionError(
            f"the stream ended after {len(''.join(parts))} characters, before the answer was "
            "complete"
        )
    return {
        "text": "".join(parts),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "finish_reason": finish,
        "tool_calls": [calls[i] for i in sorted(calls)],
    }


def _close(response: Any) -> None:
    """Close a stream's HTTP response (litellm wraps the provider's stream), so that the
    server sees the connection end and stops generating."""
    for stream in (getattr(response, "completion_stream", None), response):
        close = getattr(stream, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
            return


def _call(call: Any) -> dict[str, str]:
    function = getattr(call, "function", None)
    return {
        "id": str(getattr(call, "id", "") or ""),
        "name": str(getattr(function, "name", "") or ""),
        "arguments": str(getattr(function, "arguments", "") or ""),
    }


def _add_fragment(calls: dict[int, dict[str, str]], delta: Any) -> None:
    """One streamed piece of a tool call: the first names it, later ones add to its arguments
    (OpenAI's stream; litellm keeps its shape for every provider)."""
    index = int(getattr(delta, "index", 0) or 0)
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    function = getattr(delta, "function", None)
    if getattr(delta, "id", None):
        call["id"] = str(delta.id)
    if function is not None and getattr(function, "name", None):
        call["name"] = str(function.name)
    if function is not None and getattr(function, "arguments", None):
        call["arguments"] += str(function.arguments)


def rates(litellm: Any, model: str) -> list[float] | None:
    try:
        prompt, completion = litellm.cost_per_token(
            model=model, prompt_tokens=1_000_000, completion_tokens=1_000_000
        )
    except Exception:  # unknown model (a local alias): no price, not an error
        return None
    return [float(prompt) / 1e6, float(completion) / 1e6]


class _Writer:
    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        line = (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            self._out.write(line)
            self._out.flush()


def serve(litellm: Any, req: dict[str, Any], writer: _Writer, cancelled: set[Any]) -> None:
    rid = req.get("id")
    try:
        if req.get("op") == "rates":
            writer.send({"id": rid, "rates": rates(litellm, req["model"])})
            return
        send = lambda piece: writer.send({"id": rid, "text": piece})  # noqa: E731
        done = complete(litellm, req, send, lambda: rid in cancelled)
        writer.send({"id": rid, "done": done})
    except Exception as e:  # litellm raises many types; all mean "this call failed"
        writer.send({"id": rid, "error": {"message": short_error(e), "retryable": is_retryable(e)}})


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; it closes our stdin
    # The protocol owns the real stdout; anything litellm prints goes to stderr instead.
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    writer = _Writer(protocol)
    try:
        litellm = import_litellm()
    except Exception as e:
        writer.send({"id": None, "error": {"message": f"import litellm: {e}", "retryable": False}})
        return
    writer.send({"id": None, "ready": True})
    cancelled: set[Any] = set()  # ids whose caller left; read by their threads
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if req.get("op") == "cancel":
            cancelled.add(req.get("id"))
            continue
        args = (litellm, req, writer, cancelled)
        threading.Thread(target=serve, args=args, daemon=True).start()
    os._exit(0)  # the parent is gone: do not wait for calls nobody will read


if __name__ == "__main__":
    main()
