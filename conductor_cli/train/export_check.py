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


def llama_greedy(llama: Any, prompt: Sequence[int], n: int) -> list[int]:
    import llama_cpp

    llama.reset()
    llama.eval(list(prompt))
    out: list[int] = []
    for _ in range(n):
        logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(llama.ctx, -1), shape=(llama.n_vocab(),)
        )
        token = int(np.argmax(logits))
        out.append(token)
        llama.eval([token])
    return out


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
        results = []
        for text in prompts:
            tokens = llama.tokenize(text.encode("utf-8"), add_bos=False)
            ours = llama_greedy(llama, tokens, TOKENS)
            # torch's choice after each of llama.cpp's prefixes: torch's greedy continuation
            # is `ours` exactly when every choice agrees, and the first disagreement is where
            # the two continuations part.
            theirs = policy.argmax_after(tokens, ours)
            pairs = zip(ours, theirs, strict=True)
            agree = next((i for i, (a, b) in enumerate(pairs) if a != b), TOKENS)
            results.append({"prompt": text, "identical": ours == theirs, "same_prefix": agree})
    finally:
        llama.close()
    return {
        "prompts": len(results),
        "tokens": TOKENS,
        "identical": sum(r["identical"] for r in results),
        "results": results,
    }
