"""Prove the learning on a SIMULATED specialist pool where the right answer is known: a
conductor trained with `conductor train` against the untrained one, every single worker, vote,
moa, the router, the k-means lookup table (`knn-router`) and the oracle, all through
`conductor eval` on held-out questions the trainer never saw.

Run: .venv/bin/python bench/prove_learning.py [--questions 1000] [--held-out 250]
     [--train 24,48,96,160] [--plot docs/img/learning-curve.png] [--json]

The pool is a simulation (conductor_cli/testing/simulated_pool.py): workers w0..w3 with identical
descriptions behind an OpenAI-compatible server on 127.0.0.1, reached through litellm like any
remote worker. Five kinds of question, equally many of each: arith (w0's), words (w1's), geo
(w2's), logic (w3's), where the specialist is right 95 % and the others 20 %; and chain, which
w0 answers 50 % alone and w3 95 % when it sees w0's attempt (10 % alone), so only the workflow
w0 > w3<0 reaches 95 %. The dataset files carry no kind (no category field): the kind is kept
here, for the per-kind report only.

Steps, each a user's command in an isolated config, cache and data dir:
1. `conductor train qa train-N.jsonl --holdout 0 --out sim-N` for each training size N (nested
   subsets of the training questions, so the larger sizes reuse the smaller ones' cached runs);
2. `conductor eval qa held.jsonl --strategies conductor,conductor:sim-N...,single,vote,moa,
   router,knn-router,oracle`;
3. from the eval's stored per-question results: accuracy with Wilson intervals, per kind, the
   paired difference of the trained conductor against knn-router with its 95 % interval, the
   share of chain questions the trained conductor answers with the chain w0 > w3<0, and the
   learning curve (held-out accuracy against training questions) as a plot.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from _common import accuracy, conductor, isolated_env, paired, stored_results, temp_root

from conductor_cli.testing.simulated_pool import SimulatedPool, SimulatedQuestion, make_questions

KINDS = ["arith", "words", "geo", "logic", "chain"]
SPECIALIST = {"arith": "w0", "words": "w1", "geo": "w2", "logic": "w3"}
CHAIN = "w0 > w3<0"


def skills() -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for w in ("w0", "w1", "w2", "w3"):
        row = {k: (0.95 if SPECIALIST[k] == w else 0.2) for k in SPECIALIST}
        row["chain"] = 0.5 if w == "w0" else 0.1
        table[w] = row
    return table


def write_qa(questions: list[SimulatedQuestion], path: Path) -> Path:
    """An exact-answer qa file with no category: the kind is for this report only."""
    with path.open("w", encoding="utf-8") as out:
        for q in questions:
            out.write(json.dumps({"id": f"q{q.number}", "question": q.text, "answer": q.answer}))
            out.write("\n")
    return path


def plot_curve(path: Path, curve: list[dict], refs: dict[str, float], n: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [c["training_questions"] for c in curve]
    ys = [c["accuracy"] for c in curve]
    lows = [c["accuracy"] - c["low"] for c in curve]
    highs = [c["high"] - c["accuracy"] for c in curve]
    ax.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=3, label="trained conductor")
    styles = {"untrained conductor": ":", "best single worker": "--", "knn-router": "-."}
    for label, value in refs.items():
        ax.axhline(value, linestyle=styles.get(label, "-"), color="grey", linewidth=1)
        ax.annotate(label, (xs[-1], value), textcoords="offset points", xytext=(4, 2), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("training questions (head method)")
    ax.set_ylabel(f"held-out accuracy ({n} questions, 95 % interval)")
    ax.set_title("conductor train on a simulated specialist pool (a simulation)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=1000, help="generated questions in all")
    parser.add_argument("--held-out", type=int, default=250)
    parser.add_argument("--train", default="24,48,96,160", help="training sizes (questions)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--plot", type=Path, default=None, help="write the learning curve here")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="continue the run in this directory (printed at the end): trained conductors "
        "and stored eval results are kept, only what is missing runs",
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.train.split(","))
    root = args.root or temp_root()
    root.mkdir(parents=True, exist_ok=True)
    bank = make_questions(KINDS, args.questions // len(KINDS), seed=args.seed)
    # The same port as before when continuing: the pool's address is part of the eval's key.
    port_file = root / "port"
    port = int(port_file.read_text()) if port_file.exists() else 0
    sim = SimulatedPool(bank, skills(), {"w3": {"chain": ("w0", 0.95)}}, port=port)
    port_file.write_text(sim.api_base.split(":")[2].split("/")[0])
    env = isolated_env(root)
    env["CONDUCTOR_CONFIG"] = str(sim.config(root / "config.toml"))
    data_dir = Path(env["CONDUCTOR_DATA_DIR"])

    order = list(bank.values())
    random.Random(args.seed).shuffle(order)
    held, pool = order[: args.held_out], order[args.held_out :]
    if sizes[-1] > len(pool):
        sys.exit(f"--train {sizes[-1]}: only {len(pool)} questions are left to train on")
    kind_of = {f"q{q.number}": q.kind for q in bank.values()}
    held_file = write_qa(held, root / "held.jsonl")

    timings_file = root / "training.json"
    timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    trained: list[dict] = []
    for n in sizes:
        data = write_qa(pool[:n], root / f"train-{n}.jsonl")
        record_file = data_dir / "conductors" / f"sim-{n}" / "record.json"
        start = time.monotonic()
        if not record_file.exists():
            conductor(
                ["train", "qa", str(data), "--holdout", "0", "--seed", str(args.seed),
                 "--out", f"sim-{n}", "--concurrency", str(args.concurrency)],
                env,
                f"train on {n}",
            )  # fmt: skip
            timings[str(n)] = round((time.monotonic() - start) / 60, 1)
            timings_file.write_text(json.dumps(timings))
        record = json.loads(record_file.read_text())
        trained.append(
            {
                "training_questions": n,
                "workflow_runs": record["reward_table"]["workflow_runs"],
                "worker_calls": record["reward_table"]["worker_calls"],
                "minutes": timings.get(str(n)),
            }
        )

    names = [f"conductor:sim-{n}" for n in sizes]
    strategies = ["conductor", *names, "single", "vote", "moa", "router", "knn-router", "oracle"]
    start = time.monotonic()
    conductor(
        ["eval", "qa", str(held_file), "--strategies", ",".join(strategies),
         "--concurrency", str(args.concurrency), "--quiet",
         "--json-out", str(root / "eval.json")],
        env,
        "eval on the held-out questions",
    )  # fmt: skip
    eval_minutes = round((time.monotonic() - start) / 60, 1)

    # Per problem: the outcomes of every strategy (derived ones too) from the eval's JSON, the
    # rest of a result (the conductor's shape, calls) from its store.
    correct = json.loads((root / "eval.json").read_text())["correct"]
    results: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in stored_results(data_dir):
        results[row["strategy"]][row["problem_id"]] = row
    ids = [f"q{q.number}" for q in held]

    def right(strategy: str) -> list[bool]:
        return [bool(correct[strategy][i]) for i in ids]

    summary: dict[str, dict] = {}
    for s in correct:
        summary[s] = {
            **accuracy(right(s), [kind_of[i] for i in ids]),
            "calls_per_question": round(
                sum(results[s].get(i, {}).get("model_calls", 0) for i in ids) / len(ids), 2
            ),
        }
    singles = {s: v for s, v in summary.items() if s.startswith("single:")}
    best_single = max(singles, key=lambda s: singles[s]["accuracy"])
    final = names[-1]
    chain_ids = [i for i in ids if kind_of[i] == "chain"]
    chain_shapes = [results[final][i].get("detail", {}).get("shape") for i in chain_ids]
    curve = [
        {"training_questions": n, **{k: summary[name][k] for k in ("accuracy", "low", "high")}}
        for n, name in zip(sizes, names, strict=True)
    ]
    report = {
        "simulation": "conductor_cli/testing/simulated_pool.py: w0..w3, identical descriptions",
        "questions": len(bank),
        "held_out": len(ids),
        "held_out_by_kind": {k: sum(1 for i in ids if kind_of[i] == k) for k in KINDS},
        "strategies": summary,
        "best_single": best_single,
        "trained": final,
        "trained_minus_knn_router": paired(right(final), right("knn-router")),
        "trained_minus_untrained": paired(right(final), right("conductor")),
        "trained_minus_best_single": paired(right(final), right(best_single)),
        "chain_kind": {
            "questions": len(chain_ids),
            "trained_writes_the_chain": round(
                sum(1 for s in chain_shapes if s == CHAIN) / len(chain_ids), 3
            ),
            "trained_shapes": {s or "?": chain_shapes.count(s) for s in set(chain_shapes)},
            "trained_minus_knn_router": paired(
                [bool(correct[final][i]) for i in chain_ids],
                [bool(correct["knn-router"][i]) for i in chain_ids],
            ),
        },
        "learning_curve": curve,
        "training": trained,
        "eval_minutes": eval_minutes,
    }
    if args.plot:
        refs = {
            "untrained conductor": summary["conductor"]["accuracy"],
            "best single worker": summary[best_single]["accuracy"],
            "knn-router": summary["knn-router"]["accuracy"],
        }
        plot_curve(args.plot, curve, refs, len(ids))
    sim.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"held-out: {len(ids)} questions {report['held_out_by_kind']}; simulation")
    print(f"{'strategy':28} {'accuracy':>8} {'95% interval':>15} {'calls':>6}  by kind")
    for s, v in sorted(summary.items(), key=lambda kv: -kv[1]["accuracy"]):
        kinds = " ".join(f"{k} {v['by_kind'].get(k, 0):.2f}" for k in KINDS)
        print(
            f"{s:28} {v['accuracy']:8.3f} [{v['low']:.3f}, {v['high']:.3f}] "
            f"{v['calls_per_question']:6.2f}  {kinds}"
        )
    for key in ("trained_minus_knn_router", "trained_minus_untrained", "trained_minus_best_single"):
        d = report[key]
        print(f"{key}: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
    c = report["chain_kind"]
    print(
        f"chain kind: {final} writes {CHAIN} for {c['trained_writes_the_chain']:.0%}; "
        f"vs knn-router {c['trained_minus_knn_router']}"
    )
    for t in trained:
        print(f"training on {t['training_questions']}: {t}")
    print(f"eval: {eval_minutes} min; files in {root}")


if __name__ == "__main__":
    main()
