"""Rounds (issue 20), does it scale: held-out accuracy, model calls and rounds used against
max_rounds = 1, 2, 3, 4, of the UNTRAINED embedded conductor (SmolLM2-135M), on two pools.

Run: .venv/bin/python bench/rounds_curve.py [--per-kind 5] [--cue 10] [--facts-limit 20]
     [--pools sim,embedded] [--plot docs/img/rounds-curve.png] [--root DIR] [--json]

(a) sim: the simulated specialist pool of bench/prove_learning.py (tests/simulated_pool.py: w0..w3
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
right; the paired difference of rounds=2 against rounds=1 with its 95 % interval (on the cue
kind, on all simulated questions, on the facts).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from _common import REPO, accuracy, conductor, isolated_env, paired, stored_results, temp_root

sys.path.insert(0, str(REPO))

from prove_learning import skills as specialist_skills
from prove_learning import write_qa

from conductor_cli.evals.answers import score_qa
from conductor_cli.evals.strategies import rounds_of as strategy_rounds
from tests.simulated_pool import ROUND_ANSWER, SimulatedPool, SimulatedQuestion, make_questions

ROUNDS = (1, 2, 3, 4)
STRATEGIES = ["conductor", *(f"conductor@rounds={n}" for n in ROUNDS[1:])]
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


def sim_questions(per_kind: int, cue: int, seed: int) -> list[SimulatedQuestion]:
    """`per_kind` questions of each of the five kinds of prove_learning, `cue` of the cue kind."""
    bank = make_questions(KINDS, max(per_kind, cue), seed=seed)
    count: Counter[str] = Counter()
    chosen = []
    for q in bank.values():
        if count[q.kind] < (cue if q.kind == "cue" else per_kind):
            count[q.kind] += 1
            chosen.append(q)
    return chosen


def run_eval(env: dict[str, str], data: Path, root: Path, extra: list[str], what: str) -> float:
    start = time.monotonic()
    conductor(
        ["eval", "qa", str(data), *extra, "--strategies", ",".join(STRATEGIES),
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
    for s in STRATEGIES:
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
    seconds = {s: out[s]["round_2"].pop("by_question") for s in STRATEGIES[1:]}
    for s in STRATEGIES[2:]:
        for i, d in seconds[s].items():
            if seconds[STRATEGIES[1]].get(i) != d:
                anomalies.append(
                    f"{s} {i}: round 2 {d}, in {STRATEGIES[1]} {seconds[STRATEGIES[1]].get(i)}"
                )
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
        if first == results["conductor"].get(i, {}).get("reply"):
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


# ------------------------------------------------------------------------------ the pools' runs


def sim_pool(args: argparse.Namespace, root: Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    questions = sim_questions(args.per_kind, args.cue, args.seed)
    bank = {q.number: q for q in questions}
    port_file = root / "port"  # the pool's address is part of the eval's key: resume binds it
    port = int(port_file.read_text()) if port_file.exists() else 0
    sim = SimulatedPool(bank, skills(), helped(), port=port)
    port_file.write_text(sim.api_base.split(":")[2].split("/")[0])
    try:
        env = isolated_env(root)
        env["CONDUCTOR_CONFIG"] = str(sim.config(root / "config.toml"))
        data = write_qa(questions, root / "held.jsonl")
        minutes = run_eval(env, data, root, [], f"sim: eval on {len(questions)}")
        ids = [f"q{q.number}" for q in questions]
        kind_of = {f"q{q.number}": q.kind for q in questions}
        reference = {f"q{q.number}": q.answer for q in questions}
        figures = measure(root, env, ids, kind_of, reference, "exact")
        figures["worker_calls_served"] = sim.calls
    finally:
        sim.close()
    correct = figures.pop("correct")
    cue = [i for i in ids if kind_of[i] == "cue"]

    def right(s: str, of: list[str]) -> list[bool]:
        return [bool(correct[s][i]) for i in of]

    return {
        "pool": "simulation (tests/simulated_pool.py): w0..w3, identical descriptions, + kind cue",
        "questions": dict(Counter(kind_of[i] for i in ids)),
        **figures,
        "rounds2_minus_rounds1_cue": paired(right(STRATEGIES[1], cue), right("conductor", cue)),
        "rounds2_minus_rounds1_all": paired(right(STRATEGIES[1], ids), right("conductor", ids)),
        "eval_minutes": minutes,
        "root": str(root),
    }


def embedded_pool(args: argparse.Namespace, root: Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(x) for x in args.facts.read_text(encoding="utf-8").splitlines() if x]
    rows = rows[: args.facts_limit]
    data = root / "facts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    env = isolated_env(root)  # no config file: the embedded default pool
    minutes = run_eval(
        env, data, root, ["--scorer", "contains"], f"embedded: eval on {len(rows)} facts"
    )
    ids = [str(r["id"]) for r in rows]
    kind_of = {str(r["id"]): str(r.get("category") or "facts") for r in rows}
    reference = {str(r["id"]): str(r["answer"]) for r in rows}
    figures = measure(root, env, ids, kind_of, reference, "contains")
    correct = figures.pop("correct")

    def right(s: str) -> list[bool]:
        return [bool(correct[s][i]) for i in ids]

    return {
        "pool": "embedded default: SmolLM2-135M-Instruct plans and is the one worker, local",
        "questions": dict(Counter(kind_of.values())),
        **figures,
        "rounds2_minus_rounds1_all": paired(right(STRATEGIES[1]), right("conductor")),
        "eval_minutes": minutes,
        "root": str(root),
    }


# ------------------------------------------------------------------------------ the report


def plot(path: Path, report: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    lines = []
    if "sim" in report:
        s = report["sim"]["strategies"]
        n = sum(report["sim"]["questions"].values())
        lines.append((f"simulated pool, all {n} questions", s, None, "o-"))
        if "cue" in report["sim"]["questions"]:
            n_cue = report["sim"]["questions"]["cue"]
            lines.append((f"simulated pool, cue kind ({n_cue})", s, "cue", "s--"))
    if "embedded" in report:
        n = sum(report["embedded"]["questions"].values())
        lines.append((f"embedded pool, {n} facts", report["embedded"]["strategies"], None, "^-."))
    for offset, (label, s, kind, style) in enumerate(lines):
        xs = [r + 0.04 * (offset - 1) for r in ROUNDS]
        if kind is None:
            ys = [s[k]["accuracy"] for k in STRATEGIES]
            lo = [s[k]["low"] for k in STRATEGIES]
            hi = [s[k]["high"] for k in STRATEGIES]
        else:
            ys = [s[k]["by_kind"][kind] for k in STRATEGIES]
            lo = [s[k]["kind_interval"][kind][0] for k in STRATEGIES]
            hi = [s[k]["kind_interval"][kind][1] for k in STRATEGIES]
        err = [
            [y - a for y, a in zip(ys, lo, strict=True)],
            [b - y for y, b in zip(ys, hi, strict=True)],
        ]
        ax.errorbar(xs, ys, yerr=err, fmt=style, capsize=3, label=label)
    ax.set_xticks(list(ROUNDS))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("max_rounds (conductor@rounds=N)")
    ax.set_ylabel("accuracy (95 % interval)")
    ax.set_title("Rounds with the untrained embedded conductor (simulated pool: a simulation)")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def print_pool(name: str, r: dict) -> None:
    print(f"== {name}: {r['pool']}; questions {r['questions']}")
    kinds = list(r["questions"])
    print(
        f"{'strategy':20} {'accuracy':>8} {'95% interval':>15} {'calls':>6} {'rounds':>6}  by kind"
    )
    for s in STRATEGIES:
        v = r["strategies"][s]
        by = " ".join(f"{k} {v['by_kind'].get(k, 0):.2f}" for k in kinds)
        print(
            f"{s:20} {v['accuracy']:8.3f} [{v['low']:.3f}, {v['high']:.3f}] "
            f"{v['calls_per_question']:6.2f} {v['rounds_per_question']:6.2f}  {by}"
        )
    for s in STRATEGIES:
        v = r["strategies"][s]
        print(
            f"{s}: rounds used {v['rounds_used']}"
            + (f"; errors {v['errors']}" if "errors" in v else "")
        )
    for s in STRATEGIES[1:]:
        v = r["strategies"][s]
        same = v["round_2"]["round_1_same_as_rounds_1"]
        print(f"{s}: later rounds {v['decisions']}; round 1 as in rounds=1: {same}")
    # Round 2 is the same run in every rounds >= 2 (the cache): its decisions once, per kind.
    two = r["strategies"][STRATEGIES[1]]["round_2"]
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
        print(f"  round 2 on {k}: " + "; ".join(parts))
    for key in ("rounds2_minus_rounds1_cue", "rounds2_minus_rounds1_all"):
        if key in r:
            d = r[key]
            print(f"{key}: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
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
