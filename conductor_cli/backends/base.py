"""The interface every model backend implements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

TextSink = Callable[[str], None]


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
    # llama.cpp only: stop when the output starts repeating itself (backends/loop_guard.py);
    # the reply then ends after the first copy, with finish_reason "loop".
    stop_loops: bool = False
    # Grammar-constrained workflows only: logits taken from every token that would start another
    # step (backends/constrained.py), the prior that a step costs a call.
    step_penalty: float = 0.0
    # How many leading messages repeat across calls (the conductor's system prompt): llama.cpp
    # keeps its state after them on disk. A hint for speed only, so not part of the cache key.
    fixed_messages: int = 0


@dataclass(frozen=True)
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    finish_reason: str = "stop"  # "stop", "length" (max_tokens) or "loop" (stop_loops)
    cached: bool = False
    cost: float | None = None  # USD this call cost (0 for a cache hit); None: unknown
    # A tool that ran a program: each confinement it ran under (Isolation.describe())
    confinement: str | None = None

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "text": self.text,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "finish_reason": self.finish_reason,
        }
        if self.confinement is not None:
            record["confinement"] = self.confinement
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any], *, cached: bool = False) -> Completion:
        return cls(
            text=str(record["text"]),
            tokens_in=int(record.get("tokens_in", 0)),
            tokens_out=int(record.get("tokens_out", 0)),
            finish_reason=str(record.get("finish_reason", "stop")),
            cached=cached,
            confinement=record.get("confinement"),
        )


class Backend(Protocol):
    @property
    def identity(self) -> str:
        """What model answers, for people: a GGUF path or a litellm model string and api_base."""
        ...

    @property
    def fingerprint(self) -> str:
        """What model answers, for the cache: the GGUF's sha256, or the litellm identity."""
        ...

    @property
    def supports_grammar(self) -> bool: ...

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        """Answer `request`; with `on_text`, stream the output to it piece by piece."""
        ...
