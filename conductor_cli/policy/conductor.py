"""The conductor's model: a trained conductor's base GGUF with its adapter, when conductor.model
names one (policy/registry.py), else the model the config names (a catalog name, a .gguf path,
or `litellm:<model>`)."""

from __future__ import annotations

from conductor_cli.backends.base import Backend
from conductor_cli.backends.litellm import LiteLLMBackend, LiteLLMProcess
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.backends.openai_compat import OpenAICompatBackend, served_directly
from conductor_cli.config.settings import Config
from conductor_cli.errors import ModelError
from conductor_cli.exports import resolve
from conductor_cli.models.catalog import Catalog, resolve_gguf
from conductor_cli.models.spec import ModelSpec, spellings
from conductor_cli.policy.registry import find
from conductor_cli.run.pool import config_key


def conductor_backend(
    config: Config,
    catalog: Catalog,
    models: LlamaModels,
    litellm: LiteLLMProcess | None = None,
) -> Backend:
    """The conductor, built by its model kind's entry (models/spec.MODEL_KINDS); the config
    check refuses a kind with no conductor builder."""
    entry = config.conductor.spec.entry
    if not entry.conductor:
        raise ModelError(
            f"conductor.model {config.conductor.model!r}: a conductor runs on "
            f"{spellings(conductor=True)}"
        )
    return resolve(entry.conductor)(config, catalog, models, litellm)


def litellm_conductor(
    config: Config, catalog: Catalog, models: LlamaModels, litellm: LiteLLMProcess | None
) -> Backend:
    """`litellm:<model>`: a conductor served elsewhere."""
    c = config.conductor
    kind = OpenAICompatBackend if served_directly(c.spec.name, c.api_base) else LiteLLMBackend
    return kind(
        c.spec.name,
        api_base=c.api_base,
        api_key_env=c.api_key_env,
        where=config_key(config, "conductor"),
        process=litellm,
    )


def gguf_conductor(
    config: Config, catalog: Catalog, models: LlamaModels, litellm: LiteLLMProcess | None
) -> Backend:
    """A catalog name or .gguf path in llama.cpp, or a trained conductor: its base GGUF with
    its adapter, if it has one."""
    c = config.conductor
    spec = c.spec.name
    trained = find(spec)
    adapter = None
    if trained is not None:  # a conductor trained by `conductor train`: its base GGUF
        spec = ModelSpec.for_conductor(trained.base_model).name
        adapter = trained.adapter_path
        if adapter is not None and not adapter.is_file():
            raise ModelError(
                f"conductor.model {c.model!r}: its adapter {adapter} is missing; train it again"
            )
    resolved = resolve_gguf(spec, catalog, config_key(config, "conductor.model"))
    if adapter is None:
        return LlamaCppBackend(models, resolved.path, resolved.sha256())
    assert trained is not None
    sha = resolved.sha256()
    return LlamaCppBackend(models, resolved.path, sha, adapter, trained.adapter_sha256())


def conductor_base(config: Config) -> ModelSpec:
    """The model the conductor runs on: a trained conductor's base model, else its own."""
    spec = config.conductor.spec
    trained = find(spec.name) if spec.local else None
    return ModelSpec.for_conductor(trained.base_model) if trained else spec
