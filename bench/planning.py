"""Planning, cold against warm: the conductor's fixed prompt prefix (instructions + a pool of 6
workers with long descriptions) is read once, its llama.cpp state saved on disk, and loaded by
later runs. Each figure is a fresh process: cold = empty cache dir, warm = the cache dir a cold
run left behind, asked a different question (so the response cache cannot answer).

Run: .venv/bin/python bench/planning.py [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from _common import isolated_env, median, must, report, temp_root, timed

NAMES = ["coder", "mathematician", "writer", "reviewer", "researcher", "translator"]
DESCRIPTION = (
    "Strong at {} tasks; careful, slow and thorough; writes clear explanations with worked "
    "examples, checks its own arithmetic, prefers short answers when the question is easy, "
    "costs about one cent per thousand tokens and answers in five to ten seconds."
)
QUESTIONS = [
    "How many prime numbers are there below 100?",
    "Write a haiku about the sea and translate it into French.",
    "Explain why the sky is blue to a ten-year-old.",
    "Find the bug in a binary search that loops forever on two elements.",
    "What is the derivative of x to the power x?",
    "Summarise the causes of the First World War in three sentences.",
]


def pool_config() -> str:
    workers = "".join(
        f'[[workers]]\nname = "{n}"\nmodel = "gguf:smollm2-135m-instruct"\n'
        f'description = "{DESCRIPTION.format(n)}"\n\n'
        for n in NAMES
    )
    return f"[conductor]\nmax_steps = 5\n\n{workers}"


def plan_once(question: str) -> None:
    """In a fresh process: load the conductor, plan once, print the timings as JSON."""
    from conductor_cli.api import plan_question
    from conductor_cli.config.settings import load_config
    from conductor_cli.run.planner import worker_infos
    from conductor_cli.runtime import Runtime

    config = load_config()
    runtime = Runtime(config)
    runtime.pull_missing()
    scope = runtime.scope()
    pool = runtime.pool(scope)
    backend = runtime.conductor(scope)
    start = time.perf_counter()
    plan = plan_question(
        backend, config, question, (), worker_infos(pool.workers, 0, 0), lambda e: None
    )
    seconds = time.perf_counter() - start
    runtime.close()
    print(json.dumps({"seconds": seconds, "tokens_in": plan.tokens_in, "cached": plan.cached}))


def measure(env: dict[str, str], question: str) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--once", question]
    result = json.loads(must(timed(cmd, env), "planning").stdout)
    if result["cached"]:
        sys.exit("the response cache answered; the bench needs a fresh question per run")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--once", metavar="QUESTION")
    args = parser.parse_args()
    if args.once:
        plan_once(args.once)
        return
    cold, warm = [], []
    tokens = 0
    for i in range(args.runs):
        env = isolated_env(temp_root(), pool_config())
        first = measure(env, QUESTIONS[(2 * i) % len(QUESTIONS)])
        second = measure(env, QUESTIONS[(2 * i + 1) % len(QUESTIONS)])
        cold.append(first["seconds"])
        warm.append(second["seconds"])
        tokens = int(first["tokens_in"])
    ratio = median(warm) / median(cold)
    report(
        [
            {
                "what": f"planning, pool of 6 long descriptions ({tokens} prompt tokens), warm",
                "figure": f"{median(warm):.2f} s = {ratio:.2f} x cold",
                "reference": f"cold {median(cold):.2f} s (median of {args.runs} each)",
                "target": "<= 0.5 x cold",
                "ok": ratio <= 0.5,
            }
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
