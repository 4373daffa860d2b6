"""The worker pool: config entries resolved to callable backends, and the conductor's backend."""

from __future__ import annotations

from dataclasses import dataclass

from .backends.base import Backend
from .backends.litellm import LiteLLMBackend, LiteLLMProcess
from .backends.llamacpp import LlamaCppBackend, LlamaModels
from .catalog import Catalog, resolve_gguf
from .config import Config, WorkerConfig

GGUF_PREFIX = "gguf:"
LITELLM_PREFIX = "litellm:"


@dataclass(frozen=True)
class Worker:
    config: WorkerConfig
    backend: Backend

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def description(self) -> str:
        return self.config.description


@dataclass(frozen=True)
class Pool:
    workers: tuple[Worker, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(w.name for w in self.workers)

    def get(self, name: str) -> Worker:
        for w in self.workers:
            if w.name == name:
                return w
        raise KeyError(name)


def _where(config: Config, key: str) -> str:
    return f"{config.source}: {key}" if config.source else key


def uses_litellm(config: Config) -> bool:
    return config.conductor.model.startswith(LITELLM_PREFIX) or any(
        not w.model.startswith(GGUF_PREFIX) for w in config.workers
    )


def build_pool(
    config: Config,
    catalog: Catalog,
    models: LlamaModels,
    litellm: LiteLLMProcess | None = None,
) -> Pool:
    """Resolve every worker's model; GGUF files are checked (and fetched) but not loaded yet."""
    workers = []
    for i, wc in enumerate(config.workers):
        where = _where(config, f"workers[{i}].model")
        backend: Backend
        if wc.model.startswith(GGUF_PREFIX):
            resolved = resolve_gguf(wc.model.removeprefix(GGUF_PREFIX), catalog, where)
            backend = LlamaCppBackend(models, resolved.path, resolved.sha256())
        else:
            backend = LiteLLMBackend(
                wc.model.removeprefix(LITELLM_PREFIX),
                api_base=wc.api_base,
                api_key_env=wc.api_key_env,
                where=_where(config, f"workers[{i}] ({wc.name})"),
                timeout_s=wc.timeout_s,
                process=litellm,
            )
        workers.append(Worker(config=wc, backend=backend))
    return Pool(workers=tuple(workers))


def conductor_backend(
    config: Config,
    catalog: Catalog,
    models: LlamaModels,
    litellm: LiteLLMProcess | None = None,
) -> Backend:
    """The conductor: a catalog name or .gguf path in llama.cpp, or `litellm:<model>`."""
    c = config.conductor
    if c.model.startswith(LITELLM_PREFIX):
        return LiteLLMBackend(
            c.model.removeprefix(LITELLM_PREFIX),
            api_base=c.api_base,
            api_key_env=c.api_key_env,
            where=_where(config, "conductor"),
            process=litellm,
        )
    spec = c.model.removeprefix(GGUF_PREFIX)
    resolved = resolve_gguf(spec, catalog, _where(config, "conductor.model"))
    return LlamaCppBackend(models, resolved.path, resolved.sha256())
