"""conductor: answer hard questions with a team of language models.

Library use mirrors the CLI:

    from conductor_cli import ask, load_config
    result = ask("What is the capital of France?", config=load_config())
    print(result.answer)

Names are imported on first use so that `import conductor_cli` (and the CLI's start-up) stays fast.
"""

from __future__ import annotations

from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "ask": "api",
    "run_workflow": "api",
    "RunResult": "api",
    "RunOptions": "api",
    "TraceOptions": "api",
    "Runtime": "runtime",
    "CacheMode": "storage.cache",
    "load_trace": "storage.trace",
    "Config": "config.settings",
    "load_config": "config.settings",
    "save_config": "config.settings",
    "Workflow": "run.workflow",
    "Step": "run.workflow",
    "parse_workflow": "run.workflow",
    "gbnf_grammar": "run.workflow",
    "load_catalog": "models.catalog",
    "pull": "models.fetch",
    "pull_missing": "models.fetch",
    "ModelSpec": "models.spec",
    "Attachment": "run.inputs",
    "ConductorError": "errors",
}

__all__ = [*_EXPORTS, "__version__"]


# `object`, not typing.Any: importing typing here (8 ms) would delay the CLI's signal handlers,
# which cli/entry.py can install only after this package has been imported.
def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'conductor_cli' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
