"""The interface every model backend implements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

TextSink = Callable[[str], None]


@dataclass(frozen=True)
class Request:
    """Everything that determines a model's answer (and so, later, its cache key)."""

    # Chat messages; an agent's conversation (run/agent.py) also carries assistant `tool_calls`
    # (content None) and `role: "tool"` results, passed to a worker as the client sent them.
    messages: tuple[dict[str, Any], ...]
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
    # llama.cpp only: stop once a block tagged Python that prints has closed (a step whose
    # program the python tool runs: what its writer adds after it, a guess of what the program
    # prints, is never read; sandbox/fences.program_end).
    stop_after_program: bool = False
    # Grammar-constrained workflows only: logits taken from every token that would start another
    # step (backends/constrained.py), the prior that a step costs a call.
    step_penalty: float = 0.0
    # How many leading messages repeat across calls (the conductor's system prompt): llama.cpp
    # keeps its state after them on disk. A hint for speed only, so not part of the cache key.
    fixed_messages: int = 0
    # An agent's function tools the model may call (OpenAI's chat format, as canonical JSON so
    # that the request stays a value), and its tool_choice; None: no tools.
    tools: str | None = None
    tool_choice: str | None = None
    # The run's cancel flag (an Event's is_set): a local model stops once it is set, between
    # tokens or inside a decode of a long prompt (backends/abort.py), so a client that hangs up
    # frees the model at once. Not part of what the answer is, nor of the cache key.
    cancelled: Callable[[], bool] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ToolCall:
    """A call of one of the agent's tools a model asked for: the client runs it."""

    id: str
    name: str
    arguments: str  # JSON text, as OpenAI sends it (a model may write JSON that does not parse)

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> ToolCall:
        return cls(str(record["id"]), str(record["name"]), str(record.get("arguments") or ""))

    def to_openai(self) -> dict[str, Any]:
        """As an assistant message's `tool_calls` entry."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


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
    # The agent's tools the model called (finish_reason "tool_calls"); text may then be empty.
    tool_calls: tuple[ToolCall, ...] = ()

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "text": self.text,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "finish_reason": self.finish_reason,
        }
        if self.confinement is not None:
            record["confinement"] = self.confinement
        if self.tool_calls:
            record["tool_calls"] = [c.to_dict() for c in self.tool_calls]
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
            tool_calls=tuple(ToolCall.from_dict(c) for c in record.get("tool_calls") or ()),
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


def calls_tools(backend: Any) -> bool:
    """Whether a backend can call an agent's tools (a `supports_tools` property; the built-in
    tools, which answer with a program's output, have none)."""
    return bool(getattr(backend, "supports_tools", False))


def message_text(message: dict[str, Any]) -> str:
    """A message's text, whatever its content's form: a string, None (an assistant message
    that only called tools) or OpenAI's list of parts."""
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return content if isinstance(content, str) else ""
