"""Model output is text, never terminal control.

A model's answer, a program's output and a piped file's contents are written by whoever
wrote the question's inputs (a prompt injection is enough): an escape sequence in them would
write the clipboard (OSC 52), set links or the window title (OSC 8, OSC 0), clear or redraw
the screen under the tree (CSI), or reorder what the user reads (bidi overrides). Before any
of it reaches a terminal: `visible()` writes every control character but newline and tab as
its escape (`\\x1b`, `\\x9b`, `\\u202e`), `flat()` drops whole escape sequences and makes the
rest visible on one line (the tree), and `json_text()` escapes what JSON leaves raw (C1,
DEL, bidi) so that `--json` is the same value with nothing a terminal acts on.

What stays raw: an answer written to a pipe or file (`conductor ask ... > answer.md`), where
the bytes the model wrote are what the user asked for (cli/output.print_answer).
"""

from __future__ import annotations

import re

# C0 but tab and newline, DEL, C1, and the characters that reorder text (bidi embeddings,
# overrides and isolates, and the marks that steer them).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Whole escape sequences, 7-bit and C1 forms: CSI; OSC, DCS, SOS, PM and APC strings up to
# their terminator (or the end of the text); any other ESC sequence.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)"
    r"|\x1b[ -/]*[0-~]",
    re.DOTALL,
)
_SPACE = re.compile(r"\s+")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control character but newline and tab written as its escape
    (Windows line ends become plain newlines first)."""
    return _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


def flat(text: str) -> str:
    """One line: escape sequences dropped, what is left of control made visible, every run
    of whitespace one space."""
    return _SPACE.sub(" ", visible(_SEQUENCE.sub("", text))).strip()


def json_text(dumped: str) -> str:
    """JSON text (from json.dumps(..., ensure_ascii=False)) with DEL, C1 and bidi characters
    as \\u escapes: the same value. They can stand only inside strings, where the escape
    means the character itself."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
