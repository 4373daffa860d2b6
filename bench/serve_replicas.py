"""Serving replicas (issue 45): answers per second from one `conductor serve` and from two
`conductor serve --replica` processes of the same config, each behind LiteLLM's Router
(least-busy), the client sending REQUESTS chat completions at once, batch after batch; each
server has as many run slots (server.max_concurrent_runs), so none answers 429 and what
limits a server is its own work. The pool's one worker is a
simulated OpenAI-compatible server (testing/fake_openai.py) that answers after POOL_S; two
conductors:

(a) the embedded GGUF conductor (SmolLM2-135M), planning for real on this CPU with one thread
    per process (a replica brings its own model, so two plans run at once where one server
    plans one at a time);
(b) a conductor served elsewhere (`litellm:`, simulated: it answers every plan request after
    PLAN_S): nothing in the server limits it, so a second replica should add nothing (the
    control row).

Both sides in the same run, cache off; the ratio is what counts on a noisy machine.

Run: .venv/bin/python bench/serve_replicas.py [--batches 3] [--json] [--only remote]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from _common import CONDUCTOR, REPO, isolated_env, median, report, temp_root

sys.path.insert(0, str(REPO))
from conductor_cli.testing.fake_openai import FakeOpenAIServer

POOL_S = 0.5  # the simulated worker's answer
PLAN_S = 0.3  # a plan by the simulated conductor served elsewhere
REQUESTS = 16
ARRIVAL_S = 0.02  # between two requests of a batch


def start(env: dict[str, str], replica: bool) -> tuple[subprocess.Popen[str], str]:
    args = [CONDUCTOR, "serve", "--port", "0", *(["--replica"] if replica else [])]
    proc = subprocess.Popen(
        args, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    line = ""
    while "serving" not in line:
        line = proc.stderr.readline()
        if not line:
            sys.exit(f"conductor serve did not start: {proc.communicate()[1]}")
    return proc, re.search(r"http://\S+/v1", line).group(0)  # type: ignore[union-attr]


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGINT)
    for proc in procs:
        proc.communicate(timeout=60)


def throughput(urls: list[str], batches: int) -> tuple[float, int, dict[str, int]]:
    """(answers a second, median over batches; answers; requests answered per server)."""
    import litellm

    router = litellm.Router(
        model_list=[
            {
                "model_name": "conductor",
                "litellm_params": {
                    "model": "openai/conductor",
                    "api_base": url,
                    "api_key": "unused",
                },
            }
            for url in urls
        ],
        routing_strategy="least-busy",
        num_retries=2,
    )
    counter = iter(range(10**6))

    async def ask(k: int) -> str | None:
        n = next(counter)
        # Arrivals 20 ms apart, as traffic comes: least-busy counts a request once it is sent,
        # so a burst in one instant would all go to the one replica idle at that instant.
        await asyncio.sleep(ARRIVAL_S * k)
        reply = await router.acompletion(
            model="conductor", messages=[{"role": "user", "content": f"What is {n} + {n}?"}]
        )
        return reply._hidden_params.get("api_base") if reply.choices[0].message.content else None

    async def burst(count: int) -> list[str | None]:
        return await asyncio.gather(*(ask(k) for k in range(count)))

    asyncio.run(burst(len(urls) * 2))  # warm-up: litellm's helper, each conductor's prompt
    rates, served = [], {url: 0 for url in urls}
    answered = 0
    for _ in range(batches):
        start_at = time.perf_counter()
        bases = asyncio.run(burst(REQUESTS))
        rates.append(REQUESTS / (time.perf_counter() - start_at))
        for base in bases:
            if base is not None:
                answered += 1
                served[base.rstrip("/")] = served.get(base.rstrip("/"), 0) + 1
    return median(rates), answered, served


def row(config: str, what: str, batches: int, gain: float | None) -> dict[str, Any]:
    """`gain`: the ratio two replicas must pass (None: the control row, no gain expected). On
    2 cores the two replicas share them with this client and the simulated servers, so (a)
    asks only that replicas not lose; a machine with a core per replica can ask 1.5."""
    env = isolated_env(temp_root(), config)
    env["CONDUCTOR_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="cr-", dir="/tmp")
    procs: list[subprocess.Popen[str]] = []
    try:
        one, url = start(env, replica=False)
        procs.append(one)
        single, single_ok, _ = throughput([url], batches)
        stop(procs)
        procs = []
        urls = []
        for _ in range(2):
            proc, url = start(env, replica=True)
            procs.append(proc)
            urls.append(url)
        double, double_ok, served = throughput(urls, batches)
    finally:
        stop(procs)
    total = batches * REQUESTS
    return {
        "what": f"{what}: {REQUESTS} concurrent chat completions through LiteLLM's Router, "
        f"simulated {POOL_S:g} s worker, {REQUESTS} run slots a server, cache off, median of "
        f"{batches} batches",
        "figure": f"two replicas {double:.2f} answers/s = {double / single:.2f} x one server "
        f"({double_ok}/{total} answered; per replica {sorted(served.values())})",
        "reference": f"one server {single:.2f} answers/s ({single_ok}/{total} answered)",
        "target": "every request answered, both replicas used, "
        + (f"> {gain:g} x" if gain else "no gain expected (control)"),
        "ok": double_ok == total
        and single_ok == total
        and min(served.values()) > 0
        and (gain is None or double / single > gain),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=["remote"], help="remote: only row (b), no GGUF model")
    args = parser.parse_args()
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    pool = FakeOpenAIServer(script=["slow"], delay=POOL_S, answer="{n}")
    planner = FakeOpenAIServer(
        script=["slow"],
        delay=PLAN_S,
        answer=json.dumps({"steps": [{"worker": "w", "task": "Answer it.", "sees": []}]}),
    )
    common = (
        f"[cache]\nenabled = false\n\n[server]\nmax_concurrent_runs = {REQUESTS}\n\n"
        f'[[workers]]\nname = "w"\nmodel = "openai/w"\napi_base = "{pool.api_base}"\n'
        'description = "answers every question"\n'
    )
    rows = []
    try:
        if args.only is None:
            rows.append(
                row(
                    f"[conductor]\nmax_steps = 1\nn_threads = 1\n\n{common}",
                    "(a) the embedded conductor (SmolLM2-135M, one thread a process)",
                    args.batches,
                    1.0,
                )
            )
        rows.append(
            row(
                f'[conductor]\nmodel = "litellm:openai/planner"\napi_base = "{planner.api_base}"'
                f"\nmax_steps = 1\n\n{common}",
                f"(b) a conductor served elsewhere (simulated, {PLAN_S:g} s a plan)",
                args.batches,
                None,
            )
        )
    finally:
        pool.close()
        planner.close()
    report(rows, args.json)


if __name__ == "__main__":
    main()
