"""Fuzzing the parsers of untrusted text: workflows (both written forms) and traces.

Thousands of generated and mutated inputs, seeded so a failure replays; the only exception
allowed out is the documented one (WorkflowError, TraceError). The sample trace in
tests/data/ is a real run's (2 steps on the embedded model).
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from conductor_cli.cli.view import build_tree
from conductor_cli.errors import TraceError, WorkflowError
from conductor_cli.replay import play, trace_attachments, trace_workflow
from conductor_cli.run.state import RunState
from conductor_cli.run.workflow import parse_workflow
from conductor_cli.storage.trace import list_traces, load_trace, trace_summary

WORKERS = ["local", "coder", "Critic-2"]
SAMPLE = Path(__file__).parent / "data" / "sample_trace.json"

PIECES = [
    "{", "}", "[", "]", ",", ":", '"', "steps", '"steps"', '"worker"', '"task"', '"sees"',
    '"local"', '"CODER"', "coder", '"nobody"', "0", "1", "-1", "99", "1.5", "true", "null",
    '"all"', '"Solve it step by step."', "''", "Workers:", "Tasks:", "Access:", "workers =",
    "model_id", "subtasks", "access_list", "[[0]]", "['coder']", "\n", " ", "```json",
    "```", "\\", "\x00", "é", "🎼", "{'steps': []}", "}}}", "[[[",
]  # fmt: skip


def random_reply(rng: random.Random) -> str:
    """Either a mangled valid workflow or a soup of the forms' pieces."""
    if rng.random() < 0.5:
        n = rng.randint(0, 6)
        steps = [
            {
                "worker": rng.choice([*WORKERS, "coder ", "x", 3, None]),
                "task": rng.choice(["Do it well.", "", "  ", None, 7, "é" * 40]),
                "sees": rng.choice([[], [0], [5], [-1, 0], "all", None, "0", [True], [1.0]]),
            }
            for _ in range(n)
        ]
        text = json.dumps({"steps": steps}, ensure_ascii=rng.random() < 0.5)
        cut = rng.randint(0, len(text))
        if rng.random() < 0.3:
            text = text[:cut]
        elif rng.random() < 0.3:
            text = f"Here is the plan:\n{text}\nHope it helps."
        return text
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40)))


def test_workflow_parser_raises_only_workflow_error() -> None:
    rng = random.Random(20261123)
    parsed = 0
    for _ in range(5000):
        text = random_reply(rng)
        max_steps = rng.randint(1, 10)
        try:
            wf = parse_workflow(text, WORKERS, max_steps)
        except WorkflowError:
            continue
        parsed += 1
        assert 1 <= len(wf.steps) <= max_steps
        for i, step in enumerate(wf.steps):
            assert step.worker in WORKERS and step.task.strip()
            assert all(0 <= j < i for j in step.sees)
    assert parsed > 20  # the fuzzer also reaches the accepting paths (48 with this seed)


JUNK: list[Any] = [None, 0, -1, 1e308, "", "x", [], {}, [None], {"type": "StepStarted"}, True]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _paths(v, (*prefix, i))
    return found


def _mutate(record: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    record = copy.deepcopy(record)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_paths(record))
        parent = record
        for key in path[:-1]:
            parent = parent[key]
        if rng.random() < 0.4 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(JUNK))
        if not isinstance(record, dict):
            break
    return record


def consume(path: Path) -> None:
    """Everything `traces show`, `traces list` and `replay` do with a trace file."""
    record = load_trace(path)
    trace_summary(record)
    trace_workflow(record)
    trace_attachments(record)
    state = RunState()
    play(record, state.apply)
    build_tree(state, now=state.last_at)


def test_trace_consumers_raise_only_trace_error(tmp_path: Path) -> None:
    original = json.loads(SAMPLE.read_text(encoding="utf-8"))
    consume(SAMPLE)  # the real trace itself is fine
    rng = random.Random(7)
    target = tmp_path / "t.json"
    for i in range(1500):
        if i % 5 == 0:  # truncated or byte-damaged JSON
            data = SAMPLE.read_bytes()
            data = data[: rng.randint(0, len(data))] if i % 2 else data.replace(b'"', b"'", 1)
            target.write_bytes(data)
        else:
            target.write_text(json.dumps(_mutate(original, rng)), encoding="utf-8")
        try:
            consume(target)
        except TraceError:
            pass
        except Exception as e:  # pragma: no cover - the report names the mutation
            pytest.fail(f"iteration {i}: {type(e).__name__}: {e}\n{target.read_text()[:2000]}")
    assert list_traces(tmp_path)  # a damaged file is listed, not a crash
