"""What a sandboxed two-line program costs, one checkout against another, alternated.

    .venv/bin/python bench/sandbox_cost.py --before DIR --after . [--runs 20]

Each checkout gets a worker process (its own `conductor_cli` on the path) that probes a
Sandbox under the python tool's limits once and then runs the program on each request; the
runs alternate between the two workers, and the medians (and their difference) are printed.
Issue 56's closing note has the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

PROGRAM = "x = sum(range(10))\nprint(x)\n"

WORKER = f"""
import sys, time
from conductor_cli.sandbox import Limits, Sandbox
sandbox = Sandbox(Limits(file_mb=1))
print("ready", flush=True)
for _ in sys.stdin:
    start = time.perf_counter()
    outcome = sandbox.run({PROGRAM!r})
    assert outcome.passed, outcome.output
    print(time.perf_counter() - start, flush=True)
"""


def worker(checkout: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd="/",
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def once(proc: subprocess.Popen[str]) -> float:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    return float(proc.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    procs = {"before": worker(args.before), "after": worker(args.after)}
    times: dict[str, list[float]] = {"before": [], "after": []}
    for i in range(args.runs):
        order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
        for name in order:
            times[name].append(once(procs[name]))
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    before, after = (statistics.median(times[n]) * 1000 for n in ("before", "after"))
    print(f"runs: {args.runs} each, alternated; python {sys.version.split()[0]}")
    for name in ("before", "after"):
        ms = sorted(t * 1000 for t in times[name])
        print(f"{name}: median {statistics.median(ms):.1f} ms (min {ms[0]:.1f}, max {ms[-1]:.1f})")
    print(f"after - before: {after - before:+.1f} ms")


if __name__ == "__main__":
    main()
