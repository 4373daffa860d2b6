"""A step-by-step policy over workers as vectors: the head for pools too large for one score per
workflow shape (`conductor train --policy steps`; `auto` takes it beyond head.MAX_SHAPES).

A worker is five vectors over the question's inputs (the PCA-reduced hidden state of the
planning prompt, as for the shape head): its score as the one who answers, as the one who
checks the answer before it (and sees it), as the judge of two independent answers (it sees
both), and what it gives when seen: as the draft a checker reads, as one of the two inputs a
judge reads (a tool or a partial worker, wrong alone, can be the best input). They start as
ridge regressions of the worker's measured rewards in each role (a worker is described by its
results, not by its slot), and three gate vectors shared by every worker weigh the moves.
Planning goes step by step: the move whose best continuation scores highest: the best answerer
alone, the best draft checked by the best checker, or the two best inputs read by the best
judge. Each choice is an argmax over the workers, so the policy has 5(k + 1) weights a worker
plus 3(k + 1): its size and its cost grow linearly with the pool, where the shape head's grow
with the number of shapes (n + n² + n²(n - 1)/2 with joins).

The search that measures its rewards (adaptive.search) buys the checks and joins of the best
answerers (those of the lesser ones drawn from what the compositions near the question showed:
lesser_prior), and spends a share of the budget (EXPLORE_SHARE, paced over the search) on readers
and drafts chosen by what workers were seen to add (explore_inputs, RoleLifts), so that a
worker whose value is what it gives to another step is tried in that role.

The gates are then evolved by sep-CMA-ES on the reward table (measured where measured,
estimated elsewhere), kept only where a 2-fold cross-validation prefers them to zero gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from conductor_cli.policy.shapes import Shape
from conductor_cli.policy.step_head import Plan, StepWeights, plan
from conductor_cli.train.explore import Near, Observations, right_runs
from conductor_cli.train.head_evolution import CV_MARGIN, GENERATIONS, search

# The gates' evolution step size, as a share of the regressions' spread: they start from a
# good ranking within each role, and larger steps only scatter it.
SIGMA = 0.1
# Whom checks and joins start from, at each question: checks of the FIRSTS workers best alone,
# joins of two of the PAIRS_OF best (one spare each: the estimates of workers nearly tied alone
# are noise). The search buys only these (beyond_drafts); the regressions score each checker
# and judge on them.
FIRSTS = 2
PAIRS_OF = 3
# The regressions' penalty, as a share of the inputs' mean variance (head.ridge's).
RIDGE = 1e-2
# How far under its estimate a shape measured on few runs counts when what a worker gives is
# its best shape (gives): one run, 0.18 under; four, 0.11; sixteen, 0.06.
GIVE_DOUBT = 0.25
# How many runs what a worker was seen to add in a role weighs as the prior of a draw
# (explore_inputs), and how much more a tool starts with as a draft or an input.
READ_PRIOR = 2.0
TOOL_LIFT = 0.25
# The prior of a worker never seen as a draft or an input: above one seen to add nothing (0.5),
# so that every worker is read at least once where a composition could help.
UNSEEN = 0.8
# At most how many runs what a reader was seen to add weighs when it is drawn.
READER_RUNS = 20.0
# The share of the reward calls left after the single runs that explore_inputs may spend:
# checks and joins of workers as inputs they were not chosen for, the floor for a worker never
# seen as one; spent as the search goes, never more than this share of what it has spent so
# far (adaptive.search). Measured on bench/prove_eight.py, with and without --partial
# (docs/train.md).
EXPLORE_SHARE = 0.3
# A question has room for a composition while its best shape is estimated at most this (on
# the 0-1 scale from a wrong answer to a right one).
ROOM = 0.8
# How many runs the record of the compositions measured near a question weighs as the prior of
# a check or join there that does not read its best answerer alone (lesser_prior). On a numpy
# copy of bench/prove_eight.py (200 seeds, docs/train.md) 6 and 10 did alike, and better than
# 0 (a uniform prior) with the partial workers; a prior on every check and join lost the chain
# kind's.
LESSER_RUNS = 10.0


@dataclass(frozen=True)
class ShapeIndex:
    """Where each shape the policy can make sits among the table's columns (-1: absent)."""

    single: np.ndarray  # (n,)
    chain: np.ndarray  # (n, n): first, checker
    join: np.ndarray  # (n, n, n): lower, higher (pool order), judge
    moves: int

    @classmethod
    def of(cls, shapes: Sequence[Shape], workers: Sequence[str]) -> ShapeIndex:
        at = {w: i for i, w in enumerate(workers)}
        n = len(workers)
        single = np.full(n, -1)
        chain = np.full((n, n), -1)
        join = np.full((n, n, n), -1)
        for s, shape in enumerate(shapes):
            ix = tuple(at[w] for w in shape.workers)
            if shape.sees == ((),):
                single[ix] = s
            elif shape.sees == ((), (0,)):
                chain[ix] = s
            elif shape.sees == ((), (), (0, 1)):
                join[ix] = s
        if (single < 0).any():
            raise ValueError("the step policy needs every worker's single shape")
        moves = 3 if (join >= 0).any() else 2 if (chain >= 0).any() else 1
        return cls(single, chain, join, moves)

    def columns(self, p: Plan) -> np.ndarray:
        """The table column of each row's plan; a plan the table lacks scores as its answerer
        alone (it cannot arise from shapes.candidate lists, which hold every one)."""
        lo = np.minimum(p.left, p.right)
        hi = np.maximum(p.left, p.right)
        cols = np.select(
            [p.move == 0, p.move == 1],
            [self.single[p.first], self.chain[p.draft, p.checker]],
            self.join[lo, hi, p.judge],
        )
        return np.where(cols >= 0, cols, self.single[p.first])

    def readers(self, shapes: int) -> np.ndarray:
        """(S,) the worker that reads the others in each check or join (its last step), -1 for
        a worker alone and a shape the policy cannot make."""
        reader = np.full(shapes, -1)
        for c in range(len(self.single)):
            reader[self.chain[:, c][self.chain[:, c] >= 0]] = c
            reader[self.join[:, :, c][self.join[:, :, c] >= 0]] = c
        return reader

    def drafts(self, shapes: int) -> np.ndarray:
        """(n, S) True where a shape's reader reads that worker (a check's draft, either of a
        join's inputs)."""
        n = len(self.single)
        columns = np.hstack([self.chain, self.pairs().reshape(n, -1)])  # per draft or input
        reads = np.zeros((n, shapes), dtype=bool)
        rows = np.broadcast_to(np.arange(n)[:, None], columns.shape)
        there = columns >= 0
        reads[rows[there], columns[there]] = True
        return reads

    def pairs(self) -> np.ndarray:
        """(n, n, n): the join of inputs a and b (either order) judged by j, -1 where the table
        lacks it (a worker is never both inputs)."""
        n = len(self.single)
        a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        full = self.join[np.minimum(a, b), np.maximum(a, b)]
        full[a == b] = -1
        return full


def fit_steps(
    inputs: np.ndarray,
    rewards: np.ndarray,
    shapes: Sequence[Shape],
    workers: Sequence[str],
    *,
    seed: int,
    generations: int = GENERATIONS,
    on_generation: Any = None,
    support: np.ndarray | None = None,
) -> tuple[StepWeights, int]:
    """(weights, open moves) maximizing the mean reward of the shapes `plan` makes on (N, k + 1)
    `inputs`, from the (N, S) `rewards` of `shapes` (measured, or estimated where not; `support`:
    the runs each estimate rests on, see `gives`)."""
    index = ShapeIndex.of(shapes, workers)
    width = inputs.shape[1]

    def fit(rows: np.ndarray, evolve: bool, report: Any = None) -> StepWeights:
        held = None if support is None else support[rows]
        start = regressions(inputs[rows], rewards[rows], index, held)
        if not evolve:
            return start

        def pick(gates: np.ndarray, x: np.ndarray) -> np.ndarray:
            w = replace(start, gates=gates.reshape(3, width))
            return index.columns(plan(x, w, index.moves))

        # Only the gates evolve (3(k + 1) weights, whatever the pool): the regressions rank the
        # workers within each role; what they predict less well is how the roles compare.
        sigma = SIGMA * (float(start.flat().std()) or 1.0)
        gates = search(
            start.gates.ravel(), pick, inputs[rows], rewards[rows], seed, generations, report,
            sigma=sigma,
        )  # fmt: skip
        return replace(start, gates=gates.reshape(3, width))

    def score(w: StepWeights, rows: np.ndarray) -> float:
        return float(rewards[rows, index.columns(plan(inputs[rows], w, index.moves))].mean())

    evolve = True
    count = inputs.shape[0]
    if count >= 4:
        order = np.random.default_rng(seed).permutation(count)
        folds = (order[: count // 2], order[count // 2 :])
        cv = {e: sum(score(fit(folds[1 - f], e), folds[f]) for f in (0, 1)) for e in (False, True)}
        evolve = cv[True] > cv[False] + 2 * CV_MARGIN
    return fit(np.arange(count), evolve, on_generation), index.moves


def regressions(
    inputs: np.ndarray,
    rewards: np.ndarray,
    index: ShapeIndex,
    support: np.ndarray | None = None,
) -> StepWeights:
    """Each worker's vectors as ridge regressions of its rewards in each role on the inputs: as
    the one who answers, its runs alone; as a draft, its best check by anyone; as an input, its
    best join with anyone by anyone, over what the judge gets checking the other input alone
    (what it gives when seen, `gives`: a worker wrong alone can be the best input); as the
    checker, its best check of the two best alone or the two best drafts at that question; as
    the judge, its best join of two of the best three alone or of the best three inputs (what
    the search buys: beyond_drafts, explore_inputs). The best, not
    the first: between workers nearly tied, which one the table puts first is noise, and a
    judge must not be scored on the pairs it never saw. The gates start at zero: each move's
    score is then its predicted reward."""
    x = inputs
    answer = regress(x, rewards[:, index.single])
    none = np.zeros_like(answer)  # a move that is not open: plan never takes it
    give_check, give_join = gives(index, rewards, support)
    alone = rewards[:, index.single]
    checks, joins = (
        a + b
        for a, b in zip(
            _drafts(index, alone, alone), _drafts(index, give_check, give_join), strict=True
        )
    )
    check = draft = judge = feed = none
    if index.moves >= 2:
        check, draft = _best(x, rewards, checks), regress(x, give_check)
    if index.moves >= 3:
        judge, feed = _best(x, rewards, joins), regress(x, give_join)
    return StepWeights(answer, check, judge, np.zeros((3, x.shape[1])), draft, feed)


def gives(
    index: ShapeIndex, rewards: np.ndarray, support: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(N, n) twice: what each worker gives when seen, at each question of the (N, S) rewards:
    how much it raised the reward of the step that read it, at best: as the draft of a check
    (the check's reward less its checker's own answer alone at that question), as one of the
    two inputs of a join (less its judge's alone, and less what its judge gains checking the
    other input alone); -1 where it is in none. A lucky judge right whatever it read credits
    its inputs nothing. `support` (N, S): the runs each estimate rests on; given, each shape
    counts at a lower bound (GIVE_DOUBT / sqrt(1 + runs) under its estimate), so that the best
    of many shapes each measured once (one lucky run among them) does not outrank a shape
    measured right again and again."""
    count, n = rewards.shape[0], len(index.single)
    reader = index.readers(rewards.shape[1])
    alone = rewards[:, index.single]
    lifted = rewards - np.where(reader >= 0, alone[:, np.maximum(reader, 0)], 0.0)
    if support is not None:
        lifted = lifted - GIVE_DOUBT / np.sqrt(1.0 + support)

    def best(columns: np.ndarray, owed: np.ndarray | float = 0.0) -> np.ndarray:
        """(n, m) columns -> (N, n); `owed` (N, 1, m): what each shape's lift owes others."""
        if columns.size == 0 or count == 0:
            return np.full((count, n), -1.0)
        values = np.where(columns >= 0, lifted[:, np.maximum(columns, 0)] - owed, -1.0)
        return values.max(axis=2)

    give_check = best(index.chain) if index.moves >= 2 else np.full((count, n), -1.0)
    if index.moves < 3:
        return give_check, give_check
    # An input is credited with what its judge did not get from checking the other input alone:
    # w3 right reading w0 and anyone owes it to w0, and the anyone must not be ranked as an
    # input beside it.
    checked = np.where(index.chain >= 0, rewards[:, np.maximum(index.chain, 0)], -np.inf)
    owed = np.maximum(checked - alone[:, None, :], 0.0)  # (N, other input, judge)
    # index.pairs() is (input, other input, judge): a row's columns run over (other, judge).
    return give_check, best(index.pairs().reshape(n, -1), owed.reshape(count, 1, n * n))


def _drafts(
    index: ShapeIndex, check_by: np.ndarray, join_by: np.ndarray
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The checks and the joins each question may start from: checks of the FIRSTS best by
    `check_by` (N, n), joins of two of the PAIRS_OF best by `join_by`: lists of (N, n) table
    columns, one entry a worker as the checker or judge (-1 where the table lacks the
    shape)."""
    order = np.argsort(-check_by, axis=1, kind="stable")
    checks = [index.chain[order[:, i]] for i in range(min(FIRSTS, order.shape[1]))]
    top = np.argsort(-join_by, axis=1, kind="stable")[:, :PAIRS_OF]
    joins = [
        index.join[np.minimum(top[:, i], top[:, j]), np.maximum(top[:, i], top[:, j])]
        for i in range(top.shape[1])
        for j in range(i + 1, top.shape[1])
    ]
    return checks, joins


def _best(x: np.ndarray, rewards: np.ndarray, options: list[np.ndarray]) -> np.ndarray:
    """(n, k + 1): a regression of each worker's best reward over `options`, each (N, n) table
    columns of the shapes it could be in at each question; -1 (a shape the table lacks) counts
    as the lowest reward in it."""
    rows = np.arange(x.shape[0])[:, None]
    floor = rewards.min()
    values = [np.where(c >= 0, rewards[rows, np.maximum(c, 0)], floor) for c in options]
    return regress(x, np.max(values, axis=0))


def regress(x: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(T, k + 1): a ridge regression of each of the (N, T) `targets` on the (N, k + 1) inputs
    (column 0 the constant 1) with the intercept not shrunk: the roles' predictions are
    compared with each other, so their level must be the data's (head.ridge shrinks the
    intercept, which an argmax within one role forgives). The penalty is head.ridge's, on the
    PCA's own scale: the minor components, mostly noise, stay small."""
    z = x[:, 1:]
    mean = z.mean(axis=0)
    zc = z - mean
    level = targets.mean(axis=0)
    gram = zc.T @ zc
    # A floor: questions whose inputs are all alike leave nothing to fit but the level.
    scale = max(float(np.trace(gram)) / max(1, gram.shape[0]), 1e-9)
    penalty = RIDGE * scale * np.eye(gram.shape[0])
    slopes = np.linalg.solve(gram + penalty, zc.T @ (targets - level))
    return np.vstack([level - mean @ slopes, slopes]).T


def beyond_drafts(index: ShapeIndex, answers: np.ndarray, shapes: int) -> np.ndarray:
    """(N, S) True where a chain or a join starts from answers the policy would not take at
    that question (by `answers` (N, n), each worker's estimate alone): the search buys the
    checks and joins of FIRSTS and PAIRS_OF there. A draft poor alone but good to read is
    found by explore_inputs instead, and its shapes opened once they prove right
    (adaptive.search)."""
    count = answers.shape[0]
    closed = np.zeros((count, shapes), dtype=bool)
    closed[:, index.chain[index.chain >= 0]] = True
    closed[:, index.join[index.join >= 0]] = True
    checks, joins = _drafts(index, answers, answers)
    rows = np.broadcast_to(np.arange(count)[:, None], (count, len(index.single)))
    for cols in checks + joins:
        there = cols >= 0
        closed[rows[there], cols[there]] = False
    return closed


def lesser_prior(
    obs: Observations, near: np.ndarray, index: ShapeIndex, floor: float
) -> tuple[np.ndarray, np.ndarray]:
    """(runs (N, S), rate (N, 1)): the prior of the search's Thompson draws (explore.next_batch).
    A check or join that does not read a question's best answerer alone starts from LESSER_RUNS
    runs at the share of right runs among the compositions measured near the question (one
    right and one wrong pseudo-run besides); the others from a uniform prior. Where the
    compositions tried near a question have failed, its lesser drafts are not worth a run of
    every reader: the calls go to the best answerer's checks and joins, and a judge reading
    the two best is found sooner, and proven as a judge for input exploration (docs/train.md:
    on the numpy copy, the join kind's composition first right in batch 8.5 instead of 13.5)."""
    seen = Near.of(obs, near, floor)
    composite = index.readers(obs.sums.shape[1]) >= 0
    rate = (seen.right[:, composite].sum(axis=1) + 1.0) / (
        seen.runs[:, composite].sum(axis=1) + 2.0
    )
    best = seen.mean[:, index.single].argmax(axis=1)
    lesser = composite & ~index.drafts(obs.sums.shape[1])[best]
    return np.where(lesser, LESSER_RUNS, 0.0), rate[:, None]


@dataclass(frozen=True)
class RoleLifts:
    """(n,) per role: the mean lift of a worker's best shape in it over every question, best
    at a lower bound (None where it was never seen in the role). A lift is a check's or join's
    reward less its reader's (the checker's, the judge's) own answer alone at the same
    question: what seeing the drafts added. The reader's roles are credited with it, and so
    are the drafts'."""

    checker: list[tuple[float, float] | None]  # (lift, runs of the shape it was seen in)
    judge: list[tuple[float, float] | None]
    draft: list[tuple[float, float] | None]
    feed: list[tuple[float, float] | None]

    @classmethod
    def of(cls, obs: Observations, index: ShapeIndex, floor: float) -> RoleLifts:
        right = right_runs(obs.sums, obs.counts, floor)
        with np.errstate(invalid="ignore", divide="ignore"):
            alone = np.nan_to_num(right[:, index.single] / obs.counts[:, index.single])
        n = len(index.single)
        reader = index.readers(obs.sums.shape[1])
        runs = obs.counts.sum(axis=0)
        lift = np.zeros(obs.sums.shape[1])
        seen = (reader >= 0) & (runs > 0)
        cols = np.flatnonzero(seen)
        base = (alone[:, reader[cols]] * obs.counts[:, cols]).sum(axis=0)
        # One run of no lift shrinks a shape run once: one lucky run is not a worker's worth.
        lift[cols] = (right[:, cols].sum(axis=0) - base) / (runs[cols] + 1.0)
        # A worker's best shape is the best at a lower bound (as in `gives`): among the many
        # shapes a reader was seen in once, one is lucky, and would outrank the one it was
        # seen to lift again and again.
        sure = lift - GIVE_DOUBT / np.sqrt(1.0 + runs)

        def best(columns: np.ndarray) -> list[tuple[float, float] | None]:  # per worker
            out: list[tuple[float, float] | None] = []
            for row in columns:
                there = row[(row >= 0)]
                there = there[seen[there]]
                top = there[np.argmax(sure[there])] if there.size else -1
                out.append((float(lift[top]), float(runs[top])) if top >= 0 else None)
            return out

        pairs = index.pairs().reshape(n, -1)
        return cls(
            checker=best(index.chain.T),
            judge=best(index.join.transpose(2, 0, 1).reshape(n, -1)),
            draft=best(index.chain),
            feed=best(pairs),
        )


def _rates(
    lifts: list[tuple[float, float] | None], bonus: Sequence[int] = (), unseen: float = 0.5
) -> np.ndarray:
    """A prior share of right runs per worker from its lifts in a role: 0.5 plus the lift
    (bounded), `unseen` where never seen in the role, and TOOL_LIFT more for a tool as a draft
    or input."""
    rate = np.array([unseen if v is None else 0.5 + v[0] for v in lifts])
    rate[list(bonus)] += TOOL_LIFT
    return np.clip(rate, 0.05, 0.95)


def explore_inputs(
    obs: Observations,
    near: np.ndarray,
    index: ShapeIndex,
    calls: Sequence[int],
    budget: int,
    rng: np.random.Generator,
    max_jobs: int,
    *,
    floor: float = 0.0,
    tools: Sequence[int] = (),
) -> list[tuple[int, int]]:
    """At most `max_jobs` (question, shape) pairs whose drafts are chosen by what workers give
    when seen, not by what they answer alone, costing at most `budget` calls.

    A reader first (a checker, or a judge): drawn from what it was seen to add in that role
    anywhere (RoleLifts, weighed by the runs behind it; uniform where never seen), so a
    worker that settles one kind of question by reading is tried on another. Then what it
    reads: each check or join of that reader drawn from its own Beta posterior near the
    question, whose prior (READ_PRIOR runs) is what its drafts were seen to give anywhere, or
    UNSEEN for a worker no run near the question has read yet (the floor that lets it be
    tried), TOOL_LIFT more for a tool (its output is material for a later step); runs correct
    both. The check or the join whose draw is higher is bought,
    on the questions whose best shape is estimated lowest first (ROOM: those a composition
    could still lift)."""
    seen = Near.of(obs, near, floor)
    sums, counts, best = seen.right, seen.runs, seen.mean.max(axis=1)
    n, count = len(index.single), sums.shape[0]
    rows = np.arange(count)
    lifts = RoleLifts.of(obs, index, floor)

    def read(
        readers: list[tuple[float, float] | None], options: np.ndarray, given: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per question: a reader drawn by what it was seen to add (`readers`: a Beta whose
        weight is the runs behind it, at most READER_RUNS), then its best-drawn shape among
        `options` (n readers, m shapes; -1 absent) whose prior is `given` (N, m)."""
        rate = _rates(readers)
        weight = np.array([0.0 if v is None else min(v[1], READER_RUNS) for v in readers])
        who = rng.beta(1.0 + weight * rate, 1.0 + weight * (1 - rate), (count, n))
        r = who.argmax(axis=1)
        cols = options[r]  # (N, m)
        there = cols >= 0
        at = np.maximum(cols, 0)
        s, c = sums[rows[:, None], at], counts[rows[:, None], at]
        g = given
        draws = rng.beta(
            1.0 + s + READ_PRIOR * g, 1.0 + np.maximum(c - s, 0) + READ_PRIOR * (1 - g)
        )
        draws = np.where(there, draws, -1.0)
        k = draws.argmax(axis=1)
        return cols[rows, k], draws[rows, k]

    value = np.full(count, -np.inf)
    column = np.full(count, -1)

    def gave(role: np.ndarray, lifted: list[tuple[float, float] | None]) -> np.ndarray:
        """(N, n) the prior of each worker as a draft or input at each question: what it gave
        anywhere, or UNSEEN where no run near the question has read it yet."""
        here = (counts[:, np.maximum(role, 0)] * (role >= 0)).sum(axis=2)
        return np.where(here > 0, _rates(lifted, tools), _rates([None] * n, tools, UNSEEN))

    if index.moves >= 2:
        drafts = gave(index.chain, lifts.draft)
        column, value = read(lifts.checker, index.chain.T, drafts)
    if index.moves >= 3:
        feeds = gave(index.pairs().reshape(n, -1), lifts.feed)
        judged = index.join.transpose(2, 0, 1).reshape(n, -1)  # (judge, lo * n + hi)
        lo, hi = np.divmod(np.arange(n * n), n)
        joined, drawn = read(lifts.judge, judged, (feeds[:, lo] + feeds[:, hi]) / 2)
        take = (joined >= 0) & (drawn > value)
        column, value = np.where(take, joined, column), np.where(take, drawn, value)
    chosen: list[tuple[int, int]] = []
    spent = 0
    for q in np.argsort(best, kind="stable"):
        if best[q] > ROOM or len(chosen) >= max_jobs:
            break
        s = int(column[q])
        if s < 0 or not np.isfinite(value[q]) or obs.counts[q, s] > 0:
            continue
        if spent + calls[s] > budget:
            continue
        chosen.append((int(q), s))
        spent += calls[s]
    return chosen
