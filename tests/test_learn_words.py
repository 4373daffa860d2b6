"""`conductor train --learn-words`: the words of a step learned per kind of question, kept as a
shape the head picks, planned by the trained conductor. Real llama.cpp hidden states, the real
engine, cache and CLI; the workers are a SIMULATION (testing/simulated_pool.py) in which one
worker answers one kind right when its step is told to work "step by step" and rarely
otherwise, so the right words are known and only learning them can find them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.policy.registry import conductors_dir
from conductor_cli.policy.words import WORDS
from conductor_cli.testing.simulated_pool import SimulatedPool, make_questions

from .conftest import assert_one_line_error, run_cli

SKILLS = {"w0": {"arith": 0.95, "words": 0.0}, "w1": {"arith": 0.0, "words": 0.3}}


@pytest.fixture(scope="module")
def simulation() -> Iterator[SimulatedPool]:
    sim = SimulatedPool(
        make_questions(["arith", "words"], 12),
        SKILLS,
        worded={"w1": {"words": ("step by step", 0.95)}},
    )
    yield sim
    sim.close()


def test_the_words_a_kind_needs_are_learned_and_planned(
    simulation: SimulatedPool, tmp_path: Path, gguf_path: Path
) -> None:
    config, data = simulation.files(tmp_path, with_kinds=True)
    proc = run_cli(
        "train", "qa", str(data), "--config", str(config), "--out", "worded", "--json",
        "--holdout", "0.34", "--generations", "30", "--repeats", "1", "--search", "all",
        "--shapes", "w0;w1", "--tasks", "fixed", "--learn-words", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    learned = record["learned_words"]
    by_kind = {s["kind"]: s for s in learned["searches"]}
    words = by_kind["words"]
    # The kind's best shape was w1 alone; of its role's other words, "Work it out step by
    # step ..." made it right, and became a shape of its own.
    assert words["base"] == "w1" and words["shape"] == "w1[answer_steps]"
    assert words["steps"][0]["words"] == WORDS["answer_steps"]
    assert words["right_after"] - words["right_before"] >= 2
    assert learned["kept"] == ["w1[answer_steps]"]
    assert record["hyperparameters"]["shapes"] == 3
    assert record["hyperparameters"]["learn_words"] == 1
    before, after = record["evaluations"]
    assert after["accuracy"] > before["accuracy"], (before, after)

    # The trained conductor plans the learned words: a words question goes to w1, told them.
    use = tmp_path / "use.toml"
    use.write_text(config.read_text().replace("max_steps = 2", 'max_steps = 2\nmodel = "worded"'))
    question = next(q for q in simulation.questions.values() if q.kind == "words")
    asked = run_cli("ask", "--config", str(use), "--json", question.text)
    assert asked.returncode == 0, asked.stderr
    steps = json.loads(asked.stdout)["workflow"]["steps"]
    assert [(s["worker"], s["task"]) for s in steps] == [("w1", WORDS["answer_steps"])]

    # Two kinds: a withheld one would be weighed against the other alone, which says nothing
    # of a question unlike both, so no familiarity is kept.
    assert "withholding one needs 3" in record["familiar"]["none"]
    assert not (conductors_dir() / "worded" / "familiar.npz").exists()


def test_learned_words_need_the_shape_head(simulation: SimulatedPool, tmp_path: Path) -> None:
    config, data = simulation.files(tmp_path, with_kinds=True)
    proc = run_cli("train", "qa", str(data), "--config", str(config), "--out", "x",
                   "--policy", "steps", "--learn-words", "1")  # fmt: skip
    assert_one_line_error(proc, 2, "--learn-words 1", "--policy shapes")
