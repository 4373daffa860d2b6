"""Any model litellm can reach: API providers, local OpenAI-compatible servers, proxies.

litellm takes seconds to import, so it is imported here, on the first call only.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError, WorkerError
from .base import Completion, Request, TextSink

# A local OpenAI-compatible server needs no key, but the OpenAI client insists on one.
_PLACEHOLDER_KEY = "sk-no-key-needed"


def import_litellm() -> Any:
    # Without this, importing litellm first fetches a price list from the internet.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


_RETRYABLE_TYPES = (
    "Timeout",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
    "APIConnectionError",
    "APIError",
)


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


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text.removeprefix("litellm.").strip()[:300]


class LiteLLMBackend:
    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        where: str = "",
        timeout_s: float = 600.0,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.where = where
        self.timeout_s = timeout_s

    @property
    def identity(self) -> str:
        return f"litellm:{self.model}@{self.api_base}" if self.api_base else f"litellm:{self.model}"

    @property
    def fingerprint(self) -> str:
        return self.identity

    @property
    def supports_grammar(self) -> bool:
        return False

    def _api_key(self) -> str | None:
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ConfigError(
                    f"{self.where}: environment variable {self.api_key_env} is not set; "
                    f"export {self.api_key_env}=... (keys never go in the config file)."
                )
            return key
        return _PLACEHOLDER_KEY if self.api_base else None

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        key = self._api_key()
        litellm = import_litellm()
        kwargs: dict[str, Any] = {}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if key:
            kwargs["api_key"] = key
        if on_text is not None:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        try:
            response = litellm.completion(
                model=self.model,
                messages=list(request.messages),
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                seed=request.seed,
                timeout=self.timeout_s,
                num_retries=0,
                max_retries=0,  # the OpenAI client retries on its own otherwise; we count ours
                drop_params=True,
                **kwargs,
            )
            done = _from_stream(response, on_text) if on_text else _from_response(response)
        except Exception as e:  # litellm raises many types; all mean "this call failed"
            target = self.api_base or self.model
            raise WorkerError(
                f"{self.model} at {target}: {_short(e)}", retryable=is_retryable(e)
            ) from None
        if not done.text.strip():
            raise WorkerError(f"{self.model}: the answer was empty", retryable=True)
        return done


def _from_response(response: Any) -> Completion:
    choice = response.choices[0]
    usage = getattr(response, "usage", None)
    return Completion(
        text=choice.message.content or "",
        tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
        tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
        finish_reason=choice.finish_reason or "stop",
    )


def _from_stream(chunks: Any, on_text: TextSink) -> Completion:
    parts: list[str] = []
    finish = "stop"
    tokens_in = tokens_out = 0
    for chunk in chunks:
        usage = getattr(chunk, "usage", None)
        if usage:
            tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
            tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        piece = getattr(choice.delta, "content", None)
        if piece:
            parts.append(piece)
            on_text(piece)
        finish = choice.finish_reason or finish
    return Completion("".join(parts), tokens_in, tokens_out, finish)
