"""A planning prompt's hidden state is read once and kept (policy/feature_store.py): read again,
in this process or a later one, it costs no decode and is the very same numbers; a damaged or
foreign file is never read as features; `cache clear` removes them. The prompt's fixed prefix
(instructions and pool) is kept too (backends/hidden_states.py): a later run decodes only a
new question's own tokens, to the same numbers. On the real default GGUF."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conductor_cli.policy.feature_store import FeatureStore
from conductor_cli.policy.features import PromptFeatures
from conductor_cli.run.planner import WorkerInfo, plan_messages

from .conftest import run_cli

POOL = [WorkerInfo("w0", "a general assistant"), WorkerInfo("w1", "a careful checker")]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FeatureStore:
    # A state folder of this test's own: the suite's shared one holds other tests' prompts.
    monkeypatch.setenv("CONDUCTOR_STATE_DIR", str(tmp_path / "state"))
    return FeatureStore.default()


def _no_decode(features: PromptFeatures) -> None:
    def refuse(tokens: list[int], fixed: int = 0) -> np.ndarray:
        raise AssertionError("decoded a prompt the store holds")

    features._states.last = refuse  # type: ignore[method-assign]


def test_a_prompt_read_once_is_read_again_from_disk(gguf_path: Path, store: FeatureStore) -> None:
    question = plan_messages("What is 7 times 8?", POOL, (), 2)
    first = PromptFeatures(gguf_path, n_ctx=2048)
    try:
        read = first(question)
    finally:
        first.close()
    (kept,) = store.files()
    assert kept.stat().st_size == 32 + 4 * read.size

    later = PromptFeatures(gguf_path, n_ctx=2048)  # another run
    _no_decode(later)
    try:
        again = later(question)
    finally:
        later.close()
    assert again.dtype == np.float32 and np.array_equal(again, read)

    # Damaged (cut short, or another prompt's numbers under this name): decoded again, and
    # the same numbers as a prompt never kept.
    whole = kept.read_bytes()
    kept.write_bytes(whole[:-4])
    plain = PromptFeatures(gguf_path, n_ctx=2048, kept=False)
    try:
        fresh = plain(question)
        assert len(store.files()) == 1  # kept=False writes nothing
    finally:
        plain.close()
    foreign = bytes(32) + np.ones(read.size, dtype="<f4").tobytes()  # another key's
    for damaged in (whole[:-4], foreign):
        kept.write_bytes(damaged)
        reread = PromptFeatures(gguf_path, n_ctx=2048)
        try:
            np.testing.assert_allclose(reread(question), fresh, rtol=1e-4, atol=1e-4)
        finally:
            reread.close()
        assert kept.stat().st_size == 32 + 4 * read.size  # written whole again

    cleared = run_cli("cache", "clear")
    assert cleared.returncode == 0, cleared.stderr
    # The question's numbers and the prompt's fixed prefix (test below).
    assert "2 prompt states" in cleared.stdout and store.files() == []
    assert not list(store.directory.parent.glob("*.kvstate"))


def test_the_fixed_prefix_is_decoded_once_and_a_later_run_loads_it(
    gguf_path: Path, store: FeatureStore
) -> None:
    states = store.directory.parent
    first = PromptFeatures(gguf_path, n_ctx=2048)
    try:
        first(plan_messages("What is 7 times 8?", POOL, (), 2))
    finally:
        first.close()
    (prefix,) = states.glob("*.kvstate")

    question = plan_messages("Spell stone backwards.", POOL, (), 2)
    later = PromptFeatures(gguf_path, n_ctx=2048)  # another run, another question
    decoded: list[int] = []
    decode = later._states._decode

    def counted(tokens: list[int], keep: int) -> None:
        decoded.append(len(tokens) - keep)
        decode(tokens, keep)

    later._states._decode = counted  # type: ignore[method-assign]
    try:
        fixed = later._fixed(question, later._states.chat_tokens(question) or [])
        loaded = later(question)
    finally:
        later.close()
    # Only the question's own tokens were read: the prefix came from the file.
    assert fixed > 200 and decoded and sum(decoded) < 40, (fixed, decoded)

    # Loaded or decoded, the prefix's state is the same bytes: the same numbers as a run that
    # keeps nothing; and a damaged file is decoded again and written whole.
    plain = PromptFeatures(gguf_path, n_ctx=2048, kept=False)
    try:
        assert np.array_equal(plain(question), loaded)
    finally:
        plain.close()
    size = prefix.stat().st_size
    prefix.write_bytes(prefix.read_bytes()[:-8])
    for kept in store.files():
        kept.unlink()
    again = PromptFeatures(gguf_path, n_ctx=2048)
    try:
        assert np.array_equal(again(question), loaded)
    finally:
        again.close()
    assert prefix.stat().st_size == size  # written whole again
