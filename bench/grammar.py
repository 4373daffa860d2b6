"""Grammar-constrained generation against the same generation unconstrained, same tokens.

The conductor's plan for a 6-worker pool is generated under the workflow grammar through the
backend (conductor_cli.backends.constrained: the grammar checks the sampled token first); then the
same prompt is generated without it, with end-of-text banned and max_tokens set to the constrained
run's count, so both produce exactly as many tokens. The prompt is already in the context for
both (only generation is compared). Alternated, median of --runs each.

Run: .venv/bin/python bench/grammar.py [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import time

from _common import median, report
from planning import DESCRIPTION, NAMES


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from conductor_cli.backends.base import Request
    from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
    from conductor_cli.models.catalog import file_sha256, load_catalog, resolve_gguf
    from conductor_cli.run.planner import WorkerInfo, plan_messages
    from conductor_cli.run.workflow import gbnf_grammar, max_plan_tokens

    path = resolve_gguf("smollm2-135m-instruct", load_catalog(), "bench").path
    models = LlamaModels()
    backend = LlamaCppBackend(models, path, file_sha256(path))  # the product's path
    llama = models.get(path).llama
    pool = [WorkerInfo(n, DESCRIPTION.format(n)) for n in NAMES]
    messages = plan_messages("How many primes are below 100?", pool, (), 5)
    request = Request(messages, max_plan_tokens(5), 0.2, 0, grammar=gbnf_grammar(NAMES, 5))
    common = {"messages": list(messages), "temperature": 0.2, "seed": 0, "repeat_penalty": 1.1}
    llama.create_chat_completion(max_tokens=1, **common)  # the prompt is now in the context

    constrained, free = [], []
    n = 0
    for _ in range(args.runs):
        start = time.perf_counter()
        n = backend.complete(request).tokens_out
        constrained.append(time.perf_counter() - start)
        start = time.perf_counter()
        out = llama.create_chat_completion(
            max_tokens=n, logit_bias={llama.token_eos(): -1e9}, **common
        )
        free.append(time.perf_counter() - start)
        assert out["usage"]["completion_tokens"] == n, out["usage"]
    ratio = median(constrained) / median(free)
    report(
        [
            {
                "what": f"grammar-constrained plan generation ({n} tokens, 6 workers, 5 steps)",
                "figure": f"{median(constrained):.3f} s = {ratio:.2f} x unconstrained",
                "reference": f"unconstrained, same {n} tokens: {median(free):.3f} s "
                f"(median of {args.runs})",
                "target": "<= 1.25 x",
                "ok": ratio <= 1.25,
            }
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
