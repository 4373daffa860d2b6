"""The server's parts without a model: cancelling a run, the CLI's request format, the config
watch and the local files (fast; tests/test_server_client.py runs the whole thing for real)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from conductor_cli.errors import ConfigError, InputError, RunCancelled
from conductor_cli.run.events import StepStarted
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.server import local
from conductor_cli.server.app import ConfigWatch
from conductor_cli.testing.fake_backend import FakeBackend, fake_worker
from conductor_cli.wire import Overrides, RunRequest

from .test_engine_unit import Recorder, engine


def test_a_cancelled_run_ends_at_once_while_its_step_still_waits() -> None:
    release = threading.Event()
    fake = FakeBackend(on_call=lambda request: release.wait(10))
    cancel = threading.Event()
    rec = Recorder()
    wf = Workflow((Step("w", "A", ()), Step("w", "B", (0,))))
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            engine([fake_worker("w", fake)], rec, cancel=cancel).run_steps("q", wf, ())
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    while not rec.of(StepStarted):
        time.sleep(0.01)
    start = time.monotonic()
    cancel.set()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - start < 1.0
    assert len(outcome) == 1 and isinstance(outcome[0], RunCancelled)
    assert isinstance(outcome[0], KeyboardInterrupt)  # ends as interrupted, like Ctrl-C
    assert fake.calls == 1  # step B never started
    release.set()


def test_a_cancelled_streaming_step_stops_at_its_next_token() -> None:
    cancel = threading.Event()

    def on_call(request: object) -> None:
        cancel.set()  # cancelled before the first token arrives

    fake = FakeBackend(reply="one two three four", on_call=on_call)
    rec = Recorder()
    with pytest.raises(RunCancelled):
        engine([fake_worker("w", fake)], rec, cancel=cancel, stream=True).run_steps(
            "q", Workflow((Step("w", "A", ()),)), ()
        )
    seen = [e for e in rec.events if type(e).__name__ == "StepToken"]
    assert seen == []


def test_run_requests_round_trip_and_reject_bad_fields() -> None:
    request = RunRequest(
        "q",
        (("stdin", "text"),),
        {"steps": [{"worker": "w", "task": "t", "sees": []}]},
        Overrides(conductor="c", workers=("w",), max_steps=2, seed=7),
        "refresh",
        True,
        0.5,
        3,
        "trace",
        "abc",
    )
    import json

    assert RunRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
    for bad, field in [
        ({"question": 1}, "question"),
        ({"question": "q", "attachments": [["a"]]}, "attachments"),
        ({"question": "q", "cache_mode": "sometimes"}, "cache_mode"),
        ({"question": "q", "overrides": {"max_steps": "2"}}, "max_steps"),
        ({"question": "q", "overrides": {"seed": True}}, "seed"),
        ({"question": "q", "max_cost": "1"}, "max_cost"),
        ({"question": "q", "max_cost": True}, "max_cost"),
        ({"question": "q", "attachments": 5}, "attachments"),
        ({"question": "q", "stream": "yes"}, "stream"),
        ({"question": "q", "source": "elsewhere"}, "source"),
        ([], "object"),
    ]:
        with pytest.raises(ValueError, match=field):
            RunRequest.from_dict(bad)


def test_the_config_watch_sees_changes_not_touches_and_survives_a_broken_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[conductor]\nmax_steps = 2\n")
    watch = ConfigWatch(path)
    assert watch.changed() is None
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))  # touched only
    assert watch.changed() is None
    path.write_text("[conductor]\nmax_steps = 3\n")
    new = watch.changed()
    assert new is not None and new.conductor.max_steps == 3
    assert watch.changed() is None
    path.write_text("[conductor]\nmax_steps = -1\n")
    with pytest.raises(ConfigError, match="max_steps"):
        watch.changed()
    with pytest.raises(ConfigError):  # still broken: looked at again, not forgotten
        watch.changed()
    path.write_text("[conductor]\nmax_steps = 4\n")
    fixed = watch.changed()
    assert fixed is not None and fixed.conductor.max_steps == 4


def test_local_files_are_private_and_stale_ones_are_removed(tmp_path: Path) -> None:
    files = local.prepare(local.files_for(tmp_path / "c.toml"))
    os.chmod(files.directory, 0o755)
    local.prepare(files)
    assert files.directory.stat().st_mode & 0o777 == 0o700
    # What a killed server leaves: a socket nobody listens on, a pid file of a dead process.
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(files.socket))
    dead.close()
    local.write_info(files, local.ServerInfo(2**22 + 1, str(files.socket), None, "c", 0.0, True))
    assert files.pid.stat().st_mode & 0o777 == 0o600
    assert local.clean_stale(files)
    assert not files.socket.exists() and not files.pid.exists()
    assert not local.clean_stale(files)  # nothing left to clean


def test_one_server_per_config_and_data_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = local.files_for(tmp_path / "a.toml")
    assert local.files_for(tmp_path / "a.toml") == a
    assert local.files_for(tmp_path / "b.toml").key != a.key
    monkeypatch.setenv("CONDUCTOR_DATA_DIR", str(tmp_path / "elsewhere"))
    assert local.files_for(tmp_path / "a.toml").key != a.key


def test_a_runtime_dir_too_deep_for_a_socket_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_RUNTIME_DIR", str(tmp_path / ("d" * 120)))
    with pytest.raises(InputError, match="CONDUCTOR_RUNTIME_DIR"):
        local.prepare(local.files_for(None))


def test_an_exited_process_not_yet_collected_is_not_alive() -> None:
    # What a stopped detached server is until the init process collects it (seconds in a
    # micro-VM, never under a PID 1 that collects nothing): `serve --stop` must not wait for it.
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(pid, 0)  # signal 0 still reaches it
        assert not local.pid_alive(pid)
    finally:
        os.waitpid(pid, 0)
    assert not local.pid_alive(pid)
    assert local.pid_alive(os.getpid())
