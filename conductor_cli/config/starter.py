"""The commented starter file `conductor config init` writes.

Its live settings are the embedded default; every example below them is commented out, one
block per kind of worker, ready to uncomment (tests uncomment each block and load the result).
"""

from __future__ import annotations

EXAMPLE_MARK = "# --- example: "

STARTER_CONFIG = """\
# conductor's config. `conductor config show` prints what is in force; `conductor config set
# KEY VALUE` changes one key; `conductor config edit` opens this file and checks it on save.
# API keys never go here: a worker names the environment variable that holds its key.

[conductor]
model = "smollm2-135m-instruct"   # catalog name, a .gguf path, or litellm:MODEL
n_gpu_layers = -1                 # every layer on the GPU when llama.cpp was built with one
n_ctx = 8192
n_threads = 0                     # 0: one per physical core
kv_cache_type = "q8_0"            # f16 | q8_0 | q4_0
max_steps = 5                     # most steps in a workflow (1..10)
max_rounds = 1                    # rounds of plan, run, read the answer, re-plan (1..4)
temperature = 0.2
seed = 0

[cache]
enabled = true
size_limit_mb = 2048

# The worker pool. The conductor reads each description to choose who does what.

[[workers]]
name = "local"
model = "gguf:smollm2-135m-instruct"
description = "SmolLM2 135M, a tiny local model: instant and free, but weak; short answers"

# --- example: OpenAI (export OPENAI_API_KEY=...)
# [[workers]]
# name = "gpt"
# model = "openai/gpt-4.1-mini"
# description = "strong general reasoning and code; fast; about $0.4 per million input tokens"
# api_key_env = "OPENAI_API_KEY"

# --- example: Anthropic (export ANTHROPIC_API_KEY=...)
# [[workers]]
# name = "claude"
# model = "anthropic/claude-sonnet-4-5"
# description = "careful reasoning, long documents and code review; slower, pricier"
# api_key_env = "ANTHROPIC_API_KEY"
# fallback = "local"              # if it still fails after its retries, this worker takes the step

# --- example: a local OpenAI-compatible server (python -m llama_cpp.server, vLLM, LM Studio)
# [[workers]]
# name = "server"
# model = "openai/qwen2.5-7b-instruct"   # openai/<the model name the server reports>
# api_base = "http://127.0.0.1:8000/v1"
# description = "Qwen2.5 7B on our own GPU box: good at code and maths, free, medium speed"
# max_concurrency = 8

# --- example: Ollama (ollama serve; ollama pull llama3.1)
# [[workers]]
# name = "ollama"
# model = "ollama_chat/llama3.1"
# api_base = "http://127.0.0.1:11434"
# description = "Llama 3.1 8B through Ollama: general questions, free, local"

# --- example: a bigger local GGUF in this process (conductor models pull qwen2.5-3b-instruct)
# [[workers]]
# name = "qwen"
# model = "gguf:qwen2.5-3b-instruct"     # a catalog name or a path to any .gguf file
# description = "Qwen2.5 3B in-process: better than SmolLM2 at code, slower on a CPU"
# max_tokens = 1024
"""


def team_config() -> str:
    """What `conductor config init --team` writes: the team bench/prove_team.py trained a
    conductor for (shipped as `coder-team`), word for word, since the trained head reads each
    worker's description in its planning prompt."""
    from conductor_cli.config.settings import TEAM_CONDUCTOR, TEAM_WORKERS

    lines = [
        "# conductor's config: a team of SmolLM2-135M (local), Qwen2.5-Coder-0.5B (coder, 491 MB,",
        "# fetched on first use) and the sandboxed python tool, planned by the conductor trained",
        "# for exactly these workers (README: 'A trained team on one machine'). Changing a",
        "# worker's model or words makes it one the trained conductor never measured: train your",
        "# own then (conductor train ... --out NAME). `conductor config show` prints all settings.",
        "",
        "[conductor]",
        f'model = "{TEAM_CONDUCTOR}"',
    ]
    for w in TEAM_WORKERS:
        lines += ["", "[[workers]]", f'name = "{w.name}"', f'model = "{w.model}"']
        if w.description:
            lines.append(f'description = "{w.description}"')
    return "\n".join(lines) + "\n"
