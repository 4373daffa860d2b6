"""A trained linear head over the conductor's hidden state that picks a workflow shape: the
hidden state standardized and reduced by PCA to a few numbers, and a linear layer that scores
each shape; the shape with the highest score is planned (train/head_evolution.py learns the
weights).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from conductor_cli.errors import ModelError
from conductor_cli.policy.shapes import Shape

PCA_DIMS = 16
READS = ("prompt", "question", "embedding")


@dataclass(frozen=True)
class Head:
    mean: np.ndarray  # (d,) feature means
    scale: np.ndarray  # (d,) feature standard deviations (never 0)
    components: np.ndarray  # (k, d) principal directions
    weights: np.ndarray  # (k + 1, S): a bias row, then one row per component
    shapes: tuple[Shape, ...]
    # What its features read: the planning prompt as asked ("prompt"), or with the question
    # bare, its set's format line cut ("question": problems.bare_question), or the bare
    # question's mean state from `embedder` ("embedding").
    reads: str = "prompt"
    # reads "embedding": the GGUF that embeds the question (a catalog name or a path) and its
    # sha256 (another file gives other numbers: the head refuses it).
    embedder: str = ""
    embedder_sha256: str = ""

    def project(self, features: np.ndarray) -> np.ndarray:
        return project(self.mean, self.scale, self.components, features)

    def choose(self, features: np.ndarray) -> Shape:
        return self.shapes[int(np.argmax(self.project(features)[0] @ self.weights))]

    @property
    def size(self) -> int:
        """Its weights (the PCA's aside)."""
        return int(self.weights.size)

    @property
    def workers(self) -> tuple[str, ...]:
        """The workers its shapes name, in order of first appearance."""
        return tuple(dict.fromkeys(w for s in self.shapes for w in s.workers))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "shape-head",
            "pca_dims": int(self.components.shape[0]),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "components": self.components.tolist(),
            "weights": self.weights.tolist(),
            "shapes": [s.to_dict() for s in self.shapes],
            **({"reads": self.reads} if self.reads != "prompt" else {}),
            **(
                {"embedder": {"model": self.embedder, "sha256": self.embedder_sha256}}
                if self.embedder
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Head:
        shapes = tuple(Shape.from_dict(s) for s in d["shapes"])
        embedder = d.get("embedder") or {}
        if not isinstance(embedder, dict):
            raise TypeError("embedder must be an object with model and sha256")
        head = cls(
            np.asarray(d["mean"], dtype=np.float64),
            np.asarray(d["scale"], dtype=np.float64),
            np.asarray(d["components"], dtype=np.float64),
            np.asarray(d["weights"], dtype=np.float64),
            shapes,
            str(d.get("reads", "prompt")),
            str(embedder.get("model", "")),
            str(embedder.get("sha256", "")),
        )
        if head.reads not in READS:
            raise ValueError(f"reads {head.reads!r} is none of {', '.join(READS)}")
        if (head.reads == "embedding") != bool(head.embedder and head.embedder_sha256):
            raise ValueError("reads embedding goes with an embedder's model and sha256, only")
        k, dims = head.components.shape
        if head.mean.shape != (dims,) or head.scale.shape != (dims,):
            raise ValueError("mean and scale must match the components' width")
        if head.weights.shape != (k + 1, len(shapes)):
            raise ValueError("weights must be (pca_dims + 1) x shapes")
        return head

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict()), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Head:
        return read_head(path, cls.from_dict)


def read_head(path: Path, build: Callable[[dict[str, Any]], Any]) -> Any:
    """`build` applied to the JSON object in `path`; one line naming the file if it is missing,
    not JSON, or not a head `build` can read (shape head or step policy alike)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        return build(data)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ModelError(f"{path}: not a readable trained head ({e}); train it again") from None


def project(
    mean: np.ndarray, scale: np.ndarray, components: np.ndarray, features: np.ndarray
) -> np.ndarray:
    """(n, d) hidden states -> (n, k + 1) inputs of a linear layer (a 1 for the bias)."""
    x = (np.atleast_2d(features) - mean) / scale
    z = x @ components.T
    return np.hstack([np.ones((z.shape[0], 1)), z])
