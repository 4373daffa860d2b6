"""Dynamic shell completion: worker names, catalog model names and trace ids.

The shell runs `conductor` on every Tab, so these read a TOML file or a directory listing and
nothing more: no litellm, no llama.cpp, no model. Any error completes nothing.
"""

from __future__ import annotations

from pathlib import Path

import typer

# The variable the completion scripts set; Typer's machinery answers it (see app.main).
COMPLETE_VAR = "_CONDUCTOR_COMPLETE"


def _root_config(ctx: typer.Context) -> Path | None:
    obj = ctx.find_root().params.get("config") if ctx is not None else None
    return Path(obj) if obj else None


def worker_names(ctx: typer.Context, incomplete: str) -> list[str]:
    try:
        from conductor_cli.config import load_config

        option = ctx.params.get("config") if ctx is not None else None
        config = load_config(Path(option) if option else _root_config(ctx))
    except Exception:
        return []
    return [w.name for w in config.workers if w.name.startswith(incomplete)]


def model_names(incomplete: str) -> list[str]:
    try:
        from conductor_cli.models import load_catalog

        return [n for n in load_catalog().entries if n.startswith(incomplete)]
    except Exception:
        return []


def trace_ids(incomplete: str) -> list[str]:
    try:
        from conductor_cli.storage import traces_dir

        ids = sorted((p.stem for p in traces_dir().glob("*.json")), reverse=True)  # newest first
    except OSError:
        return []
    return [i for i in ids if i.startswith(incomplete)]
