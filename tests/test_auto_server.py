"""The background server on by default (issue 32): the first `conductor run` of a session
starts one and says so in one note, the next reuses it silently, a changed credential gets a
server of its own, `serve --stop` stops them all, and a server that cannot start leaves the
run in-process. Real CLI processes and servers on real sockets; the worker is a fake
OpenAI-compatible server (conductor_cli/testing/fake_openai.py), so no model is loaded."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_cli.server import local
from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import assert_one_line_error, run_cli

QUESTION = "What is 2 + 2?"
SECRET = "sk-test-" + "q" * 24


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer(["ok"], answer="Four.")
    yield server
    server.close()


@pytest.fixture
def setup(
    fake: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, Path]]:
    """The default config but for its one worker (the fake, keyed by W_CREDS), a one-step
    workflow, and CONDUCTOR_SERVER_AUTO unset (conftest sets it to 0). Every server it
    started is stopped, and checked gone, on the way out."""
    monkeypatch.delenv("CONDUCTOR_SERVER_AUTO")
    monkeypatch.delenv("W_CREDS", raising=False)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[workers]]\nname = "w"\nmodel = "openai/w"\napi_base = "{fake.api_base}"\n'
        'api_key_env = "W_CREDS"\nretries = 0\n',
        encoding="utf-8",
    )
    workflow = tmp_path / "wf.json"
    workflow.write_text(json.dumps({"steps": [{"worker": "w", "task": "Answer.", "sees": []}]}))
    yield config, workflow
    pids = [i.pid for f in local.servers_of_config(config) if (i := local.read_info(f))]
    run_cli("--config", str(config), "serve", "--stop")
    deadline = time.monotonic() + 10
    while any(local.pid_alive(p) for p in pids):
        assert time.monotonic() < deadline, "a server outlived `serve --stop`"
        time.sleep(0.05)


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("conductor: note:")]


def run(config: Path, workflow: Path, *extra: str) -> tuple[str, str]:
    done = run_cli(
        "--config", str(config), "run", "--no-cache", *extra, str(workflow), QUESTION, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def test_the_first_run_starts_a_server_with_one_note_and_the_second_reuses_it(
    setup: tuple[Path, Path], fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, workflow = setup
    monkeypatch.setenv("W_CREDS", SECRET)
    out, err = run(config, workflow)
    assert out.strip() == "Four."
    [note] = err.strip().splitlines()  # the note, and nothing else
    assert note.startswith("conductor: note: started a background server for this config")
    for needle in ("10 min idle", "conductor serve --stop", "server.auto false", "--no-server"):
        assert needle in note, (needle, note)
    info = local.read_info(local.files_for(config))
    assert info is not None and info.detached and f"pid {info.pid}" in note
    assert info.url is None  # socket only: nothing else on this machine reaches it

    out, err = run(config, workflow)
    assert (out.strip(), err) == ("Four.", "")  # reused: no second note
    done = run_cli("--config", str(config), "serve", "--status", "--json")
    doc = json.loads(done.stdout)
    assert doc["pid"] == info.pid and doc["runs_served"] == 2 and doc["other_servers"] == []
    assert list(doc["listening"]) == ["socket"]
    assert [r["auth"] for r in fake.requests] == [f"Bearer {SECRET}"] * 2

    out, err = run(config, workflow, "--no-server")  # in this process: the server not asked
    assert (out.strip(), err) == ("Four.", "") and len(fake.requests) == 3
    assert (
        json.loads(run_cli("--config", str(config), "serve", "--status", "--json").stdout)[
            "runs_served"
        ]
        == 2
    )


def test_a_key_exported_after_the_server_started_gets_a_server_of_its_own(
    setup: tuple[Path, Path], fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, workflow = setup
    # The server starts without the worker's key: the run fails there, as in-process.
    failed = run_cli("--config", str(config), "run", "--no-cache", str(workflow), QUESTION)
    assert failed.returncode == 2 and "W_CREDS is not set" in failed.stderr, failed.stderr
    assert len(notes(failed.stderr)) == 1
    old = local.read_info(local.files_for(config))
    assert old is not None

    monkeypatch.setenv("W_CREDS", SECRET)  # the user exports it and asks again
    out, err = run(config, workflow)
    assert out.strip() == "Four."
    [note] = notes(err)
    assert "started a background server" in note and "has other keys" in note, note
    new = local.read_info(local.files_for(config))
    assert new is not None and new.pid != old.pid and local.pid_alive(old.pid)
    assert [r["auth"] for r in fake.requests] == [f"Bearer {SECRET}"]
    # The environment's hash names the files; no value is written anywhere.
    runtime = local.files_for(config).directory
    for path in runtime.iterdir():
        assert SECRET not in path.name
        if path.suffix in (".json", ".log"):
            assert SECRET not in path.read_text(errors="replace")

    status = run_cli("--config", str(config), "serve", "--status", "--json")
    doc = json.loads(status.stdout)
    assert doc["pid"] == new.pid
    assert [o["pid"] for o in doc["other_servers"]] == [old.pid]
    status = run_cli("--config", str(config), "serve", "--status")
    assert f"pid           {new.pid}" in status.stdout
    assert f"(pid {old.pid})" in status.stderr and "serve --stop" in status.stderr

    stopped = run_cli("--config", str(config), "serve", "--stop")
    assert stopped.returncode == 0, stopped.stderr
    assert sorted(stopped.stderr.strip().splitlines()) == sorted(
        f"conductor: stopped the server (pid {p})" for p in (old.pid, new.pid)
    )
    assert not any(local.pid_alive(p) for p in (old.pid, new.pid))
    assert local.servers_of_config(config) == []
    gone = run_cli("--config", str(config), "serve", "--status", "--json")
    assert gone.returncode == 1 and json.loads(gone.stdout) == {
        "running": False,
        "other_servers": [],
    }


def test_a_server_that_cannot_start_leaves_the_run_in_process(
    setup: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, workflow = setup
    monkeypatch.setenv("W_CREDS", SECRET)
    # Fault injection: the runtime dir is a file of the user's.
    mine = tmp_path / "not-a-dir"
    mine.write_text("the user's own file\n")
    monkeypatch.setenv("CONDUCTOR_RUNTIME_DIR", str(mine))
    out, err = run(config, workflow)
    assert out.strip() == "Four."
    [note] = err.strip().splitlines()
    assert note.startswith("conductor: note: could not start a background server"), note
    assert "not a directory" in note and note.endswith("running in-process")
    assert mine.read_text() == "the user's own file\n"  # nothing the user made is lost


def test_conductor_server_auto_beats_the_config(
    setup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, workflow = setup
    monkeypatch.setenv("W_CREDS", SECRET)
    monkeypatch.setenv("CONDUCTOR_SERVER_AUTO", "0")
    out, err = run(config, workflow)
    assert (out.strip(), err) == ("Four.", "")
    assert local.servers_of_config(config) == []

    config.write_text(config.read_text() + "\n[server]\nauto = false\n", encoding="utf-8")
    monkeypatch.setenv("CONDUCTOR_SERVER_AUTO", "true")
    out, err = run(config, workflow, "-q")  # started, but -q keeps the note back
    assert (out.strip(), err) == ("Four.", "")
    assert len(local.servers_of_config(config)) == 1

    monkeypatch.setenv("CONDUCTOR_SERVER_AUTO", "maybe")
    done = run_cli("--config", str(config), "run", "--no-cache", str(workflow), QUESTION)
    assert_one_line_error(done, 2, "CONDUCTOR_SERVER_AUTO")


def test_the_environment_hash_follows_credentials_endpoints_and_the_configs_key_names(
    tmp_path: Path,
) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[[workers]]\nname = "w"\nmodel = "openai/w"\napi_key_env = "MY_CREDS"\n')
    base = {"PATH": "/bin", "HOME": "/home/u"}
    same = local.environment_id(config, base)
    assert local.environment_id(config, {**base, "EDITOR": "vi", "LANG": "C"}) == same
    # The CLI's own client settings pick a server; they change nothing a run does.
    for name in ("CONDUCTOR_SERVER_KEY", "CONDUCTOR_SERVER_AUTO"):
        assert local.environment_id(config, {**base, name: "x"}) == same
    for name in (
        "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "MY_SECRET",
        "AZURE_API_BASE", "CUSTOM_BASE_URL", "AWS_REGION_NAME", "GOOGLE_APPLICATION_CREDENTIALS",
        "VERTEXAI_PROJECT", "HF_HOME", "OLLAMA_HOST", "LITELLM_LOG", "OPENROUTER_REFERRER",
        "https_proxy", "NO_PROXY", "MY_CREDS", "CONDUCTOR_SANDBOX",
    ):  # fmt: skip
        changed = local.environment_id(config, {**base, name: "v"})
        assert changed != same, name
        assert local.environment_id(config, {**base, name: "w"}) != changed, name
    # A name the config gives counts set or not: set to "" is not unset.
    assert local.environment_id(config, {**base, "MY_CREDS": ""}) != same
    assert len(same) == 8
    # An MCP server's ${VAR}s are read when the (background) server starts it: they count too.
    config.write_text(
        config.read_text() + '[mcp_servers.fs]\ncommand = "${FS_BIN:-npx}"\nargs = ["${FS_ROOT}"]\n'
        '[mcp_servers.fs.env]\nMODE = "${FS_MODE}"\n'
    )
    with_servers = local.environment_id(config, base)
    for name in ("FS_BIN", "FS_ROOT", "FS_MODE"):
        assert local.environment_id(config, {**base, name: "v"}) != with_servers, name
    assert local.environment_id(config, {**base, "FS_OTHER": "v"}) == with_servers
    # Broken or missing config: the pattern rule alone, no error.
    config.write_text("[[workers]\n")
    assert local.environment_id(config, base) == local.environment_id(tmp_path / "none", base)
