"""A training of many kinds (train/head_fit.KINDS_OUT or more): the head's fit is validated on
whole kinds withheld, and the features that read the question bare (its format line cut) are
weighed against those of the planning prompt as asked and against the pool's largest local
model's embedding of the bare question (train/head_reads.py), the best kept. Real llama.cpp
hidden states (SmolLM2's, as the conductor and as a pool member), the real engine,
cache and CLI; the workers that answer are a SIMULATION (testing/simulated_pool.py) whose
skills split the kinds between two members."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.models.catalog import load_catalog
from conductor_cli.policy.head import Head
from conductor_cli.policy.registry import conductors_dir
from conductor_cli.testing.simulated_pool import SimulatedPool, make_questions
from conductor_cli.train.head_fit import KINDS_OUT

from .conftest import run_cli

KINDS = [
    "arith", "words", "geo", "logic", "chain", "join", "pcheck", "pjoin",
    "color", "animal", "planet", "coin",
]  # fmt: skip
SKILLS = {
    "w0": {k: (0.9 if i % 2 else 0.1) for i, k in enumerate(KINDS)},
    "w1": {k: (0.1 if i % 2 else 0.9) for i, k in enumerate(KINDS)},
}


@pytest.fixture(scope="module")
def simulation() -> Iterator[SimulatedPool]:
    sim = SimulatedPool(make_questions(KINDS, 2), SKILLS)
    yield sim
    sim.close()


def test_a_broad_training_withholds_kinds_and_keeps_the_features_that_carry(
    simulation: SimulatedPool, tmp_path: Path, gguf_path: Path
) -> None:
    assert len(KINDS) >= KINDS_OUT
    config, data = simulation.files(tmp_path, with_kinds=True)
    # A local model in the pool: its embedding of the bare question is the third reading.
    # Measured alone as every member is, one token an answer (wrong, and quick: the simulated
    # members are what the head learns to tell apart).
    config.write_text(
        config.read_text(encoding="utf-8")
        + '\n[[workers]]\nname = "small"\nmodel = "gguf:smollm2-135m-instruct"\n'
        + "max_tokens = 1\n",
        encoding="utf-8",
    )
    proc = run_cli(
        "train", "qa", str(data), "--config", str(config), "--out", "broad", "--json",
        "--holdout", "0", "--generations", "10", "--repeats", "1", "--search", "all",
        "--shapes", "w0;w1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["fit"]["withheld"] == "questions and kinds"
    compared = record["features_compared"]
    assert set(compared) == {"prompt", "question", "embedding", "chosen", "embedder"}
    assert compared["embedder"] == "smollm2-135m-instruct"
    for reads in ("prompt", "question", "embedding"):
        assert 0.5 <= compared[reads]["held_out_reward"] <= 1.0, compared
    head = Head.load(conductors_dir() / "broad" / "head.json")
    assert head.reads == compared["chosen"]
    if head.reads == "embedding":  # pinned to the file it read
        assert head.embedder == "smollm2-135m-instruct"
        assert head.embedder_sha256 == load_catalog().get(head.embedder).sha256
    table = record["reward_table"]
    # Kind by kind, where the head sends the training questions and what it earned on them
    # unseen beside the kind's best member, named; the summary a person reads says it.
    picks = table["picks_by_kind"]
    assert set(picks) == set(KINDS) and all(sum(c.values()) == 2 for c in picks.values())
    # Each shape's right runs of the measured ones per kind: every shape on both questions, and
    # the local model's one token never right.
    right = table["right_by_kind"]
    assert set(right) == set(KINDS) and all(n == 2 for c in right.values() for _, n in c.values())
    assert all(c["small"] == [0, 2] for c in right.values()), right
    kinds = record["fit"]["kinds"]
    assert {kinds[k]["best_member"] for k in KINDS} <= {"w0", "w1", "small"}
    assert kinds["words"]["best_member"] == "w0" and kinds["arith"]["best_member"] == "w1"
    shown = run_cli("models", "info", "broad").stdout
    assert "  per kind (training questions;" in shown and "    coin: " in shown, shown
    # The kept head earns more on its training questions than any one shape for all (each
    # member is right on half the kinds: the head must tell them apart to).
    assert table["head_train_reward"] > table["best_fixed_shape_reward"], table
