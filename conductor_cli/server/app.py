"""What every listener of one server shares: the config (reloaded when its file changes), the
Runtime that keeps models warm, the run slots and the counts `serve --status` reports."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conductor_cli.config.settings import Config, load_config
from conductor_cli.disk import paths
from conductor_cli.runtime import Runtime
from conductor_cli.server.tool_loops import ToolLoops

# What a server asks itself once it has loaded its models: the planning prompt's state saved
# and the trained head's features read once, so the first real run pays for neither.
REHEARSAL = "What is 2 + 2?"


def _rehearse(config: Config, runtime: Runtime) -> None:
    """One run nobody sees (no cache, no trace, not counted), where the models are local and
    loaded (Runtime.warm); what fails here fails again, said, in a real run."""
    from conductor_cli.api import RunOptions, TraceOptions, execute
    from conductor_cli.run.pool import calls_remote
    from conductor_cli.storage import CacheMode

    if calls_remote(config):
        return  # a remote call costs money
    with contextlib.suppress(Exception):
        execute(
            REHEARSAL,
            config=config,
            options=RunOptions(cache_mode=CacheMode.OFF),
            trace=TraceOptions(enabled=False),
            runtime=runtime,
        )


def remote_readiness(config: Config, helper: str) -> dict[str, str]:
    """Each remote worker (and a remote conductor) and whether its first call would wait:
    "ready (called directly)" for an OpenAI-compatible endpoint, else the state of litellm's
    helper ("ready", "starting": importing litellm, "not started", "failed: ...")."""
    from conductor_cli.backends.openai_compat import served_directly
    from conductor_cli.run.pool import remote_members

    return {
        name: "ready (called directly)" if served_directly(model, base) else f"litellm {helper}"
        for name, model, base in remote_members(config)
    }


def runtime_key(config: Config) -> tuple[Any, ...]:
    """The settings a Runtime is built with: a change to one of these needs a new Runtime;
    any other change (workers, conductor model, prompts) applies to the next run as it is."""
    c = config.conductor
    return (c.n_ctx, c.n_gpu_layers, c.n_threads, c.kv_cache_type, config.cache)


@dataclass
class ConfigWatch:
    """Notices a change of the config file by its mtime and size, confirmed by its hash."""

    explicit: Path | None  # --config / $CONDUCTOR_CONFIG as given; None: the default place
    _stamp: tuple[int, int] | None = None
    _digest: str | None = None

    def __post_init__(self) -> None:
        self._stamp, self._digest = self._look()

    @property
    def path(self) -> Path:
        return self.explicit or paths.config_file()

    def _look(self) -> tuple[tuple[int, int] | None, str | None]:
        try:
            st = self.path.stat()
            data = self.path.read_bytes()
        except OSError:
            return None, None
        return (st.st_mtime_ns, st.st_size), hashlib.sha256(data).hexdigest()

    def changed(self) -> Config | None:
        """The new config when the file changed since the last look, else None. A broken file
        raises its ConfigError (and is looked at again on the next call)."""
        try:
            st = self.path.stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return None
        new_stamp, digest = self._look()
        if digest == self._digest:
            self._stamp = new_stamp  # touched, not changed
            return None
        config = load_config(self.explicit)
        self._stamp, self._digest = new_stamp, digest
        return config


class ServerApp:
    def __init__(
        self,
        config: Config,
        *,
        watch: ConfigWatch | None = None,
        idle_timeout_s: float | None = None,
    ) -> None:
        self.started = time.time()
        self.watch = watch
        self.idle_timeout_s = idle_timeout_s  # None: never exits for being idle
        self.urls: dict[str, str] = {}  # "tcp" / "socket" -> where it listens
        self.slots = threading.BoundedSemaphore(config.server.max_concurrent_runs)
        self.max_runs = config.server.max_concurrent_runs
        self.stop_requested = threading.Event()
        self.runs_served = 0
        self.reloads = 0
        self._config = config
        self._runtime = Runtime(config)
        self._lock = threading.Lock()
        self._users: dict[int, int] = {}  # id(runtime) -> runs using it
        self._retired: list[Runtime] = []
        self._cancels: set[threading.Event] = set()
        self.warmed = threading.Event()  # the config's models loaded (warm())
        self._last = time.monotonic()
        self.tool_loops = ToolLoops()  # agents: which worker called each tool

    @property
    def config(self) -> Config:
        return self._config

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    def touch(self) -> None:
        with self._lock:
            self._last = time.monotonic()

    def idle_for(self) -> float:
        with self._lock:
            return 0.0 if self._cancels else time.monotonic() - self._last

    def _reload(self) -> None:
        if self.watch is None:
            return
        new = self.watch.changed()
        if new is None:
            return
        self.reloads += 1
        if runtime_key(new) != runtime_key(self._config):
            self._retired.append(self._runtime)
            self._runtime = Runtime(new)
        else:
            self._runtime.config = new
        self._config = new

    @contextlib.contextmanager
    def lease(self, cancel: threading.Event) -> Iterator[tuple[Config, Runtime]]:
        """The current config and runtime for one run (the config re-read if it changed)."""
        with self._lock:
            self._reload()
            config, runtime = self._config, self._runtime
            self._users[id(runtime)] = self._users.get(id(runtime), 0) + 1
            self._cancels.add(cancel)
        try:
            yield config, runtime
        finally:
            with self._lock:
                self._users[id(runtime)] -= 1
                self._cancels.discard(cancel)
                self.runs_served += 1
                self._last = time.monotonic()
                idle = [r for r in self._retired if not self._users.get(id(r))]
                self._retired = [r for r in self._retired if r not in idle]
            for old in idle:
                old.close()

    def warm(self, wait: bool = False) -> None:
        """Load what the config's first run uses (Runtime.warm): `wait`, before returning;
        else in a thread of its own, where a request that comes first waits only for the
        models it needs. `status()["warm"]` says when it is done."""
        runtime, config = self._runtime, self._config

        def load() -> None:
            try:
                if runtime.warm(config):  # loaded: a missing model is the first run's to pull
                    _rehearse(config, runtime)
            finally:
                self.warmed.set()

        if wait:
            load()
        else:
            threading.Thread(target=load, daemon=True, name="warm").start()

    def status(self) -> dict[str, Any]:
        with self._lock:
            runtime = self._runtime
            active = len(self._cancels)
        return {
            "pid": os.getpid(),
            "started": self.started,
            "uptime_s": round(time.time() - self.started, 1),
            "runs_served": self.runs_served,
            "active_runs": active,
            "max_concurrent_runs": self.max_runs,
            "config": str(self.watch.path) if self.watch else None,
            "config_reloads": self.reloads,
            "models_loaded": runtime.models.loaded(),
            "warm": "ready" if self.warmed.is_set() else "loading",
            "litellm_helper": runtime.litellm.started,
            "remote": remote_readiness(self._config, runtime.litellm.state),
            "idle_timeout_s": self.idle_timeout_s,
            "listening": dict(self.urls),
        }

    def close(self, grace_s: float = 3.0) -> None:
        """Cancel the runs under way (their traces end as interrupted), then free the models."""
        with self._lock:
            cancels = list(self._cancels)
        for cancel in cancels:
            cancel.set()
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._cancels:
                    break
            time.sleep(0.05)
        for runtime in [*self._retired, self._runtime]:
            runtime.close()
