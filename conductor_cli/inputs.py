"""What the user gives besides the question: piped stdin and --file attachments."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import InputError

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
