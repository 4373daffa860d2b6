"""A sampled workflow as a training example: the planning prompt's tokens exactly as `ask` feeds
them to llama.cpp (the GGUF's own chat template), the reply's tokens, and which of them are
routing decisions. Tokenized by llama.cpp (vocabulary only), so the LoRA is trained on what the
conductor sees when it plans."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conductor_cli.backends.llamacpp import load_llama, prompt_tokens, stderr_note
from conductor_cli.errors import ModelError
from conductor_cli.train.routing import routing_mask


@dataclass(frozen=True)
class Example:
    prompt: tuple[int, ...]
    reply: tuple[int, ...]  # ends with the end-of-turn token
    mask: tuple[bool, ...]  # per reply token: a routing decision (the end token: no)


class Encoder:
    def __init__(self, base: Path) -> None:
        self._llama: Any = load_llama(base, stderr_note, vocab_only=True)

    def prompt(self, messages: Sequence[dict[str, str]]) -> list[int]:
        tokens = prompt_tokens(self._llama, messages)
        if tokens is None:
            raise ModelError("the conductor's GGUF has no chat template; it cannot be trained")
        return tokens

    def example(self, messages: Sequence[dict[str, str]], reply: str) -> Example:
        data = reply.encode("utf-8")
        tokens = list(self._llama.tokenize(data, add_bos=False, special=False))
        pieces = [self._llama.detokenize([t]) for t in tokens]
        mask = routing_mask(pieces, data)
        return Example(
            tuple(self.prompt(messages)),
            (*tokens, self._llama.token_eos()),
            (*mask, False),
        )

    @property
    def eos(self) -> int:
        return int(self._llama.token_eos())

    def close(self) -> None:
        self._llama.close()
