"""The proof on real parts (issue 33, section 5): a conductor trained on a pool of the embedded
model and the python tool, against every single worker, the lookup table and the untrained
conductor, on held-out questions. Nothing here is simulated: SmolLM2-135M-Instruct (llama.cpp)
plans and answers, and `tool:python` runs what it wrote in the real sandbox.

Run alone (llama.cpp on every core; about 30 minutes on 2 cores):
    .venv/bin/python bench/prove_tools.py [--facts 60] [--each 40] [--everyday 40]
        [--root DIR] [--json]

The pool (a config file; the conductor is the untrained embedded model):
    local  = gguf:smollm2-135m-instruct   (the embedded default's worker, same description)
    python = tool:python                  (runs the last ```python block of a step it sees)

The questions, generated here and seeded, one `mixed` dataset (each line names its scorer):
- facts: "What is the capital of X?" from prove_embedded.py's table (written by us from common
  knowledge), scored `contains`; the model alone answers most, the interpreter none;
- add: "What is a + b?", four-digit a and b; pow: "What is a to the power of b?" (a 2-9, b
  5-12); muladd: "What is a * b + c?" (two-digit a and b, one-digit c); all scored `numeric`.
  The model alone answers almost none (it cannot compute); the interpreter cannot read English;
  together (the model writes a program, the tool runs it) they answer some;
- everyday: 60 open requests a user types ("Why is the sky blue?", "Write a haiku about the
  sea."; bench/data/everyday60.jsonl, written by us), scored `answered`: right when the reply
  is an answer at all, not the python tool's report that it found no program or failed. It
  teaches the conductor when *not* to send a question to the tool.
Every question is asked as written ("instruction": false: no "Answer:" line appended), as a user
types it into `ask`: the head reads the planning prompt, and one trained on eval's appended
line learned routes that `ask` never sees (a first run did: its sums went `python > local` on
plain questions). Each kind is split in half by a seeded shuffle: the first half trains, the
second is held out.

Steps, each a user's command in an isolated config, cache and data dir:
1. `conductor train mixed train.jsonl --holdout 0 --out tools-head` (the default method: a
   head that picks a workflow shape of at most two steps over {local, python}; the conductor
   writes the tasks), and `--tasks fixed --out tools-head-fixed` (the steps keep the words the
   rewards were measured with; its runs come from the first training's cache);
2. `conductor eval mixed held.jsonl --strategies conductor,conductor:tools-head,
   conductor:tools-head-fixed,single,knn-router,oracle --plot docs/img/prove-tools.png`;
3. accuracy with Wilson intervals per strategy and per kind, each trained conductor's paired
   difference (95 %) against the untrained one, single:local and knn-router, the shapes they
   chose per kind, and the cost (worker calls, tool runs and seconds per question).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from collections import Counter, defaultdict
from pathlib import Path

from _common import (
    REPO,
    accuracy,
    conductor,
    isolated_env,
    paired,
    split_by_kind,
    stored_results,
    temp_root,
    train_heads,
    write_rows,
)
from prove_embedded import CAPITALS

from conductor_cli.config.settings import DEFAULT_MODEL, DEFAULT_WORKER

# The embedded default's worker, word for word, and the tool: the head reads the planning
# prompt, which holds each worker's description, so a head to ship with the default must be
# trained on exactly the pool it would plan for.
CONFIG = f"""
[conductor]
model = "{DEFAULT_MODEL}"

[[workers]]
name = "{DEFAULT_WORKER.name}"
model = "{DEFAULT_WORKER.model}"
description = "{DEFAULT_WORKER.description}"

[[workers]]
name = "python"
model = "tool:python"
"""
KINDS = ("facts", "add", "pow", "muladd", "everyday")
EVERYDAY = REPO / "bench" / "data" / "everyday60.jsonl"
TRAINED = {"tools-head": "written", "tools-head-fixed": "fixed"}
PLOT = REPO / "docs" / "img" / "prove-tools.png"


def fact_rows(n: int, rng: random.Random) -> list[dict]:
    countries = sorted(CAPITALS)
    rng.shuffle(countries)
    return [
        {"dataset": "qa", "id": f"facts-{c.lower().replace(' ', '-')}",
         "question": f"What is the capital of {c}?", "answer": CAPITALS[c], "scorer": "contains",
         "instruction": False}
        for c in countries[:n]
    ]  # fmt: skip


def arithmetic_rows(kind: str, n: int, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(n):
        if kind == "add":
            a, b = rng.randint(1000, 9999), rng.randint(1000, 9999)
            question, value = f"What is {a} + {b}?", a + b
        elif kind == "pow":
            a, b = rng.randint(2, 9), rng.randint(5, 12)
            question, value = f"What is {a} to the power of {b}?", a**b
        else:
            a, b, c = rng.randint(10, 99), rng.randint(10, 99), rng.randint(1, 9)
            question, value = f"What is {a} * {b} + {c}?", a * b + c
        rows.append({"dataset": "qa", "id": f"{kind}-{i}", "question": question,
                     "answer": str(value), "scorer": "numeric", "instruction": False})  # fmt: skip
    return rows


def kind_of(problem_id: str) -> str:
    return problem_id.split("-", 1)[0]


def shape_of(row: dict | None) -> str:
    """The workflow a strategy ran: the trained conductors record their shape's label."""
    if row is None:
        return "missing"
    return str(row.get("detail", {}).get("shape") or "planned")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=60)
    parser.add_argument("--each", type=int, default=40, help="questions per arithmetic kind")
    parser.add_argument("--everyday", type=int, default=40, help="open requests (at most 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="train --repeats")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=None, help="continue the run in this dir")
    args = parser.parse_args()
    root = args.root or temp_root()
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    rows = fact_rows(args.facts, rng)
    for kind in ("add", "pow", "muladd"):
        rows += arithmetic_rows(kind, args.each, rng)
    everyday = [json.loads(line) for line in EVERYDAY.read_text(encoding="utf-8").splitlines()]
    rows += everyday[: args.everyday]
    train, held = split_by_kind(rows, KINDS, lambda r: kind_of(r["id"]), rng)
    train_file = write_rows(train, root / "train.jsonl")
    held_file = write_rows(held, root / "held.jsonl")
    env = isolated_env(root, CONFIG)
    data_dir = Path(env["CONDUCTOR_DATA_DIR"])

    timings = train_heads(TRAINED, train_file, len(train), env, root, args.seed, args.repeats)
    record = json.loads((data_dir / "conductors" / "tools-head" / "record.json").read_text())

    strategies = ["conductor", *(f"conductor:{n}" for n in TRAINED), "single", "knn-router"]
    start = time.monotonic()
    plot = root / "prove-tools.png"
    conductor(
        ["eval", "mixed", str(held_file), "--strategies", ",".join([*strategies, "oracle"]),
         "--concurrency", "1", "--quiet", "--json-out", str(root / "eval.json"),
         "--plot", str(plot)],
        env,
        f"eval on {len(held)} held-out",
    )  # fmt: skip
    timings["eval_minutes"] = round((time.monotonic() - start) / 60, 1)
    if plot.exists():
        PLOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(plot, PLOT)
    correct = json.loads((root / "eval.json").read_text())["correct"]
    results: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in stored_results(data_dir):
        results[row["strategy"]][row["problem_id"]] = row
    ids = [r["id"] for r in held]
    kinds = [kind_of(i) for i in ids]

    def right(strategy: str) -> list[bool]:
        return [bool(correct[strategy][i]) for i in ids]

    def cost(strategy: str) -> dict[str, float]:
        got = [results[strategy][i] for i in ids if i in results[strategy]]
        n = max(len(got), 1)
        return {
            "worker_calls": round(sum(r["model_calls"] for r in got) / n, 2),
            "tokens_out": round(sum(r["tokens_out"] for r in got) / n, 1),
            "seconds": round(sum(r["seconds"] for r in got) / n, 2),
        }

    summary = {s: {**accuracy(right(s), kinds), "cost": cost(s)} for s in correct}
    trained = {}
    for name, tasks in TRAINED.items():
        strategy = f"conductor:{name}"
        by_kind: dict[str, Counter] = defaultdict(Counter)
        for i in ids:
            by_kind[kind_of(i)][shape_of(results[strategy].get(i))] += 1
        trained[name] = {
            "tasks": tasks,
            "minus_untrained": paired(right(strategy), right("conductor")),
            "minus_single_local": paired(right(strategy), right("single:local")),
            "minus_knn_router": paired(right(strategy), right("knn-router")),
            "shapes_by_kind": {k: dict(v) for k, v in by_kind.items()},
        }
    report = {
        "pool": "SmolLM2-135M-Instruct plans; workers: local (the same model), python "
        "(tool:python, the sandbox); nothing simulated",
        "training_questions": dict(Counter(kind_of(r["id"]) for r in train)),
        "held_out": dict(Counter(kinds)),
        "strategies": summary,
        "trained": trained,
        "untrained_minus_single_local": paired(right("conductor"), right("single:local")),
        "reward_table": record.get("reward_table"),
        **timings,
        "root": str(root),
    }
    (root / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"held-out: {report['held_out']}; trained on {report['training_questions']}")
    print(f"{'strategy':28} {'accuracy':>8} {'95% interval':>15}  by kind  | calls s/question")
    for s, v in sorted(summary.items(), key=lambda kv: -kv[1]["accuracy"]):
        by = " ".join(f"{k} {v['by_kind'].get(k, 0):.2f}" for k in KINDS)
        c = v["cost"]
        print(
            f"{s:28} {v['accuracy']:8.3f} [{v['low']:.3f}, {v['high']:.3f}]  {by}"
            f" | {c['worker_calls']} {c['seconds']}"
        )
    for name, t in trained.items():
        for key in ("minus_untrained", "minus_single_local", "minus_knn_router"):
            d = t[key]
            print(f"{name} {key}: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
        print(f"{name} shapes: {t['shapes_by_kind']}")
    print(f"training: {report['reward_table']}")
    print(f"minutes: {timings}; files in {root}")


if __name__ == "__main__":
    main()
