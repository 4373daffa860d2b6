"""How far sampling the coder's program goes on letter, digit and word questions (issue 68):
each question of the given files asked of `coder[program] > python[run]<0` with `--samples`
seeds; how many the first program gets right, a majority of the first 3 and of all (failed
runs do not vote), and any of them (the oracle over the samples: the most a vote or a check
choosing among these programs could reach).

    .venv/bin/python bench/program_samples.py FILE.jsonl [FILE.jsonl ...] [--samples 5]
        [--out rows.jsonl]

The embedded default team, the response cache as configured. Run alone (llama.cpp)."""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

from conductor_cli.api import NO_TRACE, RunOptions, execute
from conductor_cli.config import load_config
from conductor_cli.evals import scoring
from conductor_cli.evals.records import Problem
from conductor_cli.evals.strategies import majority
from conductor_cli.policy.shapes import parse_shape
from conductor_cli.problems import QA_INSTRUCTION
from conductor_cli.runtime import Runtime
from conductor_cli.tools.python_tool import is_failure


def key(reply: str) -> str:
    said = re.findall(r"Answer:\s*(.*)", reply)
    return (said[-1] if said else reply).strip().lower()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    config = load_config(None)
    shape = parse_shape("coder[program] > python[run]<0", [w.name for w in config.workers])
    lines = [json.loads(line) for f in args.files for line in f.read_text().splitlines() if line]
    rows, tally = [], collections.Counter()
    with Runtime(config) as runtime:
        for line in lines:
            question = f"{line['question']}\n\n{QA_INSTRUCTION}"
            problem = Problem(id=line["id"], kind="qa", question=question,
                              answer=str(line["answer"]), scorer=line["scorer"])  # fmt: skip
            samples = []
            for k in range(args.samples):
                run = execute(question, config=config, workflow=shape.workflow(),
                              options=RunOptions(seed=10 * k), trace=NO_TRACE,
                              runtime=runtime)  # fmt: skip
                right, _, _ = scoring.score(problem, run.answer, None)
                samples.append({"reply": run.answer, "right": right,
                                "failed": is_failure(run.answer)})  # fmt: skip
            # A failed run has no answer to vote with (majority skips empty keys).
            keys = ["" if s["failed"] else key(s["reply"]) for s in samples]
            tally["first"] += samples[0]["right"]
            for n in sorted({3, args.samples}):
                tally[f"majority of {n}"] += samples[majority(keys[:n])]["right"]
            tally["any"] += any(s["right"] for s in samples)
            tally["failed runs"] += sum(s["failed"] for s in samples)
            rows.append({"id": line["id"], "samples": samples})
            print(json.dumps({"id": line["id"], "right": [s["right"] for s in samples]}),
                  flush=True)  # fmt: skip
    print(f"{len(rows)} questions, {args.samples} programs each: {dict(tally)}")
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
