"""`conductor doctor`: check the environment and say what is wrong and what to do.

Each check is a row (what, status, detail). Nothing here loads a model or imports litellm:
workers behind an `api_base` are probed with a plain HTTP request to `{api_base}/models`;
hosted providers are only checked for their key (`conductor workers test` calls them).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from conductor_cli import __version__
from conductor_cli.disk import paths
from conductor_cli.errors import ConductorError
from conductor_cli.exports import resolve

if TYPE_CHECKING:
    from conductor_cli.config.settings import Config, WorkerConfig

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    what: str
    status: Status
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check(
        "python",
        "ok" if ok else "fail",
        f"{platform.python_version()} ({sys.executable})" + ("" if ok else ": needs 3.11+"),
    )


def _llama_cpp() -> list[Check]:
    try:
        import llama_cpp
    except ImportError as e:
        return [Check("llama.cpp", "fail", f"llama-cpp-python does not import: {e}")]
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    gpu = bool(llama_cpp.llama_supports_gpu_offload())
    backends = [name for name in ("CUDA", "Metal", "Vulkan", "ROCm", "SYCL") if name in info]
    build = ", ".join(backends) if backends else "CPU"
    return [
        Check("llama.cpp", "ok", f"llama-cpp-python {llama_cpp.__version__}, {build} build"),
        Check(
            "gpu offload",
            "ok" if gpu else "warn",
            "available: n_gpu_layers = -1 puts every layer on the GPU"
            if gpu
            else 'not in this build; for CUDA reinstall with CMAKE_ARGS="-DGGML_CUDA=on"',
        ),
    ]


def _repacking() -> list[Check]:
    """What the one-time repack check decided (see backends/repack_check.py); runs nothing."""
    from conductor_cli.backends import repack_check

    verdict = repack_check.load_verdict()
    if verdict is None:
        row = Check("weight repacking", "ok", "not checked yet; the first model load checks it")
    else:
        row = Check(
            "weight repacking",
            "ok" if verdict.repack else "warn",
            f"{verdict.describe()} (checked {verdict.checked_at}; key {verdict.key[:12]}…)",
        )
    rows = [row]
    log = repack_check.crash_log()
    try:
        crashed = "Fatal Python error" in log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        crashed = False
    if crashed:
        rows.append(
            Check(
                "native crashes",
                "warn",
                f"llama.cpp crashed here before; the stacks are in {log} "
                "(attach it to a bug report)",
            )
        )
    return rows


def _models() -> list[Check]:
    from conductor_cli.models.catalog import file_sha256, load_catalog

    rows = []
    catalog = load_catalog()
    for entry in catalog.entries.values():
        path = entry.local_path()
        if not path.exists():
            parts = entry.parts_path()
            if parts.is_dir():  # a split model's pull stopped part way
                kept = len(list(parts.iterdir()))
                total = max((len(s.parts) for s in entry.sources), default=0)
                rows.append(
                    Check(
                        f"model {entry.name}",
                        "warn",
                        f"its pull stopped with {kept} of {total} parts fetched; "
                        f"`conductor models pull {entry.name}` fetches the rest",
                    )
                )
            elif entry.name == catalog.default:
                rows.append(
                    Check(
                        f"model {entry.name}",
                        "warn",
                        "not downloaded yet; the first `ask` fetches it "
                        f"(or: conductor models pull {entry.name})",
                    )
                )
            continue
        digest = file_sha256(path)
        if entry.sha256 and digest != entry.sha256:
            rows.append(
                Check(
                    f"model {entry.name}",
                    "fail",
                    f"{path}: sha256 {digest[:12]}… differs from the catalog's; "
                    f"fetch it again: conductor models pull {entry.name}",
                )
            )
        else:
            verified = "verified" if entry.sha256 else "no recorded checksum"
            rows.append(
                Check(f"model {entry.name}", "ok", f"{path} (sha256 {digest[:12]}…, {verified})")
            )
    return rows


def _probe(api_base: str, timeout_s: float) -> str | None:
    """None when something answers HTTP at api_base; else why not."""
    try:
        with urllib.request.urlopen(f"{api_base.rstrip('/')}/models", timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None  # it answered (401, 404...): reachable
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return str(getattr(reason, "strerror", None) or reason)


def _workers(config_file: Path | None, timeout_s: float) -> list[Check]:
    from conductor_cli.config.settings import load_config

    try:
        config = load_config(config_file)
    except ConductorError as e:
        return [Check("config", "fail", str(e))]
    rows = [Check("config", "ok", str(config.source or "embedded default (no config file)"))]
    rows.extend(_trained_conductor(config))
    for w in config.workers:
        # Each model kind says how it is checked (models/spec.MODEL_KINDS).
        rows.append(resolve(w.spec.entry.doctor)(f"worker {w.name}", w, config, timeout_s))
    return rows


def _trained_conductor(config: Any) -> list[Check]:
    """A trained conductor learned one pool: warn when the configured pool is another."""
    from conductor_cli.policy.registry import find, pool_fingerprint

    try:
        trained = find(config.conductor.model)
    except ConductorError as e:
        return [Check("conductor model", "fail", str(e))]
    if trained is None:
        return []
    if trained.record.get("pool_fingerprint") != pool_fingerprint(config.workers):
        return [
            Check(
                "conductor model",
                "warn",
                f"{trained.name} was trained for the pool {', '.join(trained.pool)}; the "
                "configured pool differs (workers, models or descriptions): train it again",
            )
        ]
    return [Check("conductor model", "ok", f"{trained.name}, trained for this pool")]


def gguf_worker(what: str, w: WorkerConfig, config: Config, timeout_s: float) -> Check:
    from conductor_cli.models.catalog import load_catalog, resolve_gguf

    try:
        resolved = resolve_gguf(w.spec.name, load_catalog(), what)
    except ConductorError as e:
        return Check(what, "warn", str(e))
    return Check(what, "ok", f"local GGUF {resolved.path}")


def tool_worker(what: str, w: WorkerConfig, config: Config, timeout_s: float) -> Check:
    return Check(what, "ok", f"{w.model}: built-in, runs programs in the sandbox (below)")


def mcp_worker(what: str, w: WorkerConfig, config: Config, timeout_s: float) -> Check:
    """Found, not started: starting a server runs its code (`workers test` does that)."""
    name = w.spec.name
    server = config.mcp_server(name.split("/", 1)[0])  # the config checked it exists
    found = shutil.which(server.command) or Path(server.command).is_file()
    if not found:
        return Check(
            what, "fail", f"mcp server {server.name}: command {server.command!r} not found"
        )
    return Check(what, "ok", f"mcp:{name} (`conductor workers test {what.split()[-1]}` starts it)")


def litellm_worker(what: str, w: WorkerConfig, config: Config, timeout_s: float) -> Check:
    """Its key set, its endpoint answering, and whether its first call waits: an
    OpenAI-compatible endpoint is called directly (ready at once); another provider goes
    through litellm's helper, whose import a process waits for unless a server keeps it
    ready. No model is called (`workers test` does)."""
    from conductor_cli.backends.openai_compat import served_directly

    if w.api_key_env and not os.environ.get(w.api_key_env):
        return Check(what, "fail", f"{w.api_key_env} is not set; export it")
    direct = served_directly(w.spec.name, w.api_base)
    if not direct and importlib.util.find_spec("litellm") is None:
        return Check(what, "fail", f"{w.model} needs litellm, which is not installed")
    ready = "ready at once: called directly" if direct else THROUGH_LITELLM
    if w.api_base:
        why = _probe(w.api_base, timeout_s)
        if why:
            return Check(what, "fail", f"{w.api_base} unreachable: {why}")
        return Check(what, "ok", f"{w.model} at {w.api_base} answers; {ready}")
    key = f"key in {w.api_key_env}" if w.api_key_env else "no key configured"
    return Check(
        what, "ok", f"{w.model} ({key}; `conductor workers test {w.name}` calls it); {ready}"
    )


# Where a litellm worker's first call waits: on importing litellm in the process that runs
# it, unless a server keeps its helper ready (`serve --status` says its state).
THROUGH_LITELLM = (
    "through litellm: a process's first call waits for its import (3-7 s); a running server "
    "keeps it ready (`conductor serve --status` says)"
)


def _sandbox() -> list[Check]:
    """The confinement model-written code would run under (eval's code scorer, the python
    tool), one row for each; probing starts a few short processes."""
    from conductor_cli.sandbox import Sandbox

    try:
        isolation = Sandbox().isolation
    except ConductorError as e:  # a confinement missing and no CONDUCTOR_SANDBOX=unconfined
        return [Check("sandbox", "warn", str(e))]
    if isolation.unconfined:
        head = Check("sandbox", "warn", isolation.unconfined_note())
    else:
        head = Check("sandbox", "ok", f"model-written code runs confined: {isolation.how()}")
    rows = [part.split(": ", 1) for part in isolation.confinements()]
    checks = [head, *(Check(f"sandbox {what}", "ok", how) for what, how in rows)]
    if note := isolation.memory_note():  # bounded process by process, not by the kernel
        checks.append(Check("sandbox memory in all", "warn", note))
    return checks


def _writable(what: str, directory: Path) -> Check:
    try:
        paths.private_dir(directory)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".doctor-"):
            pass
    except OSError as e:
        return Check(what, "fail", f"{directory} is not writable: {e.strerror}")
    return Check(what, "ok", f"{directory} writable")


def run_checks(config_file: Path | None = None, *, timeout_s: float = 3.0) -> list[Check]:
    """Every check, in the order a user would fix them."""
    from conductor_cli.storage.trace import traces_dir

    return [
        Check("conductor", "ok", __version__),
        _python(),
        *_llama_cpp(),
        *_repacking(),
        *_models(),
        *_workers(config_file, timeout_s),
        *_sandbox(),
        _writable("cache dir", paths.cache_dir()),
        _writable("trace dir", traces_dir()),
    ]
