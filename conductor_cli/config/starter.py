"""The commented starter file `conductor config init` writes.

Its live settings are one preset: by default the embedded default (the trained team); every
example below them is commented out, one block per kind of worker, ready to uncomment (tests
uncomment each block and load the result).
"""

from __future__ import annotations

EXAMPLE_MARK = "# --- example: "
PRESETS = ("team", "small-team", "smollm2")

_HEADER = """\
# conductor's config. `conductor config show` prints what is in force; `conductor config set
# KEY VALUE` changes one key; `conductor config edit` opens this file and checks it on save.
# API keys never go here: a worker names the environment variable that holds its key.
"""

_TEAM_NOTE = """\
# The team: {summary},
# planned by {conductor}, the conductor trained for exactly these workers (README: "A
# trained team on one machine"). Changing a worker's model or words makes it one the trained
# conductor never measured: train your own then (conductor train ... --out NAME). A pool of
# your own is planned by model = "smollm2-135m-instruct" untrained, or by a conductor you
# train for it.
"""

_CONDUCTOR = """
[conductor]
model = "{model}"{model_note}
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
"""


def starter_config(preset: str = "team") -> str:
    """The starter file for one of PRESETS: `team` (the embedded default), `small-team` (the
    same with the 0.5B coder: half the download, less right) or `smollm2` (SmolLM2 alone,
    98 MB, planned untrained: instant and weak)."""
    from conductor_cli.config.settings import DEFAULT_MODEL, DEFAULT_WORKER, TEAMS

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; one of {', '.join(PRESETS)}")
    team = TEAMS.get(preset)
    if team is None:
        model, workers, text = DEFAULT_MODEL, (DEFAULT_WORKER,), _HEADER
        note = "   # catalog name, a .gguf path, or litellm:MODEL"
    else:
        model, workers = team.conductor, team.workers
        note = "         # trained for the workers below (shipped)"
        text = _HEADER + "\n" + _TEAM_NOTE.format(conductor=team.conductor, summary=team.summary)
    text += _CONDUCTOR.format(model=model, model_note=note)
    for w in workers:
        text += f'\n[[workers]]\nname = "{w.name}"\nmodel = "{w.model}"\n'
        if w.description:
            text += f'description = "{w.description}"\n'
    if team is not None:
        text += _OWN_WORKERS.format(conductor=team.conductor, model=DEFAULT_MODEL)
    return text + "\n" + _EXAMPLES


_OWN_WORKERS = """
# Workers of your own, below: {conductor} plans only the team above and would never
# choose them. With one, set model = "{model}" under [conductor] (planned
# untrained), or train a conductor for your pool.
"""


_EXAMPLES = """\
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
