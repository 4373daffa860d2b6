"""Does llama.cpp, with the exported `adapter.gguf`, compute what torch trained?

llama.cpp multiplies a Q4_1 model's weights with 8-bit-quantized activations, torch with the
dequantized floats; that alone moves logits by up to about 1.4 and flips greedy choices at near
ties, adapter or not. So the check loads the *same* weights in both: a float32 copy of the base
GGUF (every tensor dequantized, every key kept), where the two agree to about 0.02, then greedy
continuations must be identical (torch reads llama.cpp's continuation in one pass and must choose
each of its tokens). An adapter with Q and K rows in the wrong order moves logits by
4 or more there (both measured on SmolLM2-135M).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conductor_cli.backends.llamacpp import load_llama, stderr_note
from conductor_cli.train import base_copy
from conductor_cli.train.lora_model import Policy

PROMPTS = (
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "To make a cup of tea, first",
)
TOKENS = 32


def greedy_together(llama: Any, prompts: Sequence[Sequence[int]], n: int) -> list[list[int]]:
    """llama.cpp's greedy continuation of `n` tokens after each prompt, all prompts decoded
    side by side as sequences of one batch: each step reads the float32 weights once for all
    of them (one at a time, 5 prompts took 13 s here, side by side 3.8 s, the same tokens).

    The context is a second one on the loaded model, made for as many sequences as prompts
    (llama-cpp-python makes its own for one); the adapter the model was loaded with is set on
    it too."""
    import llama_cpp
    from llama_cpp import _internals

    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("each prompt needs a token at least")
    params = type(llama.context_params).from_buffer_copy(llama.context_params)
    params.n_seq_max, params.kv_unified = len(prompts), True
    size = max(sum(len(p) for p in prompts), len(prompts))
    with contextlib.ExitStack() as stack:
        ctx = _internals.LlamaContext(model=llama._model, params=params, verbose=False)
        stack.callback(ctx.close)
        batch = _internals.LlamaBatch(n_tokens=size, embd=0, n_seq_max=len(prompts), verbose=False)
        stack.callback(batch.close)
        if llama._lora_adapter is not None:
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(llama._lora_adapter)
            scales = (ctypes.c_float * 1)(llama.lora_scale)
            if llama_cpp.llama_set_adapters_lora(ctx.ctx, adapters, 1, scales):
                raise RuntimeError("llama.cpp did not set the adapter on the check's context")
        batch.reset()
        for seq, prompt in enumerate(prompts):
            batch.add_sequence(list(prompt), seq, False)
        ctx.decode(batch)
        last = [int(i) for i in np.cumsum([len(p) for p in prompts]) - 1]
        positions = [len(p) for p in prompts]
        vocab, raw = llama.n_vocab(), batch.batch
        out: list[list[int]] = [[] for _ in prompts]
        for step in range(n):
            chosen = [int(np.argmax(_logits(ctx, i, vocab))) for i in last]
            for seq, token in enumerate(chosen):
                out[seq].append(token)
            if step == n - 1:
                break
            raw.n_tokens = len(prompts)
            for seq, token in enumerate(chosen):
                raw.token[seq], raw.pos[seq], raw.logits[seq] = token, positions[seq], True
                raw.seq_id[seq][0], raw.n_seq_id[seq] = seq, 1
                positions[seq] += 1
            ctx.decode(batch)
            last = list(range(len(prompts)))
        return out


def _logits(ctx: Any, index: int, vocab: int) -> np.ndarray:
    return np.ctypeslib.as_array(ctx.get_logits_ith(index), shape=(vocab,))


def check_export(
    policy: Policy, base: Path, adapter: Path, prompts: Sequence[str] = PROMPTS
) -> dict[str, Any]:
    """Greedy continuations of `prompts` in llama.cpp (float32 base + adapter) and in torch."""
    # A float32 KV cache too: an f16 one alone flipped a near tie at token 29.
    llama = load_llama(
        base_copy.float32_gguf(base), stderr_note, adapter=adapter, n_ctx=512, flash_attn=False,
        type_k=0, type_v=0,
    )  # fmt: skip
    try:
        tokens = [llama.tokenize(text.encode("utf-8"), add_bos=False) for text in prompts]
        continuations = greedy_together(llama, tokens, TOKENS)
    finally:
        llama.close()
    results = []
    for text, prompt, ours in zip(prompts, tokens, continuations, strict=True):
        # torch's choice after each of llama.cpp's prefixes: torch's greedy continuation is
        # `ours` exactly when every choice agrees, and the first disagreement is where the
        # two continuations part.
        theirs = policy.argmax_after(prompt, ours)
        pairs = zip(ours, theirs, strict=True)
        agree = next((i for i, (a, b) in enumerate(pairs) if a != b), TOKENS)
        results.append({"prompt": text, "identical": ours == theirs, "same_prefix": agree})
    return {
        "prompts": len(results),
        "tokens": TOKENS,
        "identical": sum(r["identical"] for r in results),
        "results": results,
    }
