"""`conductor doctor`: an unreachable worker and a missing key are reported as failures."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import run_cli


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_doctor_reports_unreachable_worker_and_missing_key(tmp_path: Path) -> None:
    up = FakeOpenAIServer(["ok"])  # answers HTTP: reachable
    try:
        config = tmp_path / "config.toml"
        config.write_text(
            f"""
[[workers]]
name = "gone"
model = "openai/x"
api_base = "http://127.0.0.1:{closed_port()}/v1"

[[workers]]
name = "keyed"
model = "openai/gpt-4.1-mini"
api_key_env = "CONDUCTOR_TEST_UNSET_KEY"

[[workers]]
name = "up"
model = "openai/fake"
api_base = "{up.api_base}"
""",
            encoding="utf-8",
        )
        proc = run_cli("doctor", "--json", "--config", str(config))
    finally:
        up.close()
    assert proc.returncode == 1, proc.stderr  # a failed check fails the command
    rows = {r["what"]: r for r in json.loads(proc.stdout)}
    assert rows["worker gone"]["status"] == "fail"
    assert "unreachable" in rows["worker gone"]["detail"]
    assert rows["worker keyed"]["status"] == "fail"
    assert "CONDUCTOR_TEST_UNSET_KEY is not set" in rows["worker keyed"]["detail"]
    assert rows["worker up"]["status"] == "ok"
    assert rows["config"]["status"] == "ok" and str(config) in rows["config"]["detail"]
    for what in ("python", "llama.cpp", "gpu offload", "sandbox", "cache dir", "trace dir"):
        assert rows[what]["status"] in ("ok", "warn"), rows[what]
    # The code sandbox's confinement, or why there is none: Landlock either way.
    assert "Landlock" in rows["sandbox"]["detail"], rows["sandbox"]
    if rows["sandbox"]["status"] == "ok":  # then one row for each confinement in force
        for what in ("reads", "writes", "network", "unix sockets", "processes", "memory", "disk"):
            assert rows[f"sandbox {what}"]["status"] == "ok", rows
        assert "its folder only" in rows["sandbox reads"]["detail"]
        assert rows["sandbox unix sockets"]["detail"] == "none (seccomp)"


def test_doctor_passes_on_a_good_setup_and_prints_plain_lines_when_piped(
    fast_config: Path,
) -> None:
    proc = run_cli("doctor", "--config", str(fast_config))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line.split("\t") for line in proc.stdout.splitlines()]
    assert all(len(parts) == 3 for parts in lines), proc.stdout
    status = {parts[0]: parts[1] for parts in lines}
    assert status["model smollm2-135m-instruct"] == "ok"
    assert status["worker local"] == "ok"


def test_doctor_names_a_broken_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[conductor\n", encoding="utf-8")
    proc = run_cli("doctor", "--json", "--config", str(bad))
    assert proc.returncode == 1
    rows = {r["what"]: r for r in json.loads(proc.stdout)}
    assert rows["config"]["status"] == "fail" and "invalid TOML" in rows["config"]["detail"]


def test_every_listing_prints_json_that_parses(fast_config: Path) -> None:
    """`--json` wherever a listing is printed, each one valid JSON of the expected shape."""
    listings = {
        ("traces", "list", "--json"): list,
        ("workers", "list", "--json", "--config", str(fast_config)): list,
        ("models", "list", "--json"): list,
        ("models", "info", "smollm2-135m-instruct", "--json"): dict,
        ("cache", "stats", "--json"): dict,
        ("doctor", "--json", "--config", str(fast_config)): list,
    }
    for args, shape in listings.items():
        proc = run_cli(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert isinstance(json.loads(proc.stdout), shape), args
