"""The conductor's hidden state after reading its planning prompt: what a head decides from.

The GGUF is loaded a second time in llama.cpp's embeddings mode (no torch); the chat-formatted
prompt is decoded and the last token's final hidden state (n_embd numbers, 576 for SmolLM2)
is read. The planning prompt is mostly the same for every question (instructions and pool):
the tokens the context already holds are kept and only the rest is decoded, so a question
costs its own tokens (about 50 ms for SmolLM2 here) instead of the whole prompt (0.8 s).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conductor_cli.backends.hardware import physical_cores
from conductor_cli.backends.llamacpp import load_llama, prompt_tokens, stderr_note
from conductor_cli.errors import ModelError

N_BATCH = 512


class PromptFeatures:
    """Hidden states of chat prompts from one GGUF (one instance per model; thread-safe)."""

    def __init__(self, model: Path, *, n_ctx: int = 4096, n_threads: int = 0) -> None:
        import llama_cpp

        self.model = model
        self._llama: Any = load_llama(
            model,
            stderr_note,
            n_ctx=n_ctx,
            n_batch=N_BATCH,
            n_threads=n_threads or physical_cores(),
            embedding=True,
            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED,  # the model's own: none
        )
        self._lc = llama_cpp
        self.size = int(llama_cpp.llama_model_n_embd(self._llama.model))
        self._held: list[int] = []  # the tokens whose state the context holds
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[dict[str, str]]) -> np.ndarray:
        tokens = prompt_tokens(self._llama, messages)
        if not tokens:
            raise ModelError(f"{self.model}: the model has no chat template to format a prompt")
        if len(tokens) > self._llama.n_ctx():
            raise ModelError(
                f"{self.model}: the planning prompt ({len(tokens)} tokens) does not fit "
                f"{self._llama.n_ctx()}; raise conductor.n_ctx"
            )
        with self._lock:
            return self._last_hidden(tokens)

    def _last_hidden(self, tokens: list[int]) -> np.ndarray:
        lc = self._lc
        keep = 0
        for a, b in zip(self._held, tokens, strict=False):
            if a != b:
                break
            keep += 1
        keep = min(keep, len(tokens) - 1)  # decode at least the last token: its state is read
        memory = lc.llama_get_memory(self._llama.ctx)
        lc.llama_memory_seq_rm(memory, 0, keep, -1)
        self._held = tokens[:keep]
        for start in range(keep, len(tokens), N_BATCH):
            chunk = tokens[start : start + N_BATCH]
            # Every token marked as an output: embeddings mode wants them all (llama.cpp says
            # so on stderr otherwise); the last one's state is what we read.
            self._llama._batch.set_batch(chunk, n_past=start, logits_all=True)
            self._llama._ctx.decode(self._llama._batch)
            self._held = tokens[: start + len(chunk)]
        pointer = lc.llama_get_embeddings_ith(self._llama.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.size,)).astype(np.float32).copy()

    def close(self) -> None:
        self._llama.close()
