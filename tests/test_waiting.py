"""Ctrl-C reaches a main thread that waits, even when the kernel hands it to another thread."""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from conductor_cli import waiting
from conductor_cli.cli.signals import during_command


def _signalled_from_a_side_thread(wait_for: Callable[[Future[None], queue.Queue[int]], object]):
    """Run `wait_for` in the main thread while a side thread takes SIGINT and then blocks."""
    armed, release = threading.Event(), threading.Event()
    box: queue.Queue[int] = queue.Queue()

    def side() -> None:
        armed.wait()
        time.sleep(0.2)  # the main thread is blocked in wait_for by then
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        release.wait(30)  # what the main thread waits for ends only 30 s later
        box.put(1)

    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            future = pool.submit(side)
            with during_command(), pytest.raises(KeyboardInterrupt):
                armed.set()
                wait_for(future, box)
            # Interrupted while the work still ran, not once it was over.
            assert not future.done()
        finally:
            release.set()


def test_waiting_for_a_result_is_interrupted() -> None:
    _signalled_from_a_side_thread(lambda future, _: waiting.result(future))


def test_waiting_for_futures_is_interrupted() -> None:
    _signalled_from_a_side_thread(lambda future, _: waiting.all_or_first_error([future]))


def test_waiting_on_a_queue_is_interrupted() -> None:
    _signalled_from_a_side_thread(lambda _, box: waiting.get(box))


def test_waits_still_return_what_they_waited_for() -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        assert waiting.result(pool.submit(lambda: 7)) == 7
        with pytest.raises(ZeroDivisionError):
            waiting.result(pool.submit(lambda: 1 / 0))
        ok = pool.submit(lambda: 1)
        bad = pool.submit(lambda: 1 / 0)
        slow = pool.submit(threading.Event().wait, 30)
        waiting.all_or_first_error([ok, bad, slow])  # returns at the error, not after 30 s
        assert bad.done() and not slow.done()
        slow.cancel()
    box: queue.Queue[str] = queue.Queue()
    threading.Timer(0.3, box.put, ("late",)).start()
    assert waiting.get(box) == "late"


class TakesASignalWhileCollected:
    def __del__(self) -> None:
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        time.sleep(0.001)  # the handler runs here: the signal is kept for a safe point


@pytest.mark.parametrize("wait", ["result", "all_or_first_error", "get"])
def test_a_signal_kept_for_later_interrupts_the_next_wait(wait: str) -> None:
    # A signal that lands in a finalizer is sent to the main thread again (cli/signals.py):
    # a wait that follows must end with it at once, not when what it waits for ends.
    box: queue.Queue[int] = queue.Queue()
    release = threading.Event()

    def work() -> None:
        release.wait(3)
        box.put(1)

    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(work)
        waits: dict[str, Callable[[], object]] = {
            "result": lambda: waiting.result(future),
            "all_or_first_error": lambda: waiting.all_or_first_error([future]),
            "get": lambda: waiting.get(box),
        }
        started = time.monotonic()
        try:
            with during_command(), pytest.raises(KeyboardInterrupt):
                TakesASignalWhileCollected()
                waits[wait]()
            assert time.monotonic() - started < 1
        finally:
            release.set()
