"""A LoRA adapter as llama.cpp reads it: a GGUF of type `adapter` with `blk.N.attn_q.weight.lora_a`
and `.lora_b` tensors beside the base GGUF (`Llama(lora_path=...)`).

The layout follows llama.cpp's own converter (convert_lora_to_gguf.py): tensors in torch's
shape (A: rank x in, B: out x rank), the scale alpha / rank from `adapter.lora.alpha`. One
difference from a plain copy: a llama GGUF stores the rows of the attention Q and K weights
permuted for its RoPE kernel, and transformers' GGUF loader undoes that when it loads the base.
An adapter trained on the loaded model therefore has B for q and k in the unpermuted order, and
its rows must be permuted the way the converter permutes the base weights.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# transformers' module name -> llama.cpp's tensor name, for the modules we adapt
MODULES = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
}


@dataclass(frozen=True)
class LoraPair:
    layer: int
    module: str  # a key of MODULES
    a: np.ndarray  # rank x in
    b: np.ndarray  # out x rank


def rope_permute(rows: np.ndarray, n_head: int) -> np.ndarray:
    """The row order llama.cpp's converter gives Q and K (LlamaModel.permute)."""
    per_head = rows.shape[0] // n_head
    return (
        rows.reshape(n_head, 2, per_head // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)
    )


def gguf_tensors(pairs: list[LoraPair], n_head: int, n_head_kv: int) -> dict[str, np.ndarray]:
    """Tensor name -> float32 array, with Q and K's B rows in llama.cpp's order."""
    out: dict[str, np.ndarray] = {}
    for p in pairs:
        b = p.b.astype(np.float32)
        if p.module == "q_proj":
            b = rope_permute(b, n_head)
        elif p.module == "k_proj":
            b = rope_permute(b, n_head_kv)
        name = f"blk.{p.layer}.{MODULES[p.module]}.weight"
        out[f"{name}.lora_a"] = np.ascontiguousarray(p.a.astype(np.float32))
        out[f"{name}.lora_b"] = np.ascontiguousarray(b)
    return out


def write_adapter(
    path: Path,
    pairs: list[LoraPair],
    *,
    alpha: float,
    n_head: int,
    n_head_kv: int,
    architecture: str = "llama",
) -> None:
    """Write the adapter to `path` atomically: a reader sees the old file or the new one."""
    import gguf  # the training extra's; llama.cpp's own GGUF writer

    tensors = gguf_tensors(pairs, n_head, n_head_kv)
    tmp = path.with_name(f".{path.name}.tmp")
    writer = gguf.GGUFWriter(str(tmp), architecture)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, path)


def pairs_from_peft(state: Mapping[str, np.ndarray]) -> list[LoraPair]:
    """The A and B of each adapted module, from a peft model's state dict (as numpy)."""
    found: dict[tuple[int, str], dict[str, np.ndarray]] = {}
    for key, value in state.items():
        if ".lora_A." not in key and ".lora_B." not in key:
            continue
        parts = key.split(".")
        layer = int(parts[parts.index("layers") + 1])
        module = next(m for m in MODULES if m in parts)
        side = "a" if ".lora_A." in key else "b"
        found.setdefault((layer, module), {})[side] = value
    return [
        LoraPair(layer, module, ab["a"], ab["b"]) for (layer, module), ab in sorted(found.items())
    ]
