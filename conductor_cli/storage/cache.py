"""The response cache: every model call, keyed by a hash of its canonical request.

Values are JSON records (diskcache's JSONDisk, never pickle: a pickled cache lets anyone who
can write the directory run code in conductor, CVE-2025-69872). SQLite underneath makes it
safe for several conductor processes at once. Keys and values never hold secrets: the key
hashes the model fingerprint and the request, and API keys are not part of either.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from conductor_cli.backends.base import (
    Backend,
    Completion,
    Request,
    TextSink,
    calls_tools,
    message_text,
)
from conductor_cli.backends.tool_calls import PARSE_VERSION
from conductor_cli.disk import paths
from conductor_cli.run.budget import Budget, Pricing

KEY_VERSION = 1


class CacheMode(StrEnum):
    USE = "use"  # read hits, write misses
    REFRESH = "refresh"  # always call, overwrite
    OFF = "off"  # neither read nor write


def request_key(fingerprint: str, request: Request) -> str:
    canonical = {
        "v": KEY_VERSION,
        "model": fingerprint,
        "messages": list(request.messages),
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "seed": request.seed,
        "grammar": request.grammar,
        "repeat_penalty": request.repeat_penalty,
    }
    # Only where set, so that every other request keeps its key.
    if request.stop_loops:
        # The guard's version: an answer kept under an older guard is not this one's (2: it
        # also stops lines that rotate and repeat).
        canonical["stop_loops"] = 2
    if request.stop_after_program:
        canonical["stop_after_program"] = 1
    if request.step_penalty:
        canonical["step_penalty"] = request.step_penalty
    if request.tools is not None:
        canonical["tools"] = request.tools
        canonical["tool_choice"] = request.tool_choice
        canonical["tool_parse"] = PARSE_VERSION
    blob = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, directory: Path | None = None, size_limit_mb: int = 2048) -> None:
        import diskcache

        self.directory = directory or paths.cache_dir() / "responses"
        paths.private_dir(self.directory)
        self._cache = diskcache.Cache(
            str(self.directory),
            disk=diskcache.JSONDisk,
            size_limit=size_limit_mb * 1024 * 1024,
            eviction_policy="least-recently-used",
            timeout=60,  # wait for another process's write rather than fail
        )
        self._claims = _Claims()

    def claim(self, key: str) -> contextlib.AbstractContextManager[None]:
        """Held while one request is answered: a second thread asking the same request waits
        and reads the first one's answer, so a request is one model call however many steps
        ask it at once (training runs workflows that share steps on parallel threads)."""
        return self._claims.hold(key)

    def get(self, key: str) -> Completion | None:
        record = self._cache.get(key)
        if not isinstance(record, dict) or "text" not in record:
            return None
        return Completion.from_record(record, cached=True)

    def put(self, key: str, completion: Completion) -> None:
        self._cache.set(key, completion.to_record())

    def stats(self) -> dict[str, Any]:
        return {
            "path": str(self.directory),
            "entries": len(self._cache),
            "bytes": int(self._cache.volume()),
            "size_limit_bytes": int(self._cache.size_limit),
        }

    def clear(self) -> int:
        return int(self._cache.clear())

    def verify(self) -> int:
        """Read every entry back (SQLite index and value files); the number of good entries.

        Raises what diskcache or the JSON decoder raise on a damaged entry: for tests and
        checks after a crash, not for the hot path.
        """
        integrity = self._cache._sql("PRAGMA integrity_check").fetchone()[0]
        if integrity != "ok":
            raise ValueError(f"cache index damaged: {integrity}")
        good = 0
        for key in list(self._cache.iterkeys()):
            record = self._cache.get(key)
            if isinstance(record, dict) and isinstance(record.get("text"), str):
                good += 1
            elif record is not None:
                raise ValueError(f"cache entry {key[:12]} is not a response record")
        return good

    def close(self) -> None:
        self._cache.close()


@dataclass
class CallCounter:
    """Counts at the backend boundary: real model calls versus answers served by the cache."""

    model_calls: int = 0
    cache_hits: int = 0


class CachedBackend:
    """Any backend, behind the cache, the budget and the price list.

    This is the boundary where model calls are counted: a cache hit is free and uncounted;
    a miss is checked against the budget first, then made, priced and counted.
    """

    def __init__(
        self,
        backend: Backend,
        cache: ResponseCache | None,
        mode: CacheMode,
        counter: CallCounter,
        *,
        label: str = "model call",
        pricing: Pricing | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.backend = backend
        self.cache = cache if mode is not CacheMode.OFF else None
        self.mode = mode
        self.counter = counter
        self.label = label
        self.pricing = pricing
        self.budget = budget

    @property
    def identity(self) -> str:
        return self.backend.identity

    @property
    def fingerprint(self) -> str:
        return self.backend.fingerprint

    @property
    def supports_grammar(self) -> bool:
        return self.backend.supports_grammar

    @property
    def supports_tools(self) -> bool:
        return calls_tools(self.backend)

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        key = request_key(self.backend.fingerprint, request) if self.cache is not None else ""
        if self.cache is None or self.mode is not CacheMode.USE:
            return self._call(request, on_text, key)
        with self.cache.claim(key):
            hit = self.cache.get(key)
            if hit is None:
                return self._call(request, on_text, key)
        self.counter.cache_hits += 1
        if on_text is not None and hit.text:
            on_text(hit.text)
        return dataclasses.replace(hit, cost=0.0)

    def _call(self, request: Request, on_text: TextSink | None, key: str) -> Completion:
        """A model call, checked against the budget first, then priced, counted and kept
        under `key`."""
        if self.budget is not None:
            chars = sum(len(message_text(m)) for m in request.messages)
            # Before the call only a bound is known: ~4 characters a token, all of max_tokens.
            estimate = self.pricing.cost(chars // 4, request.max_tokens) if self.pricing else None
            self.budget.reserve(self.label, estimate)
        self.counter.model_calls += 1
        done = self.backend.complete(request, on_text)
        cost = self.pricing.cost(done.tokens_in, done.tokens_out) if self.pricing else None
        if self.budget is not None:
            self.budget.settle(cost)
        if self.cache is not None:
            self.cache.put(key, done)
        return dataclasses.replace(done, cost=cost)


@dataclass
class _Claim:
    lock: threading.Lock = field(default_factory=threading.Lock)
    holders: int = 0  # threads holding or waiting for the lock


@dataclass
class _Claims:
    """One lock a request key, kept only while some thread holds or waits for it."""

    _guard: threading.Lock = field(default_factory=threading.Lock)
    _held: dict[str, _Claim] = field(default_factory=dict)

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            claim = self._held.setdefault(key, _Claim())
            claim.holders += 1
        try:
            with claim.lock:
                yield
        finally:
            with self._guard:
                claim.holders -= 1
                if claim.holders == 0:
                    del self._held[key]
