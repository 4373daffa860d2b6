"""The config reference, generated from the settings the code accepts.

`docs/config.md` is this module's output (python -m conductor_cli.config.doc > docs/config.md);
a test fails when a key has no description here or the file is out of date.
"""

from __future__ import annotations

import dataclasses

from conductor_cli.config.settings import (
    _CACHE_TYPES,
    _CONDUCTOR_TYPES,
    _MCP_SERVER_TYPES,
    _SANDBOX_TYPES,
    _SERVER_TYPES,
    _TYPE_WORDS,
    _WORKER_TYPES,
    CacheSettings,
    ConductorSettings,
    McpServerConfig,
    SandboxSettings,
    ServerSettings,
    WorkerConfig,
)

KEY_HELP: dict[str, str] = {
    "conductor.model": "The conductor: a catalog name (`conductor models list`), a path to a "
    "`.gguf` file, or `litellm:MODEL` for one served elsewhere.",
    "conductor.n_gpu_layers": "Layers to offload to the GPU; -1 all (when llama.cpp was built "
    "with a GPU backend), 0 none.",
    "conductor.n_ctx": "Context window of in-process llama.cpp models, in tokens (at least 512).",
    "conductor.n_threads": "llama.cpp threads; 0 means one per physical core.",
    "conductor.kv_cache_type": "KV cache number format: `f16`, `q8_0` (half the memory) or `q4_0`.",
    "conductor.max_steps": "Most steps the conductor's plan may have (1 to 10); the tests of "
    "code the question shows examples for come on top (`code_retries`).",
    "conductor.max_rounds": "Rounds of plan, run, read the answer, re-plan (1 to 4); the "
    "conductor stops earlier by keeping the answer. 1: no re-planning.",
    "conductor.temperature": "Sampling temperature for planning (0 to 2).",
    "conductor.seed": "Sampling seed for planning and steps; same seed, same cache keys.",
    "conductor.step_penalty": "Logits taken from every token that would start another step "
    "of a plan (llama.cpp conductors): the price of a step; 0 leaves the step count to the "
    "model.",
    "conductor.code_retries": "Times the code of an answer is written again where the "
    "examples its question shows fail (0 to 5); each try is a test and a writer's step, on top "
    "of the plan's `max_steps` (a workflow has 10 steps at most); 0 runs no examples.",
    "conductor.api_base": "For a `litellm:` conductor: the server's base URL.",
    "conductor.api_key_env": "For a `litellm:` conductor: the environment variable holding "
    "its key.",
    "workers.name": "The name the conductor writes in workflows: letters, digits, `_-.`, "
    "at most 32.",
    "workers.model": "`gguf:NAME` or `gguf:PATH` (in-process llama.cpp), any litellm "
    "model string (`openai/gpt-4.1-mini`, `anthropic/...`, `ollama_chat/...`), or "
    "`tool:python` (runs the Python program of the steps it sees, in the sandbox), or "
    "`mcp:SERVER/TOOL` (the tool TOOL of the server [mcp_servers.SERVER]).",
    "workers.description": "Strengths, cost and speed, in words: goes into the conductor's prompt.",
    "workers.api_base": "Base URL of an OpenAI-compatible server, Ollama, or a litellm proxy. "
    "An `openai/NAME` worker with an `api_base` is called directly (no litellm import, ready "
    "from the first call); other model strings go through litellm.",
    "workers.api_key_env": "Environment variable that holds the key (keys never go in the file).",
    "workers.max_tokens": "Most tokens one answer may have.",
    "workers.temperature": "Sampling temperature.",
    "workers.timeout_s": "Seconds before a remote call counts as failed (and may be retried).",
    "workers.retries": "Further tries after a retryable failure (timeout, 429, 5xx, refused).",
    "workers.fallback": "Another worker that takes the step when this one still fails.",
    "workers.max_concurrency": "Most steps this worker runs at once.",
    "workers.input_cost_per_mtok": "USD per million input tokens, when litellm has no price.",
    "workers.output_cost_per_mtok": "USD per million output tokens, when litellm has no price.",
    "workers.context_tokens": "The model's context window in tokens; attachments are cut to "
    "fit it, with a note (default: `conductor.n_ctx` for GGUF, 128000 for remote models).",
    "workers.stop_loops": "A local (`gguf:`) worker stops generating when its output starts "
    "repeating itself and keeps one copy of what repeated; remote models ignore it.",
    "cache.enabled": "Cache every model response on disk (and the conductor's prompt state).",
    "cache.size_limit_mb": "Size limit of the response cache; least recently used goes first.",
    "server.port": "`conductor serve`'s TCP port on 127.0.0.1 (`--port` overrides it).",
    "server.auto": "`ask`, `run` and `replay --live` start a background server when none "
    "runs, and use it (`--no-server` runs in-process).",
    "server.idle_timeout_s": "A background server (`serve --detach`, or started by `auto`) "
    "exits after this many seconds with no request.",
    "server.max_concurrent_runs": "Runs `conductor serve` carries out at once; one more is "
    "answered 429 with Retry-After.",
    "server.allowed_hosts": "Host names a TCP listener without a key answers to besides "
    "`localhost`, loopback addresses and the address it is bound to (a web page that renamed "
    "itself to 127.0.0.1 is refused); `*` allows any name. With `--api-key-env` any name.",
    "server.allowed_origins": "Web pages (`scheme://host[:port]`) allowed to call the server "
    "from a browser; a request from any other page is refused (403).",
    "server.allow_overrides": "Whether a run request on TCP may change the conductor or the "
    "workers (which can load or fetch a model); the CLI's local socket always may.",
    "sandbox.wall_s": "The python tool stops a program after this many seconds.",
    "sandbox.cpu_s": "Seconds of CPU a python tool program may use.",
    "sandbox.memory_mb": "Memory of a python tool program and everything it starts, together "
    "(a cgroup where one can be had; else a limit per process, with fewer processes).",
    "sandbox.disk_mb": "What a python tool program may write in its folder (a tmpfs).",
    "sandbox.processes": "Processes and threads a python tool program may start.",
}
# [mcp_servers.NAME] tables (named by the user, so not `config set` keys).
MCP_SERVER_HELP: dict[str, str] = {
    "mcp_servers.command": "The program that starts the MCP server over stdio (as in Claude's "
    "`mcpServers`); `${VAR}` and `${VAR:-default}` come from the environment.",
    "mcp_servers.args": "Its arguments; `${VAR}` expands as in `command`.",
    "mcp_servers.env": "Variables the server gets besides HOME, PATH, SHELL, TERM, USER and "
    "LOGNAME (nothing else of the environment reaches it); values may use `${VAR}`.",
    "mcp_servers.type": 'Only `"stdio"` (accepted so that Claude Code entries copy over).',
}

_SECTIONS = (
    ("conductor", "[conductor]", _CONDUCTOR_TYPES, ConductorSettings),
    ("workers", "[[workers]] (one table per worker)", _WORKER_TYPES, WorkerConfig),
    ("cache", "[cache]", _CACHE_TYPES, CacheSettings),
    ("server", "[server]", _SERVER_TYPES, ServerSettings),
    ("sandbox", "[sandbox]", _SANDBOX_TYPES, SandboxSettings),
    (
        "mcp_servers",
        "[mcp_servers.NAME] (one table per MCP server)",
        _MCP_SERVER_TYPES,
        McpServerConfig,
    ),
)


def _default(cls: type, key: str) -> str:
    for f in dataclasses.fields(cls):
        if f.name == key:
            if f.default is dataclasses.MISSING:
                return "required"
            if f.default == ():
                return "none"
            return "unset" if f.default is None else f"`{f.default!r}`".replace("'", '"')
    return ""


def reference_markdown() -> str:
    lines = [
        "# Config reference",
        "",
        "Generated from the code by `python -m conductor_cli.config.doc`; do not edit by hand.",
        "The file is TOML, at `conductor config path`. Set a key with",
        "`conductor config set SECTION.KEY VALUE` (`workers.NAME.KEY` for a worker,",
        "`mcp_servers.NAME.command`, `.args` or `.env.VAR` for an MCP server): it changes that",
        "key's line alone, and every comment, blank line and example of yours stays.",
    ]
    for section, title, types, cls in _SECTIONS:
        lines += ["", f"## {title}", "", "| key | type | default | what it does |"]
        lines.append("| --- | --- | --- | --- |")
        for key, kind in types.items():
            lines.append(
                f"| `{key}` | {_TYPE_WORDS[kind]} | {_default(cls, key)} "
                f"| {(KEY_HELP | MCP_SERVER_HELP)[f'{section}.{key}']} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
