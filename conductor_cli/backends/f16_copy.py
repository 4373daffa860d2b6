"""A small Q4_1 GGUF's weights in 16-bit floats, made once, for reading hidden states faster.

A trained head plans from the conductor's hidden state after the planning prompt, so every
question costs its own tokens through the base model (policy/features.py). SmolLM2-135M ships
as Q4_1, for which llama.cpp has no repacked CPU kernels: on 2 cores it read 331 tokens in
0.98 s, the same weights in F16 in 0.42 s (F32 0.57 s, Q8_0 0.50 s; measured 2026-12-02; over
the 594 planning prompts of bench/f16_features.py, 0.58 times the seconds). Other types have
fast kernels, and a big model's copy would cost gigabytes: only a Q4_1 file under
`MAX_SOURCE_BYTES` gets a copy (`wanted`). The copy holds the very weights the file decodes
to; its states differ from the file's in the last bits (llama.cpp quantizes the activations
for a Q4_1 product), so which file a head read is part of what it was trained with
(policy/features.FEATURES: a record's `hyperparameters.features`).

The copy is written by llama.cpp's own quantize in a child process (it logs a line per tensor
on the process's stderr, and a damaged file may abort it), beside the other derived files
(disk/paths.state_dir), named by the source's sha256 and llama.cpp's build, flushed and moved
into place whole, so a crash leaves no half file where a later run looks; its part is swept
by the next copy made.

`python -m conductor_cli.backends.f16_copy SOURCE TARGET` is that child.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

from conductor_cli.disk import kept_files, paths
from conductor_cli.errors import ModelError

SUFFIX = "-f16.gguf"
PART = ".part"
MAX_SOURCE_BYTES = 512 * 2**20  # the copy is ~2.8 times the Q4_1 file
Q4_1 = "Q4_1"
# A part this old is no copy being written (one takes seconds): a killed writer's.
STALE_PART_S = 600.0
TIMEOUT_S = 600.0


def copies_dir() -> Path:
    return paths.state_dir() / "f16"


def wanted(model: Path) -> bool:
    """Whether `model` reads faster from a 16-bit copy: a small Q4_1 file."""
    from conductor_cli.models.gguf import read_gguf

    try:
        small = model.stat().st_size <= MAX_SOURCE_BYTES
    except OSError:
        return False
    return small and read_gguf(model).quantization == Q4_1


def f16_copy(model: Path, sha256: str) -> Path:
    """The F16 copy of `model` (whose sha256 is `sha256`), made now if it is not kept yet."""
    import llama_cpp

    directory = copies_dir()
    target = directory / f"{sha256[:32]}-{llama_cpp.__version__}{SUFFIX}"
    if target.is_file():
        return target
    room = (
        f"free space in {directory}, or set CONDUCTOR_STATE_DIR to a folder with room "
        "(`conductor cache clear` removes the copies)"
    )
    try:
        paths.private_dir(directory)
        _sweep(directory, sha256[:32])
    except OSError as e:
        raise ModelError(f"could not keep a 16-bit copy of {model} ({e}): {room}") from None
    # Its own part per call: two processes, or two threads of a server, may make it at once.
    partial = directory / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}{PART}"
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__, str(model), str(partial)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0 or not partial.is_file():
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            why = said[-1][:200] if said else f"exit {done.returncode}"
            raise ModelError(
                f"llama.cpp could not write a 16-bit copy of {model} ({why}): check the file "
                f"(`conductor models pull` fetches a catalog model again), or {room}"
            )
        os.replace(partial, target)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ModelError(f"could not keep a 16-bit copy of {model} ({e}): {room}") from None
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()
    return target


def _stale_parts(directory: Path) -> list[Path]:
    """Parts left by killed writers (a part being written is left to its writer)."""
    now = time.time()
    stale = []
    for path in kept_files.listed(directory, PART):
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > STALE_PART_S:
                stale.append(path)
    return stale


def _sweep(directory: Path, source: str) -> None:
    """Remove what no run will read: stale parts, and copies of the same source made by
    other llama.cpp builds (this build's own was not found: the caller makes it)."""
    others = [p for p in kept_files.listed(directory, SUFFIX) if p.name.startswith(f"{source}-")]
    kept_files.remove(_stale_parts(directory) + others)


def clear() -> int:
    """`cache clear`: remove every kept copy (the next planning makes it again) and stale
    parts; how many copies."""
    directory = copies_dir()
    kept_files.remove(_stale_parts(directory))
    return kept_files.remove(kept_files.listed(directory, SUFFIX))


def _write(source: str, target: str) -> int:
    """The child: quantize `source` to F16 into `target`, flushed to disk; 0 when done."""
    import ctypes

    import llama_cpp

    from conductor_cli.backends.hardware import physical_cores

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_F16
    params.allow_requantize = True
    params.nthread = physical_cores()
    failed = int(
        llama_cpp.llama_model_quantize(source.encode(), target.encode(), ctypes.byref(params))
    )
    if failed:
        return failed
    with open(target, "rb+") as f:
        os.fsync(f.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(_write(sys.argv[1], sys.argv[2]))
