"""A CPU that faults on llama.cpp's repacked kernels (AMX) must never kill conductor.

The crash itself needs such a machine; the tests inject it with a fake child
(`tests/fake_repack_probe.py`, named a fake: fault injection) that dies of SIGSEGV when
repacking is on, as llama.cpp does there. Everything else is real: the CLI, the model load
with repacking off, the verdict file and `doctor`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conductor_cli.backends import repack_check
from conductor_cli.backends.llamacpp import LlamaModels
from conductor_cli.errors import ModelError

from .conftest import assert_one_line_error, run_cli

FAKE = Path(__file__).with_name("fake_repack_probe.py")


@pytest.fixture
def fresh_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state dir with no verdict yet, and a file that counts the fake child's runs."""
    state = tmp_path / "state"
    monkeypatch.setenv("CONDUCTOR_STATE_DIR", str(state))
    runs = tmp_path / "probe-runs.txt"
    monkeypatch.setenv("FAKE_PROBE_RUNS", str(runs))
    monkeypatch.setenv(repack_check.PROBE_ENV, f"{sys.executable} {FAKE}")
    return runs


def _runs(runs: Path) -> list[str]:
    return runs.read_text().split() if runs.exists() else []


def _notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("conductor: note:")]


def test_a_crashing_check_turns_repacking_off_once_and_doctor_says_so(
    fresh_state: Path, fast_config: Path
) -> None:
    first = run_cli("ask", "--config", str(fast_config), "What is 2 + 2?")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip(), "no answer"
    assert _runs(fresh_state) == ["on", "off"]
    notes = _notes(first.stderr)
    assert len(notes) == 1 and "SIGSEGV" in notes[0] and "without it" in notes[0], first.stderr

    second = run_cli("ask", "--config", str(fast_config), "Name a colour.")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip()
    assert _runs(fresh_state) == ["on", "off"], "the kept verdict must not be checked again"
    assert _notes(second.stderr) == []

    doctor = run_cli("doctor", "--json", "--config", str(fast_config))
    rows = {row["what"]: row for row in json.loads(doctor.stdout)}
    assert rows["weight repacking"]["status"] == "warn"
    assert "repacking off" in rows["weight repacking"]["detail"]
    assert "SIGSEGV" in rows["weight repacking"]["detail"]
    assert rows["native crashes"]["status"] == "warn"
    assert str(repack_check.crash_log()) in rows["native crashes"]["detail"]


def test_a_model_loads_without_repacking_when_the_verdict_says_so(
    fresh_state: Path, gguf_path: Path
) -> None:
    notes: list[str] = []
    models = LlamaModels(n_ctx=512, note=notes.append)
    try:
        llama = models.get(gguf_path).llama
        assert llama.model_params.use_extra_bufts is False
        tokens = llama.tokenize(b"A batched decode of several tokens works.", add_bos=True)
        llama.eval(tokens)  # the path that died on the faulting machine
    finally:
        models.close()
    assert len(notes) == 1


def test_the_real_check_is_kept_and_runs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gguf_path: Path
) -> None:
    """The real child on this machine, whichever verdict it reaches (repacking works on most
    CPUs; some with AMX fault): the verdict is kept and reused by the next load, and a note
    is given only when repacking is turned off, once."""
    monkeypatch.setenv("CONDUCTOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv(repack_check.PROBE_ENV, raising=False)
    assert repack_check.load_verdict() is None
    notes: list[str] = []
    models = LlamaModels(n_ctx=512, note=notes.append)
    try:
        llama = models.get(gguf_path).llama
        verdict = repack_check.load_verdict()
        assert verdict is not None
        kept = repack_check.verdict_file(verdict.key).stat().st_mtime_ns
        assert llama.model_params.use_extra_bufts is verdict.repack
        llama.eval(llama.tokenize(b"A batched decode of several tokens works.", add_bos=True))
    finally:
        models.close()
    assert len(notes) == (0 if verdict.repack else 1), notes
    again = LlamaModels(n_ctx=512, note=pytest.fail)
    try:
        again.get(gguf_path)
    finally:
        again.close()
    assert repack_check.verdict_file(verdict.key).stat().st_mtime_ns == kept


def test_a_verdict_from_another_machine_or_build_is_not_used(fresh_state: Path) -> None:
    key = repack_check.machine_key()
    other = "0" * 64
    path = repack_check.verdict_file(key)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps({"repack": False, "reason": "x", "key": other, "checked_at": "then"})
    )
    assert repack_check.load_verdict(key) is None
    path.write_text("{not json")
    assert repack_check.load_verdict(key) is None


def test_a_crash_without_repacking_too_is_one_line(
    fresh_state: Path, fast_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROBE_CRASH", "always")
    proc = run_cli("ask", "--config", str(fast_config), "What is 3 + 3?")
    assert_one_line_error(proc, 1, "even without weight repacking", "install notes")
    assert _runs(fresh_state) == ["on", "off"]


def test_a_stopped_child_is_not_taken_for_a_crash(
    fresh_state: Path, gguf_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROBE_CRASH", "sigterm")
    verdict = repack_check.ensure(gguf_path, note=pytest.fail)
    assert verdict.repack is True
    assert repack_check.load_verdict() is None, "an inconclusive check must not be kept"
    assert _runs(fresh_state) == ["on"]


def test_errors_from_the_check_name_what_to_do(
    fresh_state: Path, gguf_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PROBE_CRASH", "always")
    with pytest.raises(ModelError, match="SIGSEGV"):
        repack_check.ensure(gguf_path, note=pytest.fail)
