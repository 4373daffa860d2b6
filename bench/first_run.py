"""The first run after the background server starts against the second (issue 59).

On the embedded default (no config file; fresh cache and data dirs, the user's models): start
`conductor serve --detach`, then time the same `conductor ask` twice, each with `--no-cache`
(the same plan and the same tokens), and report first / second; the same for `conductor run`
of a workflow of two independent steps (the parallel check). Before issue 59 the models
loaded at the first run; now the server loads them as it starts and rehearses one run
(Runtime.warm, server/app._rehearse), and `serve --detach` returns when that is done.
`--checkout DIR` measures another checkout's code (e.g. `git worktree add DIR cdb5a23`) with
this interpreter, for the before column.

Run alone on an idle machine (llama.cpp): .venv/bin/python bench/first_run.py [--checkout DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from _common import CONDUCTOR, isolated_env, must, temp_root, timed

# The same question twice, cache off: the same plan and tokens, so only warmth differs.
ASKS = ("What is the capital of Spain?",) * 2
TWO_STEPS = {
    "steps": [
        {"worker": "local", "task": "Name a fruit.", "sees": []},
        {"worker": "local", "task": "Name a colour.", "sees": []},
    ]
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, help="another checkout's code to measure")
    parser.add_argument("--wait", type=float, default=0.0, help="seconds after the start")
    args = parser.parse_args()
    rows = {}
    for what in ("ask", "run"):
        root = temp_root()
        env = isolated_env(root, config=None)
        env.pop("CONDUCTOR_SERVER_AUTO", None)
        if args.checkout:
            env["PYTHONPATH"] = str(args.checkout.resolve())
        command = [sys.executable, "-m", "conductor_cli"] if args.checkout else [CONDUCTOR]
        must(timed([*command, "serve", "--detach"], env), "serve --detach")
        time.sleep(args.wait)
        try:
            if what == "ask":
                runs = [must(timed([*command, "ask", "--no-cache", q], env), q) for q in ASKS]
            else:
                workflow = root / "wf.json"
                workflow.write_text(json.dumps(TWO_STEPS), encoding="utf-8")
                runs = [
                    must(timed([*command, "run", "--no-cache", str(workflow), q], env), q)
                    for q in ("Go.", "Go.")
                ]
        finally:
            timed([*command, "serve", "--stop"], env)
        first, second = (r.seconds for r in runs)
        rows[what] = {"first_s": round(first, 2), "second_s": round(second, 2)}
        rows[what]["first_over_second"] = round(first / second, 2)
        ratio = first / second
        print(f"{what}: first {first:.2f} s, second {second:.2f} s, first/second {ratio:.2f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
