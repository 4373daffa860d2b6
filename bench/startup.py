"""Start-up: `conductor --help` and `conductor config show` against `python -c pass` and
`llm --help`, run interleaved so that noise hits all alike; and a check that neither path
imports litellm or llama_cpp.

Run: .venv/bin/python bench/startup.py [--runs 15] [--llm PATH_TO_llm] [--json]
(`llm` only in a bench environment: python3 -m venv /tmp/llmbench && /tmp/llmbench/bin/pip
install llm; never a dependency of conductor.)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from _common import CONDUCTOR, compile_sources, isolated_env, median, must, report, temp_root, timed

HEAVY = ("litellm", "llama_cpp")


def heavy_imports(args: list[str], env: dict[str, str]) -> list[str]:
    """Top-level packages among HEAVY that `conductor ARGS` imported (python -X importtime)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "conductor_cli", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    found = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[-1].strip().split(".")[0]
            if name in HEAVY:
                found.add(name)
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--llm", default=shutil.which("llm") or "/tmp/llmbench/bin/llm")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    compile_sources()
    env = isolated_env(temp_root())
    cmds = {
        "pass": [sys.executable, "-c", "pass"],
        "help": [CONDUCTOR, "--help"],
        "show": [CONDUCTOR, "config", "show"],
        "llm": [args.llm, "--help"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            times[name].append(must(timed(cmd, env), " ".join(cmd)).seconds)
    med = {k: median(v) for k, v in times.items()}
    rows = []
    for name, label in (("help", "conductor --help"), ("show", "conductor config show")):
        heavy = heavy_imports(["--help"] if name == "help" else ["config", "show"], env)
        ratio = med[name] / med["llm"]
        rows.append(
            {
                "what": f"{label} (median of {args.runs})",
                "figure": f"{med[name]:.3f} s = {ratio:.2f} x llm --help; "
                f"heavy imports: {', '.join(heavy) or 'none'}",
                "reference": f"llm --help {med['llm']:.3f} s, python -c pass {med['pass']:.3f} s",
                "target": "< 0.35 s and <= 0.4 x llm --help, no litellm/llama_cpp",
                "ok": med[name] < 0.35 and ratio <= 0.4 and not heavy,
            }
        )
    report(rows, args.json)


if __name__ == "__main__":
    main()
