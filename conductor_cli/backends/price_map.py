"""USD per token for a model reached without litellm (backends/openai_compat.py), from the price
list litellm ships (its model_prices_and_context_window_backup.json, which litellm itself reads
with LITELLM_LOCAL_MODEL_COST_MAP), read as a file: 20 ms, where importing litellm to ask it
takes seconds and would hold up the first call's cost."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

FILE = "model_prices_and_context_window_backup.json"


@functools.cache
def _prices() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        path = Path(folder) / FILE
        if path.is_file():
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return {}
            return loaded if isinstance(loaded, dict) else {}
    return {}


def rates(model: str) -> list[float] | None:
    """[USD per input token, per output token] of `openai/NAME` as litellm prices it (NAME in
    OpenAI's price list), or None for a model the list does not know (a local alias)."""
    prices = _prices()
    for key in (model, model.removeprefix("openai/")):
        entry = prices.get(key)
        if isinstance(entry, dict) and entry.get("litellm_provider") == "openai":
            given = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
            if all(isinstance(x, int | float) for x in given):
                return [float(given[0]), float(given[1])]
    return None
