"""In-process GGUF models through llama-cpp-python.

A `Llama` object is not thread-safe, and loading one costs memory and seconds, so each GGUF
file is loaded once per `LlamaModels` registry and every call to it holds that model's lock.
The conductor and any local worker using the same file share the one instance.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ModelError, WorkerError
from .base import Completion, Request, TextSink


@dataclass
class _Loaded:
    llama: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    grammars: dict[str, Any] = field(default_factory=dict)


class LlamaModels:
    """Loads each GGUF file at most once, on first use."""

    def __init__(self, n_ctx: int = 8192, n_gpu_layers: int = -1, n_threads: int = 0) -> None:
        self.n_ctx = n_ctx
        self.n_gpu_layers = n_gpu_layers
        self.n_threads = n_threads or (os.cpu_count() or 1)
        self._models: dict[Path, _Loaded] = {}
        self._lock = threading.Lock()

    def get(self, path: Path) -> _Loaded:
        key = path.resolve()
        with self._lock:
            if key not in self._models:
                self._models[key] = _Loaded(self._load(key))
            return self._models[key]

    def _load(self, path: Path) -> Any:
        from llama_cpp import Llama

        try:
            # Defaults are wrong for us (verbose, n_ctx=512, CPU only, random seed): set them all.
            return Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_gpu_layers=self.n_gpu_layers,
                n_threads=self.n_threads,
                seed=0,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as e:
            raise ModelError(
                f"llama.cpp could not load {path} ({e}): the file is truncated or not a model "
                "llama.cpp supports. Re-download it with `conductor models pull NAME`."
            ) from None

    def close(self) -> None:
        with self._lock:
            for loaded in self._models.values():
                # A model still busy in a step's thread (after Ctrl-C) must not be freed under
                # it: that crashes the process. It goes with the process instead.
                if loaded.lock.acquire(blocking=False):
                    try:
                        loaded.llama.close()
                    finally:
                        loaded.lock.release()
            self._models.clear()


class LlamaCppBackend:
    def __init__(self, models: LlamaModels, path: Path, sha256: str) -> None:
        self._models = models
        self.path = path
        self.sha256 = sha256

    @property
    def identity(self) -> str:
        return f"gguf:{self.path}"

    @property
    def fingerprint(self) -> str:
        return f"gguf-sha256:{self.sha256}"

    @property
    def supports_grammar(self) -> bool:
        return True

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        loaded = self._models.get(self.path)
        kwargs: dict[str, Any] = {}
        with loaded.lock:
            if request.grammar is not None:
                grammar = loaded.grammars.get(request.grammar)
                if grammar is None:
                    from llama_cpp import LlamaGrammar

                    grammar = LlamaGrammar.from_string(request.grammar, verbose=False)
                    loaded.grammars[request.grammar] = grammar
                kwargs["grammar"] = grammar
            try:
                out = loaded.llama.create_chat_completion(
                    messages=list(request.messages),
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
                    seed=request.seed,
                    repeat_penalty=request.repeat_penalty,
                    stream=on_text is not None,
                    **kwargs,
                )
                if on_text is None:
                    return _from_response(out)
                return _from_stream(loaded.llama, out, on_text)
            except ValueError as e:
                # e.g. "Requested tokens (9000) exceed context window of 8192"
                raise WorkerError(f"{self.path.name}: {e}") from None


def _from_response(out: dict[str, Any]) -> Completion:
    choice = out["choices"][0]
    usage = out.get("usage") or {}
    return Completion(
        text=choice["message"]["content"] or "",
        tokens_in=int(usage.get("prompt_tokens", 0)),
        tokens_out=int(usage.get("completion_tokens", 0)),
        finish_reason=choice.get("finish_reason") or "stop",
    )


def _from_stream(llama: Any, chunks: Any, on_text: TextSink) -> Completion:
    parts: list[str] = []
    finish = "stop"
    for chunk in chunks:
        choice = chunk["choices"][0]
        piece = choice.get("delta", {}).get("content")
        if piece:
            parts.append(piece)
            on_text(piece)
        finish = choice.get("finish_reason") or finish
    text = "".join(parts)
    # A stream carries no usage; n_tokens is everything in the context after the call.
    tokens_out = len(llama.tokenize(text.encode("utf-8"), add_bos=False)) if text else 0
    return Completion(
        text=text,
        tokens_in=max(int(llama.n_tokens) - tokens_out, 0),
        tokens_out=tokens_out,
        finish_reason=finish,
    )
