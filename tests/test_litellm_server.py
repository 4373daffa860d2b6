"""The litellm path against a real OpenAI-compatible server: `python -m llama_cpp.server`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import run_cli


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(gguf_path: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "conductor_cli.backends.llama_server",  # llama_cpp.server, crash-checked
            "--model",
            str(gguf_path),
            "--model_alias",
            "smol",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
            "--seed",
            "0",
            "--verbose",
            "False",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2) as r:
                if "smol" in r.read().decode():
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(
                f"llama_cpp.server did not start: {proc.stderr.read() if proc.stderr else ''}"
            )
        time.sleep(0.5)
    yield base
    proc.terminate()
    proc.wait(timeout=30)


def test_a_provider_litellm_translates_is_called_through_litellm(
    server: str, tmp_path: Path
) -> None:
    """`hosted_vllm/` is litellm's (an OpenAI-compatible server under another provider's
    name): not called directly, it goes through litellm's helper, for real."""
    config = tmp_path / "vllm.toml"
    config.write_text(
        "[conductor]\nmax_steps = 1\n\n"
        f'[[workers]]\nname = "served"\nmodel = "hosted_vllm/smol"\napi_base = "{server}"\n'
        "max_tokens = 24\n",
        encoding="utf-8",
    )
    proc = run_cli("ask", "--config", str(config), "--json", "Say hello.")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["answer"].strip()
    assert all(s["tokens_in"] > 0 and s["tokens_out"] > 0 for s in doc["steps"])


def test_worker_through_litellm(server: str, tmp_path: Path) -> None:
    """`openai/NAME` at an api_base: called directly (backends/openai_compat.py), the same
    worker as through litellm."""
    config = tmp_path / "served.toml"
    config.write_text(
        "[conductor]\nmax_steps = 2\n\n"
        f'[[workers]]\nname = "served"\nmodel = "openai/smol"\napi_base = "{server}"\n'
        'description = "SmolLM2 behind an OpenAI-compatible server"\nmax_tokens = 48\n',
        encoding="utf-8",
    )
    proc = run_cli("ask", "--config", str(config), "--json", "What is the capital of France?")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert {s["worker"] for s in doc["steps"]} == {"served"}
    assert doc["answer"].strip()
    # Token counts come from the server's usage field, so a real call was made.
    assert all(s["tokens_in"] > 0 and s["tokens_out"] > 0 for s in doc["steps"])


def test_conductor_served_through_litellm(server: str, tmp_path: Path, gguf_path: Path) -> None:
    """No grammar there: the reply is parsed, retried once, or replaced by a one-step plan."""
    config = tmp_path / "served-conductor.toml"
    config.write_text(
        f'[conductor]\nmodel = "litellm:openai/smol"\napi_base = "{server}"\nmax_steps = 2\n\n'
        '[[workers]]\nname = "local"\nmodel = "gguf:smollm2-135m-instruct"\nmax_tokens = 32\n',
        encoding="utf-8",
    )
    proc = run_cli("ask", "--config", str(config), "--json", "What is 2 + 2?")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["plan"]["attempts"] in (1, 2)
    assert 1 <= len(doc["workflow"]["steps"]) <= 2
    if doc["plan"]["fallback"]:
        assert doc["plan"]["attempts"] == 2 and len(doc["workflow"]["steps"]) == 1


def test_litellm_is_imported_only_when_a_litellm_worker_runs(gguf_path: Path) -> None:
    code = (
        "import sys\n"
        "from conductor_cli import ask\n"
        "from conductor_cli.cli.app import main\n"
        "sys.argv = ['conductor', 'config', 'show']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('show', 'litellm' in sys.modules, 'llama_cpp' in sys.modules)\n"
        "ask('What is 1 + 1?')\n"
        "print('ask', 'litellm' in sys.modules, 'llama_cpp' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy()
    )
    lines = out.stdout.strip().splitlines()
    assert "show False False" in lines, out.stderr
    assert lines[-1] == "ask False True", out.stderr


def test_api_key_never_reaches_written_files(
    server: str, tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-planted-3f9a1c7e5b2d4086"
    monkeypatch.setenv("CONDUCTOR_PLANTED_KEY", secret)
    config = tmp_path / "keyed.toml"
    config.write_text(
        "[conductor]\nmax_steps = 2\n\n"
        f'[[workers]]\nname = "served"\nmodel = "openai/smol"\napi_base = "{server}"\n'
        'api_key_env = "CONDUCTOR_PLANTED_KEY"\nmax_tokens = 24\n',
        encoding="utf-8",
    )
    proc = run_cli("ask", "--config", str(config), "--json", "Say hello.")
    assert proc.returncode == 0, proc.stderr
    assert secret not in proc.stdout + proc.stderr
    written = [p for p in isolated_home.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" and "traces" in p.parts for p in written)
    for path in [*written, config]:
        assert secret.encode() not in path.read_bytes(), path
