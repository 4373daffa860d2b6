"""Ctrl-C and SIGTERM: what they do before, during and after a command.

- Before a command runs (Python's imports, Typer building its command tree and parsing):
  nothing has been written, so the process leaves at once with exit code 130. Raising
  KeyboardInterrupt there is not safe: Typer evaluates our string annotations with `eval()`,
  and a KeyboardInterrupt passing out of an `eval()` makes CPython end the process by SIGINT
  at exit whatever exit code we chose (seen as a SIGTERM'd run dying of SIGINT, no output).
- While a command runs: KeyboardInterrupt, which the command handles (trace marked
  interrupted, "conductor: interrupted", exit 130 through `os._exit`).
- After it: the default action, as for any program; everything is on disk by then.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from ..errors import EXIT_INTERRUPTED

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def leave_at_once(signum: int, frame: FrameType | None) -> None:
    # Between a command's end and after_command() its output may still sit in the buffer.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """Raise KeyboardInterrupt in the main thread.

    An exception raised inside a ctypes callback is printed and dropped, so a signal that
    lands in llama.cpp's log callback (a model is loading) is delivered again a moment later,
    outside it, instead of being lost.
    """
    if _in_ctypes_callback(frame):
        main_thread = threading.main_thread().ident
        if main_thread is not None:
            threading.Timer(0.02, signal.pthread_kill, (main_thread, signum)).start()
        return
    raise KeyboardInterrupt


def _in_ctypes_callback(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "llama_log_callback":
            return True
        frame = frame.f_back
    return False


def before_command() -> None:
    for sig in SIGNALS:
        signal.signal(sig, leave_at_once)


def after_command() -> None:
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


@contextlib.contextmanager
def during_command() -> Iterator[None]:
    """Signals raise KeyboardInterrupt inside the block; the earlier handlers come back after.

    Only the main thread may set handlers; a command called from another thread (a Python
    user's own code) keeps whatever handlers the program has.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = [signal.getsignal(sig) for sig in SIGNALS]
    for sig in SIGNALS:
        signal.signal(sig, raise_interrupt)
    try:
        yield
    finally:
        for sig, handler in zip(SIGNALS, previous, strict=True):
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
