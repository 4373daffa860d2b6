"""A local model stopped in the middle of a llama.cpp decode, for a run whose client left.

Between tokens a cancelled run stops by itself (the text sink or the constrained loop raises),
but one decode of a long prompt (the conductor's instructions read for the first time, a piped
file) takes seconds, and it ran to its end after the client had gone. llama.cpp asks an abort
callback between the nodes of every graph it computes. A Python callback there would take the
GIL hundreds of times a token, waiting on any busy Python thread each time; so the callback is
libc's `strlen` over a byte of ours: a string 0 bytes long says "go on", 1 byte long "stop"
(a bool is read from the low byte of the return register, where strlen leaves 0 or 1), and no
Python runs inside a decode. A watcher thread copies the run's cancel flag into that byte.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from conductor_cli.errors import RunCancelled

# How often the watcher reads the run's cancel flag: the server notices a hang-up within 0.2 s.
POLL_S = 0.05


def _strlen() -> Any:
    """libc's strlen as a function pointer, from the symbols this process already has (Python
    links the C library on Linux and macOS; no search for it runs at each model's load), or
    None where there is none (Windows)."""
    try:
        return ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value
    except (OSError, AttributeError, TypeError):
        return None


class AbortSwitch:
    """The abort byte of one loaded model's context: `watching` arms it for one call."""

    def __init__(self, llama: Any) -> None:
        # b"\0\0": strlen 0, go on. Set only by a call's watcher, and 0 again when it ends.
        self._byte = ctypes.create_string_buffer(2)
        self.armed = False
        address = _strlen()
        if address is None:
            return
        import llama_cpp

        # Kept on self: llama.cpp holds the pointer, and ctypes frees what nobody references.
        self._callback = llama_cpp.ggml_abort_callback(address)
        llama_cpp.llama_set_abort_callback(
            llama.ctx, self._callback, ctypes.cast(self._byte, ctypes.c_void_p)
        )
        self.armed = True

    @property
    def tripped(self) -> bool:
        return self._byte.raw[0] != 0

    @contextmanager
    def watching(self, llama: Any, cancelled: Callable[[], bool] | None) -> Iterator[None]:
        """One call on the model: once `cancelled()` is true, the decode under way stops and
        RunCancelled is raised (the context is emptied: its last batch was half read)."""
        if cancelled is None or not self.armed:
            yield
            return
        done = threading.Event()

        def watch() -> None:
            while not done.wait(POLL_S):
                if cancelled():
                    self._byte[0] = b"\1"
                    return

        watcher = threading.Thread(target=watch, name="llama-abort", daemon=True)
        watcher.start()
        try:
            yield
        except RuntimeError:
            # llama-cpp-python's "llama_decode returned 2": the abort we asked for.
            if not self.tripped:
                raise
            llama.reset()
            raise RunCancelled from None
        finally:
            done.set()
            watcher.join()
            self._byte[0] = b"\0"
