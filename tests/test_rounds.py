"""Rounds on the real embedded conductor under the real llama.cpp grammar (issue 20): the
re-planning grammar admits the empty workflow, and the 135M conductor, sampled at temperature
1.0, sometimes keeps its team's answer and sometimes corrects it; a corrective round's step
sees the earlier answer. The CLI: --rounds bounds, budgets across rounds, offline replay."""

from __future__ import annotations

import json
from pathlib import Path

from conductor_cli.api import NO_TRACE, ask
from conductor_cli.config.settings import load_config, with_conductor
from conductor_cli.runtime import Runtime
from conductor_cli.storage.trace import load_trace

from .conftest import FAST_CONFIG, assert_one_line_error, run_cli

QUESTION = "What is the capital of France?"


def test_the_real_conductor_keeps_or_corrects_its_teams_answer(fast_config: Path) -> None:
    config = load_config(fast_config)
    seen: dict[str, int] = {}
    with Runtime(config) as runtime:
        for seed in range(16):
            c = with_conductor(config, max_rounds=2, seed=seed, temperature=1.0)
            result = ask(QUESTION, config=c, runtime=runtime, trace=NO_TRACE)
            [second] = result.rounds
            first_answer = result.steps[-1].output
            assert second.plan is not None and second.decision in ("kept", "corrected")
            if second.decision == "kept":
                assert second.plan.workflow.steps == () and second.steps == ()
                assert result.answer == first_answer
            else:
                # The corrective step was shown round 1's answer, and its output is the answer.
                shown = "\n".join(m["content"] for m in second.steps[0].messages)
                assert "answer of round 1" in shown and first_answer.strip()[:40] in shown
                assert result.answer == second.steps[-1].output
            seen.setdefault(second.decision, seed)
            if len(seen) == 2:
                break
    assert set(seen) == {"kept", "corrected"}, seen


def test_rounds_on_the_command_line(tmp_path: Path, gguf_path: Path) -> None:
    config = tmp_path / "r.toml"
    config.write_text(FAST_CONFIG.replace("max_steps = 2", "max_steps = 1"), encoding="utf-8")
    for bad in ("0", "5"):
        proc = run_cli("--config", str(config), "ask", "--rounds", bad, QUESTION)
        assert_one_line_error(proc, 2, f"--rounds {bad}", "1 to 4")
    # Calls: plan, step, re-plan; the third round's plan is refused by --max-calls 3 at once
    # or, when round 2 corrected, its step is: either way round 1 or 2's answer stands.
    proc = run_cli(
        "--config", str(config), "ask", "--json", "--rounds", "3", "--max-calls", "3", QUESTION
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    decisions = [r["decision"] for r in doc["rounds"]]
    assert decisions in (["kept"], ["corrected", "failed"], ["failed"]), decisions
    if "failed" in decisions:
        notes = [x for x in proc.stderr.splitlines() if x.startswith("conductor: note:")]
        assert len(notes) == 1 and "--max-calls 3" in notes[0], proc.stderr
    record = load_trace(Path(doc["trace"]))
    assert record["answer"] == doc["answer"]
    assert [r["decision"] for r in record["rounds"]] == decisions
    # Played back offline, the multi-round trace gives the run's final answer.
    replay = run_cli("replay", Path(doc["trace"]).stem)
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.strip() == doc["answer"].strip()
