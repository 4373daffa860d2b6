"""The worker pool: config entries resolved to callable backends, and the conductor's backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conductor_cli.backends.base import Backend
from conductor_cli.backends.litellm import LiteLLMBackend, LiteLLMProcess
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.config.settings import Config, WorkerConfig
from conductor_cli.errors import ModelError
from conductor_cli.models.catalog import Catalog, CatalogEntry, resolve_gguf
from conductor_cli.models.spec import ModelSpec
from conductor_cli.run.inputs import Attachment, attachment_budget
from conductor_cli.tools import default_description, mcp_backend, tool_backend

# A remote model's context when the config does not say: today's API models read 128k or more.
REMOTE_CONTEXT_TOKENS = 128_000


@dataclass(frozen=True)
class Worker:
    config: WorkerConfig
    backend: Backend
    # Tokens the model reads at once: attachments are cut to fit (see inputs.fit_attachments).
    context_tokens: int = REMOTE_CONTEXT_TOKENS

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def spec(self) -> ModelSpec:
        return self.config.spec

    @property
    def tool(self) -> bool:
        return self.config.spec.tool

    @property
    def description(self) -> str:
        return self.config.description or default_description(self.config.spec)


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
    return config.conductor.spec.remote or any(w.spec.remote for w in config.workers)


def context_tokens(config: Config, wc: WorkerConfig) -> int:
    """The worker's context window: its own setting, else llama.cpp's n_ctx or a remote default."""
    if wc.context_tokens:
        return wc.context_tokens
    return config.conductor.n_ctx if wc.spec.local else REMOTE_CONTEXT_TOKENS


def cut_notes(config: Config, question: str, attachments: Sequence[Attachment]) -> list[str]:
    """One line per worker that will read the attachments cut (before any step's outputs)."""
    total = sum(len(a.text) for a in attachments)
    notes = []
    for wc in config.workers:
        context = context_tokens(config, wc)
        budget = attachment_budget(context, wc.max_tokens, len(question))
        if total > budget:
            notes.append(
                f"{wc.name} ({context:,}-token context) reads the first {budget:,} of "
                f"{total:,} characters of the attachments; the cut is marked in its prompt"
            )
    return notes


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
        spec = wc.spec
        if spec.local:
            resolved = resolve_gguf(spec.name, catalog, where)
            backend = LlamaCppBackend(models, resolved.path, resolved.sha256())
        elif spec.kind == "mcp":
            backend = mcp_backend(spec, config, where)
        elif spec.tool:
            backend = tool_backend(spec.name, config, where)
        else:
            backend = LiteLLMBackend(
                spec.name,
                api_base=wc.api_base,
                api_key_env=wc.api_key_env,
                where=_where(config, f"workers[{i}] ({wc.name})"),
                timeout_s=wc.timeout_s,
                process=litellm,
            )
        workers.append(
            Worker(config=wc, backend=backend, context_tokens=context_tokens(config, wc))
        )
    return Pool(workers=tuple(workers))


def conductor_backend(
    config: Config,
    catalog: Catalog,
    models: LlamaModels,
    litellm: LiteLLMProcess | None = None,
) -> Backend:
    """The conductor: a catalog name or .gguf path in llama.cpp, or `litellm:<model>`."""
    c = config.conductor
    if not c.spec.local:
        return LiteLLMBackend(
            c.spec.name,
            api_base=c.api_base,
            api_key_env=c.api_key_env,
            where=_where(config, "conductor"),
            process=litellm,
        )
    spec = c.spec.name
    from conductor_cli.train.registry import find

    trained = find(spec)
    adapter = None
    if trained is not None:  # a conductor trained by `conductor train`: its base GGUF
        spec = ModelSpec.for_conductor(trained.base_model).name
        adapter = trained.adapter_path
        if adapter is not None and not adapter.is_file():
            raise ModelError(
                f"conductor.model {c.model!r}: its adapter {adapter} is missing; train it again"
            )
    resolved = resolve_gguf(spec, catalog, _where(config, "conductor.model"))
    if adapter is None:
        return LlamaCppBackend(models, resolved.path, resolved.sha256())
    assert trained is not None
    sha = resolved.sha256()
    return LlamaCppBackend(models, resolved.path, sha, adapter, trained.adapter_sha256())


def conductor_base(config: Config) -> ModelSpec:
    """The model the conductor runs on: a trained conductor's base model, else its own."""
    from conductor_cli.train.registry import find

    spec = config.conductor.spec
    trained = find(spec.name) if spec.local else None
    return ModelSpec.for_conductor(trained.base_model) if trained else spec


def local_models(config: Config, *, conductor: bool = True) -> list[str]:
    """Every GGUF the config runs in llama.cpp (catalog names or paths), the conductor's first."""
    names = []
    if conductor and (base := conductor_base(config)).local:
        names.append(base.name)
    names += [w.spec.name for w in config.workers if w.spec.local]
    return list(dict.fromkeys(names))


def missing_catalog_models(
    config: Config, catalog: Catalog, *, conductor: bool = True
) -> list[CatalogEntry]:
    """The catalog models the config uses that are not downloaded yet (pulled on first use)."""
    entries = []
    for name in local_models(config, conductor=conductor):
        entry = catalog.entries.get(name)  # None for a .gguf path: nothing to pull
        if entry is not None and not entry.local_path().exists():
            entries.append(entry)
    return entries
