"""Agents' tool loops on one server: which worker made each tool call it answered with (so
that the request bringing the tool's result goes back to that worker), and the notes about
agents already said in the server's log."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from conductor_cli.run.agent import AgentTurn, loop_worker

if TYPE_CHECKING:
    from conductor_cli.api import RunResult

# Tool calls remembered (call id -> the worker that made it): far more than the loops that
# are open at once; the oldest go first.
REMEMBERED_CALLS = 10_000


class ToolLoops:
    """Which worker made each tool call the server answered with; the notes said."""

    def __init__(self) -> None:
        self._callers: OrderedDict[str, str] = OrderedDict()
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def remember(self, result: RunResult) -> None:
        if not result.tool_calls:
            return
        worker = result.steps[-1].worker
        with self._lock:
            for call in result.tool_calls:
                self._callers[call.id] = worker
                self._callers.move_to_end(call.id)
            while len(self._callers) > REMEMBERED_CALLS:
                self._callers.popitem(last=False)

    def worker_for(self, turn: AgentTurn, workers: list[str]) -> str | None:
        with self._lock:
            return loop_worker(turn, dict(self._callers), workers)

    def note_once(self, key: str, line: str) -> None:
        """One `conductor: note:` line in the server's log, the first time only."""
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        sys.stderr.write(f"conductor: note: {line}\n")
        sys.stderr.flush()
