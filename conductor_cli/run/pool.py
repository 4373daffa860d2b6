"""The worker pool: config entries resolved to callable backends; the local models a config
uses."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from conductor_cli.backends.base import Backend
from conductor_cli.backends.litellm import LiteLLMBackend, LiteLLMProcess
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.backends.openai_compat import OpenAICompatBackend, served_directly
from conductor_cli.config.settings import Config, WorkerConfig
from conductor_cli.exports import resolve
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


def config_key(config: Config, key: str) -> str:
    """A config key as an error names it: with the file it is in."""
    return f"{config.source}: {key}" if config.source else key


def remote_members(config: Config) -> list[tuple[str, str, str | None]]:
    """(name, model, api_base) of each model `config` reaches elsewhere: the conductor
    ("conductor") where it is remote, and each remote worker."""
    c = config.conductor
    remote = [("conductor", c.spec.name, c.api_base)] if c.spec.remote else []
    return remote + [(w.name, w.spec.name, w.api_base) for w in config.workers if w.spec.remote]


def calls_remote(config: Config) -> bool:
    """Whether a run of `config` may call a model served elsewhere (a call that may cost)."""
    return bool(remote_members(config))


def uses_litellm(config: Config) -> bool:
    """Whether a run of `config` calls litellm's helper: a remote conductor or worker that is
    not an OpenAI-compatible endpoint reached directly (backends/openai_compat)."""
    return any(not served_directly(model, base) for _, model, base in remote_members(config))


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


@dataclass(frozen=True)
class Makers:
    """What building a worker's backend may use: the config (for error keys, [sandbox],
    [mcp_servers]), the model catalog, the loaded GGUF models and the litellm helper."""

    config: Config
    catalog: Catalog
    models: LlamaModels
    litellm: LiteLLMProcess | None = None


# Builds the backend of the `index`th worker of the config (`wc`), without loading a model.
BackendMaker = Callable[[WorkerConfig, int, Makers], Backend]


def gguf_backend(wc: WorkerConfig, index: int, m: Makers) -> Backend:
    where = config_key(m.config, f"workers[{index}].model")
    resolved = resolve_gguf(wc.spec.name, m.catalog, where)
    return LlamaCppBackend(m.models, resolved.path, resolved.sha256())


def litellm_backend(wc: WorkerConfig, index: int, m: Makers) -> Backend:
    # An OpenAI-compatible endpoint is called directly; litellm's helper serves the rest.
    kind = OpenAICompatBackend if served_directly(wc.spec.name, wc.api_base) else LiteLLMBackend
    return kind(
        wc.spec.name,
        api_base=wc.api_base,
        api_key_env=wc.api_key_env,
        where=config_key(m.config, f"workers[{index}] ({wc.name})"),
        timeout_s=wc.timeout_s,
        process=m.litellm,
    )


def tool_worker_backend(wc: WorkerConfig, index: int, m: Makers) -> Backend:
    return tool_backend(wc.spec.name, m.config, config_key(m.config, f"workers[{index}].model"))


def mcp_worker_backend(wc: WorkerConfig, index: int, m: Makers) -> Backend:
    return mcp_backend(wc.spec, m.config, config_key(m.config, f"workers[{index}].model"))


def build_pool(
    config: Config,
    catalog: Catalog,
    models: LlamaModels,
    litellm: LiteLLMProcess | None = None,
) -> Pool:
    """Resolve every worker's model; GGUF files are checked (and fetched) but not loaded yet."""
    makers = Makers(config, catalog, models, litellm)
    workers = []
    for i, wc in enumerate(config.workers):
        maker: BackendMaker = resolve(wc.spec.entry.worker)  # models/spec.MODEL_KINDS
        backend = maker(wc, i, makers)
        workers.append(
            Worker(config=wc, backend=backend, context_tokens=context_tokens(config, wc))
        )
    return Pool(workers=tuple(workers))


def local_models(config: Config, conductor: ModelSpec | None = None) -> list[str]:
    """Every GGUF the config runs in llama.cpp (catalog names or paths), the conductor's model
    (policy.conductor.conductor_base: a trained conductor's base) first when given."""
    names = []
    if conductor is not None and conductor.local:
        names.append(conductor.name)
    names += [w.spec.name for w in config.workers if w.spec.local]
    return list(dict.fromkeys(names))


def missing_catalog_models(
    config: Config, catalog: Catalog, conductor: ModelSpec | None = None
) -> list[CatalogEntry]:
    """The catalog models the config uses that are not downloaded yet (pulled on first use);
    `conductor`: the conductor's model, when the run plans."""
    entries = []
    for name in local_models(config, conductor):
        entry = catalog.entries.get(name)  # None for a .gguf path: nothing to pull
        if entry is not None and not entry.local_path().exists():
            entries.append(entry)
    return entries
