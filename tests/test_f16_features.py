"""A trained head's features read from its base model's 16-bit copy (backends/f16_copy.py):
made once (by two threads at once, too), killed writers' parts and other builds' copies swept,
close to the quantized file's states but really the copy's, and the shipped head picks from it
what it picked from the file; a conductor trained before reads the file."""

from __future__ import annotations

import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conductor_cli.backends.f16_copy import clear, copies_dir, f16_copy, wanted
from conductor_cli.config import load_config
from conductor_cli.errors import ModelError, WorkflowError
from conductor_cli.models.catalog import file_sha256
from conductor_cli.policy.chooser import read_as
from conductor_cli.policy.features import PromptFeatures
from conductor_cli.policy.registry import conductors_dir, packaged_dir
from conductor_cli.run.planner import plan_messages, worker_infos
from conductor_cli.runtime import Runtime

SHIPPED = "coder-team-1.5b-public"

# Kinds the shipped head sends to different shapes: multiple choice and dates to the coder,
# counting and word problems to a program, typed letters, everyday facts.
QUESTIONS = (
    "Which gas do plants take in from the air? (A) oxygen (B) carbon dioxide (C) helium (D) "
    'neon\n\nEnd your reply with a line "Answer: <your letter>".',
    "Today is 3/5/1990. What is the date one week from today in MM/DD/YYYY?\nOptions:\n(A) "
    '03/12/1990\n(B) 03/05/1991\n(C) 02/26/1990\n\nEnd your reply with a line "Answer: '
    '<your letter>".',
    "I have a flute, two pianos, a goat and three trumpets. How many musical instruments do I "
    'have?\n\nEnd your reply with a line "Answer: <your answer>".',
    "A baker sells 14 loaves a day for 6 days and gives away 9. How many loaves did she sell "
    'in all?\n\nEnd your reply with a line "Answer: <your answer>".',
    "how many r's are in carrier?",
    "spell lantern backwards",
    "What is the capital of France?",
    "Who wrote Pride and Prejudice?",
)


def test_the_copy_is_made_once_swept_and_made_by_two_threads_at_once(
    gguf_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_STATE_DIR", str(tmp_path / "state"))
    assert wanted(gguf_path)  # SmolLM2's Q4_1: the copy reads it twice as fast
    sha = file_sha256(gguf_path)
    folder = copies_dir()
    folder.mkdir(parents=True)
    killed = folder / f".{sha[:32]}-0.3.36-f16.gguf.123-abcd.part"  # a killed writer's part
    killed.write_bytes(b"half")
    os.utime(killed, (time.time() - 3600, time.time() - 3600))
    fresh = folder / ".other-f16.gguf.456-ef01.part"  # another writer, still at work
    fresh.write_bytes(b"half")
    older = folder / f"{sha[:32]}-0.0.1-f16.gguf"  # another llama.cpp build's copy
    older.write_bytes(b"GGUF")
    err_before = os.readlink("/proc/self/fd/2")
    with ThreadPoolExecutor(2) as pool:  # a server's two first plans at once
        made = set(pool.map(lambda _: f16_copy(gguf_path, sha), range(2)))
    (copy,) = made
    # llama.cpp's lines per tensor went to a child's pipe: this process's stderr is intact.
    assert os.readlink("/proc/self/fd/2") == err_before
    assert copy.parent == folder and copy.stat().st_size > 2 * gguf_path.stat().st_size
    assert sorted(p.name for p in folder.iterdir()) == sorted([copy.name, fresh.name])
    stamp = copy.stat().st_mtime_ns
    assert f16_copy(gguf_path, sha) == copy and copy.stat().st_mtime_ns == stamp  # kept
    assert clear() == 1 and [p.name for p in folder.iterdir()] == [fresh.name]


def test_a_damaged_model_ends_in_one_clear_error_and_leaves_no_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_STATE_DIR", str(tmp_path / "state"))
    bad = tmp_path / "damaged.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
    with pytest.raises(ModelError, match=r"damaged\.gguf") as caught:
        f16_copy(bad, "0" * 64)
    assert "\n" not in str(caught.value) and "models pull" in str(caught.value)
    assert list(copies_dir().iterdir()) == []


def test_a_conductor_whose_record_names_no_features_reads_the_file(gguf_path: Path) -> None:
    mine = conductors_dir() / "before"
    shutil.copytree(packaged_dir() / SHIPPED, mine)
    record = json.loads((mine / "record.json").read_text())
    del record["hyperparameters"]["features"]  # trained before 2026-12-02
    (mine / "record.json").write_text(json.dumps(record))
    config = load_config(None)
    config = replace(config, conductor=replace(config.conductor, model="before"))
    with Runtime(config) as runtime:
        chooser = runtime.chooser()
        assert chooser is not None and chooser.features.model == gguf_path


def test_the_shipped_head_reads_the_copy_made_once_and_picks_as_from_the_file(
    gguf_path: Path,
) -> None:
    record = json.loads((packaged_dir() / SHIPPED / "record.json").read_text())
    assert record["hyperparameters"]["features"] == "f16"
    config = load_config(None)
    assert config.conductor.model == SHIPPED
    infos = worker_infos(config.workers)
    with Runtime(config) as runtime:
        chooser = runtime.chooser()
        assert chooser is not None
        assert chooser.features.model == f16_copy(gguf_path, file_sha256(gguf_path))
        native = PromptFeatures(gguf_path, n_ctx=4096, kept=False)
        try:
            picks = set()
            for question in QUESTIONS:
                messages = plan_messages(question, infos, (), config.conductor.max_steps)
                asked = read_as("prompt", messages, question)
                a, b = native(asked), chooser.features(asked)
                cosine = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
                # The same weights: nearly the same state; another file: not the same numbers.
                assert cosine > 0.995, (cosine, question)
                assert not np.allclose(a, b, rtol=0, atol=1e-6)
                from_copy = chooser.choose(messages, question)
                assert from_copy == chooser.head.choose(a), question
                picks.add(from_copy.label)
            assert len(picks) >= 2  # the questions reach more than one shape
        finally:
            native.close()


def test_a_record_naming_features_this_version_does_not_know_is_refused(
    gguf_path: Path,
) -> None:
    mine = conductors_dir() / "future"
    shutil.copytree(packaged_dir() / SHIPPED, mine)
    record = json.loads((mine / "record.json").read_text())
    record["hyperparameters"]["features"] = "f8"
    (mine / "record.json").write_text(json.dumps(record))
    config = load_config(None)
    config = replace(config, conductor=replace(config.conductor, model="future"))
    with Runtime(config) as runtime, pytest.raises(WorkflowError, match="features 'f8'"):
        runtime.chooser()
