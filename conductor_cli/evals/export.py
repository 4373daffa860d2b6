"""Eval traces as training rows for a conductor: (prompt, workflow, reward).

One JSON line per conductor run of `conductor eval` whose answer was scored:

    {"prompt": [{"role": "system", ...}, {"role": "user", ...}],  # what the conductor read
     "completion": "<the conductor's reply: the workflow it wrote>",
     "workflow": {"steps": [...]},                                 # the parsed workflow
     "reward": 1.0,                                                # 1.0 right, 0.0 wrong
     "question": "...", "dataset": "mcq", "problem_id": "...", "trace_id": "..."}

TRL's GRPOTrainer takes `prompt` in this conversational form; `reward` is what a reward
function returns for the recorded completion (offline data: the trainer samples its own
completions, and the recorded ones serve as a warm start or for filtering).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conductor_cli.errors import InputError, TraceError
from conductor_cli.storage.trace import load_trace, traces_dir


def grpo_rows(directory: Path | None = None) -> Iterator[dict[str, Any]]:
    """Rows oldest first, so that an export lists runs in the order they happened."""
    folder = directory or traces_dir()
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        try:
            record = load_trace(path)
        except TraceError:
            continue  # a damaged trace is skipped here; `traces show` names the problem
        row = grpo_row(record)
        if row is not None:
            yield row


def grpo_row(record: dict[str, Any]) -> dict[str, Any] | None:
    scored = record.get("eval")
    plan = record.get("plan")
    if not isinstance(scored, dict) or "reward" not in scored or not isinstance(plan, dict):
        return None
    if not plan.get("messages") or not isinstance(plan.get("reply"), str):
        return None
    return {
        "prompt": plan["messages"],
        "completion": plan["reply"],
        "workflow": record.get("workflow"),
        "reward": float(scored["reward"]),
        "question": record.get("question"),
        "dataset": scored.get("dataset"),
        "problem_id": scored.get("problem_id"),
        "trace_id": record.get("id"),
    }


def export_grpo(out: Path) -> int:
    """Write every scored conductor run to `out` (JSONL, atomically); the number of rows."""
    rows = list(grpo_rows())
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{out}: cannot write the export ({e.strerror})") from None
    return len(rows)
