"""The conductor's GGUF as a transformers model, converted once and kept.

transformers reads a GGUF by dequantizing every tensor in Python: 24 s for the 98 MB default
on 2 cores, at the start of every LoRA training run, export check and resume. The float32
result saved as safetensors loads in 0.1 s with the same weights (checked bit for bit), so the
first load keeps it under the state folder (`paths.state_dir()`, derived files kept for speed
only; `conductor cache clear` removes them). Keyed by the GGUF's path, size and mtime, and the
transformers version: a changed file or library converts again.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from conductor_cli.disk import paths


def copies_dir() -> Path:
    return paths.torch_bases_dir()


def key(base: Path) -> str:
    import transformers

    stat = base.stat()
    ident = f"{base.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{transformers.__version__}"
    return f"{base.stem}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def load_base(base: Path) -> Any:
    """The dequantized float32 model (a transformers PreTrainedModel) of the GGUF `base`."""
    import torch
    from transformers import AutoModelForCausalLM

    kept = copies_dir() / key(base)
    if (kept / "config.json").is_file():
        try:
            with _quiet():
                return AutoModelForCausalLM.from_pretrained(str(kept), dtype=torch.float32)
        except Exception:  # any damage to a derived copy (safetensors has its own errors)
            shutil.rmtree(kept, ignore_errors=True)  # convert again below
    with _quiet():
        model = AutoModelForCausalLM.from_pretrained(
            str(base.parent), gguf_file=base.name, dtype=torch.float32
        )
    # The GGUF was dequantized on load: these weights are plain floats, and the marks
    # left by the GGUF "quantizer" only make peft and trainers refuse them.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    _keep(model, kept)
    return model


def _keep(model: Any, kept: Path) -> None:
    """Save next to the final place, then rename: a reader never sees half a copy, and a full
    disk or a second writer only costs the next run the conversion."""
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=kept.parent, prefix=".partial-") as tmp:
            staged = Path(tmp) / "model"
            with _quiet():
                model.save_pretrained(str(staged), safe_serialization=True)
            staged.rename(kept)
    except OSError:
        pass


@contextlib.contextmanager
def _quiet() -> Any:
    # transformers draws its own tqdm bars and warns of deprecations on stderr; the training
    # display is ours.
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def clear() -> int:
    """Remove every kept copy; how many there were."""
    return paths.clear_torch_bases()
