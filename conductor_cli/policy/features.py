"""The conductor's hidden state after reading its planning prompt: what a head decides from.

The GGUF is loaded a second time in llama.cpp's embeddings mode (no torch); the chat-formatted
prompt is decoded and the last token's final hidden state (n_embd numbers, 576 for SmolLM2)
is read. The planning prompt is mostly the same for every question (instructions and pool):
the tokens the context already holds are kept and only the rest is decoded, so a question
costs its own tokens (about 50 ms for SmolLM2 here) instead of the whole prompt (0.8 s); the
fixed part's state is kept on disk too (backends/hidden_states.py), so a new process does not
read it again.
A prompt read once is kept on disk (policy/feature_store.py): read again, in this run or a
later one, it costs no decode.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from conductor_cli.backends.hidden_states import HiddenStates
from conductor_cli.backends.prefix_state import PrefixStateStore
from conductor_cli.errors import ModelError
from conductor_cli.models.catalog import file_sha256
from conductor_cli.policy.feature_store import FeatureStore, features_key

N_BATCH = 512

# Which copy of the base model a trained conductor's features are read from (its record's
# `hyperparameters.features`): "native", the file itself, or "f16", its weights in 16-bit
# floats (backends/f16_copy.py), about twice as fast on a CPU for a small Q4_1 file such as
# SmolLM2's. A training reads the copy where the base is such a file (`trained_features`) and
# says so; conductors trained before 2026-12-02 read the file. The shipped
# coder-team-1.5b-public was trained on the file and reads the copy: on the 480 questions its
# figures stand on and its 114 training questions, no pick differs (bench/f16_features.py).
# A head reads what its record says.
FEATURES = ("native", "f16")


def trained_features(base: Path) -> str:
    """What a training on `base` reads its features from (one of FEATURES)."""
    from conductor_cli.backends.f16_copy import wanted

    return "f16" if wanted(base) else "native"


def features_model(base: Path, features: str) -> Path:
    """The GGUF whose hidden states are a head's features, for a conductor whose record says
    `features` (one of FEATURES)."""
    if features == "native":
        return base
    from conductor_cli.backends.f16_copy import f16_copy

    try:
        sha256 = file_sha256(base)
    except OSError as e:
        raise ModelError(f"could not read {base} ({e}): check the file and its folder") from None
    return f16_copy(base, sha256)


class PromptFeatures:
    """Hidden states of chat prompts from one GGUF (one instance per model; thread-safe)."""

    def __init__(
        self, model: Path, *, n_ctx: int = 4096, n_threads: int = 0, kept: bool = True
    ) -> None:
        """`kept=False`: every prompt decoded, none read from or written to the store."""
        self.model = model
        self._store: FeatureStore | None = None
        self._identity = self._build = ""
        prefixes: PrefixStateStore | None = None
        if kept:
            import llama_cpp  # its build computes the states: a new one may compute others

            try:
                self._identity, self._build = file_sha256(model), llama_cpp.__version__
                self._store = FeatureStore.default()
                prefixes = PrefixStateStore.default()
            except OSError:  # no hash remembered where the cache cannot be written: no store
                pass
        self._states = HiddenStates(
            model,
            n_ctx=n_ctx,
            n_batch=N_BATCH,
            n_threads=n_threads,
            states=prefixes,
            sha256=self._identity,
        )
        self.size = self._states.size
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[dict[str, str]]) -> np.ndarray:
        tokens = self._states.chat_tokens(messages)
        if not tokens:
            raise ModelError(f"{self.model}: the model has no chat template to format a prompt")
        if len(tokens) > self._states.n_ctx:
            raise ModelError(
                f"{self.model}: the planning prompt ({len(tokens)} tokens) does not fit "
                f"{self._states.n_ctx}; raise conductor.n_ctx"
            )
        if self._store is None:
            with self._lock:
                return self._states.last(tokens, self._fixed(messages, tokens))
        key = features_key(self._identity, self._build, tokens)
        stored = self._store.load(key, self.size)
        if stored is not None:
            return stored
        with self._lock:
            vector = self._states.last(tokens, self._fixed(messages, tokens))
        self._store.save(key, vector)
        return vector

    def _fixed(self, messages: Sequence[dict[str, str]], tokens: list[int]) -> int:
        """How many leading tokens the prompt shares with its first message alone: the
        planning prompt's instructions and pool, the same for every question (a round's
        prompt goes on with the question and the team's answer: not shared)."""
        if len(messages) < 2:
            return 0
        from jinja2 import TemplateError

        try:
            head = self._states.chat_tokens(messages[:1]) or []
        except TemplateError:  # a template that wants a user turn: no prefix kept, all read
            return 0
        n = 0
        for a, b in zip(tokens, head, strict=False):
            if a != b:
                break
            n += 1
        return n

    def close(self) -> None:
        self._states.close()
