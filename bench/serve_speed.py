"""`conductor serve` (issue 18's speed targets): what a warm background server saves the CLI, and
what it does with concurrent OpenAI requests. Every figure is compared with a reference taken in
the same run; workers are a simulated OpenAI-compatible server (testing/fake_openai.py) that
answers after a fixed delay, except in the embedded-model rows.

1. a one-step `conductor run` (0.2 s worker, --no-cache) through a warm server: wall time of the
   whole client process beyond the worker's 0.2 s, against the same command with --no-server;
2. three independent 1 s steps and a fourth that sees them, through the warm server, against
   the same four steps as a chain: the steps' span in the trace (first StepStarted to
   RunFinished);
3. a second `ask` on the embedded model with a warm server, against the same ask in-process,
   answered from the cache (the main row) and with --no-cache (real model calls);
4. 8 concurrent OpenAI chat completions on the server's TCP URL (0.5 s worker, max_steps 1,
   cache off) against the same 8 one at a time, twice: (a) the embedded conductor plans each
   request on this CPU, one plan at a time (the model's lock), so planning's share is
   reported; (b) a conductor served elsewhere (`litellm:`, simulated: 0.3 s per plan), where
   plans overlap as steps do;
5. the default config (issue 32: server.auto on, CONDUCTOR_SERVER_AUTO unset, no `serve
   --detach`, nothing in the config but the workers): (a) the first `conductor run` of a session,
   which starts the background server, against the same run --no-server; (b) the second:
   wall time beyond the 0.2 s worker, against --no-server; (c) 3 independent 1 s steps + a
   join on a second command, as a share of the chain's span, against the same --no-server.

Run: .venv/bin/python bench/serve_speed.py [--runs 5] [--json] [--only default|remote]
(`--only remote`: only rows without a GGUF model, 1, 2, 4b and 5; `--only default`: 5.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import CONDUCTOR, REPO, Timed, isolated_env, median, must, report, temp_root, timed

sys.path.insert(0, str(REPO))
from conductor_cli.testing.fake_openai import FakeOpenAIServer

QUESTION = "What is the capital of France?"
STEP_S = 0.2  # the one-step run's worker
SLOW_S = 1.0  # the graph/chain workers
POOL_S = 0.5  # the OpenAI-request rows' worker
PLAN_S = 0.3  # a plan by the simulated conductor served elsewhere
REQUESTS = 8

NOTES: list[str] = []  # conductor's stderr lines, each once, printed at the end


def bench_env(config: str) -> dict[str, str]:
    """isolated_env, plus a short runtime dir of its own (a socket path fits 104 bytes)."""
    env = isolated_env(temp_root(), config)
    env["CONDUCTOR_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="cs-", dir="/tmp")
    for name in ("CONDUCTOR_SERVER", "CONDUCTOR_SERVER_KEY"):  # a server elsewhere would win
        env.pop(name, None)
    return env


def call(args: list[str], env: dict[str, str], what: str) -> Timed:
    result = must(timed([CONDUCTOR, *args], env), what)
    for line in result.stderr.splitlines():
        if line.strip() and line not in NOTES:
            NOTES.append(line)
    return result


def status(env: dict[str, str]) -> dict[str, Any]:
    return json.loads(call(["serve", "--status", "--json"], env, "serve --status").stdout)


@contextlib.contextmanager
def server(env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """A detached server for env's config, stopped on the way out; yields its first status."""
    call(["serve", "--detach"], env, "serve --detach")
    try:
        yield status(env)
    finally:
        stop_servers(env)


def stop_servers(env: dict[str, str], *, must_run: bool = True) -> None:
    """`serve --stop` for env's config; the servers' logs go to NOTES."""
    stop = timed([CONDUCTOR, "serve", "--stop"], env)
    if stop.returncode != 0 and must_run:
        print(f"serve --stop failed ({stop.returncode}): {stop.stderr.strip()}", file=sys.stderr)
    for log in Path(env["CONDUCTOR_RUNTIME_DIR"]).glob("*.log"):  # the server's stderr
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip() and f"(server log) {line}" not in NOTES:
                NOTES.append(f"(server log) {line}")


def write_workflow(steps: list[dict[str, Any]], name: str) -> Path:
    path = temp_root() / name
    path.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    return path


def load_trace(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def events(trace: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in trace.get("events", []) if e.get("type") == kind]


def steps_span(trace: dict[str, Any]) -> float:
    started = events(trace, "StepStarted")
    finished = events(trace, "RunFinished")
    if len(started) != 4 or not finished:
        sys.exit(
            f"a 4-step run's trace has {len(started)} StepStarted, {len(finished)} RunFinished"
        )
    return float(finished[-1]["at"]) - min(float(e["at"]) for e in started)


# --- 1. one-step run -------------------------------------------------------------------------


def one_step_row(env: dict[str, str], fake: FakeOpenAIServer, runs: int) -> dict[str, Any]:
    wf = write_workflow([{"worker": "w", "task": "Answer the question.", "sees": []}], "one.json")
    served = ["run", "--no-cache", "--json", str(wf), QUESTION]
    here = ["run", "--no-server", "--no-cache", "--json", str(wf), QUESTION]
    call(served, env, "warm-up run through the server")  # starts litellm's helper there
    before, calls_before = status(env)["runs_served"], len(fake.requests)
    t_served, t_here = [], []
    for _ in range(runs):
        t_served.append(call(served, env, "one-step run through the server").seconds)
        t_here.append(call(here, env, "one-step run --no-server").seconds)
    by_server = status(env)["runs_served"] - before
    calls = len(fake.requests) - calls_before
    beyond, beyond_here = median(t_served) - STEP_S, median(t_here) - STEP_S
    return {
        "what": f"one-step `conductor run` through a warm server, {STEP_S:g} s worker, "
        f"--no-cache (median of {runs})",
        "figure": f"{median(t_served):.2f} s wall = {beyond:+.2f} s beyond the worker "
        f"({by_server}/{runs} served by the server; worker called {calls}/{2 * runs} times)",
        "reference": f"--no-server (in-process): {median(t_here):.2f} s = {beyond_here:+.2f} s "
        "beyond the worker",
        "target": "<= 0.3 s beyond the worker",
        "ok": beyond <= 0.3 and by_server == runs,
    }


# --- 2. parallel graph against chain ---------------------------------------------------------


def graph_row(env: dict[str, str], fake: FakeOpenAIServer, runs: int) -> dict[str, Any]:
    task = "Answer the question."
    graph = write_workflow(
        [{"worker": "slow", "task": task, "sees": []} for _ in range(3)]
        + [{"worker": "slow", "task": "Combine the answers.", "sees": [0, 1, 2]}],
        "graph.json",
    )
    chain = write_workflow(
        [{"worker": "slow", "task": task, "sees": [i - 1] if i else []} for i in range(4)],
        "chain.json",
    )
    calls_before = len(fake.requests)
    spans: dict[str, list[float]] = {"graph": [], "chain": []}
    for _ in range(runs):
        for name, wf in (("graph", graph), ("chain", chain)):
            out = call(["run", "--no-cache", "--json", str(wf), QUESTION], env, f"{name} run")
            spans[name].append(steps_span(load_trace(json.loads(out.stdout)["trace"])))
    calls = len(fake.requests) - calls_before
    g, c = median(spans["graph"]), median(spans["chain"])
    return {
        "what": f"3 independent {SLOW_S:g} s steps + 1 that sees them, warm server "
        f"(steps' span, median of {runs})",
        "figure": f"{g:.2f} s = {g / c:.2f} x the chain (worker called {calls}/{8 * runs} times)",
        "reference": f"the same 4 steps as a chain: {c:.2f} s",
        "target": "<= 0.55 x the chain",
        "ok": g / c <= 0.55,
    }


# --- 3. second ask on the embedded model -----------------------------------------------------


def model_seconds(trace: dict[str, Any]) -> tuple[float, float]:
    """(the plan's seconds, the steps' seconds) as the run's trace records them."""
    plan = sum(float(e["seconds"]) for e in events(trace, "PlanReady"))
    return plan, sum(float(e["seconds"]) for e in events(trace, "StepFinished"))


def split_text(parts: list[tuple[float, float]]) -> str:
    plan, steps = median([p for p, _ in parts]), median([q for _, q in parts])
    return f"plan {plan:.2f} s + steps {steps:.2f} s"


def ask_rows(runs: int) -> list[dict[str, Any]]:
    env = bench_env("[server]\nport = 0\n")  # the embedded default pool
    rows = []
    with server(env):
        call(["ask", "--json", QUESTION], env, "first ask through the server")  # warms, caches
        for cache in ([], ["--no-cache"]):
            before = status(env)["runs_served"]
            wall: dict[str, list[float]] = {"served": [], "here": []}
            parts: dict[str, list[tuple[float, float]]] = {"served": [], "here": []}
            calls, steps = set(), set()
            for _ in range(runs):
                for where, extra in (("served", []), ("here", ["--no-server"])):
                    out = call(["ask", *extra, *cache, "--json", QUESTION], env, f"ask {where}")
                    wall[where].append(out.seconds)
                    doc = json.loads(out.stdout)
                    calls.add(doc["totals"].get("model_calls"))
                    steps.add(len(doc["workflow"]["steps"]))
                    parts[where].append(model_seconds(load_trace(doc["trace"])))
            by_server = status(env)["runs_served"] - before
            ratio = median(wall["served"]) / median(wall["here"])
            split = {w: split_text(v) for w, v in parts.items()}
            kind = "--no-cache, real model calls" if cache else "answered from the cache"
            rows.append(
                {
                    "what": f"second ask on the embedded model, warm server, {kind} "
                    f"(median of {runs})",
                    "figure": f"{median(wall['served']):.2f} s = {ratio:.2f} x in-process "
                    f"({split['served']}; {by_server}/{runs} served by the server; model calls "
                    f"{sorted(calls, key=str)}, plan steps {sorted(steps)})",
                    "reference": f"the same ask --no-server: {median(wall['here']):.2f} s "
                    f"({split['here']})",
                    "target": "<= 0.5 x in-process",
                    "ok": ratio <= 0.5 and by_server == runs,
                }
            )
    return rows


# --- 4. concurrent OpenAI requests -----------------------------------------------------------


def chat(url: str, question: str) -> tuple[int, float, str | None]:
    """POST one chat completion: (HTTP status, seconds, trace id)."""
    body = {"model": "conductor", "messages": [{"role": "user", "content": question}]}
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            response.read()
            code, trace = response.status, response.headers.get("x-conductor-trace") or None
    except urllib.error.HTTPError as e:
        NOTES.append(f"HTTP {e.code} for {question!r}: {e.read()[:300]!r}")
        code, trace = e.code, None
    return code, time.perf_counter() - start, trace


def plan_seconds(env: dict[str, str], trace: str | None) -> float | None:
    if not trace:
        return None
    path = Path(env["CONDUCTOR_DATA_DIR"]) / "traces" / f"{trace}.json"
    ready = events(load_trace(path), "PlanReady")
    return float(ready[0]["seconds"]) if ready else None


def batch(url: str, questions: list[str], together: bool) -> tuple[float, list[Any]]:
    """Wall seconds of `questions` sent one at a time or all at once, and each one's result."""
    start = time.perf_counter()
    if together:
        with ThreadPoolExecutor(len(questions)) as pool:
            results = list(pool.map(lambda q: chat(url, q), questions))
    else:
        results = [chat(url, q) for q in questions]
    return time.perf_counter() - start, results


def concurrent_row(env: dict[str, str], runs: int, conductor: str) -> dict[str, Any]:
    questions = iter(f"What is {n} times {n + 3}?" for n in range(2 * REQUESTS * runs))
    walls: dict[bool, list[float]] = {False: [], True: []}
    results: dict[bool, list[Any]] = {False: [], True: []}
    with server(env) as first:
        url = first["listening"]["tcp"]
        code, _, _ = chat(url, "Warm-up: what is 1 + 1?")  # loads the conductor, litellm's helper
        if code != 200:
            sys.exit(f"the warm-up chat completion got HTTP {code}")
        for _ in range(runs):
            for together in (False, True):
                wall, got = batch(url, [next(questions) for _ in range(REQUESTS)], together)
                walls[together].append(wall)
                results[together].extend(got)
    seq_wall, con_wall = median(walls[False]), median(walls[True])
    ratio = seq_wall / con_wall  # the throughputs' ratio: the same number of requests
    answered = sum(1 for code, _, _ in results[True] if code == 200)
    seq_ok = sum(1 for code, _, _ in results[False] if code == 200)
    plans = {k: [plan_seconds(env, t) for _, _, t in v] for k, v in results.items()}
    seq_plans = [p for p in plans[False] if p is not None]
    con_plans = [p for p in plans[True] if p is not None]
    planning = (
        f"planning {median(seq_plans):.2f} s of {median([s for _, s, _ in results[False]]):.2f} s "
        f"per request alone (median); plans with 8 at once: "
        f"{median(con_plans):.2f} s median, {max(con_plans):.2f} s max"
        if seq_plans and con_plans
        else "planning time: no traces"
    )
    total = REQUESTS * runs
    return {
        "what": f"{REQUESTS} concurrent OpenAI chat completions, simulated pool "
        f"({POOL_S:g} s worker, max_steps 1, cache off; {conductor}; median of {runs} batches)",
        "figure": f"{REQUESTS / con_wall:.2f} req/s = {ratio:.2f} x one at a time "
        f"({con_wall:.2f} s a batch), {answered}/{total} HTTP 200; {planning}",
        "reference": f"{REQUESTS} one at a time: {seq_wall:.2f} s = "
        f"{REQUESTS / seq_wall:.2f} req/s ({seq_ok}/{total} HTTP 200; batches "
        f"{', '.join(f'{w:.1f}' for w in walls[False])} s)",
        "target": "all answered, >= 6 x the throughput",
        "ok": answered == total and ratio >= 6,
    }


# --- 5. the default config: the server starts by itself --------------------------------------


def default_rows(fast: FakeOpenAIServer, slow: FakeOpenAIServer, runs: int) -> list[dict[str, Any]]:
    """Issue 32's figures as a user meets them: no `serve --detach`, server.auto at its
    default, CONDUCTOR_SERVER_AUTO unset, nothing in the config but the two workers."""
    env = bench_env(f"{worker('w', fast)}\n{worker('slow', slow)}")
    env.pop("CONDUCTOR_SERVER_AUTO", None)
    one = write_workflow([{"worker": "w", "task": "Answer the question.", "sees": []}], "d1.json")
    task = "Answer the question."
    graph = write_workflow(
        [{"worker": "slow", "task": task, "sees": []} for _ in range(3)]
        + [{"worker": "slow", "task": "Combine the answers.", "sees": [0, 1, 2]}],
        "dgraph.json",
    )
    chain = write_workflow(
        [{"worker": "slow", "task": task, "sees": [i - 1] if i else []} for i in range(4)],
        "dchain.json",
    )
    served = ["run", "--no-cache", "--json", str(one), QUESTION]
    here = ["run", "--no-server", "--no-cache", "--json", str(one), QUESTION]
    first: dict[str, list[float]] = {"served": [], "here": []}
    second: dict[str, list[float]] = {"served": [], "here": []}
    spans: dict[str, list[float]] = {k: [] for k in ("graph", "chain", "graph-", "chain-")}
    started, silent = 0, 0
    try:
        for n in range(runs):
            if n:
                stop_servers(env)  # a new session: no server runs
            out = call(served, env, "first run (starts the server)")
            first["served"].append(out.seconds)
            started += sum(
                1
                for line in out.stderr.splitlines()
                if line.startswith("conductor: note: started a background server")
            )
            first["here"].append(call(here, env, "first run --no-server").seconds)
        before = status(env)["runs_served"]
        for _ in range(runs):
            out = call(served, env, "second run through the server")
            second["served"].append(out.seconds)
            silent += not out.stderr.strip()
            second["here"].append(call(here, env, "second run --no-server").seconds)
            for name, wf in (("graph", graph), ("chain", chain)):
                for suffix, extra in (("", []), ("-", ["--no-server"])):
                    args = ["run", *extra, "--no-cache", "--json", str(wf), QUESTION]
                    doc = json.loads(call(args, env, f"{name}{suffix} run").stdout)
                    spans[name + suffix].append(steps_span(load_trace(doc["trace"])))
        by_server = status(env)["runs_served"] - before
    finally:
        stop_servers(env, must_run=False)
    f_served, f_here = median(first["served"]), median(first["here"])
    s_served, s_here = median(second["served"]), median(second["here"])
    beyond, beyond_here = s_served - STEP_S, s_here - STEP_S
    ratio = median(spans["graph"]) / median(spans["chain"])
    ratio_here = median(spans["graph-"]) / median(spans["chain-"])
    return [
        {
            "what": f"default config: the first `conductor run` of a session, which starts the "
            f"background server, {STEP_S:g} s worker (median of {runs} sessions)",
            "figure": f"{f_served:.2f} s wall = {f_served - STEP_S:+.2f} s beyond the worker "
            f"(the start note printed {started}/{runs} times)",
            "reference": f"the same run --no-server: {f_here:.2f} s = "
            f"{f_here - STEP_S:+.2f} s beyond the worker",
            "target": "reported (one note line a start)",
            "ok": started == runs,
        },
        {
            "what": f"default config: the second `conductor run` of a session, "
            f"{STEP_S:g} s worker (median of {runs})",
            "figure": f"{s_served:.2f} s wall = {beyond:+.2f} s beyond the worker "
            f"({by_server} runs served by the server; {silent}/{runs} with empty stderr)",
            "reference": f"--no-server (in-process): {s_here:.2f} s = {beyond_here:+.2f} s "
            "beyond the worker",
            "target": "<= 0.5 s beyond the worker",
            "ok": beyond <= 0.5 and by_server == 3 * runs and silent == runs,
        },
        {
            "what": f"default config, a second command: 3 independent {SLOW_S:g} s steps + 1 "
            f"that sees them (steps' span, median of {runs})",
            "figure": f"{median(spans['graph']):.2f} s = {ratio:.2f} x the chain "
            f"({median(spans['chain']):.2f} s)",
            "reference": f"--no-server: {median(spans['graph-']):.2f} s = {ratio_here:.2f} x "
            f"the chain ({median(spans['chain-']):.2f} s)",
            "target": "<= 0.55 x the chain",
            "ok": ratio <= 0.55,
        },
    ]


def load_note(when: str) -> None:
    """The machine's load: two llama.cpp processes on 2 cores slow each other down many times."""
    one, five, _ = os.getloadavg()
    NOTES.append(f"(bench) load average {when}: {one:.2f} (1 min), {five:.2f} (5 min)")


def worker(name: str, fake: FakeOpenAIServer) -> str:
    return (
        f'[[workers]]\nname = "{name}"\nmodel = "openai/{name}"\n'
        f'api_base = "{fake.api_base}"\nmax_concurrency = 8\n'
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--only",
        choices=["default", "remote"],
        help="default: only the default-config rows (5); remote: only rows that load no GGUF "
        "model (1, 2, 4b, 5), e.g. while another llama.cpp process has the CPU",
    )
    args = parser.parse_args()
    fast = FakeOpenAIServer(script=["slow"], delay=STEP_S, answer="Paris.")
    slow = FakeOpenAIServer(script=["slow"], delay=SLOW_S, answer="Paris.")
    pool = FakeOpenAIServer(script=["slow"], delay=POOL_S, answer="{n}")
    # A conductor served elsewhere (a GPU box, a litellm proxy), simulated: it answers every
    # plan request with the same one-step workflow after PLAN_S.
    planner = FakeOpenAIServer(
        script=["slow"],
        delay=PLAN_S,
        answer=json.dumps({"steps": [{"worker": "w", "task": "Answer it.", "sees": []}]}),
    )
    rows: list[dict[str, Any]] = []
    try:
        env = bench_env(f"[server]\nport = 0\n\n{worker('w', fast)}\n{worker('slow', slow)}")
        load_note("at the start")
        if args.only in (None, "remote"):
            with server(env):
                rows.append(one_step_row(env, fast, args.runs))
                rows.append(graph_row(env, slow, args.runs))
            load_note("after rows 1-2")
        if args.only is None:
            rows.extend(ask_rows(args.runs))
            load_note("after the embedded-model asks")
            rows.append(
                concurrent_row(
                    bench_env(
                        "[conductor]\nmax_steps = 1\n\n[cache]\nenabled = false\n\n"
                        f"[server]\nport = 0\nmax_concurrent_runs = {REQUESTS}\n\n"
                        f"{worker('w', pool)}"
                    ),
                    args.runs,
                    "the embedded conductor plans on this CPU",
                )
            )
        if args.only in (None, "remote"):
            rows.append(
                concurrent_row(
                    bench_env(
                        '[conductor]\nmodel = "litellm:openai/planner"\n'
                        f'api_base = "{planner.api_base}"\nmax_steps = 1\n\n'
                        "[cache]\nenabled = false\n\n"
                        f"[server]\nport = 0\nmax_concurrent_runs = {REQUESTS}\n\n"
                        f"{worker('w', pool)}"
                    ),
                    args.runs,
                    f"a conductor served elsewhere ({PLAN_S:g} s per plan, simulated)",
                )
            )
        rows.extend(default_rows(fast, slow, args.runs))
        load_note("at the end")
    finally:
        for fake in (fast, slow, pool, planner):
            fake.close()
        if NOTES:
            print("notes: conductor's stderr and servers' logs, each line once", file=sys.stderr)
            for line in NOTES:
                print(f"  {line}", file=sys.stderr)
    report(rows, args.json)


if __name__ == "__main__":
    main()
