"""A user's own training on a public set, with the defaults (issue 57): `conductor train SET
--limit N` on the embedded default team (no config file, a fresh data dir and cache), then the
trained conductor against each member alone, the fixed program-aided workflow, knn-router, the
oracle over members and the shipped conductor on the set's test items; minutes and calls of
the training, accuracy with Wilson 95 % intervals, the paired differences.

    .venv/bin/python bench/train_own_public.py [--set bbh:word_sorting] [--limit 60]
        [--each N] [--sample 50] [--seed 0] [--root DIR] [--public-from DIR] [--strategies S,S]

`--each N`: train on N training items of each set of a mix (`a+b+c`, `conductor train
--sample N`) instead of the first `--limit`; `--sample` is then test items of each set too.

Training reads the set's training split only (BIG-bench: conductor's fixed 1 in 5), eval its
test split. `--public-from` links an already fetched public folder (DATA_DIR/public) instead of
fetching the packages again. Run alone on an idle machine (llama.cpp).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from _common import CONDUCTOR, stored_results
from public_mix import build, markdown

STRATEGIES = "single,program:coder,knn-router,oracle,conductor"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", default="bbh:word_sorting")
    parser.add_argument("--limit", type=int, default=60, help="training questions")
    parser.add_argument("--each", type=int, help="training items of each set (instead of --limit)")
    parser.add_argument("--sample", type=int, default=50, help="test items (of each set)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="own")
    parser.add_argument("--root", type=Path, default=Path("/tmp/conductor-own-public"))
    parser.add_argument("--public-from", type=Path)
    parser.add_argument("--strategies", default=STRATEGIES, help="besides the trained one")
    args = parser.parse_args()
    data = args.root / "data"
    data.mkdir(parents=True, exist_ok=True)
    if args.public_from and not (data / "public").exists():
        (data / "public").symlink_to(args.public_from.resolve())
    env = {k: v for k, v in os.environ.items() if k != "CONDUCTOR_CONFIG"}
    env |= {
        "CONDUCTOR_DATA_DIR": str(data),
        "CONDUCTOR_CACHE_DIR": str(args.root / "cache"),
        "XDG_CONFIG_HOME": str(args.root / "no-config"),  # the embedded default
        "CONDUCTOR_SERVER_AUTO": "0",
    }
    record_file = data / "conductors" / args.name / "record.json"
    if not record_file.exists():
        start = time.monotonic()
        command = [CONDUCTOR, "train", args.set, "--out", args.name]
        command += ["--sample", str(args.each)] if args.each else ["--limit", str(args.limit)]
        subprocess.run(command, env=env, check=True)
        print(f"training: {(time.monotonic() - start) / 60:.1f} min wall")
    record = json.loads(record_file.read_text(encoding="utf-8"))
    before, after = record["evaluations"]
    print(
        f"training record: {record['wall_seconds'] / 60:.1f} min, {record['worker_calls']} worker "
        f"calls; its held-out ({after['n']}): untrained {before['accuracy']}, trained "
        f"{after['accuracy']}; the trained head's shapes {after['shapes']}"
    )
    team = f"conductor:{args.name}"
    command = [CONDUCTOR, "eval", args.set, "--sample", str(args.sample), "--seed", str(args.seed)]
    command += ["--strategies", f"{team},{args.strategies}"]
    subprocess.run([*command, "--json-out", str(args.root / "eval.json")], env=env, check=True)
    print(markdown(build(stored_results(data), team)))


if __name__ == "__main__":
    main()
