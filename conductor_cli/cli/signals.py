"""Ctrl-C and SIGTERM: what they do before, during and after a command.

- Before a command runs (from entry.main on: Python's imports, Typer building its command tree
  and parsing): nothing has been written, so the process leaves at once with exit code 130.
  Raising KeyboardInterrupt there is not safe: Typer evaluates our string annotations with
  `eval()`, and a KeyboardInterrupt passing out of an `eval()` makes CPython end the process by
  SIGINT at exit whatever exit code we chose (seen as a SIGTERM'd run dying of SIGINT, no
  output). Earlier, while Python starts and imports the package, Python's own handler applies.
- While a command runs: KeyboardInterrupt, which the command handles (trace marked
  interrupted, "conductor: interrupted", exit 130 through `os._exit`). It is raised only where
  Python can carry it to the command. Inside a finalizer (`__del__`, a weakref, GC or ctypes
  callback, a generator's cleanup) an exception cannot propagate: CPython prints "Exception
  ignored in ..." with a traceback and drops it. importlib's own code is such a place too: its
  module-lock weakref callback runs during imports holding the import lock. Where the
  interrupted frames show such a place, the signal is kept pending and sent to the main thread
  again 20 ms later, until it lands where it can be raised; one still pending when the command
  ends is raised then. An interrupt that escapes anyway (a callback not recognisable from its
  frames: a weakref or ctypes callback of another library) reaches `sys.unraisablehook`, which
  turns it back into a pending signal instead of printing it.
- After it: the default action, as for any program; everything is on disk by then.
"""

from __future__ import annotations

import _weakrefset
import contextlib
import functools
import gc
import os
import signal
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from types import CodeType, FrameType

from conductor_cli.errors import EXIT_INTERRUPTED, is_interrupt

SIGNALS = (signal.SIGINT, signal.SIGTERM)

# Long enough for a finalizer or an import step to finish, short enough to feel immediate.
RETRY_S = 0.02

# Functions an exception cannot leave: finalizers called from C, whose exception is printed
# and dropped, and `__set_name__`, whose exception Python wraps in a RuntimeError that a
# library's `except Exception` around an optional import would swallow.
_UNSAFE_NAMES = frozenset(
    {
        "__del__",
        "__set_name__",
        "_removeHandlerRef",  # logging drops a collected handler, holding its module lock
        "llama_log_callback",  # llama.cpp's log callback (ctypes), while a model loads
        "weakref_cb",  # concurrent.futures wakes its workers when an executor is collected
    }
)
# weakref.finalize and the weak collections run their callbacks from these files.
_UNSAFE_FILES = frozenset({weakref.__file__, _weakrefset.__file__})
_IMPORTLIB_FILES = (
    os.path.join("importlib", "_bootstrap.py"),
    os.path.join("importlib", "_bootstrap_external.py"),
)

_pending: int | None = None  # a signal kept for a safe point
_raised = signal.SIGINT  # the signal behind the last KeyboardInterrupt raised
# One entry per signal the re-delivery thread has sent and the handler has not seen yet.
_redeliveries: deque[int] = deque()
_wake_fd: int | None = None  # written to ask the re-delivery thread for another try


def leave_at_once(signum: int, frame: FrameType | None) -> None:
    # Between a command's end and after_command() its output may still sit in the buffer.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """Raise KeyboardInterrupt in the main thread, or keep the signal for a safe point."""
    global _pending, _raised
    if _took_redelivery() and _pending is None:
        return  # sent again for a signal that has been raised since: not a new one
    if _unsafe(frame):
        _defer(signum)
        return
    _pending = None
    _raised = signum
    raise KeyboardInterrupt


def _took_redelivery() -> bool:
    try:
        _redeliveries.popleft()  # atomic: the handler must take no lock the thread it
    except IndexError:  # interrupted may hold
        return False
    return True


def _defer(signum: int) -> None:
    global _pending
    _pending = signum
    if _wake_fd is not None:
        # Never blocks: a full pipe already holds enough wake-ups for another try.
        with contextlib.suppress(OSError):
            os.write(_wake_fd, b"\0")


def _unsafe(frame: FrameType | None) -> bool:
    """Whether an exception raised at `frame` could be dropped or leave a lock held."""
    if frame is not None and _is_importlib(frame.f_code):
        return True  # importlib's own steps (an exception from the module's code is fine)
    if _in_generator_cleanup():
        return True  # a generator's cleanup, maybe closed by the collector
    callbacks = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        code = frame.f_code
        if (
            code.co_name in _UNSAFE_NAMES
            or code.co_filename in _UNSAFE_FILES
            or code in callbacks
            or code in _OWN_CODE  # a signal during our handler or hook: wait for them
            or (code.co_name == "cb" and _is_importlib(code))  # the module-lock callback
        ):
            return True
        frame = frame.f_back
    return False


def _in_generator_cleanup() -> bool:
    """Whether the exception being handled is a generator's GeneratorExit, or was raised while
    one was being handled (code inside the cleanup catching its own error, e.g. pathlib's
    `exists()` catching FileNotFoundError): its context chain holds the GeneratorExit."""
    error: BaseException | None = sys.exc_info()[1]
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, GeneratorExit):
            return True
        seen.add(id(error))
        error = error.__context__
    return False


def _is_importlib(code: CodeType) -> bool:
    name = code.co_filename
    return name.startswith("<frozen importlib.") or name.endswith(_IMPORTLIB_FILES)


def _unraisable(
    fallback: Callable[[sys.UnraisableHookArgs], object], unraisable: sys.UnraisableHookArgs
) -> None:
    """The last net: an interrupt that a finalizer dropped is delivered again, not printed."""
    error = unraisable.exc_value
    if issubclass(unraisable.exc_type, KeyboardInterrupt) or (
        error is not None and is_interrupt(error)
    ):
        _defer(_raised)
        return
    fallback(unraisable)


_OWN_CODE = frozenset({raise_interrupt.__code__, _defer.__code__, _unraisable.__code__})


def _start_redelivery() -> None:
    """Start, once per process, the thread that sends a kept signal to the main thread again.

    A thread, not a timer started by the handler: starting a thread takes locks that the
    interrupted code may hold.
    """
    global _wake_fd
    if _wake_fd is not None:
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    main = threading.main_thread().ident
    assert main is not None
    threading.Thread(
        target=_redeliver, args=(read_fd, main), name="conductor-signals", daemon=True
    ).start()
    _wake_fd = write_fd


def _forget_redelivery() -> None:
    # A forked child has no re-delivery thread: its first command starts its own.
    global _wake_fd, _pending
    _wake_fd, _pending = None, None
    _redeliveries.clear()


os.register_at_fork(after_in_child=_forget_redelivery)


def _redeliver(read_fd: int, main: int) -> None:
    while True:
        os.read(read_fd, 512)  # every wake-up written so far: one try serves them all
        time.sleep(RETRY_S)
        signum = _pending
        if signum is not None:
            _redeliveries.append(signum)
            with contextlib.suppress(OSError):  # the main thread has ended: nothing to stop
                signal.pthread_kill(main, signum)


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
    global _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _start_redelivery()
    previous = [signal.getsignal(sig) for sig in SIGNALS]
    previous_hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(_unraisable, previous_hook)
    for sig in SIGNALS:
        signal.signal(sig, raise_interrupt)
    try:
        yield
    finally:
        for sig, handler in zip(SIGNALS, previous, strict=True):
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        sys.unraisablehook = previous_hook
        _redeliveries.clear()
        kept, _pending = _pending, None
        if kept is not None:
            raise KeyboardInterrupt  # a signal still waiting for a safe point: this is one
