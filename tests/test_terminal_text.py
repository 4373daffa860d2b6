"""Model output is text, never terminal control (issue 67): a program's escape sequences
reach a real pseudo-terminal as visible text from `conductor run` (the live tree and the
answer) and `conductor traces show`; `--json` escapes what JSON leaves raw and keeps the
value; an answer written to a pipe keeps its bytes (what a file of it should hold)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from conductor_cli.cli.safe_text import flat, json_text, visible

# Each attack issue 67 saw reach the terminal, with parameters Rich's own drawing never uses,
# so that finding one in the terminal's bytes means it came from the program.
ATTACKS = {
    "OSC 52 clipboard": "\x1b]52;c;cHduZWQ=\x07",
    "OSC 8 link": "\x1b]8;;http://evil.example/x\x1b\\click\x1b]8;;\x1b\\",
    "OSC 0 title": "\x1b]0;pwned-title\x07",
    "CSI clear": "\x1b[2J",
    "CSI home": "\x1b[9;9H",
    "CSI up and erase": "\x1b[17A\x1b[2K",
    "DCS": "\x1bP1$qm\x1b\\",
    "C1 CSI": "\x9b2J",
    "C1 OSC": "\x9d0;c1-title\x9c",
    "bidi override": "\u202eevil\u202c",
}
PAYLOAD = "before " + " ".join(ATTACKS.values()) + " after"
RAW = [a.encode("utf-8") for a in ATTACKS.values()] + [
    b"\x1b]",  # any OSC at all
    b"\x1bP",
    "\x9b".encode(),
    "\x9d".encode(),
    "\u202e".encode(),
]
UNSAFE = [chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]] + [
    "\u202e",
    "\u2066",
    "\u200f",
]


def test_each_sequence_is_made_visible_or_dropped() -> None:
    for name, attack in ATTACKS.items():
        shown, line = visible(attack), flat(attack)
        assert not any(c in shown for c in UNSAFE), (name, shown)
        assert not any(c in line for c in UNSAFE), (name, line)
    assert visible("a\tb\nc\r\nd") == "a\tb\nc\nd"  # what a text keeps
    assert visible("\x1b]52;c;x\x07") == "\\x1b]52;c;x\\x07"
    assert visible("\u202e") == "\\u202e"
    assert flat("x\x1b[31mred\x1b[0m \x1b]0;t\x07y\n z") == "xred y z"
    dumped = json.dumps({"a": PAYLOAD}, ensure_ascii=False)
    escaped = json_text(dumped)
    assert not any(c in escaped for c in UNSAFE)
    assert json.loads(escaped) == {"a": PAYLOAD}


TOOL_CONFIG = """
[conductor]
max_steps = 2

[server]
auto = false

[[workers]]
name = "py"
model = "tool:python"
description = "runs Python"
"""


def _in_pty(args: list[str]) -> tuple[int, bytes]:
    """Run `python -m conductor_cli ARGS` with stdout and stderr on a real pseudo-terminal:
    its exit code and every byte the terminal received."""
    master, slave = pty.openpty()
    # Wide enough that the answer's visible escapes are not wrapped across lines.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 400, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "conductor_cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not chunk:
                    break
                received += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
    return proc.wait(timeout=30), bytes(received)


@pytest.fixture
def tool_run(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "tool.toml"
    config.write_text(TOOL_CONFIG, encoding="utf-8")
    workflow = tmp_path / "wf.json"
    program = f"import sys; sys.stdout.write({PAYLOAD!r})"
    workflow.write_text(
        json.dumps({"steps": [{"worker": "py", "task": program, "sees": []}]}), encoding="utf-8"
    )
    return config, workflow


def _assert_harmless(received: bytes) -> None:
    found = [raw for raw in RAW if raw in received]
    assert not found, found


def test_a_programs_escapes_reach_a_terminal_as_text(tool_run: tuple[Path, Path]) -> None:
    config, workflow = tool_run
    code, received = _in_pty(["run", "--config", str(config), str(workflow), "Show it."])
    assert code == 0, received.decode(errors="replace")[-2000:]
    _assert_harmless(received)
    text = received.decode("utf-8", errors="replace")
    assert "before" in text and "after" in text  # the answer was shown
    assert "\\x1b]52;c;cHduZWQ=" in text  # as visible text, not as control
    assert "\\u202e" in text

    traces = subprocess.run(
        [sys.executable, "-m", "conductor_cli", "traces", "list", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    trace_id = json.loads(traces.stdout)[0]["id"]
    code, shown = _in_pty(["traces", "show", trace_id])
    assert code == 0, shown.decode(errors="replace")[-2000:]
    _assert_harmless(shown)
    assert "\\x1b]52;c;cHduZWQ=" in shown.decode("utf-8", errors="replace")


def test_json_escapes_control_and_a_pipe_keeps_the_bytes(tool_run: tuple[Path, Path]) -> None:
    config, workflow = tool_run
    base = [sys.executable, "-m", "conductor_cli", "run", "--config", str(config)]
    as_json = subprocess.run(
        [*base, "--json", str(workflow), "Show it."], capture_output=True, check=True
    )
    assert not any(c.encode() in as_json.stdout for c in UNSAFE), as_json.stdout[-500:]
    assert PAYLOAD in json.loads(as_json.stdout)["answer"]  # the same value
    piped = subprocess.run([*base, str(workflow), "Show it."], capture_output=True, check=True)
    assert PAYLOAD.encode() in piped.stdout  # `> answer.txt` holds what the program wrote


def test_extracted_code_reaches_a_terminal_as_text(tmp_path: Path) -> None:
    """-x prints a block's bytes when piped, and on a terminal its escapes as visible text."""
    config = tmp_path / "tool.toml"
    config.write_text(TOOL_CONFIG, encoding="utf-8")
    workflow = tmp_path / "wf.json"
    block = "```python\n" + PAYLOAD + "\n```"
    program = f"import sys; sys.stdout.write({block!r})"
    workflow.write_text(
        json.dumps({"steps": [{"worker": "py", "task": program, "sees": []}]}), encoding="utf-8"
    )
    args = ["run", "-x", "--config", str(config), str(workflow), "Show it."]
    code, received = _in_pty(args)
    assert code == 0, received.decode(errors="replace")[-2000:]
    _assert_harmless(received)
    text = received.decode("utf-8", errors="replace")
    printed = text.rsplit("\x1b[?25h", 1)[-1]  # after the live tree: the code alone
    assert printed.startswith("before") and "```" not in printed
    assert "\\x1b]52;c;cHduZWQ=" in printed
    piped = subprocess.run(
        [sys.executable, "-m", "conductor_cli", *args], capture_output=True, text=True
    )
    assert piped.returncode == 0 and piped.stdout == PAYLOAD + "\n"
