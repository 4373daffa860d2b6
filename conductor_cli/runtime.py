"""The composition root: one long-lived object that owns what runs share, and builds pools.

A `Runtime` holds the loaded GGUF models (with the conductor's saved prompt states), the litellm
helper process (its seconds-long import paid once), the response cache and the trained heads.
`ask`, `run`, `replay`, `eval`, `workers test`, `train` and a server get their models and pools
from one, so many runs share one set of resources. What belongs to one run (cache mode,
budget, call counter) is a `RunScope`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from conductor_cli.backends import price_map
from conductor_cli.backends.base import Backend, Request
from conductor_cli.backends.litellm import LiteLLMProcess
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.backends.openai_compat import served_directly
from conductor_cli.backends.prefix_state import PrefixStateStore
from conductor_cli.config.settings import Config, WorkerConfig
from conductor_cli.disk import paths
from conductor_cli.errors import ConductorError
from conductor_cli.models.catalog import Catalog, load_catalog
from conductor_cli.policy.conductor import conductor_backend, conductor_base
from conductor_cli.run.budget import Budget, Pricing
from conductor_cli.run.planner import ShapeChooser
from conductor_cli.run.pool import (
    Pool,
    Worker,
    build_pool,
    missing_catalog_models,
    uses_litellm,
)
from conductor_cli.storage.cache import CachedBackend, CacheMode, CallCounter, ResponseCache

Lookup = Callable[[str], list[float] | None]
CONDUCTOR_LABEL = "conductor"  # the budget's name for the conductor's calls


def price_lookup(model: str, api_base: str | None, helper: Lookup) -> Lookup:
    """Where a remote model's price is read: litellm's list as a file for an endpoint called
    directly (its first call's cost waits for no import), else litellm's helper."""
    return price_map.rates if served_directly(model, api_base) else helper


def worker_pricing(wc: WorkerConfig, lookup: Lookup) -> Pricing:
    spec = wc.spec
    return Pricing(
        spec.name,
        local=not spec.remote,  # a GGUF or a tool costs nothing a call
        input_per_mtok=wc.input_cost_per_mtok,
        output_per_mtok=wc.output_cost_per_mtok,
        lookup=price_lookup(spec.name, wc.api_base, lookup),
    )


def conductor_pricing(config: Config, lookup: Lookup) -> Pricing:
    c = config.conductor
    return Pricing(
        c.spec.name, local=c.spec.local, lookup=price_lookup(c.spec.name, c.api_base, lookup)
    )


class Choosers:
    """Trained heads loaded once and kept for many questions, so a trained conductor's GGUF is
    not loaded again for each problem of an eval."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, ...], ShapeChooser] = {}
        self._lock = threading.Lock()  # eval threads may ask for the same head at once

    def get(self, key: tuple[str, ...], load: Callable[[], ShapeChooser]) -> ShapeChooser:
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = load()
            return self._loaded[key]

    def close(self) -> None:
        with self._lock:
            for chooser in self._loaded.values():
                chooser.close()
            self._loaded.clear()


@dataclass
class RunScope:
    """What one run owns: how it uses the cache, its budget, and its count of model calls."""

    cache_mode: CacheMode = CacheMode.USE
    budget: Budget | None = None
    counter: CallCounter = field(default_factory=CallCounter)


@dataclass(frozen=True)
class WorkerProbe:
    """`workers test`: one worker's answer to a tiny prompt, or why it failed."""

    name: str
    ok: bool
    seconds: float
    reply: str | None
    error: str | None


PROBE = Request(({"role": "user", "content": "Reply with the word OK."},), 8, 0.0, 0)
# A tool reads no English: the python tool runs a task that is itself a program.
TOOL_PROBE = Request(({"role": "user", "content": "print('OK')"},), 8, 0.0, 0)


_HELLO = ({"role": "user", "content": "Hello"},)


class Runtime:
    """The resources runs share. Close it (or use it as a context manager) when done."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        catalog: Catalog | None = None,
        models: LlamaModels | None = None,
        litellm: LiteLLMProcess | None = None,
    ) -> None:
        self.config = config or Config()
        self.catalog = catalog or load_catalog()
        c = self.config.conductor
        self._own_models = models is None
        self.models = models or LlamaModels.for_settings(
            c,
            # Speed only, answers do not depend on it: kept even under --no-cache/--refresh.
            state_store=PrefixStateStore.default() if self.config.cache.enabled else None,
        )
        # Started only when a worker or the conductor needs it. A caller may share its own
        # (tests share one across many runtimes, paying litellm's import once).
        self._own_litellm = litellm is None
        self.litellm = litellm or LiteLLMProcess()
        self.choosers = Choosers()
        self._cache: ResponseCache | None = None
        self._cache_lock = threading.Lock()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- models -------------------------------------------------------------------------

    def pull_missing(self, config: Config | None = None, *, conductor: bool = True) -> list[str]:
        """Download the catalog models the config uses and lacks (as `ollama run` does): one
        visible step, with its progress bar, before any pool is built. Returns their names.
        `conductor=False`: a given workflow with no rounds never loads the conductor."""
        return pull_models_for(config or self.config, self.catalog, conductor=conductor)

    # --- the response cache ---------------------------------------------------------------

    def cache(self) -> ResponseCache | None:
        """The response cache, opened on first use; None when the config turns caching off."""
        if not self.config.cache.enabled:
            return None
        with self._cache_lock:
            if self._cache is None:
                self._cache = ResponseCache(size_limit_mb=self.config.cache.size_limit_mb)
            return self._cache

    @contextmanager
    def _any_cache(self) -> Iterator[ResponseCache]:
        """The response cache even when the config turns caching off (to report or clear
        what earlier runs left); one opened only for this is closed after."""
        cache = self.cache()
        if cache is not None:
            yield cache
            return
        cache = ResponseCache(size_limit_mb=self.config.cache.size_limit_mb)
        try:
            yield cache
        finally:
            cache.close()

    def cache_report(self) -> dict[str, Any]:
        """`cache stats`: the response cache's entries and size, and the saved prompt states."""
        with self._any_cache() as cache:
            info = cache.stats()
        store = PrefixStateStore.default()
        info["prompt_states"] = len(store.files())
        info["prompt_state_bytes"] = store.size_bytes()
        info["prompt_state_dir"] = str(store.directory)
        return info

    def clear_caches(self) -> tuple[int, int, int, int]:
        """`cache clear`: (cached responses, saved prompt states and hidden states, converted
        training bases, 16-bit model copies) removed."""
        from conductor_cli.backends import f16_copy
        from conductor_cli.policy.feature_store import FeatureStore

        with self._any_cache() as cache:
            removed = cache.clear()
        states = PrefixStateStore.default().clear() + FeatureStore.default().clear()
        return removed, states, paths.clear_torch_bases(), f16_copy.clear()

    # --- pools ----------------------------------------------------------------------------

    def scope(
        self, cache_mode: CacheMode = CacheMode.USE, budget: Budget | None = None
    ) -> RunScope:
        mode = CacheMode(cache_mode)  # accept "use" / "refresh" / "off" from Python callers
        if mode is not CacheMode.OFF and self.cache() is None:
            mode = CacheMode.OFF  # the config turns caching off
        return RunScope(mode, budget)

    def _wrap(self, backend: Backend, label: str, pricing: Pricing, scope: RunScope) -> Backend:
        cache = self.cache() if scope.cache_mode is not CacheMode.OFF else None
        return CachedBackend(
            backend,
            cache,
            scope.cache_mode if cache is not None else CacheMode.OFF,
            scope.counter,
            label=label,
            pricing=pricing,
            budget=scope.budget,
        )

    def raw_pool(self, config: Config | None = None) -> Pool:
        """Every worker's model resolved and checked (not yet loaded), with no cache around it."""
        config = config or self.config
        pool = build_pool(config, self.catalog, self.models, self.litellm)
        if uses_litellm(config):
            # Start litellm's helper now: its seconds-long import runs on another core while
            # the conductor loads and plans, not in front of the first remote step.
            self.litellm.start()
        return pool

    def warm(self, config: Config | None = None) -> bool:
        """Load what the config's first run uses, in the order it uses them: the conductor,
        its trained head's features, each local worker; litellm's helper starts where the
        pool has remote workers. A server calls it as it starts, so that its first run is as
        fast as its second; what fails here is left for that run to report. False where a
        model is not downloaded yet: nothing is loaded (the first run pulls it, with
        progress, never a download behind the user's back)."""
        config = config or self.config
        if missing_catalog_models(config, self.catalog, conductor_base(config)):
            return False
        loads: list[Callable[[], object]] = [
            lambda: self.raw_conductor(config),
            lambda: self.chooser(config),
            lambda: self.raw_pool(config),
        ]
        for load in loads:
            try:
                found = load()
            except Exception:  # the run that needs it says what is wrong, in its own words
                continue
            backends = found.workers if isinstance(found, Pool) else [found]
            for backend in backends:
                backend = getattr(backend, "backend", backend)
                if isinstance(backend, LlamaCppBackend):
                    with suppress(Exception):
                        backend.load()
                        # One token: llama.cpp sizes its buffers at a model's first decode.
                        backend.complete(Request(_HELLO, max_tokens=1, temperature=0, seed=0))
        return True

    def pool(self, scope: RunScope, config: Config | None = None) -> Pool:
        """The pool for one run: each worker behind the cache, the budget and the counter."""
        raw = self.raw_pool(config)
        return Pool(
            tuple(
                Worker(
                    w.config,
                    self._wrap(
                        w.backend,
                        f"worker {w.name}",
                        worker_pricing(w.config, self.litellm.rates),
                        scope,
                    ),
                    w.context_tokens,
                )
                for w in raw.workers
            )
        )

    def raw_conductor(self, config: Config | None = None) -> Backend:
        """The conductor's model with no cache around it (training samples it afresh)."""
        return conductor_backend(config or self.config, self.catalog, self.models, self.litellm)

    def conductor(self, scope: RunScope, config: Config | None = None) -> Backend:
        config = config or self.config
        pricing = conductor_pricing(config, self.litellm.rates)
        return self._wrap(self.raw_conductor(config), CONDUCTOR_LABEL, pricing, scope)

    def chooser(self, config: Config | None = None) -> ShapeChooser | None:
        """The trained part of a trained conductor (conductor.model names one), else None."""
        from conductor_cli.policy.registry import find
        from conductor_cli.policy.registry import worker_fingerprint as registry_fp

        config = config or self.config
        trained = find(config.conductor.model)
        if trained is None or trained.method != "head":
            return None  # the LoRA methods' training lives in the adapter
        # The workers' settings too: a retuned worker is one the head never measured.
        names = tuple(f"{w.name}={registry_fp(w)}" for w in config.workers)

        def load() -> ShapeChooser:
            from conductor_cli.policy.chooser import HeadChooser

            base = conductor_backend(config, self.catalog, self.models, self.litellm)
            assert isinstance(base, LlamaCppBackend)
            return HeadChooser.load(
                trained, base.path, config.workers, config.conductor, kept=config.cache.enabled
            )

        return self.choosers.get((trained.name, str(trained.head_path), *names), load)

    def probe_workers(self, config: Config | None = None) -> list[WorkerProbe]:
        """Send each worker a tiny prompt (no cache): its latency and reply, or the error."""
        rows = []
        for w in self.raw_pool(config).workers:
            start = time.monotonic()
            try:
                done = w.backend.complete(TOOL_PROBE if w.tool else PROBE)
                reply, error = done.text.strip()[:40], None
            except ConductorError as e:
                reply, error = None, str(e)
            seconds = round(time.monotonic() - start, 3)
            rows.append(WorkerProbe(w.name, error is None, seconds, reply, error))
        return rows

    def close(self) -> None:
        self.choosers.close()
        if self._own_litellm:
            self.litellm.close()
        if self._own_models:
            self.models.close()
        with self._cache_lock:
            if self._cache is not None:
                self._cache.close()
                self._cache = None


def pull_models_for(config: Config, catalog: Catalog, *, conductor: bool = True) -> list[str]:
    """`Runtime.pull_missing` for entry points that check models before making a runtime
    (train, eval): the names of the catalog models downloaded."""
    missing = missing_catalog_models(config, catalog, conductor_base(config) if conductor else None)
    if missing:
        from conductor_cli.models import fetch

        fetch.pull_missing(missing)
    return [e.name for e in missing]


@contextmanager
def runtime_for(config: Config, runtime: Runtime | None) -> Iterator[Runtime]:
    """The caller's runtime, or a fresh one for this call only (closed after it)."""
    if runtime is not None:
        yield runtime
        return
    own = Runtime(config)
    try:
        yield own
    finally:
        own.close()
