"""A trained head knows when a question is unlike its training (policy/familiar.py): the
threshold chosen by withholding whole kinds from the reward table (train/familiar_fit.py), the
file it is kept in, and the chooser sending a question unlike training to the best member
alone; the question is read without its format line (the real SmolLM2 embeds it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conductor_cli.errors import ModelError
from conductor_cli.policy.chooser import HeadChooser, read_as
from conductor_cli.policy.familiar import Familiar, QuestionEmbedder, centered
from conductor_cli.policy.features import PromptFeatures
from conductor_cli.policy.head import Head
from conductor_cli.policy.shapes import Shape, parse_shape
from conductor_cli.problems import MCQ_INSTRUCTION, QA_INSTRUCTION, bare_question
from conductor_cli.run.planner import WorkerInfo, plan_messages
from conductor_cli.train.familiar_fit import fit_familiar, fit_threshold, nearest_scores

NAMES = ["local", "coder", "python"]
SHAPES = [
    parse_shape("local", NAMES),
    parse_shape("coder", NAMES),
    parse_shape("coder[program] > python[run]<0", NAMES),
]


def three_kinds(seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Six questions of each of three kinds, each kind tight around its own direction."""
    rng = np.random.default_rng(seed)
    rows, kinds = [], []
    for k, kind in enumerate(("letters", "facts", "dates")):
        for _ in range(6):
            v = np.zeros(8)
            v[k] = 1.0
            rows.append(v + rng.normal(0, 0.05, 8))
            kinds.append(kind)
    return centered(np.array(rows), np.zeros(8)), kinds


def rewards(n: int) -> np.ndarray:
    """Each question's reward under SHAPES: SmolLM2 alone 0.1, the coder alone 0.7, the
    program 1.0."""
    target = np.full((n, 3), 0.1)
    target[:, 1] = 0.7
    target[:, 2] = 1.0
    return target


def test_nearest_scores_withhold_the_questions_own_kind() -> None:
    points = centered(np.array([[1.0, 0], [0.9, 0.1], [0, 1.0]]), np.zeros(2))
    seen, unseen = nearest_scores(points, ["a", "a", "b"])
    assert seen[0] == pytest.approx(points[0] @ points[1])  # its kind's other question
    assert unseen[0] == pytest.approx(points[0] @ points[2])  # the other kind's, its own out
    assert unseen[2] == pytest.approx(max(points[2] @ points[0], points[2] @ points[1]))


def test_a_threshold_is_kept_where_a_withheld_kind_does_better_with_the_member_alone() -> None:
    points, kinds = three_kinds()
    n = len(kinds)
    # The head's pick earns 1 on a kind it trained on and 0 on a kind withheld from it.
    target = rewards(n)
    fold_picks = np.full(n, 2)
    kind_picks = np.zeros(n, dtype=int)  # SmolLM2 alone: wrong
    threshold, report = fit_threshold(points, kinds, target, 1, fold_picks, kind_picks)
    seen, unseen = nearest_scores(points, kinds)
    assert threshold == pytest.approx((unseen.max() + seen.min()) / 2)  # the widest margin
    assert report["head_alone"] == pytest.approx((1.0 + 0.1) / 2)
    assert report["value"] == pytest.approx((1.0 + 0.7) / 2)
    assert all(k["seen_known"] == 1 and k["withheld_known"] == 0 for k in report["kinds"].values())

    familiar, said = fit_familiar(points, kinds, SHAPES, target, fold_picks, kind_picks)
    assert familiar is not None and familiar.fallback == SHAPES[1]  # the best member alone
    assert said["fallback"] == "coder"
    assert familiar.knows(points[0]) and not familiar.knows(familiar.center + np.eye(8)[5])


def test_no_threshold_where_the_head_does_as_well_on_withheld_kinds() -> None:
    points, kinds = three_kinds()
    n = len(kinds)
    target = rewards(n)
    picks = np.full(n, 2)  # the head's pick is right whether its kind was trained or not
    threshold, report = fit_threshold(points, kinds, target, 1, picks, picks)
    assert threshold is None and report["value"] == report["head_alone"] == pytest.approx(1.0)
    familiar, said = fit_familiar(points, kinds, SHAPES, target, picks, picks)
    assert familiar is None and "no threshold" in said["none"]
    two_kinds, said = fit_familiar(points, ["x", "y"] * (n // 2), SHAPES, target, picks, picks)
    assert two_kinds is None and "2 kind(s): withholding one needs 3" in said["none"]


def test_the_file_keeps_everything_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    points, kinds = three_kinds()
    program = SHAPES[2]
    familiar = Familiar(np.arange(8.0), points, tuple(kinds), 0.42, program)
    path = tmp_path / "familiar.npz"
    familiar.save(path)
    again = Familiar.load(path)
    assert again.kinds == tuple(kinds) and again.threshold == pytest.approx(0.42)
    assert again.fallback == program and again.fallback.words == ("program", "run")
    assert np.allclose(again.points, points, atol=1e-6)
    path.write_bytes(b"not a zip")
    with pytest.raises(ModelError, match=r"familiar\.npz: not a readable familiarity file"):
        Familiar.load(path)


QUESTIONS = [
    "How many times does the letter 'r' appear in the word 'carrot'?",
    "How many times does the letter 'e' appear in the word 'cheese'?",
    "How many times does the letter 'o' appear in the word 'balloon'?",
    "What is 17 times 23?",
    "What is 345 times 12?",
    "What is 81 times 9?",
    "What day of the week was 4 July 1976?",
    "What day of the week was 1 January 2000?",
    "What day of the week was 25 December 1990?",
]
POOL = [WorkerInfo(n, "") for n in NAMES]


@pytest.fixture(scope="module")
def embedder(gguf_path: Path):
    embed = QuestionEmbedder(gguf_path)
    yield embed
    embed.close()


def test_a_format_line_does_not_change_what_a_question_is_like(embedder) -> None:
    q = QUESTIONS[0]
    assert (
        bare_question(f"{q}\n\n{QA_INSTRUCTION}") == q == bare_question(f"{q}\n{MCQ_INSTRUCTION}")
    )
    # Each embedded alone: the same tokens in one decode give the same state, bit for bit.
    # Decoded side by side in one batch, a llama.cpp built for some CPUs gives the same
    # sequence at another place in the batch states up to 1e-3 apart (seen on 2026-12-02 for
    # three copies of this very question), which says nothing about the format line.
    plain, qa, mcq = (
        embedder.many([text])[0]
        for text in (q, f"{q}\n\n{QA_INSTRUCTION}", f"{q}\n{MCQ_INSTRUCTION}")
    )
    assert np.array_equal(plain, qa) and np.array_equal(plain, mcq)
    side_by_side = embedder.many([q, f"{q}\n\n{QA_INSTRUCTION}"])
    assert float(side_by_side[0] @ side_by_side[1]) > 0.9999
    other = embedder("Who wrote the play Hamlet?")
    assert not np.allclose(plain, other)


def test_the_chooser_sends_a_question_unlike_training_to_the_member_alone(
    gguf_path: Path, embedder
) -> None:
    features = PromptFeatures(gguf_path, n_ctx=2048)
    d = features.size
    # A head that always picks the program (its bias), whatever the hidden state.
    weights = np.zeros((3, len(SHAPES)))
    weights[0, 2] = 1.0
    components = np.zeros((2, d))
    components[0, 0] = components[1, 1] = 1.0
    head = Head(np.zeros(d), np.ones(d), components, weights, tuple(SHAPES))
    x = embedder.many(QUESTIONS)
    center = x.mean(axis=0)
    points = centered(x, center)
    asked = "How many times does the letter 'a' appear in the word 'banana'?"
    near = float(np.max(points @ centered(embedder(asked), center)[0]))
    far = float(np.max(points @ centered(embedder("Who wrote the play Hamlet?"), center)[0]))
    assert far < near  # SmolLM2 reads a letter count as closer to letter counts
    kinds = ("letters",) * 3 + ("mul",) * 3 + ("dates",) * 3
    familiar = Familiar(center, points, kinds, (far + near) / 2, SHAPES[1])
    chooser = HeadChooser(head, features, "fixed", familiar=(familiar, embedder))
    try:

        def planned(question: str, format_line: str = "") -> Shape:
            text = f"{question}\n\n{format_line}".strip()
            return chooser.choose(plan_messages(text, POOL, (), 3), text)

        assert planned(asked) == SHAPES[2]  # like training: the head's choice
        assert planned("Who wrote the play Hamlet?") == SHAPES[1]  # unlike: the coder alone
        # The same questions under another set's format line: the same decisions.
        assert planned(asked, QA_INSTRUCTION) == SHAPES[2]
        assert planned("Who wrote the play Hamlet?", MCQ_INSTRUCTION) == SHAPES[1]
        reply = chooser.fixed_reply(
            plan_messages("Who wrote the play Hamlet?", POOL, (), 3), "Who wrote the play Hamlet?"
        )
        assert reply is not None and '"worker": "coder"' in reply and "python" not in reply
    finally:
        features.close()


def test_a_head_that_reads_the_question_bare_sees_the_same_prompt_under_any_format_line(
    gguf_path: Path,
) -> None:
    features = PromptFeatures(gguf_path, n_ctx=2048)
    try:
        d = features.size
        weights = np.zeros((3, len(SHAPES)))
        components = np.zeros((2, d))
        prompt_head = Head(np.zeros(d), np.ones(d), components, weights, tuple(SHAPES))
        bare_head = replace(prompt_head, reads="question")
        q = QUESTIONS[0]
        asked = [f"{q}\n\n{QA_INSTRUCTION}", f"{q}\n{MCQ_INSTRUCTION}", q]

        def seen(head: Head) -> list[np.ndarray]:
            return [features(read_as(head.reads, plan_messages(t, POOL, (), 3), t)) for t in asked]

        qa, mcq, plain = seen(bare_head)
        assert np.array_equal(qa, mcq) and np.array_equal(qa, plain)
        qa, mcq, plain = seen(prompt_head)  # as asked: the format line is read
        assert not np.allclose(qa, mcq) and not np.allclose(qa, plain)
        assert Head.from_dict(bare_head.to_dict()).reads == "question"
        assert "reads" not in prompt_head.to_dict()  # a head as before reads as before
    finally:
        features.close()


def test_the_chooser_gives_a_head_the_prompt_as_it_reads_it() -> None:
    seen: list[tuple[dict[str, str], ...]] = []

    class RecordingFeaturesFake:  # fault-free stand-in: records what the head is given
        size = 4

        def __call__(self, messages: tuple[dict[str, str], ...]) -> np.ndarray:
            seen.append(messages)
            return np.zeros(4)

    head = Head(np.zeros(4), np.ones(4), np.eye(2, 4), np.zeros((3, len(SHAPES))), tuple(SHAPES))
    q = QUESTIONS[0]
    for reads in ("question", "prompt"):
        chooser = HeadChooser(replace(head, reads=reads), RecordingFeaturesFake(), "fixed")
        for text in (f"{q}\n\n{QA_INSTRUCTION}", f"{q}\n{MCQ_INSTRUCTION}"):
            chooser.choose(plan_messages(text, POOL, (), 3), text)
    bare_qa, bare_mcq, asked_qa, asked_mcq = seen
    assert bare_qa == bare_mcq and f"Question: {q}" in bare_qa[1]["content"]
    assert QA_INSTRUCTION not in bare_qa[1]["content"]
    assert asked_qa != asked_mcq and QA_INSTRUCTION in asked_qa[1]["content"]
