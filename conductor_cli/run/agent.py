"""An agent's turn: the tools a client (Codex, Claude Code, qwen-code, an SDK) lets the model
call, and its conversation as it sent it. The answering step's worker gets both, when it can call
tools; its tool calls are the run's answer, which the client carries out and sends back.

How a tool loop runs (docs/serve.md, "Agents"): the conductor plans once per user message. The
worker that called a tool keeps the loop: the next request, which ends in that tool's result,
goes to it straight, unplanned, until the client sends a user message again. A loop the server
does not know (it restarted) is planned again, the tool results in the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conductor_cli.backends.base import message_text

# The task a step that carries on a tool loop gets (the worker reads the conversation).
LOOP_TASK = "Carry on with the conversation."


@dataclass(frozen=True)
class AgentTurn:
    """What an agent client sent besides its question (in OpenAI's chat format)."""

    tools: tuple[dict[str, Any], ...]  # function tools: {"type": "function", "function": ...}
    messages: tuple[dict[str, Any], ...]  # the whole conversation, tool calls and results kept
    tool_choice: Any = None

    @property
    def tools_json(self) -> str:
        return json.dumps(list(self.tools), sort_keys=True, separators=(",", ":"))

    @property
    def tool_choice_json(self) -> str | None:
        return None if self.tool_choice is None else json.dumps(self.tool_choice, sort_keys=True)

    def open_calls(self) -> list[str]:
        """The ids of the tool calls whose results end the conversation (the loop goes on)."""
        ids = []
        for m in reversed(self.messages):
            if m.get("role") != "tool":
                break
            ids.append(str(m.get("tool_call_id", "")))
        return ids[::-1]


def loop_worker(turn: AgentTurn, callers: Mapping[str, str], workers: list[str]) -> str | None:
    """The worker that keeps the tool loop this turn continues: the one that made the calls
    whose results end the conversation, if the server remembers it and it is still in the pool."""
    for call_id in turn.open_calls():
        worker = callers.get(call_id)
        if worker in workers:
            return worker
    return None


def agent_messages(
    turn: AgentTurn, team: list[tuple[str, str]], task: str | None
) -> tuple[dict[str, Any], ...]:
    """The answering step's messages: the client's conversation as it sent it (its system and
    developer messages first, as one system message: chat templates of small models take one),
    with the team's work on this turn (each seen step's task and output) and the step's own task
    added to that system message."""
    system: list[str] = []
    rest: list[dict[str, Any]] = []
    for m in turn.messages:
        if not rest and m.get("role") in ("system", "developer"):
            system.append(message_text(m))
        else:
            rest.append(dict(m))
    notes = [f"A step of your team ({t}) wrote:\n{output}" for t, output in team]
    if task:
        notes.append(f"Your part of the work: {task}")
    text = "\n\n".join(part for part in (*system, *notes) if part.strip())
    return (({"role": "system", "content": text},) if text else ()) + tuple(rest)
