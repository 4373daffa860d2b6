"""API keys come only from the environment and go only to the model's server: a planted key
is searched for in every file conductor wrote and everything it printed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import run_cli

PLANTED = "sk-planted-7f3c9e1d2b4a"


def test_a_planted_key_is_used_but_never_written_or_printed(
    tmp_path: Path, isolated_home: Path, fast_config: Path
) -> None:
    # The worker's answer carries code and a shell substitution that would leave marker files
    # if anything executed it: model output is data for ask and run.
    marker = tmp_path / "executed"
    payload = (
        f"remote answer\n```python\nopen({str(marker)!r} + '-py', 'w').write('x')\n```\n"
        f"$(touch {marker}-sh) `touch {marker}-tick`"
    )
    server = FakeOpenAIServer(["ok", "500", "ok"], answer=payload)
    try:
        config = tmp_path / "config.toml"
        config.write_text(
            fast_config.read_text(encoding="utf-8") + "\n[[workers]]\n"
            'name = "remote"\n'
            'model = "openai/gpt-4o-mini"\n'
            f'api_base = "{server.api_base}"\n'
            'api_key_env = "CONDUCTOR_TEST_PLANTED_KEY"\n'
            'description = "the only worker for this test"\n'
            "retries = 1\n",
            encoding="utf-8",
        )
        workflow = tmp_path / "wf.json"
        workflow.write_text(
            '{"steps": [{"worker": "remote", "task": "Say hello politely.", "sees": []},'
            ' {"worker": "remote", "task": "Repeat the greeting above.", "sees": [0]}]}',
            encoding="utf-8",
        )
        os.environ["CONDUCTOR_TEST_PLANTED_KEY"] = PLANTED
        try:
            outputs = [
                # Piped text is data as well: a script on stdin reaches the workers, unrun.
                run_cli(
                    "run",
                    "--config",
                    str(config),
                    "--json",
                    str(workflow),
                    "Hi?",
                    input=f"#!/bin/sh\ntouch {marker}-stdin\n$(touch {marker}-stdin-sub)\n",
                ),
                run_cli("run", "--config", str(config), "-v", str(workflow), "Hi?"),
                run_cli("ask", "--config", str(config), "--json", "Say hi."),
                run_cli("traces", "list", "--json"),
                run_cli("config", "show", "--config", str(config)),
                run_cli("doctor", "--json", "--config", str(config)),
            ]
        finally:
            del os.environ["CONDUCTOR_TEST_PLANTED_KEY"]
    finally:
        server.close()
    assert outputs[0].returncode == 0, outputs[0].stderr
    # The key did its job: the server got it, on every request, the retried one included.
    assert len(server.requests) >= 3
    assert all(r["auth"] == f"Bearer {PLANTED}" for r in server.requests)
    for proc in outputs:
        assert PLANTED not in proc.stdout and PLANTED not in proc.stderr
    written = [p for p in isolated_home.rglob("*") if p.is_file()] + [config]
    assert any(p.suffix == ".json" and "traces" in p.parts for p in written)  # traces exist
    assert any("responses" in p.parts for p in written)  # and cache entries
    assert not list(tmp_path.glob("executed*"))
    assert "$(touch" in outputs[0].stdout  # the payload was printed as text, not run
    assert f"touch {marker}-stdin" in json.dumps(server.requests[0])  # the worker saw stdin
    needle = PLANTED.encode()
    for path in written:
        assert needle not in path.read_bytes(), path
