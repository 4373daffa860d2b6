"""What the user gives besides the question: piped stdin and --file attachments."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from conductor_cli.errors import InputError

_SNIFF = 8192


@dataclass(frozen=True)
class Attachment:
    name: str  # "stdin" or the path as given
    text: str

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8"))


def _decode(data: bytes, name: str) -> str:
    if b"\x00" in data[:_SNIFF]:
        raise InputError(f"{name}: looks like binary data (it holds NUL bytes); give text.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{name}: is not UTF-8 text (bad byte at offset {e.start}); convert it first, "
            "e.g. `iconv -f latin1 -t utf-8`."
        ) from None


def read_stdin(stream: BinaryIO) -> Attachment | None:
    """Piped input as an attachment; None when the pipe is empty or only whitespace."""
    data = stream.read()
    if not data.strip():
        return None
    return Attachment(name="stdin", text=_decode(data, "stdin"))


def read_file(path: Path) -> Attachment:
    if not path.exists():
        raise InputError(f"--file {path}: no such file.")
    if path.is_dir():
        raise InputError(f"--file {path}: is a directory; attach files one by one.")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"--file {path}: cannot read it: {e.strerror}.") from None
    return Attachment(name=str(path), text=_decode(data, f"--file {path}"))


# Characters per token assumed when cutting attachments: English averages ~4 with today's
# tokenizers, code and other languages fewer; 3 leaves room.
CHARS_PER_TOKEN = 3
# Tokens kept free for the worker's instructions, the question and its own answer's slack.
PROMPT_RESERVE_TOKENS = 1024


def attachment_budget(context_tokens: int, max_tokens: int, other_chars: int) -> int:
    """Characters of attachments a worker can read beside `other_chars` of prompt text."""
    room = (context_tokens - max_tokens - PROMPT_RESERVE_TOKENS) * CHARS_PER_TOKEN
    return max(room - other_chars, 0)


def fit_attachments(
    attachments: tuple[Attachment, ...] | list[Attachment], budget_chars: int
) -> tuple[list[Attachment], int]:
    """The attachments cut, in order, to `budget_chars` in all, and how many characters were
    cut. A cut attachment says so at the cut: a model must not take a part for the whole."""
    total = sum(len(a.text) for a in attachments)
    if total <= budget_chars:
        return list(attachments), 0
    kept: list[Attachment] = []
    left = budget_chars
    for a in attachments:
        if len(a.text) <= left:
            kept.append(a)
            left -= len(a.text)
            continue
        cut = len(a.text) - left
        note = (
            f"\n[... conductor cut the remaining {cut:,} of {len(a.text):,} characters of "
            f"{a.name} here, to fit this model's context ...]"
        )
        kept.append(Attachment(a.name, a.text[:left] + note))
        left = 0
    return kept, total - budget_chars
