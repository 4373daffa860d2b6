"""The live tree as a person sees it: a real `conductor ask` in a real terminal (tmux)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

CONFIG = """
[conductor]
max_steps = 3

[[workers]]
name = "local"
model = "gguf:smollm2-135m-instruct"
description = "tiny local model"
max_tokens = 40
"""


def _in_tmux(args: list[str], done: Path) -> tuple[list[str], str]:
    """Run `python -m conductor_cli ARGS` in a real terminal; the screens seen while it ran
    (captured every 0.2 s) and the last one."""
    exports = " ".join(
        f"{k}={shlex.quote(v)}"
        for k, v in os.environ.items()
        if k.startswith(("CONDUCTOR_", "XDG_", "LITELLM_")) or k in ("PATH", "HOME")
    )
    command = (
        f"export {exports} TERM=xterm-256color; "
        f"{shlex.quote(sys.executable)} -m conductor_cli {shlex.join(args)}; "
        f"echo $? > {shlex.quote(str(done))}; sleep 60"
    )
    session = f"conductor-test-{os.getpid()}"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", command], check=True
    )

    def capture() -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout

    frames = []
    try:
        deadline = time.monotonic() + 180
        while not done.exists() and time.monotonic() < deadline:
            frames.append(capture())
            time.sleep(0.2)
        return frames, capture()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_live_tree_in_a_terminal(tmp_path: Path, gguf_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(CONFIG, encoding="utf-8")
    done = tmp_path / "done"
    _, screen = _in_tmux(["ask", "--config", str(config), "Name three fruits."], done)
    assert done.read_text().strip() == "0", screen
    assert "Name three fruits." in screen
    assert "planned" in screen
    # A step's row says "step N" (the plan's row may say "planned 1 step").
    step_lines = [line for line in screen.splitlines() if re.search(r"\bstep \d+\b", line)]
    assert step_lines, screen
    for i, line in enumerate(step_lines):
        assert f"step {i}" in line and "local" in line and "done" in line, line


def test_eval_shows_a_progress_bar_with_eta_then_the_table(tmp_path: Path, gguf_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(CONFIG.replace("max_tokens = 40", "max_tokens = 12"), encoding="utf-8")
    data = Path(__file__).parent / "data" / "mcq10.jsonl"
    done = tmp_path / "done"
    args = ["eval", "mcq", str(data), "--config", str(config), "--strategies", "single,vote"]
    frames, screen = _in_tmux([*args, "--limit", "4"], done)
    assert done.read_text().strip() == "0", screen
    bars = [line for f in frames for line in f.splitlines() if line.startswith("eval ")]
    assert bars, frames[-1] if frames else screen
    # "eval ━━━━━━━━╺━━━━━━━ 3/8 elapsed 0:00:04 ETA 0:00:06 single:local mcq10:2: wrong"
    assert any("/8" in line and "ETA" in line for line in bars), bars
    # The bar is gone and the table took its place.
    assert "acc %" in screen and "95% CI" in screen and "vote:local" in screen
    assert not any(line.startswith("eval ") for line in screen.splitlines())
