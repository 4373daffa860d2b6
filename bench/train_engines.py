"""GRPO on our own loop (`--engine ours`) against TRL's GRPOTrainer (`--engine trl`), in one
process and in two (`--processes 2`, CPU processes over gloo), on the simulated specialist
pool of bench/train_lora.py (a simulation: testing/simulated_pool.py) with the embedded
SmolLM2 conductor: the same questions, split, steps and samples for each, through the real CLI.

For each it prints the wall time of the whole training (sampling in llama.cpp, fitting in
torch, the export check and the same held-out evaluation), the mean reward of the sampled
workflows step by step, the held-out accuracy after, and the worker calls.

Run: .venv/bin/python bench/train_engines.py [--steps 6] [--samples 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import CONDUCTOR, isolated_env, temp_root
from train_head import KINDS, skills, write

from conductor_cli.testing.simulated_pool import SimulatedPool, make_questions

ENGINES = {
    "ours, 1 process": ["--engine", "ours"],
    "trl, 1 process": ["--engine", "trl"],
    "trl, 2 processes": ["--engine", "trl", "--processes", "2"],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--questions-per-step", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = temp_root()
    bank = make_questions(KINDS, args.questions // len(KINDS) + 1, seed=args.seed)
    sim = SimulatedPool(bank, skills(), {"w3": {"chain": ("w0", 0.95)}})
    try:
        config = sim.config(root / "sim.toml")
        # One llama.cpp thread a process: the two-process row must not oversubscribe 2 cores.
        text = config.read_text().replace("[conductor]\n", "[conductor]\nn_threads = 1\n", 1)
        config.write_text(text)
        data = write(list(bank.values())[: args.questions], root / "data.jsonl")
        rows = []
        for label, extra in ENGINES.items():
            env = isolated_env(root / label.replace(" ", "-").replace(",", ""), None)
            command = [
                CONDUCTOR, "train", "qa", str(data), "--config", str(config),
                "--out", "bench", "--method", "grpo", "--steps", str(args.steps),
                "--samples", str(args.samples), "--questions-per-step",
                str(args.questions_per_step), "--repeats", "1", "--holdout", "0.5",
                "--eval-every", str(args.steps), "--seed", str(args.seed), "--json", *extra,
            ]  # fmt: skip
            start = time.perf_counter()
            proc = subprocess.run(command, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                sys.exit(f"{label}: exit {proc.returncode}: {proc.stderr[-2000:]}")
            record = json.loads(proc.stdout)
            curve = record["curve"]
            held = curve[-1].get("held_out") or {}
            rows.append(
                {
                    "engine": label,
                    "wall_s": round(wall, 1),
                    "per_step_s": round(wall / args.steps, 1),
                    "rewards": [e["mean_reward"] for e in curve],
                    "held_out_accuracy": held.get("accuracy"),
                    "held_out_n": held.get("n"),
                    "worker_calls": record["cost"]["worker_calls"],
                }
            )
    finally:
        sim.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"GRPO, {args.steps} steps x {args.questions_per_step} questions x {args.samples} "
        f"samples, simulated pool, SmolLM2 conductor (whole trainings, wall time incl. the "
        "export check and the held-out evaluation)"
    )
    for r in rows:
        print(
            f"  {r['engine']:18} {r['wall_s']:7.1f} s ({r['per_step_s']:.1f} s a step), "
            f"held-out {r['held_out_accuracy']} of {r['held_out_n']}, "
            f"rewards {r['rewards']}, {r['worker_calls']} worker calls"
        )


if __name__ == "__main__":
    main()
