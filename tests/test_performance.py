"""What makes conductor fast, checked as behaviour (timings live in bench/, never here):
start-up imports nothing heavy, nothing loads a model before the input and config are good,
the conductor's prompt prefix state is saved and reloaded, constrained generation obeys its
grammar, one llama.cpp instance per GGUF, and llama.cpp's thread count follows physical cores.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conductor_cli.api import ask
from conductor_cli.backends.base import Request
from conductor_cli.backends.hardware import physical_cores
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels, fixed_prefix
from conductor_cli.backends.prefix_state import PrefixStateStore, state_key
from conductor_cli.config.settings import load_config
from conductor_cli.run.planner import Conductor, WorkerInfo, plan_messages
from conductor_cli.runtime import Runtime

from .conftest import assert_one_line_error

HEAVY = ("litellm", "llama_cpp")
POOL = [
    WorkerInfo(
        name,
        f"Strong at {name} tasks; careful and thorough; writes clear explanations with worked "
        "examples and checks its own arithmetic before it answers.",
    )
    for name in ("coder", "mathematician", "writer", "reviewer", "researcher", "translator")
]


def imported_top_levels(*args: str, env: dict[str, str] | None = None) -> tuple[set[str], Any]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "conductor_cli", *args],
        capture_output=True,
        text=True,
        env=env or os.environ.copy(),
        timeout=120,
    )
    lines = proc.stderr.splitlines()
    names = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in lines
        if line.startswith("import time:")
    }
    # What the user would see: stderr without the import log.
    proc.stderr = "".join(f"{x}\n" for x in lines if not x.startswith("import time:"))
    return names, proc


def test_help_and_config_show_import_neither_litellm_nor_llama_cpp() -> None:
    names, proc = imported_top_levels("--help")
    assert proc.returncode == 0 and "ask" in proc.stdout and "replay" in proc.stdout
    assert not names & set(HEAVY), names & set(HEAVY)
    # typer 0.29 validates every option through pydantic (+0.2 s): the pin keeps it out.
    assert "pydantic" not in names and "tomlkit" not in names  # only the editing commands
    names, proc = imported_top_levels("config", "show")
    assert proc.returncode == 0 and "[conductor]" in proc.stdout
    assert not names & {*HEAVY, "pydantic", "diskcache", "tomlkit"}, names


def test_bad_config_or_empty_question_costs_no_model_load(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[conductor]\nkv_cache_type = "q5"\n', encoding="utf-8")
    names, proc = imported_top_levels("ask", "--config", str(bad), "What is 2+2?")
    assert_one_line_error(proc, 2, "conductor.kv_cache_type", "q8_0")
    assert "llama_cpp" not in names
    names, proc = imported_top_levels("ask", "   ")
    assert_one_line_error(proc, 2, "question is empty")
    assert "llama_cpp" not in names


def test_one_llama_instance_serves_conductor_and_local_worker(fast_config: Path) -> None:
    models = LlamaModels(n_ctx=2048, n_threads=1)
    try:
        cfg = load_config(fast_config)
        with Runtime(cfg, models=models) as runtime:
            result = ask("Name a colour.", config=cfg, runtime=runtime)
        assert result.model_calls >= 2  # the conductor and at least one worker step
        assert len(models._models) == 1  # the same file: loaded once, shared
    finally:
        models.close()


def _fake_cpu(root: Path, cpu: int, package: int, core: int) -> None:
    topo = root / f"cpu{cpu}" / "topology"
    topo.mkdir(parents=True)
    (topo / "physical_package_id").write_text(f"{package}\n")
    (topo / "core_id").write_text(f"{core}\n")


def test_physical_cores_count_hyperthread_siblings_once(tmp_path: Path) -> None:
    for cpu, (package, core) in enumerate([(0, 0), (0, 1), (0, 0), (0, 1), (1, 0), (1, 0)]):
        _fake_cpu(tmp_path, cpu, package, core)
    assert physical_cores(range(6), tmp_path) == 3  # (0,0) (0,1) (1,0)
    assert physical_cores({0, 2}, tmp_path) == 1  # two siblings of one core
    assert physical_cores({0, 1, 9}, tmp_path) == 3  # no topology for cpu9: count CPUs
    assert LlamaModels(n_threads=0).n_threads == physical_cores()
    assert LlamaModels(n_threads=3).n_threads == 3


@pytest.fixture
def store(tmp_path: Path) -> PrefixStateStore:
    return PrefixStateStore(tmp_path / "states")


def _plan(models: LlamaModels, gguf_path: Path, question: str) -> Any:
    backend = LlamaCppBackend(models, gguf_path, "sha-of-test-model")
    return Conductor(backend, temperature=0.2, seed=0).plan(question, POOL, (), 4)


class EvalSpy:
    """Records how many tokens each llama.eval call read (a spy; the real eval still runs)."""

    def __init__(self, llama: Any) -> None:
        self.sizes: list[int] = []
        real = llama.eval

        def eval_and_record(tokens: Any) -> None:
            self.sizes.append(len(tokens))
            real(tokens)

        llama.eval = eval_and_record


@pytest.fixture
def fresh_models(store: PrefixStateStore) -> Iterator[list[LlamaModels]]:
    made: list[LlamaModels] = []
    yield made
    for m in made:
        m.close()


def test_prefix_state_is_saved_then_loaded_instead_of_read_again(
    gguf_path: Path, store: PrefixStateStore, fresh_models: list[LlamaModels]
) -> None:
    first_models = LlamaModels(n_ctx=2048, n_threads=1, state_store=store)
    fresh_models.append(first_models)
    first = _plan(first_models, gguf_path, "How many primes are below 100?")
    files = store.files()
    assert len(files) == 1
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700

    # A new registry stands for a new process: nothing of the first is in its context.
    second_models = LlamaModels(n_ctx=2048, n_threads=1, state_store=store)
    fresh_models.append(second_models)
    llama = second_models.get(gguf_path).llama
    spy = EvalSpy(llama)
    messages = plan_messages("How many primes are below 100?", POOL, (), 4)
    prefix = fixed_prefix(llama, messages, 1)
    assert len(prefix) > 300  # instructions + six long descriptions
    second = _plan(second_models, gguf_path, "How many primes are below 100?")
    assert second.reply == first.reply and second.workflow == first.workflow
    prompt_reads = [n for n in spy.sizes if n > 1]
    # Only the question's part of the prompt was read; the prefix came from the file.
    assert prompt_reads == [second.tokens_in - len(prefix)]


def test_a_damaged_or_foreign_state_file_is_never_loaded(
    gguf_path: Path, store: PrefixStateStore, fresh_models: list[LlamaModels]
) -> None:
    models = LlamaModels(n_ctx=2048, n_threads=1, state_store=store)
    fresh_models.append(models)
    first = _plan(models, gguf_path, "Name a prime number.")
    (path,) = store.files()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one flipped byte in llama.cpp's blob
    path.write_bytes(bytes(data))

    again_models = LlamaModels(n_ctx=2048, n_threads=1, state_store=store)
    fresh_models.append(again_models)
    llama = again_models.get(gguf_path).llama
    spy = EvalSpy(llama)
    prefix = fixed_prefix(llama, plan_messages("Name a prime number.", POOL, (), 4), 1)
    key = path.name.removesuffix(".kvstate")
    assert store.load(key, prefix) is None  # the checksum refuses it
    assert store.load(key, prefix[:-1]) is None  # so does a different prefix
    second = _plan(again_models, gguf_path, "Name a prime number.")
    assert second.reply == first.reply
    assert len(prefix) in spy.sizes  # read again, not loaded
    assert store.load(key, prefix) is not None  # and the file is whole again


def test_a_state_file_with_a_damaged_length_is_ignored(store: PrefixStateStore) -> None:
    import struct

    key = state_key("model", "build", 2048, [1, 2])
    store.save(key, [1, 2], b"blob")
    (path,) = store.files()
    data = path.read_bytes()
    start = len(b"conductor-kv-state\n")
    for length in (2**63, 10**12):  # more than the file holds: read whole, it would not fit
        path.write_bytes(data[:start] + struct.pack("<Q", length) + data[start + 8 :])
        assert store.load(key, [1, 2]) is None


def test_state_store_keeps_only_the_newest_files(store: PrefixStateStore) -> None:
    small = PrefixStateStore(store.directory, keep=2)
    keys = [state_key("model", "build", 2048, [i, i + 1]) for i in range(3)]
    for i, key in enumerate(keys):
        small.save(key, [i, i + 1], bytes([i]) * 10)
        time.sleep(0.01)  # distinct mtimes
    assert small.load(keys[0], [0, 1]) is None
    assert small.load(keys[2], [2, 3]) == bytes([2]) * 10
    assert len(small.files()) == 2
    assert state_key("model", "build", 2048, [1]) != state_key("other", "build", 2048, [1])
    assert state_key("model", "build", 2048, [1]) != state_key("model", "build", 4096, [1])
    assert small.clear() == 2 and small.files() == []


def test_constrained_generation_follows_the_grammar_not_the_model(gguf_path: Path) -> None:
    models = LlamaModels(n_ctx=2048, n_threads=1)
    try:
        backend = LlamaCppBackend(models, gguf_path, "sha")
        messages = ({"role": "user", "content": "Write a long poem about the sea."},)
        for seed in range(3):
            out = backend.complete(
                Request(messages, 20, 0.8, seed, grammar='root ::= "yes" | "no"')
            )
            assert out.text in {"yes", "no"} and out.finish_reason == "stop"
        out = backend.complete(Request(messages, 5, 0.2, 0, grammar='root ::= "a"{1,100}'))
        # Cut at max_tokens, still only what the grammar allows (a token may hold several a's).
        assert set(out.text) == {"a"} and out.finish_reason == "length"
        assert out.tokens_out == 5
    finally:
        models.close()


def test_every_llama_call_runs_on_the_models_own_thread(gguf_path: Path) -> None:
    # One OpenMP team per calling thread made local steps ~3x slower once the main thread had
    # planned (bench/model_thread.py); calls from any thread must land on one thread.
    models = LlamaModels(n_ctx=1024)
    backend = LlamaCppBackend(models, gguf_path, "test")
    loaded = models.get(gguf_path)
    seen: list[int] = []
    real = loaded.llama.create_chat_completion

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(threading.get_ident())
        return real(*args, **kwargs)

    loaded.llama.create_chat_completion = spy
    request = Request(
        messages=({"role": "user", "content": "Say hi."},), max_tokens=4, temperature=0.0, seed=1
    )
    try:
        backend.complete(request)
        callers = [threading.Thread(target=backend.complete, args=(request,)) for _ in range(2)]
        for t in callers:
            t.start()
        for t in callers:
            t.join()
    finally:
        models.close()
    assert len(seen) == 3 and len(set(seen)) == 1
    assert seen[0] != threading.get_ident()
    assert seen[0] not in {t.ident for t in callers}


CLOSE_UNDER_A_QUEUED_CALL = """
import sys, threading
from pathlib import Path
from conductor_cli.backends.base import Request
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.errors import WorkerError

gguf = Path(sys.argv[1])
models = LlamaModels(n_ctx=512, n_threads=1)
backend = LlamaCppBackend(models, gguf, "test")
loaded = models.get(gguf)
messages = ({"role": "user", "content": "Say hi."},)
request = Request(messages=messages, max_tokens=8, temperature=0.0, seed=1)
# The model's thread is busy (not inside the model) while a step's call waits behind it: the
# moment after Ctrl-C when the run closes its models and a step thread is about to call one.
release = threading.Event()
loaded.thread.submit(release.wait)
outcome = []

def step():
    try:
        outcome.append(backend.complete(request).text)
    except WorkerError as e:
        outcome.append(str(e))

caller = threading.Thread(target=step)
caller.start()
while loaded.thread._work_queue.qsize() < 1:
    pass
models.close()
release.set()
caller.join()
try:
    backend.complete(request)
except WorkerError as e:
    outcome.append(str(e))
print(outcome)
"""


def test_closing_models_under_a_waiting_call_fails_the_call_instead_of_crashing(
    gguf_path: Path,
) -> None:
    # Found in CI: Ctrl-C during `conductor eval` ended in SIGSEGV. The run closed its models
    # while a step's call was queued on the model's thread; the call then ran on the freed model.
    proc = subprocess.run(
        [sys.executable, "-c", CLOSE_UNDER_A_QUEUED_CALL, str(gguf_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    closed = "llama.cpp: the model was closed (the run is ending)"
    assert proc.stdout.strip() == repr([closed, closed])
