"""JSONL checkpoints of training runs: rows appended whole or not at all, read back by key, and
the threaded loop that runs jobs and appends each row as it finishes."""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from conductor_cli import waiting

K = TypeVar("K")


V = TypeVar("V")


J = TypeVar("J")


def read_checkpoint(path: Path, parse: Callable[[dict[str, Any]], tuple[K, V]]) -> dict[K, V]:
    """A JSONL checkpoint's rows by key; a line torn by Ctrl-C is skipped, so its work is done
    again."""
    done: dict[K, V] = {}
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            key, value = parse(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue
        done[key] = value
    return done


def run_checkpointed(
    jobs: Sequence[J],
    one: Callable[[J], dict[str, Any] | None],
    checkpoint: Path,
    concurrency: int,
    on_row: Callable[[dict[str, Any]], None],
) -> int:
    """Run `jobs` on `concurrency` threads; each row is appended to `checkpoint` as it finishes,
    in the jobs' order, then given to `on_row` (a job that measured nothing returns None and
    writes no row). Returns the worker calls made (`calls`). Ctrl-C (or any error) cancels the
    jobs not started and waits for those running; every row finished by then is written for a
    resume, those after the interruption included (their calls were spent)."""
    calls = 0
    with Checkpoint(checkpoint) as out, ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(one, job) for job in jobs]
        written = 0
        try:
            for future in futures:
                row = waiting.result(future)
                if row is not None:
                    out.append(row)
                written += 1
                if row is None:
                    continue
                calls += row["calls"]
                on_row(row)
        except BaseException:
            for future in futures:
                future.cancel()
            try:
                pool.shutdown(wait=True)
            finally:  # a second Ctrl-C while it waits still keeps what finished
                with contextlib.suppress(OSError):  # a full disk: the rows before stay
                    _keep_finished(futures[written:], out)
            raise
    return calls


def _keep_finished(futures: Sequence[Future[dict[str, Any] | None]], out: Checkpoint) -> None:
    """The rows of `futures` that ran to the end, appended in the jobs' order (a row whose
    append the interruption cut was taken back by `append`, and is written again here)."""
    for future in futures:
        if not future.done() or future.cancelled() or future.exception() is not None:
            continue
        row = future.result()
        if row is not None:
            out.append(row)


class Checkpoint:
    """A JSONL checkpoint open for appending, one whole line or nothing: a row that a full disk
    (or Ctrl-C) cuts short is taken back, so the rows before stay exactly as they were, and a
    torn tail left by a killed run is cut on opening, so no new row is glued to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self._end = self._cut_torn_tail()
        except BaseException:
            os.close(self._fd)
            raise

    def _cut_torn_tail(self) -> int:
        """The file's length up to its last newline, after cutting whatever follows it."""
        size = end = os.fstat(self._fd).st_size
        while end > 0:
            start = max(0, end - 65536)
            newline = os.pread(self._fd, end - start, start).rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end < size:
            os.ftruncate(self._fd, end)  # shrinking needs no free space
        return end

    def append(self, row: dict[str, Any]) -> None:
        data = (json.dumps(row) + "\n").encode("utf-8")
        try:
            written = 0
            while written < len(data):
                n = os.write(self._fd, data[written:])
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += n
            self._end += len(data)
        except BaseException as e:
            # If even this fails, the next opening cuts the torn tail; the loader skips it.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._end)
            if isinstance(e, OSError) and e.filename is None:
                raise OSError(e.errno, e.strerror, str(self.path)) from e
            raise

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
