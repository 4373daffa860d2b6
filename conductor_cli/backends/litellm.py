"""Any model litellm can reach: API providers, local OpenAI-compatible servers, proxies.

litellm runs in a helper process (`litellm_child`), started as soon as the pool is known: its
seconds-long import then runs on another core instead of holding this process's GIL while the
conductor plans. Several steps may call at once; each request is a line on the child's stdin.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import IO, Any

from conductor_cli import waiting
from conductor_cli.backends.base import Completion, Request, TextSink, ToolCall
from conductor_cli.errors import ConfigError, WorkerError


def _gone(returncode: int | None) -> dict[str, Any]:
    """The reply for calls the helper will never answer: what ended it, and what to do."""
    if returncode is not None and returncode < 0:
        try:
            how = f"died of {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"died of signal {-returncode}"
    elif returncode:
        how = f"exited with status {returncode}"
    else:
        how = "exited"
    message = f"the litellm helper process {how}; run the command again (`conductor doctor`)"
    return {"error": {"message": message, "retryable": False}}


@dataclass
class LiteLLMProcess:
    """One helper process per run, shared by every litellm worker and a litellm conductor."""

    _proc: subprocess.Popen[bytes] | None = None
    _pending: dict[int, queue.Queue[dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _rates: dict[str, list[float] | None] = field(default_factory=dict)
    _ended: dict[str, Any] | None = None  # the reply for every call once the helper is gone
    _ready: threading.Event = field(default_factory=threading.Event)  # litellm imported
    _import_error: str | None = None

    @property
    def started(self) -> bool:
        return self._proc is not None

    @property
    def state(self) -> str:
        """ "not started", "starting" (importing litellm: a call waits for it), "ready", or
        "failed: why" (its import failed, or it is gone)."""
        if self._import_error is not None:
            return f"failed: {self._import_error}"
        if self._ready.is_set():
            return "ready" if self._ended is None else "failed: the helper is gone"
        return "starting" if self._proc is not None else "not started"

    def start(self) -> None:
        with self._lock:
            if self._proc is not None:
                return
            env = dict(os.environ)
            env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "conductor_cli.backends.litellm_child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # litellm's own chatter; errors come as replies
                env=env,
            )
            assert self._proc.stdout is not None
            threading.Thread(
                target=self._read, args=(self._proc, self._proc.stdout), daemon=True
            ).start()

    def _read(self, proc: subprocess.Popen[bytes], out: IO[bytes]) -> None:
        for line in out:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("id") is None:  # the helper's own news: litellm imported, or not
                if message.get("ready"):
                    self._ready.set()
                else:
                    self._import_error = str((message.get("error") or {}).get("message"))
                continue
            box = self._pending.get(message.get("id"))
            if box is not None:
                box.put(message)
        try:
            returncode: int | None = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            returncode = None
        with self._lock:  # the child is gone: fail whatever still waits, and what comes later
            self._ended = _gone(returncode)
            for box in self._pending.values():
                box.put(self._ended)

    def request(self, payload: dict[str, Any], on_text: TextSink | None = None) -> dict[str, Any]:
        """Send one request and wait for its final reply, passing streamed text to on_text."""
        self.start()
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            rid = next(self._ids)
            self._pending[rid] = box
            proc = self._proc
            assert proc is not None and proc.stdin is not None
            ended = self._ended
            if ended is None:
                try:
                    proc.stdin.write((json.dumps({**payload, "id": rid}) + "\n").encode())
                    proc.stdin.flush()
                except OSError:
                    ended = _gone(proc.poll())
        answered = False
        try:
            if ended is not None:
                answered = True
                return ended
            while True:
                message = waiting.get(box)
                if "text" in message:
                    if on_text is not None:
                        on_text(message["text"])  # raises where the run was cancelled
                    continue
                answered = True
                return message
        finally:
            with self._lock:
                self._pending.pop(rid, None)
                if not answered:  # abandoned mid-stream: the child closes the connection
                    self._send({"op": "cancel", "id": rid})

    def _send(self, message: dict[str, Any]) -> None:
        """One line to the child, under the lock; a child already gone is no error here."""
        proc = self._proc
        if proc is None or proc.stdin is None or self._ended is not None:
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()

    def rates(self, model: str) -> list[float] | None:
        """litellm's USD per input and per output token for `model`, or None if unknown."""
        if model not in self._rates:
            self._rates[model] = self.request({"op": "rates", "model": model}).get("rates")
        return self._rates[model]

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # the child exits when its stdin closes
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class LiteLLMBackend:
    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        where: str = "",
        timeout_s: float = 600.0,
        process: LiteLLMProcess | None = None,
    ) -> None:
        self.process = process or LiteLLMProcess()
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.where = where
        self.timeout_s = timeout_s

    @property
    def identity(self) -> str:
        return f"litellm:{self.model}@{self.api_base}" if self.api_base else f"litellm:{self.model}"

    @property
    def fingerprint(self) -> str:
        return self.identity

    @property
    def supports_grammar(self) -> bool:
        return False

    @property
    def supports_tools(self) -> bool:
        # litellm passes `tools` to OpenAI-compatible servers and most providers; one that
        # cannot use them answers with text, which the run takes as the answer.
        return True

    def _check_key(self) -> None:
        # Checked here, at the point of use, so an unused worker's missing key costs nothing.
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise ConfigError(
                f"{self.where}: environment variable {self.api_key_env} is not set; "
                f"export {self.api_key_env}=... (keys never go in the config file)."
            )

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        self._check_key()
        reply = self.process.request(
            {
                "op": "complete",
                "model": self.model,
                "messages": list(request.messages),
                "max_tokens": request.max_tokens,
                "temperature": request.temperature,
                "seed": request.seed,
                "timeout": self.timeout_s,
                "api_base": self.api_base,
                "api_key_env": self.api_key_env,  # the child reads the key by name
                "stream": on_text is not None,
            }
            | (
                {"tools": json.loads(request.tools), "tool_choice": _choice(request.tool_choice)}
                if request.tools is not None
                else {}
            ),
            on_text,
        )
        if "error" in reply:
            error = reply["error"]
            target = self.api_base or self.model
            raise WorkerError(
                f"{self.model} at {target}: {error['message']}",
                retryable=bool(error.get("retryable")),
            )
        return completion_of(self.model, reply["done"])


def completion_of(model: str, done: dict[str, Any]) -> Completion:
    """A finished call ({"text", "tokens_in", "tokens_out", "finish_reason", "tool_calls"},
    litellm_child's reply or openai_compat's) as a Completion; an empty answer is retryable."""
    calls = tuple(ToolCall.from_dict(c) for c in done.get("tool_calls") or ())
    if not str(done["text"]).strip() and not calls:
        raise WorkerError(f"{model}: the answer was empty", retryable=True)
    return Completion(
        text=str(done["text"]),
        tokens_in=int(done["tokens_in"]),
        tokens_out=int(done["tokens_out"]),
        finish_reason="tool_calls" if calls else str(done["finish_reason"]),
        tool_calls=calls,
    )


def _choice(text: str | None) -> Any:
    return json.loads(text) if text is not None else None
