"""Grammar-constrained generation that checks the grammar on the sampled token first.

llama-cpp-python puts the grammar into its sampler chain, so every token the grammar is tested
against the whole vocabulary (49k entries for SmolLM2): generation ran 1.6 x slower than without
a grammar. llama.cpp's own sampler (common/sampling.cpp) samples without the grammar, asks the
grammar about that one token, and only when it is refused samples again with the grammar
applied to every candidate. The model mostly writes what the grammar allows, so the full pass
is rare. This module does the same through llama.cpp's sampler API.

Sampling parameters are llama-cpp-python's chat defaults (top_k 40, top_p 0.95, min_p 0.05).

A workflow's step count can carry a price (`step_penalty`, in logits): wherever the reply may
go on to another step, every token that would start one (a comma after a step's closing brace,
or a token holding "}," itself) loses that much before sampling. A small conductor copies the
prompt's two- and three-step examples onto one-line questions; the penalty is the prior that a
step costs a call, so only a question it strongly wants to split gets more steps.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from conductor_cli.errors import RunCancelled

TOP_K = 40
TOP_P = 0.95
MIN_P = 0.05
PENALTY_LAST_N = 64


@dataclass(frozen=True)
class StepTokens:
    """Per vocabulary entry: whether it holds "}," (closes a step and starts another), whether
    it starts with a comma (another step, right after a closing brace), and how many quotes it
    has (to know when the reply is inside a string, where neither is a step)."""

    continues: Any  # numpy bool arrays over the vocabulary
    comma_first: Any
    quotes: Any
    closes: Any  # ends with "}" once stripped: the reply is then after a step's closing brace

    @classmethod
    def of(cls, llama: Any) -> StepTokens:
        import llama_cpp as lc

        vocab = lc.llama_model_get_vocab(llama.model)
        buffer = ctypes.create_string_buffer(256)
        pieces = []
        for token in range(llama.n_vocab()):
            n = lc.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, True)
            pieces.append(buffer.raw[: max(n, 0)])
        stripped = [p.replace(b" ", b"") for p in pieces]
        return cls(
            continues=np.array([b"}," in p for p in stripped]),
            comma_first=np.array([p.startswith(b",") for p in stripped]),
            quotes=np.array([p.count(b'"') for p in pieces]),
            closes=np.array([p.endswith(b"}") for p in stripped]),
        )


@dataclass(frozen=True)
class Generated:
    tokens: list[int]
    finish_reason: str  # "stop" (end of text) or "length"


def _chain(n_vocab: int, temperature: float, seed: int, repeat_penalty: float) -> Any:
    import llama_cpp as lc

    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    penalty_args: tuple[float, ...] = (PENALTY_LAST_N, repeat_penalty, 0.0, 0.0)
    if len(lc.llama_sampler_init_penalties.argtypes) == 5:  # bindings that still take n_vocab
        penalty_args = (n_vocab, *penalty_args)
    lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_penalties(*penalty_args))
    if temperature <= 0.0:
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_greedy())
        return chain
    lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_k(TOP_K))
    lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_p(TOP_P, 1))
    lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_min_p(MIN_P, 1))
    lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_temp(temperature))
    lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_dist(seed))
    return chain


class _Candidates:
    """A llama_token_data_array over the whole vocabulary, refilled from the logits."""

    def __init__(self, n_vocab: int) -> None:
        import llama_cpp as lc

        self.n_vocab = n_vocab
        self.data = np.zeros(
            n_vocab, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)])
        )
        self.ids = np.arange(n_vocab, dtype=np.intc)
        self.array = lc.llama_token_data_array(
            data=self.data.ctypes.data_as(lc.llama_token_data_p),
            size=n_vocab,
            selected=-1,
            sorted=False,
        )

    def fill(self, logits: np.ndarray) -> Any:
        self.data["id"] = self.ids
        self.data["logit"] = logits
        self.data["p"] = 0.0
        self.array.size = self.n_vocab
        self.array.selected = -1
        self.array.sorted = False
        return ctypes.byref(self.array)

    def chosen(self) -> int:
        import llama_cpp as lc

        entries = ctypes.cast(self.array.data, ctypes.POINTER(lc.llama_token_data))
        return int(entries[self.array.selected].id)


def _allowed(grammar: Any, token: int) -> bool:
    import llama_cpp as lc

    one = (lc.llama_token_data * 1)(lc.llama_token_data(token, 1.0, 0.0))
    single = lc.llama_token_data_array(data=one, size=1, selected=-1, sorted=False)
    lc.llama_sampler_apply(grammar, ctypes.byref(single))
    return bool(np.isfinite(one[0].logit))


def generate(
    llama: Any,
    prompt: Sequence[int],
    grammar_text: str,
    *,
    max_tokens: int,
    temperature: float,
    seed: int,
    repeat_penalty: float,
    step_penalty: float = 0.0,
    step_tokens: StepTokens | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Generated:
    """Generate after `prompt` under the GBNF grammar, reusing the context's matching prefix.
    With `step_penalty` (and the model's `step_tokens`), tokens that start another step of a
    workflow lose that many logits wherever the reply is outside a string. `cancelled` is
    asked before each token: once true, RunCancelled."""
    import llama_cpp as lc

    vocab = lc.llama_model_get_vocab(llama.model)
    grammar = lc.llama_sampler_init_grammar(vocab, grammar_text.encode(), b"root")
    if not grammar:
        raise ValueError("llama.cpp rejected the grammar")
    n_vocab = llama.n_vocab()
    chain = _chain(n_vocab, temperature, seed, repeat_penalty)
    try:
        _feed(llama, list(prompt))
        candidates = _Candidates(n_vocab)
        out: list[int] = []
        priced = step_penalty > 0 and step_tokens is not None
        in_string = after_brace = False
        while len(out) < max_tokens:
            if cancelled is not None and cancelled():
                raise RunCancelled
            logits = np.ctypeslib.as_array(lc.llama_get_logits_ith(llama.ctx, -1), shape=(n_vocab,))
            if priced and not in_string:
                assert step_tokens is not None
                more = step_tokens.continues
                if after_brace:
                    more = more | step_tokens.comma_first
                logits = np.where(more, logits - step_penalty, logits)  # a copy: never llama's
            lc.llama_sampler_apply(chain, candidates.fill(logits))
            token = candidates.chosen()
            if not _allowed(grammar, token):
                # Refused: let the grammar filter every candidate, then sample among the rest.
                view = candidates.fill(logits)
                lc.llama_sampler_apply(grammar, view)
                lc.llama_sampler_apply(chain, view)
                token = candidates.chosen()
            lc.llama_sampler_accept(grammar, token)
            lc.llama_sampler_accept(chain, token)
            if lc.llama_vocab_is_eog(vocab, token):
                return Generated(out, "stop")
            out.append(token)
            if priced:
                assert step_tokens is not None
                in_string ^= bool(step_tokens.quotes[token] % 2)
                after_brace = bool(step_tokens.closes[token]) and not in_string
            llama.eval([token])
        return Generated(out, "length")
    finally:
        lc.llama_sampler_free(chain)
        lc.llama_sampler_free(grammar)


def _feed(llama: Any, tokens: list[int]) -> None:
    """Put `tokens` into the context, keeping the longest prefix it already holds."""
    keep = 0
    held = llama.input_ids[: llama.n_tokens].tolist()
    for a, b in zip(held, tokens, strict=False):
        if a != b:
            break
        keep += 1
    # Read at least one token: sampling needs the logits of a fresh decode. eval() drops the
    # context's cells past n_tokens before it reads.
    llama.n_tokens = max(min(keep, len(tokens) - 1), 0)
    llama.eval(tokens[llama.n_tokens :])
