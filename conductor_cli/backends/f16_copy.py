"""A GGUF's weights in 16-bit floats, made once, for reading hidden states faster.

A trained head plans from the conductor's hidden state after the planning prompt, so every
question costs its own tokens through the base model (policy/features.py). SmolLM2-135M ships
as Q4_1, for which llama.cpp has no repacked CPU kernels: on 2 cores it reads about 340 tokens
a second, the same weights in F16 about 780 (bench/f16_features.py). The copy holds the very
weights the quantized file decodes to; the states differ from the quantized file's in the last
bits (llama.cpp quantizes the activations for a Q4_1 product), so which file a head read is
part of what it was trained with (policy/features.FEATURES: a record's
`hyperparameters.features`).

The copy is written by llama.cpp's own quantize (about a second), beside the other derived
files (disk/paths.state_dir), named by the source's sha256 and llama.cpp's build, and moved
into place whole, so a crash leaves no half file where a later run looks.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
from pathlib import Path

from conductor_cli.disk import paths
from conductor_cli.errors import ModelError

SUFFIX = "-f16.gguf"


def copies_dir() -> Path:
    return paths.state_dir() / "f16"


def f16_copy(model: Path, sha256: str) -> Path:
    """The F16 copy of `model` (whose sha256 is `sha256`), made now if it is not kept yet."""
    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    directory = paths.private_dir(copies_dir())
    target = directory / f"{sha256[:32]}-{llama_cpp.__version__}{SUFFIX}"
    if target.is_file():
        return target
    # Its own part per call: two processes, or two threads of a server, may make it at once.
    partial = directory / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.part"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_F16
    params.allow_requantize = True
    params.nthread = max(os.cpu_count() or 1, 1)
    try:
        with suppress_stdout_stderr(disable=False):  # a line per tensor otherwise
            failed = llama_cpp.llama_model_quantize(
                str(model).encode(), str(partial).encode(), ctypes.byref(params)
            )
        if failed or not partial.is_file():
            raise ModelError(
                f"llama.cpp could not write a 16-bit copy of {model} into {directory} "
                f"(code {failed}): check the file (`conductor models pull`) and free space "
                "there, or set CONDUCTOR_STATE_DIR to a folder with room"
            )
        os.replace(partial, target)
    except OSError as e:
        raise ModelError(
            f"could not keep a 16-bit copy of {model} in {directory} ({e}): free space there, "
            "or set CONDUCTOR_STATE_DIR to a folder with room"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()
    return target


def clear() -> int:
    """`cache clear`: remove every kept copy (the next planning makes it again); how many."""
    directory = copies_dir()
    if not directory.is_dir():
        return 0
    removed = 0
    for path in directory.iterdir():
        with contextlib.suppress(OSError):
            path.unlink()
            removed += not path.name.startswith(".")
    return removed
