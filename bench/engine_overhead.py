"""Engine overhead per step: the time from a step's dependencies finishing (or the run
starting) to its model call starting, with instant in-process workers, against calling the
backend directly. Run: .venv/bin/python bench/engine_overhead.py [--runs 50]"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field

from _common import report

from conductor_cli.backends.base import Completion, Request
from conductor_cli.config.settings import WorkerConfig
from conductor_cli.run.engine import Engine
from conductor_cli.run.events import StepFinished
from conductor_cli.run.pool import Pool, Worker
from conductor_cli.run.workflow import Step, Workflow


@dataclass
class InstantBackend:
    """Answers at once and records when each call began (a bench stand-in, not a model)."""

    calls: dict[str, float] = field(default_factory=dict)  # task -> when its call began
    identity: str = "instant"
    fingerprint: str = "instant"
    supports_grammar: bool = False

    def complete(self, request: Request, on_text: object = None) -> Completion:
        began = time.perf_counter()
        self.calls[request.messages[-1]["content"].rsplit("Your task: ", 1)[-1]] = began
        return Completion("ok", 1, 1)


# 6 steps: a fan-out of 3, then a join, then a chain of 2.
SHAPE = [(), (), (), (0, 1, 2), (3,), (4,)]


def one_run() -> list[float]:
    backend = InstantBackend()
    pool = Pool((Worker(WorkerConfig("w", "instant", max_concurrency=8), backend),))
    workflow = Workflow(tuple(Step("w", f"task {i}", sees) for i, sees in enumerate(SHAPE)))
    finished: dict[int, float] = {}

    def on_event(event: object) -> None:
        if isinstance(event, StepFinished):
            finished[event.index] = time.perf_counter()

    start = time.perf_counter()
    Engine(pool, on_event).run_steps("q", workflow, ())
    waits = []
    for i, sees in enumerate(SHAPE):
        ready = max((finished[j] for j in sees), default=start)
        waits.append(backend.calls[f"task {i}"] - ready)
    return waits


def direct_call() -> float:
    backend = InstantBackend()
    request = Request(({"role": "user", "content": "q"},), 1, 0.0, 0)
    start = time.perf_counter()
    backend.complete(request)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    waits = [w for _ in range(args.runs) for w in one_run()]
    direct = [direct_call() for _ in range(args.runs * 6)]
    med, p90 = statistics.median(waits), statistics.quantiles(waits, n=10)[-1]
    report(
        [
            {
                "what": f"engine overhead per step, 6-step DAG, instant workers "
                f"({len(waits)} steps)",
                "figure": f"median {med * 1e3:.3f} ms, p90 {p90 * 1e3:.3f} ms",
                "reference": f"a direct backend call: {statistics.median(direct) * 1e3:.4f} ms",
                "target": "<= 5 ms median",
                "ok": med <= 0.005,
            }
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
