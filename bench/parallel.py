"""Parallel speed-up: three independent steps on a worker that takes 1 s per call, run with the
worker's max_concurrency 4 against the same workflow with max_concurrency 1.

Run: .venv/bin/python bench/parallel.py [--json]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from _common import report

from conductor_cli.backends.base import Completion, Request
from conductor_cli.config.settings import WorkerConfig
from conductor_cli.run.engine import Engine
from conductor_cli.run.pool import Pool, Worker
from conductor_cli.run.workflow import Step, Workflow


@dataclass
class SleepingBackend:
    """Takes `seconds` per call, like a remote model would (a bench stand-in, not a model)."""

    seconds: float = 1.0
    identity: str = "sleeping"
    fingerprint: str = "sleeping"
    supports_grammar: bool = False

    def complete(self, request: Request, on_text: object = None) -> Completion:
        time.sleep(self.seconds)
        return Completion("ok", 1, 1)


def wall(concurrency: int) -> float:
    pool = Pool(
        (Worker(WorkerConfig("w", "sleeping", max_concurrency=concurrency), SleepingBackend()),)
    )
    workflow = Workflow(tuple(Step("w", f"task {i}", ()) for i in range(3)))
    start = time.perf_counter()
    Engine(pool, lambda e: None).run_steps("q", workflow, ())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    serial = wall(1)
    parallel = wall(4)
    speedup = serial / parallel
    report(
        [
            {
                "what": "3 independent 1 s steps, max_concurrency 4",
                "figure": f"{parallel:.2f} s = {speedup:.2f} x faster",
                "reference": f"max_concurrency 1: {serial:.2f} s",
                "target": ">= 2.5 x faster",
                "ok": speedup >= 2.5,
            }
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
