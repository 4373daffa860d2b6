"""What importing litellm adds to `ask`: the same pool, once with its worker as a local GGUF,
once as a litellm worker served by `python -m llama_cpp.server` (same GGUF) on 127.0.0.1.
The conductor's prompt is identical (same names and descriptions), so the plan is too; the
difference in end-to-end time is what the litellm path (import included) costs.

Run: .venv/bin/python bench/litellm_overlap.py [--runs 3] [--json]
(needs the `server` extra: pip install -e ".[server]" or ".[test]")
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request

from _common import CONDUCTOR, isolated_env, median, must, report, temp_root, timed

WORKER = (
    'name = "helper"\ndescription = "a small general model: short, direct answers"\n'
    "max_tokens = 24\ntemperature = 0.0\n"  # short, equal-length steps on both paths
)
QUESTION = "Name the largest planet of the solar system."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(model: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "conductor_cli.backends.llama_server",  # llama_cpp.server, crash-checked
            "--model",
            model,
            "--model_alias",
            "smol",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
            "--verbose",
            "False",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/v1"
    for _ in range(240):
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2):
                return proc, base
        except OSError:
            time.sleep(0.5)
    proc.kill()
    sys.exit("llama_cpp.server did not start")


def import_seconds() -> float:
    code = (
        "import os, time; os.environ['LITELLM_LOCAL_MODEL_COST_MAP']='True'; "
        "t=time.perf_counter(); import litellm; print(time.perf_counter()-t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from conductor_cli.models.catalog import load_catalog, resolve_gguf

    model = str(resolve_gguf("smollm2-135m-instruct", load_catalog(), "bench").path)
    proc, base = start_server(model)
    try:
        local = f'[[workers]]\n{WORKER}model = "gguf:smollm2-135m-instruct"\n'
        remote = f'[[workers]]\n{WORKER}model = "litellm:openai/smol"\napi_base = "{base}"\n'
        root_l, root_r = temp_root(), temp_root()
        env_l, env_r = isolated_env(root_l, local), isolated_env(root_r, remote)
        cmd = [CONDUCTOR, "ask", "--no-cache", "--json", QUESTION]
        for env in (env_l, env_r):  # warm: the prefix state, the server's first request
            must(timed(cmd, env), "warm-up ask")
        times_l, times_r, steps = [], [], 0
        for _ in range(args.runs):
            a = must(timed(cmd, env_l), "local ask")
            b = must(timed(cmd, env_r), "litellm ask")
            times_l.append(a.seconds)
            times_r.append(b.seconds)
            steps = len(json.loads(b.stdout)["workflow"]["steps"])
        alone = import_seconds()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    added = median(times_r) - median(times_l)
    report(
        [
            {
                "what": f"ask with a litellm worker ({steps}-step plan, median of {args.runs})",
                "figure": f"{median(times_r):.2f} s: adds {added:+.2f} s "
                f"(import litellm alone: {alone:.2f} s)",
                "reference": f"the same pool as a local GGUF worker: {median(times_l):.2f} s",
                "target": "adds <= 0.5 s",
                "ok": added <= 0.5,
            }
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
