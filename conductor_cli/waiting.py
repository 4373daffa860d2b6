"""Blocking waits that Ctrl-C can interrupt.

CPython runs signal handlers in the main thread only, and the kernel may hand a signal to any
thread. One handed to a step's or a model's thread does not wake a main thread blocked on a
lock without a timeout: the handler waits until whatever the main thread waits for ends (seen:
an eval with --concurrency ran every queued problem before it noticed Ctrl-C). Waiting in
short slices lets the handler run within one slice.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from typing import Any, TypeVar

T = TypeVar("T")

# Short enough that Ctrl-C feels immediate, long enough to cost nothing while waiting.
SLICE_S = 0.1


def result(future: Future[T]) -> T:
    """`future.result()`, interruptible by a signal handler that raises."""
    while not future.done():
        wait([future], timeout=SLICE_S)
    return future.result()


def all_or_first_error(futures: Sequence[Future[Any]]) -> None:
    """Return once every future is done or one has raised (`wait(..., FIRST_EXCEPTION)`)."""
    while wait(futures, timeout=SLICE_S, return_when=FIRST_EXCEPTION).not_done:
        if any(f.done() and not f.cancelled() and f.exception() is not None for f in futures):
            return


def get(box: queue.Queue[T], between: Callable[[], None] | None = None) -> T:
    """`box.get()`, interruptible the same way; `between` runs before each slice (a check
    that may raise, e.g. a cancelled run)."""
    while True:
        if between is not None:
            between()
        try:
            return box.get(timeout=SLICE_S)
        except queue.Empty:
            continue
