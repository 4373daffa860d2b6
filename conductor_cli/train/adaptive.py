"""The adaptive search's loop (`conductor train --search adaptive`, the default): once every worker
has run alone on every training question, batch after batch of the shapes worth measuring next
(explore.next_batch), until the budget is spent or every question is settled.

For the step policy the search buys only the checks and joins the policy could make
(step_head.beyond_drafts) and those that runs near a question have shown better than the best
worker alone there (those that do not read a question's best answerer alone drawn from what the
compositions near it have shown: step_head.lesser_prior); it measures again a composition
estimated best on few runs, and one of a question's two best estimates while they are not yet
apart (explore.confirm); and it spends a share of the budget (step_head.EXPLORE_SHARE) trying
workers as drafts and inputs they were not chosen for (step_head.explore_inputs): a worker wrong
alone but right to read is found only that way. That share is paced, a share of what the search
has spent so far, so that its readers are drawn from what the later runs show (a judge is proven
on one kind of question only once the main search has found it there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from conductor_cli.train.explore import (
    MIN_GAIN,
    Near,
    Observations,
    confirm,
    estimates,
    next_batch,
)
from conductor_cli.train.step_fit import (
    EXPLORE_SHARE,
    ShapeIndex,
    beyond_drafts,
    explore_inputs,
    lesser_prior,
)

Jobs = list[tuple[int, int]]  # (training question, shape)


@dataclass
class Spent:
    """What the loop bought beyond the exploitation: calls priced for input exploration, and
    the share of the budget it was allowed."""

    explore_calls: int = 0
    explore_budget: int = 0
    explore_jobs: int = 0


def _beyond(obs: Observations, near: np.ndarray, index: ShapeIndex, floor: float) -> np.ndarray:
    """(n, S) the checks and joins the step policy's search does not buy at each question:
    those beyond its drafts (step_head.beyond_drafts), unless runs in the neighbourhood have
    shown the check or join better than the best worker alone there (a draft found by
    explore_inputs, confirmed or refuted by the runs this opens)."""
    seen = Near.of(obs, near, floor)
    counts, mean = seen.runs, seen.mean
    single = mean[:, index.single].max(axis=1, keepdims=True)
    beyond = beyond_drafts(index, estimates(obs, near, floor)[:, index.single], mean.shape[1])
    composite = np.ones(mean.shape[1], dtype=bool)
    composite[index.single] = False
    return beyond & ~(composite & (counts > 0) & (mean > single + MIN_GAIN))


def search(
    obs: Observations,
    near: np.ndarray,
    calls: Sequence[int],
    left: Callable[[], int],
    measure: Callable[[Jobs], None],
    stopped: Callable[[], bool],
    rng: np.random.Generator,
    batch: int,
    closed: np.ndarray,
    index: ShapeIndex | None = None,
    *,
    floor: float = 0.0,
    tools: Sequence[int] = (),
) -> Spent:
    """Measure batch after batch; `left()`: the calls the budget still allows, `measure(jobs)`
    adds each job's reward to `obs`, `closed` (n, S): pairs never to buy (settled by an
    earlier training). Returns what input exploration spent."""
    spent = Spent()
    steps = index is not None
    start = max(0, left())
    if index is not None:
        spent.explore_budget = int(EXPLORE_SHARE * start)
        composite = np.ones(obs.sums.shape[1], dtype=bool)
        composite[index.single] = False
    while not stopped():
        jobs: Jobs = []
        shut = closed
        if index is not None:
            shut = closed | _beyond(obs, near, index, floor)
            jobs = confirm(obs, near, calls, left(), batch, composite, closed, floor)
        cost = sum(calls[s] for _, s in jobs)
        prior = None if index is None else lesser_prior(obs, near, index, floor)
        drawn = next_batch(
            obs, near, calls, left() - cost, rng, batch, shut, floor=floor, per_call=steps,
            prior=prior,
        )  # fmt: skip
        jobs += [job for job in drawn if job not in jobs]
        cost = sum(calls[s] for _, s in jobs)
        extra: Jobs = []
        if index is not None and spent.explore_calls < spent.explore_budget:
            taken = set(jobs)
            room = min(spent.explore_budget - spent.explore_calls, left() - cost)
            if jobs:  # paced: EXPLORE_SHARE of what the search has spent so far, this batch too
                paced = EXPLORE_SHARE * (start - left() + cost) - spent.explore_calls
                room = min(room, int(paced / (1.0 - EXPLORE_SHARE)) + 1)
            drawn = explore_inputs(
                obs, near, index, calls, room, rng, batch, floor=floor, tools=tools
            )
            extra = [job for job in drawn if job not in taken]
            spent.explore_calls += sum(calls[s] for _, s in extra)
            spent.explore_jobs += len(extra)
        if not jobs and not extra:
            break
        measure(jobs + extra)
    return spent
