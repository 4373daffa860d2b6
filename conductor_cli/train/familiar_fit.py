"""Learning when a trained head does not know (policy/familiar.py): the threshold below which a
question counts as unlike the training questions, chosen by withholding whole kinds, and the
member such a question goes to.

Every training question is looked at twice, from the reward table alone (no test item):
- as a question of a kind the head was trained on: its nearest other training question, and
  the pick of the head fitted without its fold;
- as a question of a kind never seen: its nearest question of another kind, and the pick of
  the head fitted without its whole kind.
A threshold sends each below it to the fallback (the member with the best mean reward alone)
and leaves the rest with the head's pick. Its value is the mean reward (the head's target:
reward less each step's cost) over both views, each kind weighed the same; the threshold kept
is the best (the middle of the best ones where several tie: the widest margin), and "no
threshold" (the head alone) is one of the candidates, kept on a tie: a familiarity is saved
only where withholding kinds says it earns more than the head alone. It takes three kinds or
more: with two, a withheld kind is weighed against the other alone, which says nothing of a
question unlike both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from conductor_cli.policy.familiar import Familiar, centered
from conductor_cli.policy.shapes import Shape

# A threshold must earn at least this much more than the head alone (mean target reward over
# kinds) to be kept: less is within the noise of a few dozen questions.
MIN_GAIN = 0.01
MIN_KINDS = 3


def nearest_scores(points: np.ndarray, kinds: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per question: cosine to its nearest other question, and to its nearest question of
    another kind (its own kind withheld)."""
    labels = np.asarray(kinds)
    s = points @ points.T
    np.fill_diagonal(s, -np.inf)
    seen = s.max(axis=1)
    other = np.where(labels[None, :] != labels[:, None], s, -np.inf)
    return seen, other.max(axis=1)


def best_single(shapes: Sequence[Shape], target: np.ndarray) -> int | None:
    """The column of the one-step shape with the highest mean target (a member alone)."""
    singles = [i for i, s in enumerate(shapes) if len(s.workers) == 1]
    if not singles or target.size == 0:
        return None
    means = [float(np.mean(target[:, i])) for i in singles]
    return singles[int(np.argmax(means))]


def fit_threshold(
    points: np.ndarray,
    kinds: Sequence[str],
    target: np.ndarray,
    fallback: int,
    fold_picks: np.ndarray,
    kind_picks: np.ndarray,
) -> tuple[float | None, dict[str, Any]]:
    """The threshold (None: the head alone does as well) and what it earns per kind."""
    labels = np.asarray(kinds)
    names = list(dict.fromkeys(kinds))
    rows = np.arange(len(labels))
    seen, unseen = nearest_scores(points, kinds)
    as_seen = target[rows, fold_picks]
    as_new = target[rows, kind_picks]
    alone = target[:, fallback]

    def per_kind(t: float) -> dict[str, tuple[float, float]]:
        known_seen = np.where(seen >= t, as_seen, alone)
        known_new = np.where(unseen >= t, as_new, alone)
        return {
            k: (float(known_seen[labels == k].mean()), float(known_new[labels == k].mean()))
            for k in names
        }

    def value(t: float) -> float:
        return float(np.mean([(a + b) / 2 for a, b in per_kind(t).values()]))

    values = np.unique(np.concatenate([seen, unseen]))
    candidates = (values[1:] + values[:-1]) / 2  # midway between neighbouring scores
    head_alone = value(-np.inf)
    scores = [value(t) for t in candidates]
    threshold = None
    if scores and max(scores) - head_alone >= MIN_GAIN:
        tied = candidates[np.asarray(scores) >= max(scores) - 1e-12]
        threshold = float((tied.min() + tied.max()) / 2)
    at = -np.inf if threshold is None else threshold
    report: dict[str, Any] = {
        "chosen_by": "leave-kinds-out on the training questions' rewards (each kind withheld "
        "in turn, and each fold)",
        "threshold": None if threshold is None else round(threshold, 4),
        "value": round(value(at), 4),
        "head_alone": round(head_alone, 4),
        "fallback_alone": round(value(np.inf), 4),
        "kinds": {
            k: {
                "trained": round(a, 3),
                "withheld": round(b, 3),
                "seen_known": round(float(np.mean(seen[labels == k] >= at)), 3),
                "withheld_known": round(float(np.mean(unseen[labels == k] >= at)), 3),
            }
            for k, (a, b) in per_kind(at).items()
        },
    }
    return threshold, report


def too_few_kinds(kinds: Sequence[str]) -> dict[str, Any] | None:
    """Why there is nothing to withhold, if there is not."""
    n = len(set(kinds))
    if n >= MIN_KINDS:
        return None
    return {"none": f"the training questions are of {n} kind(s): withholding one needs {MIN_KINDS}"}


def fit_familiar(
    embeddings: np.ndarray,
    kinds: Sequence[str],
    shapes: Sequence[Shape],
    target: np.ndarray,
    fold_picks: np.ndarray,
    kind_picks: np.ndarray,
) -> tuple[Familiar | None, dict[str, Any]]:
    """The familiarity of a head trained on questions with these embeddings (one row each,
    `QuestionEmbedder`) and kinds, `target` (questions x shapes) its training target, and the
    picks of its fit without each question's fold and without its kind (head_fit's
    `withheld_picks`); None, and why, where it would not earn more than the head alone."""
    too_few = too_few_kinds(kinds)
    if too_few is not None:
        return None, too_few
    fallback = best_single(shapes, target)
    if fallback is None:
        return None, {"none": "no shape is a member alone"}
    center = embeddings.mean(axis=0)
    points = centered(embeddings, center)
    threshold, report = fit_threshold(points, kinds, target, fallback, fold_picks, kind_picks)
    report["fallback"] = shapes[fallback].label
    if threshold is None:
        report["none"] = "withholding kinds finds no threshold that earns more than the head"
        return None, report
    return Familiar(center, points, tuple(kinds), threshold, shapes[fallback]), report
