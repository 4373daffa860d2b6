"""Whether a question is like those a head was trained on, and where it goes when it is not.

A head learned which workflow wins on the kinds of question it was trained on; on a kind it
never saw its choice is a guess (the shipped head sent unseen kinds' questions to a program
they did not need and lost to its own coder). So a trained conductor keeps its training
questions' embeddings: the conductor's base model's mean final hidden state over the question
alone, without the instruction a set's loader wrapped it in (`problems.bare_question`), so a
format line shared with a training kind does not make a question look familiar. A question
whose nearest training question (cosine, after subtracting the training mean: raw mean states
of a small model all point much the same way) is below `threshold` is planned with `fallback`,
the member that earned most alone in training, instead of the head's choice.
`train/familiar_fit.py` chooses the threshold by withholding whole training kinds.

The file (`familiar.npz` beside `head.json`, policy/registry.FAMILIAR; read with numpy, never
unpickled): `center` (d,), `points` (n, d) unit rows, `kinds` (n,) strings, `threshold` and
`fallback` (the shape as JSON, `Shape.to_dict`) as 0-d arrays.
"""

from __future__ import annotations

import json
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from conductor_cli.errors import ModelError
from conductor_cli.policy.shapes import Shape
from conductor_cli.problems import bare_question

# A question's first tokens say what it asks; a long attachment-like question is cut.
QUESTION_TOKENS = 512


def centered(x: np.ndarray, center: np.ndarray) -> np.ndarray:
    """Rows minus `center`, scaled to unit length (a zero row stays zero)."""
    y = np.atleast_2d(x) - center
    norms = np.linalg.norm(y, axis=1, keepdims=True)
    return y / np.where(norms > 0, norms, 1.0)


@dataclass(frozen=True)
class Familiar:
    center: np.ndarray  # (d,) the training questions' mean embedding
    points: np.ndarray  # (n, d) each training question, centered, unit length
    kinds: tuple[str, ...]  # each training question's kind (the record's report reads them)
    threshold: float  # nearest-question cosine below which a question is unlike training
    fallback: Shape  # what a question unlike training is planned with

    def similarity(self, embedding: np.ndarray) -> float:
        """Cosine to the nearest training question."""
        return float(np.max(self.points @ centered(embedding, self.center)[0]))

    def knows(self, embedding: np.ndarray) -> bool:
        return self.similarity(embedding) >= self.threshold

    def save(self, path: Path) -> None:
        with path.open("wb") as f:
            np.savez(
                f,
                center=self.center.astype(np.float32),
                points=self.points.astype(np.float32),
                kinds=np.asarray(self.kinds, dtype=str),
                threshold=np.asarray(self.threshold),
                fallback=np.asarray(json.dumps(self.fallback.to_dict())),
            )

    @classmethod
    def load(cls, path: Path) -> Familiar:
        try:
            with np.load(path, allow_pickle=False) as data:
                familiar = cls(
                    data["center"].astype(np.float64),
                    data["points"].astype(np.float64),
                    tuple(str(k) for k in data["kinds"]),
                    float(data["threshold"]),
                    Shape.from_dict(json.loads(str(data["fallback"]))),
                )
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as e:
            raise ModelError(
                f"{path}: not a readable familiarity file ({e}); train it again"
            ) from None
        n, d = familiar.points.shape
        if familiar.center.shape != (d,) or len(familiar.kinds) != n:
            raise ModelError(f"{path}: center, points and kinds disagree in size; train it again")
        return familiar


class QuestionEmbedder:
    """The conductor's base GGUF in embeddings mode, for one question at a time: its mean final
    hidden state over the bare question (thread-safe). Loaded apart from the planning prompt's
    features, whose context keeps the shared prompt decoded."""

    def __init__(self, model: Path, *, n_threads: int = 0) -> None:
        from conductor_cli.backends.hidden_states import HiddenStates

        self._states = HiddenStates(
            model, n_ctx=QUESTION_TOKENS, n_batch=QUESTION_TOKENS, n_threads=n_threads
        )
        self._lock = threading.Lock()

    def __call__(self, question: str) -> np.ndarray:
        return self.many([question])[0]

    def many(self, questions: list[str]) -> np.ndarray:
        with self._lock:
            return self._states.unit_means([bare_question(q) for q in questions], QUESTION_TOKENS)

    def close(self) -> None:
        self._states.close()
