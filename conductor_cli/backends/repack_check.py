"""Whether llama.cpp may repack model weights on this machine, checked once in a child process.

llama.cpp's default build compiles the kernels of every instruction set the build machine's
CPUID offers and repacks quantized weights for the fastest one ("extra buffer types"). Some
virtual machines list AMX and grant its permission, yet fault on the first tile instruction:
every batched decode then kills the process with SIGSEGV, with no message. A crash cannot be
caught in-process, so a child process loads the model and decodes a short prompt first. If it
dies by a signal, models load without repacking (slower prompts, no crash) and the user is told
once. The verdict is kept per machine and llama.cpp build, so the child runs once.

`python -m conductor_cli.backends.repack_check MODEL on|off LOG` is that child.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import hashlib
import importlib.util
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conductor_cli.disk import paths
from conductor_cli.errors import ModelError

# Fault injection for the tests: a command that stands in for this module's child.
PROBE_ENV = "CONDUCTOR_REPACK_PROBE"
PROBE_TIMEOUT_S = 180.0
# Enough tokens for a batched decode (one token alone takes the single-row path, which works).
PROBE_PROMPT = "The quick brown fox jumps over the lazy dog, then runs into the forest."
# How a fault in native code ends a process; SIGINT or SIGTERM only say someone stopped it.
CRASH_SIGNALS = frozenset(
    {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT}
)

# Llama() reads llama_model_default_params() from this module; swapping it is the only way to
# set a model parameter the constructor does not take. One swap at a time.
_PATCH_LOCK = threading.Lock()


@dataclass(frozen=True)
class Verdict:
    repack: bool
    reason: str
    key: str
    checked_at: str

    def describe(self) -> str:
        state = "on" if self.repack else "off"
        return f"weight repacking {state}: {self.reason}"


def _cpu_text() -> str:
    """The CPU's model name and feature flags (what the build and the kernels depend on)."""
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    wanted = ("model name", "flags", "Features", "CPU implementer", "CPU part")
    seen: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        name = name.strip()
        if name in wanted and name not in seen:
            seen[name] = " ".join(sorted(value.split())) if name in ("flags", "Features") else value
    return json.dumps(seen, sort_keys=True)


def _library_files() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return []
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    # The names the loader opens; the versioned copies beside them hold the same bytes.
    return sorted(p for pattern in ("*.so", "*.dylib", "*.dll") for p in lib.glob(pattern))


def _llama_cpp_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        return "unknown"


@functools.cache  # what it reads does not change while the process runs
def machine_key() -> str:
    """What the verdict depends on: the CPU, the llama-cpp-python version and its libraries."""
    digest = hashlib.sha256()
    digest.update(_cpu_text().encode())
    digest.update(platform.machine().encode())
    digest.update(_llama_cpp_version().encode())
    for lib in _library_files():
        digest.update(lib.name.encode())
        digest.update(hashlib.sha256(lib.read_bytes()).digest())
    return digest.hexdigest()


def verdict_file(key: str) -> Path:
    return paths.state_dir() / f"repack-check-{key[:16]}.json"


def crash_log() -> Path:
    """Where native crashes (ours and the check's child's) write their stacks."""
    return paths.state_dir() / "crash.log"


def load_verdict(key: str | None = None) -> Verdict | None:
    key = key or machine_key()
    try:
        data = json.loads(verdict_file(key).read_text(encoding="utf-8"))
        verdict = Verdict(**data)
    except (OSError, ValueError, TypeError):
        return None  # none yet, or damaged: check again
    return verdict if verdict.key == key else None


def _save(verdict: Verdict) -> None:
    path = verdict_file(verdict.key)
    try:
        paths.private_dir(path.parent)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(verdict), indent=2), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only state dir costs a check per run, never the run


def _probe_command(model: Path, repack: bool) -> list[str]:
    override = os.environ.get(PROBE_ENV)
    base = shlex.split(override) if override else [sys.executable, "-m", __name__]
    return [*base, str(model), "on" if repack else "off", str(crash_log())]


def _probe(model: Path, repack: bool) -> int | None:
    """The child's exit code (negative: killed by that signal); None if it hung."""
    paths.private_dir(crash_log().parent)
    try:
        done = subprocess.run(
            _probe_command(model, repack),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            # Out of the terminal's process group: Ctrl-C interrupts us, and we end the child,
            # rather than the child dying of SIGINT and looking like a crash.
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return None
    except OSError:
        return None
    return done.returncode


def _crashed(code: int | None) -> bool:
    return code is not None and code < 0 and -code in CRASH_SIGNALS


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def ensure(model: Path, note: Callable[[str], None]) -> Verdict:
    """The verdict for this machine: kept from an earlier check, or checked now on `model`."""
    key = machine_key()
    kept = load_verdict(key)
    if kept is not None:
        return kept
    now = datetime.now(UTC).isoformat(timespec="seconds")
    code = _probe(model, repack=True)
    if code == 0:
        verdict = Verdict(True, "a batched test decode with repacking worked", key, now)
        _save(verdict)
        return verdict
    if not _crashed(code):
        # Hung, stopped, or failed for another reason (a bad model file, say): the real load
        # reports that better than we can. Nothing is kept, so the next load checks again.
        return Verdict(True, "the test decode did not finish; not checked", key, now)
    assert code is not None
    died = _signal_name(code)
    fallback = _probe(model, repack=False)
    if fallback is not None and _crashed(fallback):
        raise ModelError(
            f"llama.cpp dies of {_signal_name(fallback)} on this machine even without weight "
            f"repacking (stack in {crash_log()}); rebuild llama-cpp-python for a plain CPU, "
            "see the README's install notes."
        )
    verdict = Verdict(
        False,
        f"a batched test decode with repacking died of {died} (CPU features the build uses "
        "but this machine faults on, e.g. AMX); loading without it",
        key,
        now,
    )
    _save(verdict)
    note(
        f"llama.cpp crashed ({died}) in a test decode with weight repacking on this CPU; "
        "models load without it from now on (slower prompts). `conductor doctor` says more."
    )
    return verdict


@contextlib.contextmanager
def repacking(enabled: bool) -> Iterator[None]:
    """Inside the block, llama_cpp.Llama loads models with weight repacking on or off."""
    if enabled:
        yield
        return
    import llama_cpp.llama_cpp as raw

    with _PATCH_LOCK:
        original = raw.llama_model_default_params

        def without_repacking() -> Any:
            params = original()
            params.use_extra_bufts = False
            return params

        raw.llama_model_default_params = without_repacking
        try:
            yield
        finally:
            raw.llama_model_default_params = original


def _child(model: str, repack: bool, log: str) -> int:
    # The crash's stack goes to the log, never to a terminal.
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"--- repack check, repack={'on' if repack else 'off'}, {model}\n")
        out.flush()
        faulthandler.enable(file=out)
        from llama_cpp import Llama

        with repacking(repack):
            llama = Llama(model_path=model, n_ctx=256, n_batch=64, verbose=False, seed=0)
        tokens = llama.tokenize(PROBE_PROMPT.encode(), add_bos=True)
        llama.eval(tokens)
        llama.close()
        faulthandler.disable()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2] == "on", sys.argv[3]))
