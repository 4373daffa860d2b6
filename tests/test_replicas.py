"""Serving replicas: several real `conductor serve --replica` processes of one config behind
LiteLLM's Router (least-busy), as docs/serve.md sets them up. The conductor is the embedded
GGUF model, planning for real in each replica; the pool's one worker is a simulated
OpenAI-compatible server (testing/fake_openai.py) that answers after a fixed delay."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import assert_one_line_error, run_cli, start_cli

REQUESTS = 8


def serving_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    line = ""
    while "serving" not in line:
        line = proc.stderr.readline()
        assert line, proc.communicate(timeout=60)
    return re.search(r"http://\S+/v1", line).group(0)  # type: ignore[union-attr]


@pytest.fixture
def worker() -> Iterator[FakeOpenAIServer]:
    fake = FakeOpenAIServer(["slow"], answer="Answer {n}.", delay=0.5)
    yield fake
    fake.close()


def test_two_replicas_behind_litellms_router_share_the_requests(
    tmp_path: Path, isolated_home: Path, gguf_path: Path, worker: FakeOpenAIServer
) -> None:
    config = tmp_path / "replica.toml"
    # One thread each: two llama.cpp processes on every core slow each other many times over.
    config.write_text(
        "[conductor]\nmax_steps = 1\nn_threads = 1\n\n[server]\nmax_concurrent_runs = 4\n\n"
        f'[[workers]]\nname = "w"\nmodel = "openai/w"\napi_base = "{worker.api_base}"\n'
        'description = "answers every question"\n',
        encoding="utf-8",
    )
    replicas = [
        start_cli("serve", "--replica", "--port", "0", "--config", str(config)) for _ in range(2)
    ]
    try:
        urls = [serving_url(p) for p in replicas]
        import litellm

        router = litellm.Router(
            model_list=[
                {
                    "model_name": "conductor",
                    "litellm_params": {
                        "model": "openai/conductor",
                        "api_base": url,
                        "api_key": "unused",
                        "max_parallel_requests": 4,  # = server.max_concurrent_runs
                    },
                }
                for url in urls
            ],
            routing_strategy="least-busy",
            num_retries=2,
        )

        def ask(n: int) -> tuple[str, str]:
            # Arrivals 50 ms apart: least-busy counts a request once sent, so a burst in one
            # instant would all go to whichever replica was idle at that instant.
            time.sleep(0.05 * n)
            reply = router.completion(
                model="conductor", messages=[{"role": "user", "content": f"What is {n} + {n}?"}]
            )
            return reply.choices[0].message.content, reply._hidden_params["api_base"]

        with ThreadPoolExecutor(REQUESTS) as pool:
            replies = list(pool.map(ask, range(REQUESTS)))
    finally:
        for proc in replicas:
            proc.send_signal(signal.SIGINT)
        errs = [proc.communicate(timeout=60)[1] for proc in replicas]
    answers = sorted(text for text, _ in replies)
    assert answers == sorted(f"Answer {n}." for n in range(1, REQUESTS + 1))
    served = {base.rstrip("/") for _, base in replies}
    assert served == {url.rstrip("/") for url in urls}, replies  # both replicas answered
    assert len(worker.requests) == REQUESTS
    for proc, err in zip(replicas, errs, strict=True):
        assert proc.returncode == 130, err
        assert "chat completions: w (trace" in err  # each replica ran some of the requests
    # Both wrote their runs' traces into the one traces folder, one file a run (unique ids).
    traces = list((isolated_home / "data" / "conductor" / "traces").glob("*.json"))
    assert len(traces) == REQUESTS


def test_a_replica_takes_no_local_socket_and_excludes_the_socket_options(
    tmp_path: Path,
) -> None:
    proc = run_cli("serve", "--replica", "--detach")
    assert_one_line_error(proc, 2, "--replica", "--detach")
