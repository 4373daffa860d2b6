"""Rounds (issue 20), does it scale: held-out accuracy, model calls and rounds used against
max_rounds = 1, 2, 3, 4, of the embedded conductor (SmolLM2-135M) untrained and trained with
`conductor train --rounds 2`, on two pools.

Run: .venv/bin/python bench/rounds_curve.py [--per-kind 5] [--cue 20] [--facts-limit 20]
     [--train-per-kind 6 --train-cue 24] [--facts-train bench/data/facts_train40.jsonl]
     [--repeats 1] [--cost-weight 2] [--facts-cost-weight 0.1]
     [--pools sim,embedded] [--plot docs/img/rounds-curve.png] [--root DIR] [--json]

Trained (when --train-per-kind/--train-cue or --facts-train are given): `conductor train qa
TRAIN --holdout 0 --rounds 2 --cost-weight W --out NAME` on training questions that are not
among the evaluated ones (sim: the next questions of each kind from the same bank; embedded:
bench/data/facts_train40.jsonl, 40 facts of the same three kinds written by us), then the eval
adds `conductor:NAME`, `conductor:NAME@rounds=2..4`. The cost weight is per 1k tokens: a
simulated call is 25 tokens, a SmolLM2 step about 400, hence 2 and 0.1 (a corrective step
costs about 0.05 and 0.04 of the reward either way).

(a) sim: the simulated specialist pool of bench/prove_learning.py (testing/simulated_pool.py: w0..w3
    with identical descriptions; arith, words, geo, logic with one specialist each at 95 %, the
    others 20 %; chain, w0 50 % alone and w3 95 % when it sees w0's attempt) plus the kind "cue",
    a simulation of an answer that says something to whoever reads it: every worker answers a
    cue question right 50 % of the time alone, and its wrong answers, and only those, end in
    "(unsure)"; every worker is a checker that is right 95 % of the time when its prompt holds
    an earlier round's answer (the attachment "answer of round K"). So on cue questions a
    conductor that reads the first answer, keeps the unmarked ones and corrects the "(unsure)"
    ones reaches about 0.5 + 0.5 * 0.95 = 0.975 at about 1.5 worker calls; one that never
    corrects stays at 0.5; one that always corrects gets about 0.95 at 2 worker calls.
(b) embedded: the default config (no config file): SmolLM2-135M-Instruct plans and is the one
    worker, `local`; the questions are bench/data/facts_check20.jsonl (20 short factual
    questions written by us), scored `contains` as in bench/copy_rate.py.

Each pool in its own isolated config, cache and data dir, one user's command:
`conductor eval qa FILE --strategies conductor,conductor@rounds=2,conductor@rounds=3,
conductor@rounds=4` (round 1 of rounds=N, and its earlier rounds, come from the response cache
filled by the smaller N, so the curve is nested: the same first answers throughout). From the
stored per-question results and their traces (DATA_DIR/traces/<id>.json): accuracy with its
Wilson 95 % interval, per kind; mean model calls per question (the conductor's included, cache
hits counted as calls); mean rounds run; for each question that ran a round 2, whether round 1's
answer (the last step's output of the trace's "steps", scored with the dataset's scorer) was
right and what round 2 decided (kept, corrected, failed), and whether the final answer was
right; paired differences with their 95 % intervals (on the cue kind, on all simulated
questions, on the facts): each conductor's rounds N against its own rounds 1, and the trained
conductor against the untrained one at the same rounds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from _common import REPO, accuracy, conductor, isolated_env, paired, stored_results, temp_root
from prove_learning import skills as specialist_skills
from prove_learning import write_qa

from conductor_cli.evals.answers import score_qa
from conductor_cli.evals.strategies import rounds_of as strategy_rounds
from conductor_cli.testing.simulated_pool import (
    ROUND_ANSWER,
    SimulatedPool,
    SimulatedQuestion,
    make_questions,
)

ROUNDS = (1, 2, 3, 4)


def family(name: str) -> list[str]:
    """One conductor (`conductor`, or `conductor:NAME` for a trained one) at max_rounds 1..4."""
    return [name, *(f"{name}@rounds={n}" for n in ROUNDS[1:])]


STRATEGIES = family("conductor")  # the untrained conductor
KINDS = ["arith", "words", "geo", "logic", "chain", "cue"]
FACTS = REPO / "bench" / "data" / "facts_check20.jsonl"


def rounds_of(strategy: str) -> int:
    return strategy_rounds(strategy) or 1


# ------------------------------------------------------------------------------- the pools


def skills() -> dict[str, dict[str, float]]:
    """prove_learning's specialists, each also right half the time alone on cue questions."""
    return {w: {**row, "cue": 0.5} for w, row in specialist_skills().items()}


def helped() -> dict[str, dict[str, tuple[str, float]]]:
    table: dict[str, dict[str, tuple[str, float]]] = {
        w: {"cue": (ROUND_ANSWER, 0.95)} for w in ("w0", "w1", "w2", "w3")
    }
    table["w3"]["chain"] = ("w0", 0.95)
    return table


def sim_questions(
    per_kind: int, cue: int, seed: int, skip: dict[str, int] | None = None
) -> list[SimulatedQuestion]:
    """`per_kind` questions of each of the five kinds of prove_learning, `cue` of the cue kind,
    after the first `skip[kind]` of each (the held-out questions come first, training after)."""
    skip = skip or {}
    most = max(per_kind, cue) + max(skip.values(), default=0)
    bank = make_questions(KINDS, most, seed=seed)
    seen: Counter[str] = Counter()
    count: Counter[str] = Counter()
    chosen = []
    for q in bank.values():
        seen[q.kind] += 1
        if seen[q.kind] <= skip.get(q.kind, 0):
            continue
        if count[q.kind] < (cue if q.kind == "cue" else per_kind):
            count[q.kind] += 1
            chosen.append(q)
    return chosen


def train_rounds(
    env: dict[str, str],
    data: Path,
    name: str,
    args: argparse.Namespace,
    extra: list[str],
    cost_weight: float,
) -> dict:
    """`conductor train qa DATA --holdout 0 --rounds 2 --out NAME`, once (a rerun with --root
    reads the record it left)."""
    record = Path(env["CONDUCTOR_DATA_DIR"]) / "conductors" / name / "record.json"
    if not record.exists():
        start = time.monotonic()
        conductor(
            ["train", "qa", str(data), *extra, "--holdout", "0", "--rounds", str(args.train_rounds),
             "--cost-weight", str(cost_weight), "--repeats", str(args.repeats),
             "--seed", str(args.seed), "--out", name, "--resume"],
            env,
            f"train {name} on {data.name}",
        )  # fmt: skip
        minutes = round((time.monotonic() - start) / 60, 1)
        saved = json.loads(record.read_text(encoding="utf-8"))
        saved["bench_train_minutes"] = minutes
        record.write_text(json.dumps(saved, indent=2), encoding="utf-8")
    saved = json.loads(record.read_text(encoding="utf-8"))
    keep = ("reward_table", "round_table", "hyperparameters", "dataset", "bench_train_minutes")
    out = {k: saved.get(k) for k in keep}
    if out["round_table"]:
        out["round_table"] = {k: v for k, v in out["round_table"].items() if k != "curve"}
    return out


def run_eval(
    env: dict[str, str],
    data: Path,
    root: Path,
    extra: list[str],
    what: str,
    families: list[list[str]],
) -> float:
    start = time.monotonic()
    strategies = [s for f in families for s in f]
    conductor(
        ["eval", "qa", str(data), *extra, "--strategies", ",".join(strategies),
         "--concurrency", "1", "--quiet", "--json-out", str(root / "eval.json")],
        env,
        what,
    )  # fmt: skip
    return round((time.monotonic() - start) / 60, 1)


def first_round(trace: dict) -> str | None:
    """Round 1's answer: the last step's output of the trace's steps (round 1's)."""
    steps = trace.get("steps") or []
    return steps[-1].get("output") if steps else None


def measure(
    root: Path,
    env: dict[str, str],
    ids: list[str],
    kind_of: dict[str, str],
    reference: dict[str, str],
    scorer: str,
    families: list[list[str]],
) -> dict:
    """Every strategy's figures from the eval's JSON, its stored results and their traces."""
    data_dir = Path(env["CONDUCTOR_DATA_DIR"])
    correct = json.loads((root / "eval.json").read_text())["correct"]
    results: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in stored_results(data_dir):
        results[row["strategy"]][row["problem_id"]] = row
    kinds = sorted({kind_of[i] for i in ids}, key=lambda k: ([*KINDS, k].index(k), k))
    anomalies: list[str] = []
    out: dict[str, dict] = {}
    for s in [s for f in families for s in f]:
        ok = [bool(correct[s][i]) for i in ids]
        rows = [results[s].get(i, {}) for i in ids]
        used = [r.get("detail", {}).get("rounds") for r in rows]
        errors = Counter(str(r.get("error"))[:80] for r in rows if r.get("error"))
        entry = {
            **accuracy(ok, [kind_of[i] for i in ids]),
            "calls_per_question": round(sum(r.get("model_calls", 0) for r in rows) / len(ids), 2),
            "rounds_per_question": round(sum(u or 0 for u in used) / len(ids), 2),
            "rounds_used": dict(sorted(Counter(str(u) for u in used).items())),
            **({"errors": dict(errors)} if errors else {}),
        }
        for kind in kinds:
            of = [i for i in ids if kind_of[i] == kind]
            sub = accuracy([bool(correct[s][i]) for i in of], [kind] * len(of))
            entry.setdefault("kind_interval", {})[kind] = [sub["low"], sub["high"]]
        if rounds_of(s) >= 2:
            entry["decisions"] = decisions(s, ids, results, data_dir)
            entry["round_2"] = second_rounds(
                s, ids, kind_of, kinds, reference, scorer, correct, results, data_dir, anomalies
            )
        out[s] = entry
    # Round 2 of every rounds >= 2 should be one run served by the cache: the same decisions.
    for f in families:
        seconds = {s: out[s]["round_2"].pop("by_question") for s in f[1:]}
        for s in f[2:]:
            for i, d in seconds[s].items():
                if seconds[f[1]].get(i) != d:
                    anomalies.append(f"{s} {i}: round 2 {d}, in {f[1]} {seconds[f[1]].get(i)}")
    return {"strategies": out, "anomalies": anomalies, "correct": correct}


def decisions(s: str, ids: list[str], results: dict[str, dict[str, dict]], data_dir: Path) -> dict:
    """How each later round ended, over the questions: {"round 2": {"corrected": 7}, ...}."""
    table: dict[str, Counter] = {f"round {k}": Counter() for k in range(2, rounds_of(s) + 1)}
    for i in ids:
        trace_id = results[s].get(i, {}).get("detail", {}).get("trace")
        path = data_dir / "traces" / f"{trace_id}.json"
        if not trace_id or not path.exists():
            continue
        for r in json.loads(path.read_text(encoding="utf-8")).get("rounds") or []:
            table[f"round {r.get('round')}"][str(r.get("decision") or r.get("status"))] += 1
    return {k: dict(sorted(c.items())) for k, c in table.items()}


def second_rounds(
    s: str,
    ids: list[str],
    kind_of: dict[str, str],
    kinds: list[str],
    reference: dict[str, str],
    scorer: str,
    correct: dict[str, dict[str, bool]],
    results: dict[str, dict[str, dict]],
    data_dir: Path,
    anomalies: list[str],
) -> dict:
    """Per kind (and all): round 2's decisions after a right and after a wrong first answer."""
    table: dict[str, dict[str, Counter]] = {
        k: {"first_right": Counter(), "first_wrong": Counter()} for k in [*kinds, "all"]
    }
    by_question: dict[str, str] = {}
    same_first = 0
    traced = 0
    for i in ids:
        detail = results[s].get(i, {}).get("detail", {})
        trace_id = detail.get("trace")
        path = data_dir / "traces" / f"{trace_id}.json"
        if not trace_id or not path.exists():
            anomalies.append(f"{s} {i}: no trace ({trace_id})")
            continue
        trace = json.loads(path.read_text(encoding="utf-8"))
        first = first_round(trace)
        later = trace.get("rounds") or []
        if detail.get("rounds", 1) >= 2 and not later:
            anomalies.append(f"{s} {i}: detail says {detail.get('rounds')} rounds, trace has none")
        if first is None:
            anomalies.append(f"{s} {i}: round 1 has no output ({trace.get('status')})")
            continue
        traced += 1
        if first == results[s.split("@")[0]].get(i, {}).get("reply"):
            same_first += 1
        if not later:
            continue  # round 2 never started (round 1 failed, or the budget)
        decision = later[0].get("decision") or str(later[0].get("status"))
        by_question[i] = decision
        right_first = score_qa(first, reference[i], scorer)[0]
        side = "first_right" if right_first else "first_wrong"
        final = "final_right" if correct[s][i] else "final_wrong"
        for k in (kind_of[i], "all"):
            table[k][side][decision] += 1
            table[k][side][final] += 1
    summary: dict[str, dict] = {}
    for k, sides in table.items():
        summary[k] = {}
        for side, c in sides.items():
            n = sum(v for d, v in c.items() if not d.startswith("final_"))
            summary[k][side] = {
                "n": n,
                **{d: c[d] for d in ("kept", "corrected", "failed") if c[d]},
                "kept_share": round(c["kept"] / n, 3) if n else None,
                "final_right": c["final_right"],
            }
    summary["round_1_same_as_rounds_1"] = f"{same_first}/{traced}"
    summary["by_question"] = by_question
    return summary


def comparisons(correct: dict[str, dict[str, bool]], families: list[list[str]], ids: list[str],
                tag: str) -> dict:  # fmt: skip
    """Paired differences on `ids`: each family's rounds N against its rounds 1, and the
    trained family against the untrained one at the same rounds."""

    def right(s: str) -> list[bool]:
        return [bool(correct[s][i]) for i in ids]

    out = {}
    for f in families:
        for s in f[1:]:
            out[f"{s} - {f[0]} ({tag})"] = paired(right(s), right(f[0]))
    if len(families) == 2:
        for u, t in zip(*families, strict=True):
            out[f"{t} - {u} ({tag})"] = paired(right(t), right(u))
    return out


# ------------------------------------------------------------------------------ the pools' runs


def sim_pool(args: argparse.Namespace, root: Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    questions = sim_questions(args.per_kind, args.cue, args.seed)
    trained_on = []
    if args.train_per_kind or args.train_cue:
        held = Counter(q.kind for q in questions)
        trained_on = sim_questions(args.train_per_kind, args.train_cue, args.seed, dict(held))
    bank = {q.number: q for q in [*questions, *trained_on]}
    port_file = root / "port"  # the pool's address is part of the eval's key: resume binds it
    port = int(port_file.read_text()) if port_file.exists() else 0
    sim = SimulatedPool(bank, skills(), helped(), port=port)
    port_file.write_text(sim.api_base.split(":")[2].split("/")[0])
    families = [STRATEGIES]
    training = None
    try:
        env = isolated_env(root)
        env["CONDUCTOR_CONFIG"] = str(sim.config(root / "config.toml"))
        if trained_on:
            data = write_qa(trained_on, root / "train.jsonl")
            training = train_rounds(env, data, "sim-rounds", args, [], args.cost_weight)
            training["questions"] = dict(Counter(q.kind for q in trained_on))
            families.append(family("conductor:sim-rounds"))
        data = write_qa(questions, root / "held.jsonl")
        minutes = run_eval(env, data, root, [], f"sim: eval on {len(questions)}", families)
        ids = [f"q{q.number}" for q in questions]
        kind_of = {f"q{q.number}": q.kind for q in questions}
        reference = {f"q{q.number}": q.answer for q in questions}
        figures = measure(root, env, ids, kind_of, reference, "exact", families)
        figures["worker_calls_served"] = sim.calls
    finally:
        sim.close()
    correct = figures.pop("correct")
    cue = [i for i in ids if kind_of[i] == "cue"]
    return {
        "pool": "simulation (testing/simulated_pool.py): w0..w3, the same words, + kind cue",
        "questions": dict(Counter(kind_of[i] for i in ids)),
        "families": families,
        **figures,
        "paired": {
            **comparisons(correct, families, cue, "cue"),
            **comparisons(correct, families, ids, "all"),
        },
        "training": training,
        "eval_minutes": minutes,
        "root": str(root),
    }


def embedded_pool(args: argparse.Namespace, root: Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(x) for x in args.facts.read_text(encoding="utf-8").splitlines() if x]
    rows = rows[: args.facts_limit]
    data = root / "facts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    env = isolated_env(root)  # SmolLM2 alone: the embedded default pool of then
    families = [STRATEGIES]
    training = None
    if args.facts_train is not None:
        extra = ["--scorer", "contains"]
        training = train_rounds(
            env, args.facts_train, "facts-rounds", args, extra, args.facts_cost_weight
        )
        families.append(family("conductor:facts-rounds"))
    minutes = run_eval(
        env, data, root, ["--scorer", "contains"], f"embedded: eval on {len(rows)} facts", families
    )
    ids = [str(r["id"]) for r in rows]
    kind_of = {str(r["id"]): str(r.get("category") or "facts") for r in rows}
    reference = {str(r["id"]): str(r["answer"]) for r in rows}
    figures = measure(root, env, ids, kind_of, reference, "contains", families)
    correct = figures.pop("correct")
    return {
        "pool": "embedded default: SmolLM2-135M-Instruct plans and is the one worker, local",
        "questions": dict(Counter(kind_of.values())),
        "families": families,
        **figures,
        "paired": comparisons(correct, families, ids, "all"),
        "training": training,
        "eval_minutes": minutes,
        "root": str(root),
    }


# ------------------------------------------------------------------------------ the report


def plot(path: Path, report: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    if "sim" in report:
        r = report["sim"]
        panels.append((f"simulated pool, all {sum(r['questions'].values())}", r, None))
        if "cue" in r["questions"]:
            panels.append((f"simulated pool, cue kind ({r['questions']['cue']})", r, "cue"))
    if "embedded" in report:
        r = report["embedded"]
        panels.append((f"embedded pool, {sum(r['questions'].values())} facts", r, None))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), squeeze=False)
    for ax, (title, r, kind) in zip(axes[0], panels, strict=True):
        s = r["strategies"]
        for offset, f in enumerate(r["families"]):
            label = "untrained" if f[0] == "conductor" else f"trained ({f[0].split(':')[1]})"
            xs = [n + 0.05 * (offset - 0.5) for n in ROUNDS]
            if kind is None:
                ys = [s[k]["accuracy"] for k in f]
                lo = [s[k]["low"] for k in f]
                hi = [s[k]["high"] for k in f]
            else:
                ys = [s[k]["by_kind"][kind] for k in f]
                lo = [s[k]["kind_interval"][kind][0] for k in f]
                hi = [s[k]["kind_interval"][kind][1] for k in f]
            err = [
                [y - a for y, a in zip(ys, lo, strict=True)],
                [b - y for y, b in zip(ys, hi, strict=True)],
            ]
            style = "o-" if offset == 0 else "s--"
            ax.errorbar(xs, ys, yerr=err, fmt=style, capsize=3, label=label)
        ax.set_xticks(list(ROUNDS))
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("max_rounds")
        ax.set_title(title, fontsize=9)
        ax.legend(loc="lower right", fontsize=8)
    axes[0][0].set_ylabel("held-out accuracy (95 % interval)")
    fig.suptitle("Rounds: the embedded conductor, untrained and trained (`train --rounds 2`)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def print_pool(name: str, r: dict) -> None:
    print(f"== {name}: {r['pool']}; questions {r['questions']}")
    kinds = list(r["questions"])
    print(
        f"{'strategy':34} {'accuracy':>8} {'95% interval':>15} {'calls':>6} {'rounds':>6}  by kind"
    )
    every = [s for f in r["families"] for s in f]
    for s in every:
        v = r["strategies"][s]
        by = " ".join(f"{k} {v['by_kind'].get(k, 0):.2f}" for k in kinds)
        print(
            f"{s:34} {v['accuracy']:8.3f} [{v['low']:.3f}, {v['high']:.3f}] "
            f"{v['calls_per_question']:6.2f} {v['rounds_per_question']:6.2f}  {by}"
        )
    for s in every:
        v = r["strategies"][s]
        print(
            f"{s}: rounds used {v['rounds_used']}"
            + (f"; errors {v['errors']}" if "errors" in v else "")
        )
    for f in r["families"]:
        for s in f[1:]:
            v = r["strategies"][s]
            same = v["round_2"]["round_1_same_as_rounds_1"]
            print(f"{s}: later rounds {v['decisions']}; round 1 as in rounds=1: {same}")
        # Round 2 is the same run in every rounds >= 2 (the cache): its decisions once, per kind.
        two = r["strategies"][f[1]]["round_2"]
        for k in [k for k in two if k != "round_1_same_as_rounds_1"]:
            parts = []
            for side, label in (("first_right", "round 1 right"), ("first_wrong", "round 1 wrong")):
                d = two[k][side]
                if d["n"]:
                    parts.append(
                        f"{label} {d['n']}: kept {d.get('kept', 0)}, corrected "
                        f"{d.get('corrected', 0)}, failed {d.get('failed', 0)}, "
                        f"then right {d['final_right']}"
                    )
            print(f"  {f[0]}, round 2 on {k}: " + "; ".join(parts))
    for key, d in r["paired"].items():
        print(f"{key}: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
    if r.get("training"):
        print(f"training: {json.dumps(r['training'])}")
    if r.get("worker_calls_served") is not None:
        print(f"simulated worker calls served (this run): {r['worker_calls_served']}")
    if r["anomalies"]:
        print(f"anomalies ({len(r['anomalies'])}): " + "; ".join(r["anomalies"][:20]))
    print(f"eval: {r['eval_minutes']} min; files in {r['root']}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-kind", type=int, default=5, help="sim questions of each old kind")
    parser.add_argument("--cue", type=int, default=10, help="sim questions of the cue kind")
    parser.add_argument("--facts", type=Path, default=FACTS, help="qa file for the embedded pool")
    parser.add_argument("--facts-limit", type=int, default=None, help="only its first N lines")
    parser.add_argument("--train-per-kind", type=int, default=0, help="sim training questions "
                        "of each old kind (0 and --train-cue 0: no trained conductor)")  # fmt: skip
    parser.add_argument("--train-cue", type=int, default=0, help="sim training cue questions")
    parser.add_argument("--facts-train", type=Path, default=None, help="qa file to train the "
                        "embedded pool's conductor on (none: no trained conductor)")  # fmt: skip
    parser.add_argument("--train-rounds", type=int, default=2, help="train --rounds")
    # The cost term is per 1k tokens: a simulated call is 25 tokens, a SmolLM2 step ~400.
    parser.add_argument("--cost-weight", type=float, default=2.0, help="sim: train --cost-weight")
    parser.add_argument("--facts-cost-weight", type=float, default=0.1, help="embedded: the same")
    parser.add_argument("--repeats", type=int, default=2, help="train --repeats")
    parser.add_argument("--pools", default="sim,embedded", help="sim, embedded or both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=None, help="accuracy against max_rounds")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=None, help="continue the run in this dir")
    args = parser.parse_args()
    pools = [p.strip() for p in args.pools.split(",") if p.strip()]
    if not pools or set(pools) - {"sim", "embedded"}:
        sys.exit("--pools: sim, embedded or sim,embedded")
    root = args.root or temp_root()
    root.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    report: dict[str, dict] = {}
    if "sim" in pools:
        report["sim"] = sim_pool(args, root / "sim")
    if "embedded" in pools:
        report["embedded"] = embedded_pool(args, root / "embedded")
    wall = round((time.monotonic() - start) / 60, 1)
    if args.plot:
        plot(args.plot, report)
    if args.json:
        print(json.dumps({**report, "wall_minutes": wall}, indent=2))
        return
    for name, r in report.items():
        print_pool(name, r)
    print(f"wall: {wall} min; files in {root}")


if __name__ == "__main__":
    main()
