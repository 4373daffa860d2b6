"""Final hidden states of a GGUF from llama.cpp: the one place that loads a model in embeddings
mode and reaches into llama-cpp-python's batch and context (it has no public call for a
causal LM's per-token states).

Two readers use it: the trained head's features (policy/features.py: the last token's state of
a chat prompt, decoding only what the context does not already hold) and `knn-router`'s
question embeddings (evals/knn.py: every token's state, averaged, many questions a decode).
The model's own pooling (none) is kept, so every token's state is readable: llama.cpp's MEAN
pooling would give the same mean but says on stderr that it differs from the model's default.

A prompt's fixed prefix (the planning prompt's instructions and pool, the same for every
question), when the context does not hold it, is decoded on its own, apart from the rest, and
its state kept on disk in the prompt-state store (backends/prefix_state.py) when one is given:
a later process loads it instead of reading ~600 tokens again (`conductor ask` with the
shipped head on 2 cores of a CPU without weight repacking: planning 3.5-3.9 s decoded,
0.23-0.25 s loaded; docs/speed.md). Decoded or loaded, the
prefix's state is the same bytes and the rest is decoded from the same position: a new
process gives a question the same vector whether it read the prefix or loaded it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conductor_cli.backends.hardware import physical_cores
from conductor_cli.backends.llamacpp import (
    MIN_PREFIX_TOKENS,
    load_llama,
    prompt_tokens,
    stderr_note,
)
from conductor_cli.backends.prefix_state import PrefixStateStore, state_key

# An embeddings-mode context's state is laid out unlike a completion context's: its own keys.
_STATE_KIND = "embeddings"


class HiddenStates:
    """One GGUF loaded for its hidden states (not thread-safe: a caller holds a lock)."""

    def __init__(
        self,
        model: Path,
        *,
        n_ctx: int,
        n_batch: int,
        n_threads: int = 0,
        states: PrefixStateStore | None = None,
        sha256: str = "",
    ) -> None:
        """`states`, `sha256`: where fixed prefixes' states are kept, and the model file's
        sha256 that names them (both or neither)."""
        import llama_cpp

        self.model = model
        self._states = states if sha256 else None
        self._sha256 = sha256
        self.n_batch = n_batch
        self._lc = llama_cpp
        self._llama: Any = load_llama(
            model,
            stderr_note,
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_threads=n_threads or physical_cores(),
            embedding=True,
            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED,  # the model's own: none
        )
        self.size = int(llama_cpp.llama_model_n_embd(self._llama.model))
        self._held: list[int] = []  # the tokens whose state the context holds (`last`)

    @property
    def n_ctx(self) -> int:
        return int(self._llama.n_ctx())

    def chat_tokens(self, messages: Sequence[dict[str, str]]) -> list[int] | None:
        """The tokens of `messages` in the GGUF's chat template; None without a template."""
        return prompt_tokens(self._llama, messages)

    def tokens(self, text: str) -> list[int]:
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=True))

    def last(self, tokens: list[int], fixed: int = 0) -> np.ndarray:
        """The last token's final state (float32). The tokens the context already holds from
        the previous call are kept, only the rest is decoded. `fixed`: how many leading tokens
        are a prefix other prompts share: when the context does not hold them, they are
        loaded from the store or decoded on their own (and saved), then the rest."""
        fixed = min(fixed, len(tokens) - 1)
        keep = 0
        for a, b in zip(self._held, tokens, strict=False):
            if a != b:
                break
            keep += 1
        keep = min(keep, len(tokens) - 1)  # decode at least the last token: its state is read
        if fixed >= MIN_PREFIX_TOKENS and keep < fixed:
            self._prefix(tokens[:fixed])
            keep = fixed
        self._decode(tokens, keep)
        lc, llama = self._lc, self._llama
        pointer = lc.llama_get_embeddings_ith(llama.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.size,)).astype(np.float32).copy()

    def _decode(self, tokens: list[int], keep: int) -> None:
        """Decode `tokens` past the first `keep`, which the context holds."""
        lc, llama = self._lc, self._llama
        lc.llama_memory_seq_rm(lc.llama_get_memory(llama.ctx), 0, keep, -1)
        self._held = tokens[:keep]
        for start in range(keep, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            # Every token marked as an output: embeddings mode wants them all (llama.cpp says
            # so on stderr otherwise); the last one's state is what we read.
            llama._batch.set_batch(chunk, n_past=start, logits_all=True)
            llama._ctx.decode(llama._batch)
            self._held = tokens[: start + len(chunk)]

    def _prefix(self, prefix: list[int]) -> None:
        """Put the state after `prefix` into the context: from the store, or decoded from
        nothing and then saved there."""
        lc, llama = self._lc, self._llama
        # Nothing else in the cells (means() leaves its sequences there): a saved state holds
        # the prefix alone, laid out as a fresh process lays it out.
        lc.llama_memory_clear(lc.llama_get_memory(llama.ctx), True)
        self._held = []
        key = ""
        if self._states is not None:
            build = f"{lc.__version__}+{_STATE_KIND}"
            key = state_key(self._sha256, build, self.n_ctx, prefix)
            blob = self._states.load(key, prefix)
            if blob is not None:
                buffer = (ctypes.c_uint8 * len(blob)).from_buffer_copy(blob)
                if lc.llama_state_set_data(llama.ctx, buffer, len(blob)) == len(blob):
                    self._held = list(prefix)
                    return
        self._decode(prefix, 0)
        if self._states is not None:
            size = lc.llama_state_get_size(llama.ctx)
            buffer = (ctypes.c_uint8 * size)()
            written = lc.llama_state_get_data(llama.ctx, buffer, size)
            if 0 < written <= size:
                self._states.save(key, prefix, ctypes.string_at(buffer, written))

    def means(self, sequences: Sequence[list[int]]) -> list[np.ndarray]:
        """Each sequence's final states averaged over its tokens (float64), several sequences a
        decode (each its own sequence id: the attention keeps them apart; one decode costs
        much more than its tokens on a busy machine). Empty sequences give zeros."""
        lc, llama = self._lc, self._llama
        memory = lc.llama_get_memory(llama.ctx)
        means: list[np.ndarray] = []
        pending: list[list[int]] = []
        self._held = []  # the context is cleared below

        def decode() -> None:
            lc.llama_memory_clear(memory, True)
            llama._batch.reset()
            for seq, tokens in enumerate(pending):
                llama._batch.add_sequence(tokens, seq, True)  # every token an output
            llama._ctx.decode(llama._batch)
            states = np.ctypeslib.as_array(
                lc.llama_get_embeddings(llama.ctx),
                shape=(sum(len(t) for t in pending), self.size),
            ).astype(np.float64)
            start = 0
            for tokens in pending:
                means.append(states[start : start + len(tokens)].mean(0))
                start += len(tokens)
            pending.clear()

        for tokens in sequences:
            if not tokens:
                continue
            if pending and (
                sum(len(t) for t in pending) + len(tokens) > self.n_batch
                or len(pending) >= llama.context_params.n_seq_max
            ):
                decode()
            pending.append(tokens)
        if pending:
            decode()
        it = iter(means)
        return [next(it) if tokens else np.zeros(self.size) for tokens in sequences]

    def unit_means(self, texts: Sequence[str], limit: int) -> np.ndarray:
        """One L2-normalized mean state per text (rows, float64), each text cut to its first
        `limit` tokens: a question's embedding (knn-router, a head's familiarity)."""
        rows = self.means([self.tokens(t)[:limit] for t in texts])
        x = np.stack(rows) if rows else np.zeros((0, self.size))
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.where(norms > 0, norms, 1.0)

    def close(self) -> None:
        self._llama.close()
