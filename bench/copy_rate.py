"""Does the conductor copy its prompt's example workflows, and does the default make answers
worse? (issue 17)

1. Copy rate: the embedded default conductor (SmolLM2-135M, default settings: temperature 0.2,
   seed 0, max_steps 5) plans 20 varied questions (facts, arithmetic, code, writing,
   translation, reasoning) for two pools: the embedded default (one worker, `local`) and three
   workers of the same local model under other names (the examples use the pool's names). A
   planned task "copies" when it equals, case-insensitively and stripped, any task of the
   prompt's example workflows (read out of the system prompt itself). Also: the distribution of
   step counts. Target: <= 10% of planned tasks copied.
2. Factual accuracy: `conductor eval qa tests/data/facts20.jsonl --scorer contains
   --strategies conductor,single:local` on the embedded default (20 short questions with exact
   answers: capitals, arithmetic, dates; written by us). Target: conductor >= single:local.
   The same on bench/data/facts_check20.jsonl, 20 more of the same kinds written after the
   prompt's one-step example was chosen on the first 20.
3. The README's first command: `conductor ask "What is the capital of France?"` names Paris.

`--prompt before` measures the same with the planning prompt as it was before issue 17 (its
text is kept below), patched into the package in each child process; `--prompt after` (the
default) measures the prompt in conductor_cli/run/planner.py; `--prompt both` does both.
Each part runs in fresh processes with isolated config, cache and data dirs.

Run: .venv/bin/python bench/copy_rate.py [--prompt both] [--skip-eval] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import REPO, isolated_env, must, report, temp_root, timed

FACTS = REPO / "tests" / "data" / "facts20.jsonl"
# A second 20 of the same kinds, written after the prompt was chosen on FACTS: a check that
# the choice was not fitted to one small set.
FACTS_CHECK = REPO / "bench" / "data" / "facts_check20.jsonl"
TARGET_COPY = 0.10

QUESTIONS = [
    "What is the capital of Australia?",
    "Who painted the Mona Lisa?",
    "In which year did the Berlin Wall fall?",
    "What is 48 + 76?",
    "What is 15% of 240?",
    "How many minutes are there in 3.5 hours?",
    "Write a Python function that returns the largest of three numbers.",
    "What does the `git rebase` command do?",
    "Fix this JavaScript: `for (i = 0; i < 10; i++) console.log(i)` leaks a global.",
    "Write a short poem about a lighthouse.",
    "Write a polite email declining a meeting invitation.",
    "Give a catchy title for a blog post about saving money.",
    "Translate 'Where is the train station?' into French.",
    "How do you say 'thank you very much' in Japanese?",
    "Translate 'the cat sleeps on the sofa' into German.",
    "If all bloops are razzies and all razzies are lazzies, are all bloops lazzies?",
    "A bat and a ball cost $1.10; the bat costs $1 more than the ball. What does the ball cost?",
    "Tom is taller than Ann, and Ann is taller than Bo. Who is the shortest?",
    "Why do leaves change colour in autumn?",
    "What are the pros and cons of working from home?",
]

THREE_POOL = """\
[[workers]]
name = "solver"
model = "gguf:smollm2-135m-instruct"
description = "good at arithmetic, logic and step-by-step reasoning"

[[workers]]
name = "coder"
model = "gguf:smollm2-135m-instruct"
description = "writes and fixes code"

[[workers]]
name = "writer"
model = "gguf:smollm2-135m-instruct"
description = "writes, translates and explains clearly"
"""
POOLS = {"embedded default (local)": None, "3 workers (solver, coder, writer)": THREE_POOL}


# ---------------------------------------------------------------- the prompt before issue 17


def _old_examples(names: Sequence[str], max_steps: int) -> str:
    first = names[0]
    second = names[1] if len(names) > 1 else names[0]
    easy = {
        "steps": [
            {
                "worker": first,
                "task": "Answer the question directly in one or two sentences.",
                "sees": [],
            }
        ]
    }
    hard = {
        "steps": [
            {
                "worker": first,
                "task": "Solve the problem step by step and show the work.",
                "sees": [],
            },
            {
                "worker": second,
                "task": "Check the solution above for mistakes and write the "
                "corrected final answer.",
                "sees": [0],
            },
        ]
    }
    text = f"Easy question:\n{json.dumps(easy)}"
    if max_steps >= 2:
        text += f"\nHard question:\n{json.dumps(hard)}"
    return text


def old_system_prompt(pool: Sequence[Any], max_steps: int) -> str:
    roster = "\n".join(f"- {w.name}: {w.description or 'no description'}" for w in pool)
    names = [w.name for w in pool]
    return (
        "You are the conductor of a team of AI workers. You do not answer the question "
        "yourself: you write a workflow, a short list of steps, and each step gives one worker "
        "one clear instruction in plain words.\n"
        "A step may read the outputs of earlier steps: list their numbers (counting from 0) in "
        '"sees". The output of the last step is the final answer, so the last step must '
        "produce the complete answer.\n"
        f"Use one step for an easy question. For a hard one use up to {max_steps} steps, such "
        "as: solve, check, then fix.\n\n"
        f"The workers:\n{roster}\n\n"
        "Reply with the workflow as JSON only, like these examples:\n"
        f"{_old_examples(names, max_steps)}"
    )


def use_prompt(which: str) -> None:
    """In a child process: plan with the prompt `which` ('before' patches the old text in)."""
    if which == "before":
        from conductor_cli.run import planner as conductor

        conductor.system_prompt = old_system_prompt  # plan_messages looks it up at call time


def example_tasks(system: str) -> set[str]:
    """Every task of the example workflows in a system prompt, normalised."""
    tasks = set()
    for line in system.splitlines():
        if line.startswith('{"steps"'):
            tasks.update(norm(s["task"]) for s in json.loads(line)["steps"])
    return tasks


def norm(task: str) -> str:
    return " ".join(task.split()).strip().lower()


# ---------------------------------------------------------------- child processes


def plan_all(which: str) -> None:
    """In a fresh process: plan every question with the config in force; print JSON."""
    use_prompt(which)
    from conductor_cli.api import plan_question
    from conductor_cli.config.settings import load_config
    from conductor_cli.run.planner import plan_messages, worker_infos
    from conductor_cli.runtime import Runtime

    config = load_config()
    runtime = Runtime(config)
    runtime.pull_missing()
    scope = runtime.scope()
    pool = runtime.pool(scope)
    backend = runtime.conductor(scope)
    infos = worker_infos(pool.workers)
    system = plan_messages("", infos, (), config.conductor.max_steps)[0]["content"]
    plans = []
    start = time.perf_counter()
    for question in QUESTIONS:
        plan = plan_question(backend, config, question, (), infos, lambda e: None)
        plans.append(
            [
                {"worker": s.worker, "task": s.task, "sees": list(s.sees)}
                for s in plan.workflow.steps
            ]
        )
    seconds = time.perf_counter() - start
    runtime.close()
    print(json.dumps({"system": system, "plans": plans, "seconds": seconds}))


def cli(which: str, argv: list[str]) -> None:
    """In a fresh process: the conductor CLI with the prompt `which`."""
    use_prompt(which)
    from conductor_cli.cli.entry import main as entry

    sys.argv = ["conductor", *argv]
    entry()


# ---------------------------------------------------------------- the parent


def copy_rows(which: str, verbose: bool) -> list[dict[str, Any]]:
    rows = []
    for label, config in POOLS.items():
        env = isolated_env(temp_root(), config)
        out = json.loads(
            must(timed([sys.executable, __file__, "--plan-all", which], env), "plan").stdout
        )
        examples = example_tasks(out["system"])
        tasks = [s["task"] for plan in out["plans"] for s in plan]
        copied = [t for t in tasks if norm(t) in examples]
        counts = collections.Counter(len(plan) for plan in out["plans"])
        share = len(copied) / len(tasks)
        if verbose:
            print(f"--- {which}, {label}", file=sys.stderr)
            for q, plan in zip(QUESTIONS, out["plans"], strict=True):
                print(f"Q: {q}", file=sys.stderr)
                for i, s in enumerate(plan):
                    mark = " [COPY]" if norm(s["task"]) in examples else ""
                    print(f"  {i} {s['worker']} {s['sees']}: {s['task']}{mark}", file=sys.stderr)
        dist = ", ".join(f"{n} step{'s' if n > 1 else ''}: {c}" for n, c in sorted(counts.items()))
        rows.append(
            {
                "what": f"planned tasks copying an example's task, prompt {which}, {label}",
                "figure": f"{len(copied)}/{len(tasks)} = {share:.0%}; plans of {dist}",
                "reference": f"20 questions, {len(examples)} example tasks, planned in "
                f"{out['seconds']:.0f} s",
                "target": f"<= {TARGET_COPY:.0%}",
                "ok": share <= TARGET_COPY,
            }
        )
    return rows


def eval_accuracy(which: str, facts: Path) -> tuple[float, float, float]:
    """(conductor, single:local, seconds) on one factual file, in a fresh isolated env."""
    root = temp_root()
    env = isolated_env(root)
    out = root / "eval.json"
    cmd = [
        sys.executable,
        __file__,
        "--cli",
        which,
        "eval",
        "qa",
        str(facts),
        "--scorer",
        "contains",
        "--strategies",
        "conductor,single:local",
        "--json-out",
        str(out),
    ]
    result = must(timed(cmd, env), "eval")
    records = json.loads(out.read_text(encoding="utf-8"))["strategies"]
    acc = {r["strategy"]: r["accuracy"] for r in records}
    return acc["conductor"], acc["single:local"], result.seconds


def eval_rows(which: str) -> list[dict[str, Any]]:
    rows = []
    for facts in (FACTS, FACTS_CHECK):
        conductor, single, seconds = eval_accuracy(which, facts)
        rows.append(
            {
                "what": f"factual qa ({facts.relative_to(REPO)}, contains), prompt {which}: "
                "conductor",
                "figure": f"{conductor:.0%}",
                "reference": f"single:local {single:.0%} (eval {seconds:.0f} s)",
                "target": ">= single:local",
                "ok": conductor >= single,
            }
        )
    env = isolated_env(temp_root())
    ask = must(
        timed(
            [sys.executable, __file__, "--cli", which, "ask", "What is the capital of France?"], env
        ),
        "ask",
    )
    paris = "paris" in ask.stdout.lower()
    rows.append(
        {
            "what": f"the README's first command, prompt {which}",
            "figure": f"{ask.stdout.strip()[:80]!r}",
            "reference": f"{ask.seconds:.1f} s",
            "target": "names Paris",
            "ok": paris,
        }
    )
    return rows


def main() -> None:
    if sys.argv[1:2] == ["--cli"]:  # before argparse: the rest are conductor's own arguments
        cli(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompt", choices=["before", "after", "both"], default="after")
    parser.add_argument("--skip-eval", action="store_true", help="only the copy rate")
    parser.add_argument("--skip-copy", action="store_true", help="only the eval")
    parser.add_argument("--verbose", "-v", action="store_true", help="every plan, on stderr")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plan-all", metavar="PROMPT")
    args = parser.parse_args()
    if args.plan_all:
        plan_all(args.plan_all)
        return
    which = ["before", "after"] if args.prompt == "both" else [args.prompt]
    rows = []
    for w in which:
        if not args.skip_copy:
            rows += copy_rows(w, args.verbose)
        if not args.skip_eval:
            rows += eval_rows(w)
    report(rows, args.json)


if __name__ == "__main__":
    main()
