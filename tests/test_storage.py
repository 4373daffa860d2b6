"""A full data and cache disk (a real 2 MB tmpfs): one clear line, and the traces and cache
entries written before survive. Skipped where this process may not mount a tmpfs."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import assert_one_line_error, run_cli

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def remote_run(small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    """`conductor run` of a one-step workflow on a fake remote worker, with the data and cache
    dirs on the small disk."""
    monkeypatch.setenv("CONDUCTOR_DATA_DIR", str(small_disk / "data"))
    monkeypatch.setenv("CONDUCTOR_CACHE_DIR", str(small_disk / "cache"))
    # `cache clear` removes the state folder's training bases: not the one workers share.
    monkeypatch.setenv("CONDUCTOR_STATE_DIR", str(tmp_path / "state"))
    server = FakeOpenAIServer(["ok"], answer="answer {n}")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[workers]]\nname = "w"\nmodel = "openai/fake"\napi_base = "{server.api_base}"\n',
        encoding="utf-8",
    )
    workflow = tmp_path / "wf.json"
    workflow.write_text(
        '{"steps": [{"worker": "w", "task": "Answer the question.", "sees": []}]}',
        encoding="utf-8",
    )

    def run(question: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return run_cli("run", "--config", str(config), *extra, str(workflow), question)

    try:
        yield run
    finally:
        server.close()


def test_a_full_disk_fails_in_one_line_and_loses_nothing(small_disk: Path, remote_run: Run) -> None:
    run = remote_run
    first = run("Q1?", "--json")
    assert first.returncode == 0, first.stderr
    trace_before = Path(json.loads(first.stdout)["trace"]).read_bytes()
    filler = small_disk / "filler"
    with filler.open("wb") as f:  # fill the disk to the last block
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    for proc in (run("Q2?"), run("Q3?", "--no-cache"), run_cli("cache", "stats")):
        line = assert_one_line_error(proc, 1)
        assert "intact" in line and ("full" in line or "No space" in line), line
    os.remove(filler)
    # Nothing written before was lost: the trace is byte-identical, the cache still answers.
    assert Path(json.loads(first.stdout)["trace"]).read_bytes() == trace_before
    again = run("Q1?", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["totals"]["cache_hits"] == 1
    listed = json.loads(run_cli("traces", "list", "--json").stdout)
    assert any(t["question"] == "Q1?" and t["status"] == "done" for t in listed)


def _remount(mount: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mount)], check=True)


def test_a_read_only_data_dir_fails_in_one_line_and_loses_nothing(
    small_disk: Path, remote_run: Run
) -> None:
    run = remote_run
    first = run("Q1?", "--json")
    assert first.returncode == 0, first.stderr
    trace_path = Path(json.loads(first.stdout)["trace"])
    trace_before = trace_path.read_bytes()
    files_before = sorted(p.relative_to(small_disk) for p in small_disk.rglob("*"))
    _remount(small_disk, "ro")
    try:
        for proc in (run("Q2?"), run("Q1?"), run_cli("cache", "clear")):
            line = assert_one_line_error(proc, 1)
            assert "read-only" in line and "intact" in line, line
        # Reading what is there still works on a read-only disk.
        shown = run_cli("traces", "show", trace_path.stem)
        assert shown.returncode == 0, shown.stderr
    finally:
        _remount(small_disk, "rw")
    assert trace_path.read_bytes() == trace_before
    assert sorted(p.relative_to(small_disk) for p in small_disk.rglob("*")) == files_before
    again = run("Q1?", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["totals"]["cache_hits"] == 1
