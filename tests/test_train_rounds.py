"""`conductor train --rounds 2` (issue 20): the round head, trained from the re-planning
prompt's hidden state (real llama.cpp), decides when to keep the team's answer and when to
correct it (its learning curve: bench/rounds_curve.py).

The testbed is the simulation's cue kind (testing/simulated_pool.py): a wrong answer to a cue
question says "(unsure)", a right one does not, and a worker that reads an earlier round's
answer checks it right 95 % of the time. Arithmetic questions have one specialist (w0). Keeping
a right answer is best (a corrective round costs calls, --cost-weight); correcting a wrong one
is. Real engine runs through litellm to the simulation, real CMA-ES.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.config.settings import load_config
from conductor_cli.policy.registry import conductors_dir
from conductor_cli.policy.shapes import ANSWER_TASK
from conductor_cli.run.planner import replan_messages, worker_infos
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.runtime import Runtime
from conductor_cli.testing.simulated_pool import ROUND_ANSWER, SimulatedPool, make_questions

from .conftest import assert_one_line_error, run_cli

SKILLS = {
    "w0": {"arith": 0.95, "cue": 0.5},
    "w1": {"arith": 0.2, "cue": 0.5},
}


@pytest.fixture(scope="module")
def simulation() -> Iterator[SimulatedPool]:
    helped = {w: {"cue": (ROUND_ANSWER, 0.95)} for w in SKILLS}
    sim = SimulatedPool(make_questions(["arith", "cue"], 6), SKILLS, helped)
    yield sim
    sim.close()


def test_train_rounds_writes_a_round_head_that_decides_at_planning_time(
    simulation: SimulatedPool, tmp_path: Path, gguf_path: Path
) -> None:
    """The mechanics, end to end on real llama.cpp and CMA-ES: the round table, the round head,
    its record, and the trained conductor asking it at planning time. Whether it learns when
    to keep (held out, per round) is bench/rounds_curve.py's measurement (docs/train.md)."""
    config, data = simulation.files(tmp_path)
    proc = run_cli(
        "train", "qa", str(data), "--config", str(config), "--out", "sim-r2", "--rounds", "2",
        "--cost-weight", "2", "--holdout", "0", "--generations", "20", "--repeats", "1",
        "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["hyperparameters"]["rounds"] == 2
    assert record["evaluations"] == []  # nothing held out
    assert (conductors_dir() / "sim-r2" / "round_head.json").is_file()
    table = record["round_table"]
    for key in ("kept_share_first_right", "kept_share_first_wrong", "keep_reward", "curve"):
        assert key in table, table
    # The head can always keep (its first shape is the empty workflow), so on its own
    # training situations it does at least as well as keeping.
    assert table["head_train_reward"] >= table["keep_reward"], table

    # At planning time the trained conductor's round head decides: keep ({"steps": []}) or a
    # corrective shape, for every re-planning prompt.
    use = tmp_path / "use.toml"
    use.write_text(config.read_text().replace("max_steps = 2", 'max_steps = 2\nmodel = "sim-r2"'))
    settings = load_config(use)
    first = Workflow((Step("w0", ANSWER_TASK, ()),))
    infos = worker_infos(settings.workers)
    with Runtime(settings) as runtime:
        chooser = runtime.chooser()
        assert chooser is not None
        # Three cue questions, each with a right and a wrong first answer (a prompt's hidden
        # state costs llama.cpp about half a second here).
        cues = [q for q in simulation.questions.values() if q.kind == "cue"][:3]
        for q in cues:
            for answer in (q.answer, "a123 (unsure)"):
                messages = replan_messages(q.text, infos, (), 2, first, f"Answer: {answer}")
                grammar = chooser.replan_grammar(messages)
                assert grammar is not None and "root ::=" in grammar

    info = run_cli("train", "qa", str(data), "--config", str(config), "--out", "x", "--rounds", "5")
    assert_one_line_error(info, 2, "--rounds 5", "1 to 4")
    lora = run_cli(
        "train", "qa", str(data), "--config", str(config), "--out", "x", "--rounds", "2",
        "--method", "grpo",
    )  # fmt: skip
    assert_one_line_error(lora, 2, "--rounds 2", "only the head method")
