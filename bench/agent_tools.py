"""How well a small local model calls an agent's tools (issue 42): Qwen2.5-Coder 0.5B and 1.5B
as the worker of an agent turn, through conductor's llama.cpp backend and its tool-call reader
(backends/tool_calls.py), nothing simulated.

Run alone (llama.cpp on every core; about 10 minutes on 2 cores):
    .venv/bin/python bench/agent_tools.py [--models coder-0.5b,coder-1.5b] [--json]

Each model gets the requests below with the tools Codex and qwen-code offer most (a shell
command, read a file, write a file), as an agent sends them (temperature 0.2, seed 0, up to
512 tokens). Counted per model:
- called: the reply called a tool, as conductor reads it;
- well-formed: every call names an offered tool, its arguments are a JSON object with the
  tool's required keys, and (for the shell) a command that is a non-empty string;
- malformed: replies that tried a call conductor could not use;
- after a result: given a made-up result of its call, the reply answers in text instead of
  calling again (a model that calls again forever keeps an agent looping);
- seconds a request.
Requests where a tool is needed come first (`needs`); a few need none (a fact, a greeting),
where a call is counted as unneeded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

from _common import wilson

from conductor_cli.backends.base import Request
from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
from conductor_cli.backends.tool_calls import parse_tool_calls
from conductor_cli.models.catalog import load_catalog
from conductor_cli.run.agent import AgentTurn

MODELS = {"coder-0.5b": "qwen2.5-coder-0.5b-instruct", "coder-1.5b": "qwen2.5-coder-1.5b-instruct"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "exec_command",
            "description": "Run a shell command in the workspace; returns its output.",
            "parameters": {
                "type": "object",
                "properties": {"cmd": {"type": "string"}},
                "required": ["cmd"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write text to a file of the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
]
SYSTEM = "You are a coding agent working in the user's workspace. Use the tools to act."
NEEDS = [
    "List the files in this folder.",
    "Show me what is in README.md.",
    "Run the test suite with pytest.",
    "How much disk space is left?",
    "Which Python version is installed here?",
    "Find every TODO in the Python files.",
    "Create a file hello.py that prints hello.",
    "What is the current git branch?",
    "Count the lines of main.py.",
    "Show the last 20 lines of app.log.",
    "Is port 8080 in use?",
    "Make a folder named build.",
    "Read setup.cfg and tell me the package name.",
    "Delete the file tmp.txt.",
    "What time is it on this machine?",
    "Install the requests package with pip.",
]
NONE_NEEDED = [
    "What is the capital of France?",
    "Hello! Who are you?",
    "Explain what a Python decorator is in one sentence.",
    "What does HTTP stand for?",
]
RESULT = (
    "total 3\n-rw-r--r-- 1 user user 120 Nov 27 10:00 main.py\n-rw-r--r-- 1 user user 80 README.md"
)


def well_formed(calls: tuple, offered: dict[str, list[str]]) -> bool:
    for call in calls:
        try:
            args = json.loads(call.arguments)
        except ValueError:
            return False
        if not isinstance(args, dict) or not set(offered[call.name]) <= set(args):
            return False
        if call.name == "exec_command" and not (
            isinstance(args["cmd"], str) and args["cmd"].strip()
        ):
            return False
    return bool(calls)


def run_model(name: str, models: LlamaModels) -> dict:
    entry = load_catalog().get(MODELS[name])
    path = entry.local_path()
    if not path.exists():
        raise SystemExit(f"{entry.name} is not pulled: conductor models pull {entry.name}")
    backend = LlamaCppBackend(models, path, hashlib.sha256(path.name.encode()).hexdigest())
    turn = AgentTurn(tuple(TOOLS), ())
    offered = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in TOOLS}
    rows = []
    for i, question in enumerate(NEEDS + NONE_NEEDED):
        messages = ({"role": "system", "content": SYSTEM}, {"role": "user", "content": question})
        request = Request(messages, 512, 0.2, i, tools=turn.tools_json)
        start = time.monotonic()
        done = backend.complete(request)
        seconds = time.monotonic() - start
        row = {
            "question": question,
            "needs": question in NEEDS,
            "called": bool(done.tool_calls),
            "well_formed": well_formed(done.tool_calls, offered),
            "malformed": done.text != ""
            and parse_tool_calls(done.text, list(offered)).malformed > 0,
            "calls": [c.to_dict() for c in done.tool_calls],
            "text": done.text[:200],
            "seconds": round(seconds, 2),
        }
        if done.tool_calls:
            call = done.tool_calls[0]
            follow = (
                *messages,
                {"role": "assistant", "content": None, "tool_calls": [call.to_openai()]},
                {"role": "tool", "tool_call_id": call.id, "content": RESULT},
            )
            after = backend.complete(Request(follow, 512, 0.2, i, tools=turn.tools_json))
            row["after_text"] = not after.tool_calls and bool(after.text.strip())
            row["after"] = after.text[:200] or [c.to_dict() for c in after.tool_calls]
        rows.append(row)
        print(f"{name} {i}: {row['called']} {row['well_formed']} {seconds:.1f}s", file=sys.stderr)
    return {"rows": rows, "summary": summarize(rows)}


def summarize(rows: list[dict]) -> dict:
    need = [r for r in rows if r["needs"]]
    other = [r for r in rows if not r["needs"]]
    called = [r for r in need if r["called"]]

    def share(k: int, n: int) -> str:
        low, high = wilson(k, n)
        return f"{k}/{n} [{low:.2f}, {high:.2f}]"

    return {
        "called": share(len(called), len(need)),
        "well_formed": share(sum(r["well_formed"] for r in need), len(need)),
        "malformed": sum(r["malformed"] for r in rows),
        "after_text": share(sum(r.get("after_text", False) for r in called), len(called)),
        "unneeded_calls": f"{sum(r['called'] for r in other)}/{len(other)}",
        "seconds": round(sum(r["seconds"] for r in rows) / len(rows), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    models = LlamaModels(n_ctx=4096)
    out = {}
    try:
        for name in args.models.split(","):
            out[name] = run_model(name, models)
    finally:
        models.close()
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(
        "| worker | called (of 16 that need a tool) | well-formed | malformed replies "
        "| answers in text after the result | calls where none is needed | s / request |"
    )
    print("| --- | --- | --- | ---: | --- | ---: | ---: |")
    for name, r in out.items():
        s = r["summary"]
        print(
            f"| {name} | {s['called']} | {s['well_formed']} | {s['malformed']} | "
            f"{s['after_text']} | {s['unneeded_calls']} | {s['seconds']} |"
        )


if __name__ == "__main__":
    main()
