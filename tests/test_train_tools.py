"""Training on a pool with a tool (issue 33): the real conductor GGUF's hidden states, the real
engine, the real `tool:python` in its sandbox, real CMA-ES; the model worker is the simulation
(testing/simulated_pool.py) so the right policy is known: w0 knows "words" questions but cannot
compute "calc" ones, and asked for a program it writes one that computes them (90 %).

No single worker answers calc questions (w0 guesses wrong, the tool cannot read English); only
the composition w0 -> python does. bench/prove_tools.py measures the same on real models.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.testing.simulated_pool import SimulatedPool, make_questions

from .conftest import run_cli

SKILLS = {"w0": {"words": 0.95, "calc": 0.0}}
PROGRAMS = {"w0": {"calc": 0.9}}
TOOL = '[[workers]]\nname = "python"\nmodel = "tool:python"\n'


@pytest.fixture(scope="module")
def simulation() -> Iterator[SimulatedPool]:
    sim = SimulatedPool(make_questions(["calc", "words"], 9), SKILLS, programs=PROGRAMS)
    yield sim
    sim.close()


def test_training_routes_calc_questions_through_the_python_tool(
    simulation: SimulatedPool, tmp_path: Path, gguf_path: Path
) -> None:
    # Asked as typed, as the `ask`s below ask them (the head reads the whole planning prompt;
    # on some CPUs the answer-format line training would add moved the choice).
    config, data = simulation.files(tmp_path, as_typed=True)
    config.write_text(config.read_text() + "\n" + TOOL, encoding="utf-8")
    proc = run_cli(
        "train", "qa", str(data), "--config", str(config), "--out", "with-tool",
        "--holdout", "0.34", "--generations", "30", "--repeats", "1", "--tasks", "fixed",
        "--search", "all", "--step-cost", "0.02", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    table = record["reward_table"]
    # A step costs 0.02 of reward: words stay one step, calc pays for its second.
    assert record["hyperparameters"]["step_cost"] == 0.02
    # Of the ten shapes over {w0, python}, the five where python sees what it runs (alone
    # it is always measured), and, by default where a tool runs programs, w0's program run
    # by it (`w0[program] > python[run]<0`); the tool's steps are runs like any other.
    assert table["workflow_runs"] == 12 * 6
    # No one shape serves both kinds: the head beats the best fixed one by telling them apart.
    # (A wrong answer still earns 0.5, the paper's reward for a well-formed reply.)
    assert table["head_train_reward"] > table["best_fixed_shape_reward"] + 0.1, table
    before, after = record["evaluations"]
    assert after["accuracy"] > before["accuracy"], (before, after)

    use = tmp_path / "use.toml"
    use.write_text(
        config.read_text().replace("max_steps = 2", 'max_steps = 2\nmodel = "with-tool"')
    )
    calc = next(q for q in simulation.questions.values() if q.kind == "calc")
    asked = run_cli("ask", "--config", str(use), "--json", calc.text)
    assert asked.returncode == 0, asked.stderr
    result = json.loads(asked.stdout)
    steps = result["workflow"]["steps"]
    # w0 writes the program, the tool runs it and its printout is the answer.
    assert [s["worker"] for s in steps] == ["w0", "python"] and steps[1]["sees"] == [0], steps
    assert result["answer"].strip() == calc.answer
    words = next(q for q in simulation.questions.values() if q.kind == "words")
    asked = run_cli("ask", "--config", str(use), "--json", words.text)
    assert asked.returncode == 0, asked.stderr
    assert "python" not in [s["worker"] for s in json.loads(asked.stdout)["workflow"]["steps"]]
