"""The conductor's GGUF as a transformers model, converted once and kept.

transformers reads a GGUF by dequantizing every tensor in Python: 24 s for the 98 MB default
on 2 cores, at the start of every LoRA training run, export check and resume. The float32
result saved as safetensors loads in 0.1 s with the same weights (checked bit for bit), so the
first load keeps it under the state folder (`paths.state_dir()`, derived files kept for speed
only; `conductor cache clear` removes them). Keyed by the GGUF file itself (its device and
inode, so a hard link shares the copy), size and mtime, and the transformers version: a changed
file or library converts again. Processes that need the same copy at once (`--processes N`)
take turns: the first converts, the others load what it kept. The export check's float32
GGUF of the same base is kept beside it, under the same key (`float32_gguf`), and so is its
tokenizer (`load_tokenizer`). Converting, transformers parses the GGUF's header again for the
config, the weights and the tokenizer, and builds gguf's tensor-name table once for every
module of the model; `_parsed_once` keeps one of each (model and tokenizer on one CPU here:
16.7 -> 10.3 CPU-seconds, the kept copies' saving included; the very same weights).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from conductor_cli.disk import locks, paths

_PATCH_LOCK = threading.Lock()  # one conversion at a time swaps gguf's two functions


def copies_dir() -> Path:
    return paths.torch_bases_dir()


def _key(base: Path) -> str:
    import transformers

    stat = base.stat()
    ident = (
        f"{stat.st_dev}\0{stat.st_ino}\0{stat.st_size}\0{stat.st_mtime_ns}\0"
        f"{transformers.__version__}"
    )
    return f"{base.stem}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def load_base(base: Path) -> Any:
    """The dequantized float32 model (a transformers PreTrainedModel) of the GGUF `base`."""
    import torch
    from transformers import AutoModelForCausalLM

    def convert() -> Any:
        with _parsed_once():
            model = AutoModelForCausalLM.from_pretrained(
                str(base.parent), gguf_file=base.name, dtype=torch.float32
            )
        # The GGUF was dequantized on load: these weights are plain floats, and the marks
        # left by the GGUF "quantizer" only make peft and trainers refuse them.
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer.remove_quantization_config(model)
        return model

    return _kept_or_made(
        copies_dir() / _key(base),
        "config.json",
        lambda kept: AutoModelForCausalLM.from_pretrained(kept, dtype=torch.float32),
        convert,
    )


def load_tokenizer(base: Path) -> Any:
    """The GGUF's tokenizer as transformers reads it (TRL's trainers take one). Read from the
    GGUF, it costs 7 s a process on 2 cores (the whole file is parsed again); kept beside the
    torch copy under the same key, 0.2 s."""
    from transformers import AutoTokenizer

    return _kept_or_made(
        copies_dir() / f"{_key(base)}.tokenizer",
        "tokenizer_config.json",
        AutoTokenizer.from_pretrained,
        lambda: _tokenizer_from_gguf(base),
    )


def _tokenizer_from_gguf(base: Path) -> Any:
    from transformers import AutoTokenizer

    with _parsed_once():
        return AutoTokenizer.from_pretrained(str(base.parent), gguf_file=base.name)


@contextlib.contextmanager
def _parsed_once() -> Iterator[None]:
    """Inside the block, gguf's reader parses each file once and its tensor-name table is built
    once per architecture and depth, however often transformers asks for them (the table once
    per module of the model, the header, with its 49,152-token vocabulary, once for the config
    and again for the weights). Both are read-only once made: the same objects give the same
    config, weights and tokenizer (checked tensor for tensor)."""
    import gguf

    readers: dict[tuple[str, str], Any] = {}
    tables: dict[tuple[Any, int], Any] = {}
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    def table(arch: Any, n_blocks: int) -> Any:
        if (arch, n_blocks) not in tables:
            tables[arch, n_blocks] = name_map(arch, n_blocks)
        return tables[arch, n_blocks]

    with _PATCH_LOCK:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, table
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


def _kept_or_made(
    kept: Path, marker: str, load: Callable[[str], Any], convert: Callable[[], Any]
) -> Any:
    """What `load` reads from the folder `kept` (whole once `marker` is in it), or else what
    `convert` makes from the GGUF, then saved there (`save_pretrained`) for the next load."""
    with _one_maker(kept):
        if (kept / marker).is_file():
            try:
                with _quiet():
                    return load(str(kept))
            except Exception:  # any damage to a derived copy (safetensors has its own errors)
                shutil.rmtree(kept, ignore_errors=True)  # convert again below
        with _quiet():
            made = convert()
        _keep(made, kept)
        return made


def _one_maker(kept: Path) -> contextlib.AbstractContextManager[None]:
    """Held while `kept` is checked and made: a second process waits for the first's copy
    instead of converting the same GGUF beside it (each conversion is a core's 20 s)."""
    return locks.exclusive(kept.parent / f".{kept.name}.lock")


def _keep(made: Any, kept: Path) -> None:
    """Keep the converted model or tokenizer: a full disk or a second writer only costs the
    next run the conversion."""
    try:
        with _staged(kept) as staged, _quiet():
            made.save_pretrained(str(staged))  # safetensors: transformers 5 writes nothing else
    except OSError:
        pass


def float32_gguf(base: Path) -> Path:
    """The GGUF `base` with every tensor as float32, made once (5 s and 540 MB for the
    default) and kept beside the torch copy under the same key: the export check loads it."""
    kept = copies_dir() / f"{_key(base)}.f32.gguf"
    with _one_maker(kept):
        if not kept.is_file():
            with _staged(kept) as staged:
                dequantized_copy(base, staged)
    return kept


def dequantized_copy(source: Path, target: Path) -> None:
    """`source` with every tensor as float32 and its metadata unchanged."""
    import gguf

    reader = gguf.GGUFReader(str(source))
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(str(target), arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # the writer adds these itself
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = 0 if field.name == gguf.Keys.General.FILE_TYPE else field.contents()  # 0: F32
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    for tensor in reader.tensors:
        data = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        writer.add_tensor(tensor.name, np.ascontiguousarray(data, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@contextlib.contextmanager
def _staged(kept: Path) -> Iterator[Path]:
    """A path beside `kept` to write to, renamed to `kept` once written whole: a reader never
    sees half a copy."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=kept.parent, prefix=".partial-") as tmp:
        staged = Path(tmp) / kept.name
        yield staged
        staged.replace(kept)


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
