"""Eight workers and three steps, on a SIMULATED pool: the step policy (`--policy steps`, what
`auto` takes for eight workers) trained within about 19 worker calls a training question, on
held-out questions against knn-router, every single worker and the untrained conductor.

Run: .venv/bin/python bench/prove_eight.py [--train 160] [--held-out 250] [--per-question 19]
     [--json]

The pool is a simulation (testing/simulated_pool.py): w0..w7 with identical descriptions. Four
specialist kinds (w0..w3 right 95 % on theirs), a generalist w4 (60 % on those four), w7 right
40 %, w6 10 %; the chain kind, that w0 answers right half the time and `w0 > w3<0` 95 %
(w3 checks w0's answer); the join kind, that w1 and w2 answer right half the time and
`w1 > w2 > w5<0,1` 95 % (w5 sees both answers; alone it is right 10 %). knn-router can only
pick one worker a question: its ceiling on chain and join is 50 %.

The training runs in a data and cache dir of its own, `--tasks fixed` (the shapes run with the
words they were measured with), `conductor.max_steps = 3`; one `conductor eval` on the
held-out questions compares it with the references.

--partial adds two kinds that only compositions of partial workers answer (issue 44): pcheck,
that every worker answers right at most 30 % of the time and w7 5 %, but `w7 > w3<0` 90 % (w3
finishing w7's draft); pjoin, the same alone, but `w6 > w7 > w5<0,1` 90 % (w5 reading the two
halves w6 and w7 give, each wrong alone).

The ideal plan is the one the simulation was built around, each kind on the shape made for it
(a specialist alone, CHAIN, JOIN, PCHECK, PJOIN), scored on the same held-out questions with
the simulation's own draws (SimulatedPool.answers_right): every shape is right at most 95 % of
the time, so no plan can expect more than 0.95 (0.9375 with --partial), and a plan's score on
250 questions is itself a draw. `ideal_check` is the share of the policy's held-out answers
the same reconstruction reproduces (1.0: the ideal plan's figures are the simulation's).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from _common import accuracy, conductor, isolated_env, paired, stored_results, temp_root
from prove_learning import write_qa

from conductor_cli.testing.simulated_pool import (
    SimulatedPool,
    SimulatedQuestion,
    make_questions,
)

KINDS = ["arith", "words", "geo", "logic", "chain", "join"]
# --partial: two kinds more that only compositions of partial workers answer (issue 44).
PARTIAL_KINDS = ["pcheck", "pjoin"]
CHAIN = "w0 > w3<0"
JOIN = "w1 > w2 > w5<0,1"
PCHECK = "w7 > w3<0"
PJOIN = "w6 > w7 > w5<0,1"
SPECIALIST = {"arith": "w0", "words": "w1", "geo": "w2", "logic": "w3"}
IDEAL = {**SPECIALIST, "chain": CHAIN, "join": JOIN, "pcheck": PCHECK, "pjoin": PJOIN}
# `conductor eval`'s seed (its default): the engine seeds step i with it + i + 1 (run/engine.py).
EVAL_SEED = 0


def skills(partial: bool = False) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for w in ("w0", "w1", "w2", "w3"):
        table[w] = {k: (0.95 if SPECIALIST[k] == w else 0.2) for k in SPECIALIST}
        table[w]["chain"] = 0.5 if w == "w0" else 0.1
        table[w]["join"] = 0.5 if w in ("w1", "w2") else 0.15
    table["w4"] = {**{k: 0.6 for k in SPECIALIST}, "chain": 0.2, "join": 0.2}
    table["w5"] = {**{k: 0.2 for k in SPECIALIST}, "chain": 0.1, "join": 0.1}
    table["w6"] = {k: 0.1 for k in KINDS}
    table["w7"] = {**{k: 0.4 for k in SPECIALIST}, "chain": 0.1, "join": 0.15}
    if partial:  # wrong alone: w7 a draft only w3 can finish, w6 and w7 halves only w5 joins
        for w in table:
            table[w]["pcheck"] = 0.05 if w in ("w6", "w7") else 0.3 if w == "w4" else 0.15
            table[w]["pjoin"] = 0.05 if w in ("w6", "w7") else 0.3 if w == "w4" else 0.15
    return table


HELPED = {"w3": {"chain": ("w0", 0.95)}, "w5": {"join": ("w1+w2", 0.95)}}
PARTIAL_HELPED = {"w3": {"pcheck": ("w7", 0.9)}, "w5": {"pjoin": ("w6+w7", 0.9)}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=1200)
    parser.add_argument("--held-out", type=int, default=250)
    parser.add_argument("--train", type=int, default=160, help="training questions")
    parser.add_argument("--per-question", type=float, default=19.0, help="--max-calls / train")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=None, help="continue the run in this dir")
    parser.add_argument(
        "--partial", action="store_true", help="add the kinds only partial workers composed answer"
    )
    args = parser.parse_args()
    kinds = KINDS + (PARTIAL_KINDS if args.partial else [])
    helped = {
        w: {**HELPED.get(w, {}), **(PARTIAL_HELPED.get(w, {}) if args.partial else {})}
        for w in ("w3", "w5")
    }
    root = args.root or temp_root()
    root.mkdir(parents=True, exist_ok=True)
    bank = make_questions(kinds, args.questions // len(kinds), seed=args.seed)
    port_file = root / "port"
    port = int(port_file.read_text()) if port_file.exists() else 0
    sim = SimulatedPool(bank, skills(args.partial), helped, port=port)
    port_file.write_text(sim.api_base.split(":")[2].split("/")[0])
    order = list(bank.values())
    random.Random(args.seed).shuffle(order)
    held, rest = order[: args.held_out], order[args.held_out :]
    training = rest[: args.train]
    data = write_qa(training, root / "train.jsonl")
    held_file = write_qa(held, root / "held.jsonl")
    kind_of = {f"q{q.number}": q.kind for q in bank.values()}
    n = len(training)
    limit = round(args.per_question * n)

    env = isolated_env(root)
    config = sim.config(root / "config.toml", max_steps=3)
    env["CONDUCTOR_CONFIG"] = str(config)
    result_file = root / "train.json"
    if not result_file.exists():
        calls = sim.calls
        start = time.monotonic()
        conductor(
            ["train", "qa", str(data), "--holdout", "0", "--out", "eight", "--tasks", "fixed",
             "--max-calls", str(limit)],
            env,
            "train eight",
        )  # fmt: skip
        record = json.loads((root / "data" / "conductors" / "eight" / "record.json").read_text())
        result_file.write_text(
            json.dumps(
                {
                    "record": record,
                    "simulation_calls": sim.calls - calls,
                    "minutes": round((time.monotonic() - start) / 60, 2),
                }
            )
        )
    trained = json.loads(result_file.read_text())
    out = root / "eval.json"
    if not out.exists():
        started = time.monotonic()
        conductor(
            ["eval", "qa", str(held_file), "--strategies",
             "conductor,conductor:eight,single,knn-router", "--quiet", "--json-out", str(out)],
            env,
            "eval",
        )  # fmt: skip
        (root / "eval_minutes").write_text(str(round((time.monotonic() - started) / 60, 2)))
    correct = json.loads(out.read_text())["correct"]
    rows = stored_results(root / "data")
    ids = [f"q{q.number}" for q in held]
    kinds = [kind_of[i] for i in ids]

    def right(strategy: str) -> list[bool]:
        return [bool(correct[strategy][i]) for i in ids]

    # The shape the trained policy planned for each held-out question (None: not recorded).
    planned = {
        r["problem_id"]: r.get("detail", {}).get("shape")
        for r in rows
        if r["strategy"] == "conductor:eight"
    }

    def shapes(kind: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for i in ids:
            if kind_of[i] == kind:
                s = planned.get(i) or "?"
                counts[s] = counts.get(s, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    refs = {s: accuracy(right(s), kinds) for s in correct}
    questions = {f"q{q.number}": q for q in held}
    ideal = [through(sim, IDEAL[kind_of[i]], questions[i]) for i in ids]
    reproduced = [
        through(sim, planned[i], questions[i]) == bool(correct["conductor:eight"][i])
        for i in ids
        if planned.get(i)
    ]
    best_single = max(
        (s for s in refs if s.startswith("single:")), key=lambda s: refs[s]["accuracy"]
    )
    mine = right("conductor:eight")
    record = trained["record"]
    report = {
        "simulation": "testing/simulated_pool.py: 8 workers, 4 specialist kinds, chain, join"
        + (", pcheck, pjoin (partial workers)" if args.partial else ""),
        "training_questions": n,
        "held_out": len(ids),
        "max_calls": limit,
        "worker_calls": trained["simulation_calls"],
        "calls_per_question": round(trained["simulation_calls"] / n, 2),
        "policy": record["hyperparameters"].get("policy"),
        "weights": record["hyperparameters"].get("weights"),
        "shapes": record["hyperparameters"]["shapes"],
        "workflow_runs": record["reward_table"]["workflow_runs"],
        "measured_share": record["reward_table"]["measured_share"],
        "training_minutes": trained["minutes"],
        "strategies": refs,
        "best_single": best_single,
        "chain_shapes": shapes("chain"),
        "join_shapes": shapes("join"),
        "chain_share": _share(shapes("chain"), CHAIN),
        "join_share": _share(shapes("join"), JOIN),
        **(
            {
                "pcheck_shapes": shapes("pcheck"),
                "pjoin_shapes": shapes("pjoin"),
            }
            if args.partial
            else {}
        ),
        "explore_calls": record["reward_table"].get("explore_calls"),
        "explore_budget": record["reward_table"].get("explore_budget"),
        "minus_knn_router": paired(mine, right("knn-router")),
        "minus_best_single": paired(mine, right(best_single)),
        "minus_untrained": paired(mine, right("conductor")),
        "ideal_plan": accuracy(ideal, kinds),
        "minus_ideal_plan": paired(mine, ideal),
        "ideal_check": round(sum(reproduced) / len(reproduced), 3) if reproduced else None,
        "root": str(root),
    }
    sim.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{n} training questions, {len(ids)} held out (a simulation)")
    print(
        f"trained: {trained['simulation_calls']} calls ({report['calls_per_question']}/q, "
        f"--max-calls {limit}), {report['weights']} weights, policy {report['policy']}"
    )
    rows_out = sorted(refs.items(), key=lambda kv: -kv[1]["accuracy"])
    for s, v in [("ideal plan", report["ideal_plan"]), *rows_out]:
        by_kind = " ".join(f"{k} {v['by_kind'].get(k, 0):.2f}" for k in dict.fromkeys(kinds))
        print(f"{s:18} {v['accuracy']:.3f} [{v['low']:.3f}, {v['high']:.3f}]  {by_kind}")
    print(f"(the ideal plan reproduces {report['ideal_check']} of the policy's answers)")
    keys = ("minus_ideal_plan", "minus_knn_router", "minus_best_single", "minus_untrained")
    for key in keys:
        d = report[key]
        print(f"{key:18} {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
    print("chain:", report["chain_shapes"])
    print("join:", report["join_shapes"])
    if args.partial:
        print("pcheck:", report["pcheck_shapes"])
        print("pjoin:", report["pjoin_shapes"])
    print(f"input exploration: {report['explore_calls']} of {report['explore_budget']} calls")
    print(f"files in {root}")


def through(sim: SimulatedPool, label: str, question: SimulatedQuestion) -> bool:
    """Whether `question` is answered right through the shape `label` ("w6 > w7 > w5<0,1") as
    `conductor eval` runs it: its last step's answer is the answer, and what that step sees
    sets its odds."""
    steps = label.split(" > ")
    names = [step.split("<")[0] for step in steps]
    last = steps[-1]
    seen = {names[int(i)] for i in last.split("<")[1].split(",")} if "<" in last else set()
    return sim.answers_right(names[-1], question, seen, EVAL_SEED + len(steps))


def _share(counts: dict[str, int], label: str) -> float:
    total = sum(counts.values())
    return round(counts.get(label, 0) / total, 3) if total else 0.0


if __name__ == "__main__":
    main()
