"""FakeBackend: an in-memory model behind the Backend interface, for fast unit tests.

Like httpx's MockTransport, it answers from a script instead of a model: `reply` is a fixed
text or a function of the Request. It can block or sleep per call (`on_call`, `delay`) so tests
can prove that steps overlap, fail on chosen calls (`failures`, the same WorkerError a real
backend raises) to exercise retries and fallbacks, stream its reply, and claim grammar support.
Every request is recorded, with start/end order and the peak number of calls in flight.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conductor_cli.backends.base import Backend, Completion, Request, TextSink
from conductor_cli.config.settings import WorkerConfig
from conductor_cli.errors import ConductorError, WorkerError
from conductor_cli.run.pool import Worker

Reply = str | Callable[[Request], str]

# Each seen step is an earlier exchange whose user turn starts "Step N (worker): task".
_SEEN = re.compile(r"^Step (\d+) \(")


def user_text(request: Request) -> str:
    """The last user message: where the engine puts the question, attachments and the task."""
    return next(m["content"] for m in reversed(request.messages) if m["role"] == "user")


def conversation(request: Request) -> str:
    """Every message's text: the question, the outputs of the steps seen, the task."""
    return "\n\n".join(m["content"] for m in request.messages)


def task_of(request: Request) -> str:
    """The step's task, as the engine writes it: the last paragraph of the last user message
    (the question itself when the task only restated it)."""
    return user_text(request).rsplit("\n\n", 1)[-1]


def seen_steps(request: Request) -> tuple[int, ...]:
    """The step numbers whose outputs the prompt shows, in the order it shows them."""
    return tuple(
        int(m.group(1))
        for message in request.messages[:-1]
        if message["role"] == "user" and (m := _SEEN.match(message["content"]))
    )


def by_task(answers: Mapping[str, str], default: str = "fake answer") -> Callable[[Request], str]:
    """A reply script keyed on the step's task text."""

    def reply(request: Request) -> str:
        return answers.get(task_of(request), default)

    return reply


def transient(message: str = "503 Service Unavailable") -> WorkerError:
    """The error a real backend raises for a failure worth retrying (timeout, 429, 5xx)."""
    return WorkerError(message, retryable=True)


def permanent(message: str = "400 Bad Request") -> WorkerError:
    """The error a real backend raises for a call that will fail the same way again."""
    return WorkerError(message, retryable=False)


@dataclass
class FakeBackend:
    """A scripted model. `failures[n]`, when set, is raised by the n-th call (counting from 0,
    across threads, in arrival order) instead of answering; calls past the list answer.
    `fail_all` raises on every call. `on_call` runs inside each call before it answers (a
    barrier or an event wait), after the request is recorded."""

    reply: Reply = "fake answer"
    name: str = "fake"
    grammar: bool = False
    failures: Sequence[ConductorError | None] = ()
    fail_all: ConductorError | None = None
    delay: float = 0.0
    on_call: Callable[[Request], None] | None = None
    cached: bool = False
    requests: list[Request] = field(default_factory=list)
    # ("start" | "end", task) in the order calls began and ended, across threads.
    log: list[tuple[str, str]] = field(default_factory=list)
    streamed: list[bool] = field(default_factory=list)  # per call: was on_text given
    peak_in_flight: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def identity(self) -> str:
        return f"fake:{self.name}"

    @property
    def fingerprint(self) -> str:
        return f"fake:{self.name}"

    @property
    def supports_grammar(self) -> bool:
        return self.grammar

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        task = task_of(request)
        with self._lock:
            n = len(self.requests)
            self.requests.append(request)
            self.streamed.append(on_text is not None)
            self.log.append(("start", task))
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            if self.on_call is not None:
                self.on_call(request)
            if self.delay:
                time.sleep(self.delay)
            failure = self.failures[n] if n < len(self.failures) else self.fail_all
            if failure is not None:
                raise failure
            text = self.reply(request) if callable(self.reply) else self.reply
            if on_text is not None:
                # Word by word, as a real stream arrives in pieces.
                for piece in re.findall(r"\S+\s*|\s+", text):
                    on_text(piece)
            return Completion(
                text=text,
                tokens_in=sum(len(m["content"].split()) for m in request.messages),
                tokens_out=len(text.split()),
                cached=self.cached,
            )
        finally:
            with self._lock:
                self._in_flight -= 1
                self.log.append(("end", task))


def wait_at(barrier: threading.Barrier) -> Callable[[Request], None]:
    """An `on_call` that holds each call until the barrier's every party has arrived."""

    def on_call(request: Request) -> None:
        barrier.wait()

    return on_call


def fake_worker(
    name: str,
    backend: Backend,
    *,
    description: str = "",
    context_tokens: int = 128_000,
    **config: Any,
) -> Worker:
    """A pool Worker as run/pool.py builds one, its model a FakeBackend (or one wrapped, as
    runtime.Runtime wraps it); `config` goes to WorkerConfig (retries, fallback, max_concurrency,
    max_tokens, temperature...)."""
    wc = WorkerConfig(name=name, model=f"fake:{name}", description=description, **config)
    return Worker(config=wc, backend=backend, context_tokens=context_tokens)
