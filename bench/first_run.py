"""The first run after the background server starts against the second (issue 59).

On the embedded default (no config file; fresh cache and data dirs, the user's models): start
`conductor serve --detach`, then time two `conductor ask --no-cache` of the same kind in a row,
and stop the server; then a fresh start with the two questions the other way round. Each
question is timed once as a first run and once as a second, so first / second compares warmth
and not the questions (the same question twice would find its whole prompt in llama.cpp's
context the second time: a reuse no first run can have). The same for `conductor run` of a
workflow of two independent steps (the parallel check), with two questions. Before issue 59
the models loaded at the first run; now the server loads them as it starts and rehearses
(Runtime.warm, server/app._rehearse), and `serve --detach` returns when that is done.
`--checkout DIR` measures another checkout's code (e.g. `git worktree add DIR cdb5a23`) with
this interpreter, for the before column.

`--remote` (issue 71): a pool of three workers on an OpenAI-compatible endpoint that answers
each call in 1.0 s (the fault-injection fake, conductor_cli/testing/fake_openai.py, in this
process), and a hand-written workflow of three independent steps and a join: each run's span
(its trace's RunStarted to RunFinished) in process (`--no-server`), then the first and the
second run after `serve --detach`, `--repeat` times. Three 1-second calls at once and one
after: 2.0 s is the floor. No model is loaded: runs beside other work.

Run alone on an idle machine (llama.cpp): .venv/bin/python bench/first_run.py [--checkout DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from _common import CONDUCTOR, isolated_env, median, must, temp_root, timed

# Two questions of one kind, cache off: each asked first after one start and second after the
# other.
ASKS = ("What is the capital of Spain?", "What is the capital of Italy?")
RUNS = ("Go.", "Begin.")
TWO_STEPS = {
    "steps": [
        {"worker": "local", "task": "Name a fruit.", "sees": []},
        {"worker": "local", "task": "Name a colour.", "sees": []},
    ]
}


def _start(command: list[str], what: str, order: tuple[str, str], wait: float) -> list[float]:
    """A fresh server (fresh home), the two runs of `order`, their seconds."""
    root = temp_root()
    env = isolated_env(root, config=None)
    env.pop("CONDUCTOR_SERVER_AUTO", None)
    must(timed([*command, "serve", "--detach"], env), "serve --detach")
    time.sleep(wait)
    try:
        if what == "ask":
            runs = [must(timed([*command, "ask", "--no-cache", q], env), q) for q in order]
        else:
            workflow = root / "wf.json"
            workflow.write_text(json.dumps(TWO_STEPS), encoding="utf-8")
            runs = [
                must(timed([*command, "run", "--no-cache", str(workflow), q], env), q)
                for q in order
            ]
    finally:
        timed([*command, "serve", "--stop"], env)
    return [r.seconds for r in runs]


REMOTE_STEPS = {
    "steps": [
        {"worker": "w0", "task": "Name a fruit.", "sees": []},
        {"worker": "w1", "task": "Name a colour.", "sees": []},
        {"worker": "w2", "task": "Name a tree.", "sees": []},
        {"worker": "w0", "task": "Join them.", "sees": [0, 1, 2]},
    ]
}


def _span(
    command: list[str], env: dict[str, str], config: Path, workflow: Path, *extra: str
) -> float:
    done = must(
        timed(
            [*command, "--config", str(config), "run", "--no-cache", "--json", *extra,
             str(workflow), "Go."], env,
        ),
        "run",
    )  # fmt: skip
    trace = json.loads(Path(json.loads(done.stdout)["trace"]).read_text(encoding="utf-8"))
    at = {e["type"]: e["at"] for e in trace["events"]}
    return at["RunFinished"] - at["RunStarted"]


def remote(command: list[str], repeat: int) -> dict[str, list[float]]:
    from conductor_cli.testing.fake_openai import FakeOpenAIServer

    fake = FakeOpenAIServer(["slow"], answer="An answer.", delay=1.0)
    spans: dict[str, list[float]] = {"in_process": [], "first_after_start": [], "second": []}
    try:
        for _ in range(repeat):
            root = temp_root()
            env = isolated_env(root, config=None)
            config, workflow = root / "remote.toml", root / "wf.json"
            config.write_text(
                "".join(
                    f'[[workers]]\nname = "w{i}"\nmodel = "openai/fake"\n'
                    f'api_base = "{fake.api_base}"\nretries = 0\n\n'
                    for i in range(3)
                ),
                encoding="utf-8",
            )
            workflow.write_text(json.dumps(REMOTE_STEPS), encoding="utf-8")
            spans["in_process"].append(_span(command, env, config, workflow, "--no-server"))
            must(timed([*command, "--config", str(config), "serve", "--detach"], env), "serve")
            try:
                spans["first_after_start"].append(_span(command, env, config, workflow))
                spans["second"].append(_span(command, env, config, workflow))
            finally:
                timed([*command, "--config", str(config), "serve", "--stop"], env)
    finally:
        fake.close()
    return {k: [round(v, 2) for v in values] for k, values in spans.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, help="another checkout's code to measure")
    parser.add_argument("--wait", type=float, default=0.0, help="seconds after the start")
    parser.add_argument("--remote", action="store_true", help="the remote pool (issue 71)")
    parser.add_argument("--repeat", type=int, default=3, help="--remote: fresh starts")
    args = parser.parse_args()
    command = [sys.executable, "-m", "conductor_cli"] if args.checkout else [CONDUCTOR]
    if args.checkout:
        import os

        os.environ["PYTHONPATH"] = str(args.checkout.resolve())
        # `-m` puts the working directory first on sys.path, ahead of PYTHONPATH: run from
        # this checkout, it measured this checkout's code under the other's name.
        os.environ["PYTHONSAFEPATH"] = "1"
    if args.remote:
        spans = remote(command, args.repeat)
        for name, values in spans.items():
            print(f"{name}: median {median(values):.2f} s {values}", flush=True)
        print(json.dumps(spans))
        return
    rows = {}
    for what, pair in (("ask", ASKS), ("run", RUNS)):
        a = _start(command, what, pair, args.wait)
        b = _start(command, what, (pair[1], pair[0]), args.wait)
        first, second = a[0] + b[0], a[1] + b[1]
        rows[what] = {
            "first_s": [round(a[0], 2), round(b[0], 2)],
            "second_s": [round(a[1], 2), round(b[1], 2)],
            "first_over_second": round(first / second, 2),
        }
        print(f"{what}: first {first / 2:.2f} s, second {second / 2:.2f} s, "
              f"first/second {first / second:.2f}", flush=True)  # fmt: skip
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
