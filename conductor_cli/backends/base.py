"""The interface every model backend implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Request:
    """Everything that determines a model's answer (and so, later, its cache key)."""

    messages: tuple[dict[str, str], ...]
    max_tokens: int
    temperature: float
    seed: int
    grammar: str | None = None
    # llama.cpp only: small local models loop on a sentence without it ("The answer is: Paris."
    # fifty times with SmolLM2); API models take no such parameter.
    repeat_penalty: float = 1.1


@dataclass(frozen=True)
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    finish_reason: str = "stop"


class Backend(Protocol):
    @property
    def identity(self) -> str:
        """What model answers: a GGUF path or a litellm model string with its api_base."""
        ...

    @property
    def supports_grammar(self) -> bool: ...

    def complete(self, request: Request) -> Completion: ...
