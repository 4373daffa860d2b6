"""Local worker speed once the main thread has used llama.cpp: every call on the model's own
thread (what conductor does) against calling from whichever thread runs the step (what it did
before). Run: .venv/bin/python bench/model_thread.py [--json]

llama.cpp's CPU backend keeps an OpenMP team per calling thread; the main thread plans, engine
threads run steps, and the main thread's team kept competing with each step's team.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from _common import report

from conductor_cli.backends.base import Request
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.models.catalog import load_catalog, resolve_gguf

MESSAGES = (
    {"role": "system", "content": "You are local, one worker in a team."},
    {"role": "user", "content": "Write a long story about a lighthouse keeper named Tom."},
)


def tokens_per_second(call: Any, runs: int) -> float:
    """Median tokens/s of `runs` 128-token answers, each from a new thread (an engine step)."""
    rates: list[float] = []

    def step(seed: int) -> None:
        start = time.perf_counter()
        done = call(Request(messages=MESSAGES, max_tokens=128, temperature=0.2, seed=seed))
        rates.append(done.tokens_out / (time.perf_counter() - start))

    for seed in range(runs):
        t = threading.Thread(target=step, args=(seed,))
        t.start()
        t.join()
    return statistics.median(rates)


def measure(mode: str, runs: int) -> float:
    """One process per mode: a thread's OpenMP team lives as long as the thread."""
    catalog = load_catalog()
    path = resolve_gguf(catalog.default, catalog, "bench").path
    models = LlamaModels()
    backend = LlamaCppBackend(models, path, "bench")
    loaded = models.get(path)
    if mode == "direct":  # before: the work ran on whichever thread called
        call: Any = lambda request: backend._complete(loaded, request, None)  # noqa: E731
    else:
        call = backend.complete
    call(Request(messages=MESSAGES, max_tokens=64, temperature=0.2, seed=99))  # the plan
    try:
        return tokens_per_second(call, runs)
    finally:
        models.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--mode", choices=["direct", "model-thread"])
    args = parser.parse_args()
    if args.mode:
        print(measure(args.mode, args.runs))
        return
    rate = {
        mode: float(
            subprocess.run(
                [sys.executable, __file__, "--mode", mode, "--runs", str(args.runs)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for mode in ("direct", "model-thread")
    }
    ratio = rate["model-thread"] / rate["direct"]
    report(
        [
            {
                "what": "local worker step after the main thread planned (128 tokens, median)",
                "figure": f"{rate['model-thread']:.1f} tok/s = {ratio:.2f}x",
                "reference": f"called from the step's own thread: {rate['direct']:.1f} tok/s",
                "target": ">= 1.5x",
                "ok": ratio >= 1.5,
            }
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
