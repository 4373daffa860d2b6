"""Render the README's picture of the run tree from a real run on the embedded model.

    .venv/bin/python docs/screenshot.py          # a real `ask`, then docs/live-tree.svg
    python3 -m venv /tmp/docs && /tmp/docs/bin/pip install cairosvg
    /tmp/docs/bin/cairosvg docs/live-tree.svg -o docs/live-tree.png -s 1.5

The tree is the live view's last frame, drawn from the run's trace as `conductor traces show`
draws it. cairosvg is only for this picture, never a dependency of conductor.
"""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from conductor_cli import ask
from conductor_cli.cli.view import render_static
from conductor_cli.config.settings import config_from_dict
from conductor_cli.run.events import event_from_dict
from conductor_cli.run.state import RunState
from conductor_cli.storage.trace import load_trace

HERE = Path(__file__).resolve().parent
QUESTION = "Write a Python function that checks whether a number is prime."
POOL = [
    ("solver", "solves the problem step by step; small and local"),
    ("checker", "checks a solution for mistakes and corrects it"),
]


def main() -> None:
    for seed in range(8):  # the first conductor seed whose plan has two steps: worth a picture
        result = ask(QUESTION, config=_config(seed))
        if len(result.steps) >= 2:
            break
    assert result.trace_path is not None
    _draw(result.trace_path)


def _config(seed: int):  # type: ignore[no-untyped-def]
    return config_from_dict(
        {
            "conductor": {"max_steps": 3, "seed": seed},
            "workers": [
                {
                    "name": name,
                    "model": "gguf:smollm2-135m-instruct",
                    "description": description,
                    "max_tokens": 160,
                }
                for name, description in POOL
            ],
        }
    )


def _draw(trace_path: Path) -> None:
    state = RunState()
    for raw in load_trace(str(trace_path)).get("events") or []:
        state.apply(event_from_dict(raw))
    console = Console(
        record=True, width=96, force_terminal=True, color_system="truecolor", file=io.StringIO()
    )
    console.print(f"[bold]$ conductor ask[/] {QUESTION!r}")
    render_static(state, console)
    svg = HERE / "live-tree.svg"
    console.save_svg(str(svg), title="conductor ask")
    # Rich asks for Fira Code from a CDN; name a monospace font every converter has locally.
    svg.write_text(svg.read_text().replace("Fira Code", "DejaVu Sans Mono"), encoding="utf-8")
    print(svg)


if __name__ == "__main__":
    main()
