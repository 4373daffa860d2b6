"""Learning within a budget, on the SIMULATED specialist pool of bench/prove_learning.py:
held-out accuracy against the worker calls training made, for trying every shape on every
question (`--search all`, the head method until issue 34) and for the adaptive search at
several `--max-calls`; then the cost of adding a fifth worker to a trained four-worker pool
against training the five from scratch.

Run: .venv/bin/python bench/prove_budget.py [--train 160] [--per-question 5,7.5,10]
     [--plot docs/img/budget-curve.png] [--json]

Every training runs in a data and cache dir of its own (no response cache or measured rewards
shared: each one pays for every call it needs), with `--tasks fixed` (the head's shape runs
with the words it was measured with; planning generates nothing, so the eval is quick), on
the same training questions; one `conductor eval` on the same held-out questions compares the
trained conductors with the untrained one, every single worker and `knn-router`.

The pool is a simulation (testing/simulated_pool.py): w0..w3 with identical descriptions, four
specialist kinds and the chain kind that only w0 > w3<0 answers 95 %. The fifth worker w4 is
right 60 % on every kind: adding it changes little, and what it costs is what is measured.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path

from _common import accuracy, conductor, isolated_env, paired, stored_results, temp_root
from prove_learning import CHAIN, KINDS, skills, write_qa

from conductor_cli.testing.simulated_pool import SimulatedPool, make_questions


def train(
    root: Path, sim: SimulatedPool, data: Path, name: str, extra: list[str], workers: int = 4
) -> dict:
    """`conductor train` in a data and cache dir of its own (`root/name`), unless done; its
    record and the calls the simulation received."""
    home = root / name
    env = isolated_env(home)
    env["CONDUCTOR_CONFIG"] = str(pool_config(sim, home / "config.toml", workers))
    record_file = home / "data" / "conductors" / name / "record.json"
    result_file = home / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    calls = sim.calls
    start = time.monotonic()
    conductor(
        ["train", "qa", str(data), "--holdout", "0", "--out", name, "--tasks", "fixed", *extra],
        env,
        f"train {name}",
    )
    result = {
        "record": json.loads(record_file.read_text()),
        "simulation_calls": sim.calls - calls,
        "minutes": round((time.monotonic() - start) / 60, 2),
    }
    result_file.write_text(json.dumps(result))
    return result


def pool_config(sim: SimulatedPool, path: Path, workers: int) -> Path:
    """The simulation's config with its first `workers` workers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sim.config(path)
    text = path.read_text()
    blocks = text.split("[[workers]]")
    path.write_text("[[workers]]".join(blocks[: workers + 1]))
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--held-out", type=int, default=250)
    parser.add_argument("--train", type=int, default=160, help="training questions")
    parser.add_argument(
        "--per-question",
        default="5,7.5,10",
        help="adaptive --max-calls as worker calls a training question",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=None, help="continue the run in this dir")
    args = parser.parse_args()
    root = args.root or temp_root()
    root.mkdir(parents=True, exist_ok=True)
    bank = make_questions(KINDS, args.questions // len(KINDS), seed=args.seed)
    table = skills()
    table["w4"] = {k: 0.6 for k in KINDS}
    port_file = root / "port"
    port = int(port_file.read_text()) if port_file.exists() else 0
    sim = SimulatedPool(bank, table, {"w3": {"chain": ("w0", 0.95)}}, port=port)
    port_file.write_text(sim.api_base.split(":")[2].split("/")[0])
    order = list(bank.values())
    random.Random(args.seed).shuffle(order)
    held, pool = order[: args.held_out], order[args.held_out :]
    training = pool[: args.train]
    data = write_qa(training, root / "train.jsonl")
    held_file = write_qa(held, root / "held.jsonl")
    kind_of = {f"q{q.number}": q.kind for q in bank.values()}
    n = len(training)

    runs: dict[str, dict] = {}
    runs["all"] = train(root, sim, data, "all", ["--search", "all"])
    budgets = [float(b) for b in args.per_question.split(",")]
    for b in budgets:
        name = f"adaptive-{b:g}"
        runs[name] = train(root, sim, data, name, ["--max-calls", str(round(b * n))])
    # A fifth worker: trained on four (the default budget), w4 added, trained again in the
    # same dir (its measured rewards and response cache kept), against five from scratch.
    runs["four"] = train(root, sim, data, "four", [])
    grown_home = root / "grown"
    if not grown_home.exists():
        shutil.copytree(root / "four", grown_home)
        (grown_home / "result.json").unlink()
        src = grown_home / "data" / "conductors" / "four"
        src.rename(src.with_name("grown"))
    runs["grown"] = train(root, sim, data, "grown", ["--force"], workers=5)
    runs["five"] = train(root, sim, data, "five", [], workers=5)

    # One eval of every trained conductor on the held-out questions (4-worker config; the
    # five-worker conductors in a five-worker config).
    evals = {}
    for workers, names in ((4, ["all", *[f"adaptive-{b:g}" for b in budgets], "four"]),
                           (5, ["grown", "five"])):  # fmt: skip
        home = root / f"eval-{workers}"
        env = isolated_env(home)
        env["CONDUCTOR_CONFIG"] = str(pool_config(sim, home / "config.toml", workers))
        target = home / "data" / "conductors"
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            if not (target / name).exists():
                shutil.copytree(root / name / "data" / "conductors" / name, target / name)
        out = home / "eval.json"
        if not out.exists():
            strategies = ["conductor", *[f"conductor:{x}" for x in names], "single", "knn-router"]
            conductor(
                ["eval", "qa", str(held_file), "--strategies", ",".join(strategies),
                 "--quiet", "--json-out", str(out)],
                env,
                f"eval ({workers} workers)",
            )  # fmt: skip
        evals[workers] = (json.loads(out.read_text())["correct"], stored_results(home / "data"))

    ids = [f"q{q.number}" for q in held]
    kinds = [kind_of[i] for i in ids]

    def right(workers: int, strategy: str) -> list[bool]:
        return [bool(evals[workers][0][strategy][i]) for i in ids]

    def shapes(workers: int, strategy: str, kind: str) -> dict[str, int]:
        rows = {r["problem_id"]: r for r in evals[workers][1] if r["strategy"] == strategy}
        out: dict[str, int] = {}
        for i in ids:
            if kind_of[i] == kind:
                s = rows.get(i, {}).get("detail", {}).get("shape", "?")
                out[s] = out.get(s, 0) + 1
        return out

    refs = {}
    for s in evals[4][0]:
        if not s.startswith("conductor:"):
            refs[s] = accuracy(right(4, s), kinds)
    best_single = max(
        (s for s in refs if s.startswith("single:")), key=lambda s: refs[s]["accuracy"]
    )
    summary = {}
    for name, run in runs.items():
        workers = 5 if name in ("grown", "five") else 4
        table_ = run["record"]["reward_table"]
        mine = right(workers, f"conductor:{name}")
        summary[name] = {
            **accuracy(mine, kinds),
            "worker_calls": run["simulation_calls"],
            "calls_per_question": round(run["simulation_calls"] / n, 2),
            "workflow_runs": table_["workflow_runs"],
            "measured_share": table_.get("measured_share", 1.0),
            "training_minutes": run["minutes"],
            "chain_shapes": shapes(workers, f"conductor:{name}", "chain"),
            "minus_knn_router": paired(mine, right(workers, "knn-router")),
            "minus_best_single": paired(mine, right(workers, best_single)),
            "minus_untrained": paired(mine, right(workers, "conductor")),
        }
    report = {
        "simulation": "testing/simulated_pool.py: w0..w3 specialists and the chain kind; w4 60 %",
        "training_questions": n,
        "held_out": len(ids),
        "chain": CHAIN,
        "trained": summary,
        "references": refs,
        "best_single": best_single,
        "adding_a_fifth_worker": {
            "calls_to_train_four": runs["four"]["simulation_calls"],
            "calls_to_add_w4": runs["grown"]["simulation_calls"],
            "calls_to_train_five_from_scratch": runs["five"]["simulation_calls"],
        },
        "root": str(root),
    }
    if args.plot:
        plot(args.plot, summary, refs, best_single, budgets, len(ids))
    sim.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{n} training questions, {len(ids)} held out (a simulation)")
    for name, v in summary.items():
        d = v["minus_knn_router"]
        print(
            f"{name:14} {v['accuracy']:.3f} [{v['low']:.3f}, {v['high']:.3f}] "
            f"calls {v['worker_calls']:5} ({v['calls_per_question']}/q, "
            f"{v['measured_share']:.0%} of the table) - knn {d['difference']:+.3f} "
            f"[{d['low']:+.3f}, {d['high']:+.3f}] chain {v['chain_shapes']}"
        )
    for s, v in refs.items():
        print(f"{s:14} {v['accuracy']:.3f} [{v['low']:.3f}, {v['high']:.3f}]")
    print(json.dumps(report["adding_a_fifth_worker"]))
    print(f"files in {root}")


def plot(
    path: Path, summary: dict, refs: dict, best_single: str, budgets: list[float], n: int
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    names = [f"adaptive-{b:g}" for b in budgets]
    xs = [summary[x]["worker_calls"] for x in names]
    ys = [summary[x]["accuracy"] for x in names]
    err = [[summary[x]["accuracy"] - summary[x]["low"] for x in names],
           [summary[x]["high"] - summary[x]["accuracy"] for x in names]]  # fmt: skip
    ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label="--search adaptive (--max-calls)")
    a = summary["all"]
    ax.errorbar(
        [a["worker_calls"]], [a["accuracy"]],
        yerr=[[a["accuracy"] - a["low"]], [a["high"] - a["accuracy"]]],
        marker="s", capsize=3, linestyle="none", label="--search all (every shape, twice)",
    )  # fmt: skip
    lines = {
        "untrained conductor": refs["conductor"]["accuracy"],
        f"best single ({best_single})": refs[best_single]["accuracy"],
        "knn-router": refs["knn-router"]["accuracy"],
    }
    for label, value in lines.items():
        ax.axhline(value, linestyle="--", color="grey", linewidth=1)
        ax.annotate(label, (xs[0], value), textcoords="offset points", xytext=(2, 2), fontsize=8)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("worker calls in training (log scale)")
    ax.set_ylabel(f"held-out accuracy ({n} questions, 95 % interval)")
    ax.set_title("accuracy against training calls, simulated pool (a simulation)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
