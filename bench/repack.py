"""What llama.cpp's weight repacking is worth: prompt reading and generation speed with it on
and off, for the default Q4_1 model and a Q4_0 copy of it (the type llama.cpp's x86 AVX2
kernels repack; AMX, where the CPU has it, also repacks Q4_1).
Run: .venv/bin/python bench/repack.py [--runs 5] [--json]

conductor loads models without repacking only where the one-time check found that it crashes
(backends/repack_check.py). Each setting runs in its own process, so a setting that crashes on
this machine shows as a crash instead of ending the bench.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import report, temp_root

from conductor_cli.backends import repack_check
from conductor_cli.models.catalog import load_catalog, resolve_gguf

PROMPT_TOKENS = 384
GEN_TOKENS = 64


def quantized_copy(source: Path, target: Path) -> Path:
    """`source` requantized to Q4_0 (llama.cpp's own quantizer)."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0
    params.allow_requantize = True
    if llama_cpp.llama_model_quantize(
        str(source).encode(), str(target).encode(), ctypes.byref(params)
    ):
        sys.exit(f"quantizing {source} to Q4_0 failed")
    return target


def measure(model: str, repack: bool, runs: int) -> dict[str, float]:
    """Median prompt-reading and generation speed in tokens/s, in this process."""
    from llama_cpp import Llama

    with repack_check.repacking(repack):
        llama = Llama(model_path=model, n_ctx=1024, n_batch=512, verbose=False, seed=0)
    text = "The lighthouse keeper counted the ships that passed the rocks each night. " * 40
    prompt = llama.tokenize(text.encode(), add_bos=True)[:PROMPT_TOKENS]
    pp: list[float] = []
    tg: list[float] = []
    for _ in range(runs):
        llama.reset()
        start = time.perf_counter()
        llama.eval(prompt)
        pp.append(len(prompt) / (time.perf_counter() - start))
        start = time.perf_counter()
        for i in range(GEN_TOKENS):  # one token a decode, as generation does
            llama.eval([prompt[i % len(prompt)]])
        tg.append(GEN_TOKENS / (time.perf_counter() - start))
    llama.close()
    return {"pp": statistics.median(pp), "tg": statistics.median(tg)}


def child(model: Path, repack: bool, runs: int) -> dict[str, float] | str:
    setting = "on" if repack else "off"
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(model), setting, "--runs", str(runs)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode < 0:
        return f"crashed ({-proc.returncode})"
    if proc.returncode:
        sys.exit(proc.stderr[-800:])
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "on|off"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], args.child[1] == "on", args.runs)))
        return
    catalog = load_catalog()
    q4_1 = resolve_gguf(catalog.default, catalog, "bench").path
    q4_0 = quantized_copy(q4_1, temp_root() / "SmolLM2-135M-Instruct.Q4_0.gguf")
    rows: list[dict[str, object]] = []
    for label, model in (("Q4_1", q4_1), ("Q4_0", q4_0)):
        on = child(model, True, args.runs)
        off = child(model, False, args.runs)
        if isinstance(on, str) or isinstance(off, str):
            rows.append(
                {
                    "what": f"{label}: repacking on / off",
                    "figure": f"on: {on}",
                    "reference": f"off: {off}",
                    "target": "off runs where on crashes",
                    "ok": not isinstance(off, str),
                }
            )
            continue
        for kind, what in (("pp", f"prompt reading, {PROMPT_TOKENS} tokens"), ("tg", "generation")):
            rows.append(
                {
                    "what": f"{label} {what}, repacking off (median of {args.runs})",
                    "figure": f"{off[kind]:.0f} tok/s = {off[kind] / on[kind]:.2f} x on",
                    "reference": f"repacking on: {on[kind]:.0f} tok/s",
                    "target": "reported (the cost of the safe setting)",
                    "ok": True,
                }
            )
    report(rows, args.json)


if __name__ == "__main__":
    main()
