"""Run every bench in turn and print the Markdown table for bench/README.md.

Run: .venv/bin/python bench/all.py   (about 5 minutes on 2 cores; keep the machine otherwise idle)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [
    ["startup.py", "--runs", "15"],
    ["planning.py", "--runs", "3"],
    ["grammar.py", "--runs", "5"],
    ["engine_overhead.py", "--runs", "50"],
    ["parallel.py"],
    ["model_thread.py", "--runs", "5"],
    ["repack.py", "--runs", "5"],
    ["ask_rerun.py", "--runs", "3"],
    ["litellm_overlap.py", "--runs", "3"],
    ["serve_speed.py", "--runs", "3"],
]


def main() -> None:
    print("| what | figure | reference (same run) | target | holds | command |")
    print("| --- | --- | --- | --- | --- | --- |")
    for bench in BENCHES:
        proc = subprocess.run(
            [sys.executable, str(HERE / bench[0]), *bench[1:], "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        command = " ".join(["bench/" + bench[0], *bench[1:]])
        for row in json.loads(proc.stdout):
            holds = "yes" if row["ok"] else "**no**"
            print(
                f"| {row['what']} | {row['figure']} | {row['reference']} | {row['target']} "
                f"| {holds} | `{command}` |",
                flush=True,
            )


if __name__ == "__main__":
    main()
