"""`python -m conductor_cli.backends.llama_server --model M ...`: llama-cpp-python's
OpenAI-compatible server (`python -m llama_cpp.server`, same arguments), loading its model the
way this machine's repack check allows (see repack_check.py), so that it cannot die of a CPU
fault where conductor itself would not.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from conductor_cli.backends import repack_check
from conductor_cli.backends.llamacpp import stderr_note


def _model_argument(argv: list[str]) -> Path | None:
    for i, arg in enumerate(argv):
        if arg == "--model" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if arg.startswith("--model="):
            return Path(arg.split("=", 1)[1])
    return None


def main() -> None:
    model = _model_argument(sys.argv[1:])
    repack = repack_check.ensure(model, stderr_note).repack if model else True
    # The patch holds for the server's whole life: this process loads nothing else.
    with repack_check.repacking(repack):
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
