"""A shape head that reads the bare question through another model's embedding (issue 68):
the head file says which GGUF and pins it by sha256, the chooser embeds the question with that
file (never the planning prompt, never the format line), a changed file is refused, and a
training weighs the three readings on withheld kinds (train/head_reads.py). Real llama.cpp
(SmolLM2 embeds here: the reading is the same for any GGUF)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conductor_cli.errors import ModelError
from conductor_cli.models.catalog import file_sha256
from conductor_cli.policy.chooser import HeadChooser, embedder_path
from conductor_cli.policy.familiar import QuestionEmbedder
from conductor_cli.policy.head import Head
from conductor_cli.policy.shapes import parse_shape
from conductor_cli.problems import MCQ_INSTRUCTION, QA_INSTRUCTION
from conductor_cli.run.planner import WorkerInfo, plan_messages
from conductor_cli.train.head_reads import Reading, best, compare

NAMES = ["local", "coder", "python"]
SHAPES = (
    parse_shape("local", NAMES),
    parse_shape("coder", NAMES),
    parse_shape("coder[program] > python[run]<0", NAMES),
)
POOL = [WorkerInfo("local", "a small model"), WorkerInfo("coder", "writes programs")]


def _head(d: int, embedder: str = "", sha: str = "") -> Head:
    weights = np.zeros((3, len(SHAPES)))
    return Head(np.zeros(d), np.ones(d), np.eye(2, d), weights, SHAPES, "embedding", embedder, sha)


def test_an_embedding_head_names_its_embedder_and_round_trips() -> None:
    head = _head(4, "qwen2.5-coder-1.5b-instruct", "ab" * 32)
    data = head.to_dict()
    assert data["reads"] == "embedding"
    assert data["embedder"] == {"model": "qwen2.5-coder-1.5b-instruct", "sha256": "ab" * 32}
    again = Head.from_dict(json.loads(json.dumps(data)))
    assert (again.reads, again.embedder, again.embedder_sha256) == (
        "embedding",
        *data["embedder"].values(),
    )
    # An embedding without its model, or a model without the embedding reading: not a head.
    with pytest.raises(ValueError, match="embedder"):
        Head.from_dict({**data, "embedder": {"model": "x"}})
    prompt = replace(head, reads="prompt").to_dict()
    with pytest.raises(ValueError, match="embedder"):
        Head.from_dict(prompt)
    assert "embedder" not in replace(head, reads="prompt", embedder="").to_dict()


def test_the_chooser_embeds_the_bare_question_and_never_reads_the_prompt(gguf_path: Path) -> None:
    class RefusingFeaturesFake:  # fault injection: the planning prompt must not be read
        size = 4

        def __call__(self, messages: tuple[dict[str, str], ...]) -> np.ndarray:
            raise AssertionError("an embedding head read the planning prompt")

    embed = QuestionEmbedder(gguf_path)
    try:
        q = "How many times does the letter r appear in strawberry?"
        plain, qa, mcq = embed.many([q, f"{q}\n\n{QA_INSTRUCTION}", f"{q}\n{MCQ_INSTRUCTION}"])
        assert np.array_equal(plain, qa) and np.array_equal(plain, mcq)
        d = plain.shape[0]
        # Weights that send questions to the program or the coder by the first component.
        weights = np.zeros((3, len(SHAPES)))
        weights[1, 2], weights[1, 1] = 1.0, -1.0
        head = replace(_head(d, "smollm2", "00" * 32), weights=weights)
        head = replace(head, components=np.vstack([plain, -plain]))
        chooser = HeadChooser(head, RefusingFeaturesFake(), "fixed", embedder=embed)  # type: ignore[arg-type]
        for text in (q, f"{q}\n\n{QA_INSTRUCTION}", f"{q}\n{MCQ_INSTRUCTION}"):
            assert chooser.choose(plan_messages(text, POOL, (), 3), text) == SHAPES[2]
        flipped = replace(head, components=np.vstack([-plain, plain]))
        chooser = HeadChooser(flipped, RefusingFeaturesFake(), "fixed", embedder=embed)  # type: ignore[arg-type]
        assert chooser.choose(plan_messages(q, POOL, (), 3), q) == SHAPES[1]
    finally:
        embed.close()


def test_an_embedder_file_other_than_the_one_trained_with_is_refused(
    tmp_path: Path, gguf_path: Path
) -> None:
    copy = tmp_path / "embedder.gguf"
    shutil.copyfile(gguf_path, copy)
    head = _head(4, str(copy), file_sha256(copy))
    assert embedder_path(head, tmp_path / "head.json") == copy
    with copy.open("r+b") as f:  # one byte changed past the header: another file
        f.seek(copy.stat().st_size - 1)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    with pytest.raises(ModelError, match=r"head\.json: its embedder .* train it again"):
        embedder_path(head, tmp_path / "head.json")


def test_the_reading_kept_gives_away_fewest_kinds_then_earns_most_and_a_tie_goes_later() -> None:
    def r(reads: str, reward: float, away: int) -> Reading:
        return Reading(reads, None, None, reward, away)

    assert best([r("prompt", 0.80, 1), r("question", 0.70, 0)]).reads == "question"
    assert best([r("prompt", 0.80, 0), r("embedding", 0.79, 0)]).reads == "prompt"
    assert best([r("prompt", 0.75, 0), r("question", 0.75, 0), r("embedding", 0.75, 0)]).reads == (
        "embedding"
    )
    fitted = {"question": r("question", 0.7, 0), "embedding": None}
    kept, said = compare(r("prompt", 0.6, 0), ["question", "embedding"], fitted.get)
    assert kept.reads == "question"
    assert said == {
        "prompt": {"held_out_reward": 0.6, "kinds_given_away": 0},
        "question": {"held_out_reward": 0.7, "kinds_given_away": 0},
        "chosen": "question",
    }
