"""One recursion mechanism: rounds replaced the nested conductor step (issue 20).

Old configs, flags, hand-written workflows and server requests that ask for the nested step
get one line saying what replaced it; traces recorded with a nested step still load, show and
replay from the record, and run live once their `conductor` step is mapped to a worker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conductor_cli.config.settings import load_config
from conductor_cli.errors import ConfigError
from conductor_cli.storage.trace import load_trace, traces_dir
from conductor_cli.wire import RunRequest

from .conftest import assert_one_line_error, run_cli

OLD_TRACE = Path(__file__).parent / "data" / "run_state" / "recursive.json"


def test_an_old_config_asking_for_recursion_gets_one_line_naming_the_rounds(
    tmp_path: Path,
) -> None:
    config = tmp_path / "old.toml"
    config.write_text("[conductor]\nmax_depth = 2\nmax_steps = 3\n", encoding="utf-8")
    proc = run_cli("config", "show", "--config", str(config))
    assert_one_line_error(proc, 2, str(config), "conductor.max_depth", "max_rounds = 3")
    with pytest.raises(ConfigError, match="max_rounds = 4"):  # capped at the rounds' limit
        config.write_text("[conductor]\nmax_depth = 3\n", encoding="utf-8")
        load_config(config)


def test_the_max_depth_0_that_config_init_used_to_write_still_loads(tmp_path: Path) -> None:
    config = tmp_path / "starter.toml"
    config.write_text("[conductor]\nmax_depth = 0\nmax_steps = 3\n", encoding="utf-8")
    loaded = load_config(config)
    assert loaded.conductor.max_steps == 3 and loaded.conductor.max_rounds == 1
    proc = run_cli("config", "set", "--config", str(config), "conductor.max_rounds", "2")
    assert proc.returncode == 0, proc.stderr
    assert load_config(config).conductor.max_rounds == 2
    assert "max_steps = 3" in config.read_text(encoding="utf-8")


def test_flags_and_keys_for_the_nested_step_name_what_replaced_it(tmp_path: Path) -> None:
    proc = run_cli("ask", "--max-depth", "1", "What is 2 + 2?")
    assert_one_line_error(proc, 2, "--max-depth", "rounds", "--rounds 2")
    proc = run_cli("config", "set", "conductor.max_depth", "1")
    assert_one_line_error(proc, 2, "conductor.max_depth", "conductor.max_rounds")
    with pytest.raises(ValueError, match="max_rounds"):
        RunRequest.from_dict({"question": "q", "overrides": {"max_depth": 1}})
    assert RunRequest.from_dict({"question": "q", "overrides": {"max_depth": 0}}).question == "q"


def test_a_workflow_giving_a_step_to_the_conductor_gets_one_line(tmp_path: Path) -> None:
    workflow = tmp_path / "wf.json"
    workflow.write_text(
        json.dumps(
            {
                "steps": [
                    {"worker": "local", "task": "Draft an answer.", "sees": []},
                    {"worker": "conductor", "task": "Check the draft.", "sees": [0]},
                ]
            }
        ),
        encoding="utf-8",
    )
    proc = run_cli("run", str(workflow), "What is 2 + 2?")
    assert_one_line_error(proc, 1, str(workflow), "step 1", "'conductor'", "--rounds")


def test_a_trace_with_a_nested_step_still_shows_and_replays(
    gguf_path: Path, fast_config: Path
) -> None:
    traces_dir().mkdir(parents=True, exist_ok=True)
    shutil.copy(OLD_TRACE, traces_dir() / "recursive.json")
    # The static tree draws the nested workflow under its step.
    lines = run_cli("traces", "show", "recursive").stdout.splitlines()
    top = next(i for i, line in enumerate(lines) if "step 1" in line and "conductor" in line)
    assert any("critic" in line and line.startswith("    ") for line in lines[top + 1 :])
    # Replay from the record: the recorded answer, no model called.
    proc = run_cli("replay", "recursive")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Yes, prime."
    # Live, the nested step has no mechanism left to run it: one line, with the way out.
    proc = run_cli("replay", "recursive", "--live", "--no-server")
    assert_one_line_error(proc, 1, "step 1", "'conductor'", "--worker conductor=NAME")
    assert load_trace(traces_dir() / "recursive.json")["status"] == "done"  # left as it was
    # Mapped to a worker, the step runs as any other (real SmolLM2).
    proc = run_cli(
        "replay", "recursive", "--live", "--no-server", "--config", str(fast_config),
        "--worker", "conductor=local", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = load_trace(Path(json.loads(proc.stdout)["trace"]))
    assert [s["worker"] for s in record["steps"]] == ["local", "local"]
    assert all(s["status"] == "done" and "nested" not in s for s in record["steps"])
    assert record["replay_of"] == "recursive"
