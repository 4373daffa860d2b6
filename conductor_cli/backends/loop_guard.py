"""Stops a generation that has started repeating itself, keeping one copy of what repeated.

Small local models fall into loops: a sentence, or a block of lines, again and again until
max_tokens. The guard watches the text as it is generated. For every lag p up to MAX_PERIOD
characters it knows how long the text's end has equalled the text p characters earlier (one
counter per lag, updated per character). When that run spans at least MIN_COPIES copies of a
block of MIN_PERIOD or more characters and LOOP_CHARS in all, the output is looping: the
generation stops and the text is kept up to the end of the block's first copy.

What repeats legitimately is left alone: a rule of dashes or a row of zeros has a period under
MIN_PERIOD; a few identical lines of code, or list items that share their start, stay far
under LOOP_CHARS (a 20-character line would need ten copies in a row).

Streaming stays consistent with what is kept: the text that currently continues an earlier
span is held back, and released once the repetition breaks off (or the generation ends).
Ordinary text matches an earlier span only by a few characters, so the hold is short; a loop
is held whole and never shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MIN_PERIOD = 8  # characters in the repeated block; shorter ones are rules, rows, stutters
MAX_PERIOD = 512  # a longer block repeating is left to max_tokens
MIN_COPIES = 3  # the block and two more copies
LOOP_CHARS = 200  # the repeated run, first copy included


@dataclass
class LoopGuard:
    """Feed it the generated text piece by piece; it says what may be shown and when to stop."""

    min_period: int = MIN_PERIOD
    max_period: int = MAX_PERIOD
    min_copies: int = MIN_COPIES
    loop_chars: int = LOOP_CHARS
    text: list[str] = field(default_factory=list)  # every character generated
    released: int = 0  # characters handed on so far
    looped_at: int | None = None  # the kept length, once a loop was found
    # numpy arrays, made on first use (numpy's import stays off the CLI's start-up path):
    # each character's code point, and per lag 1..max_period the current run's length.
    _codes: Any = None
    _runs: Any = None
    _lags: Any = None

    def __post_init__(self) -> None:
        import numpy as np

        self._codes = np.zeros(1024, dtype=np.int64)
        self._lags = np.arange(1, self.max_period + 1)
        self._runs = np.zeros(self.max_period, dtype=np.int64)

    @property
    def looped(self) -> bool:
        return self.looped_at is not None

    @property
    def kept(self) -> str:
        """The output to keep: everything, or up to the first copy of the loop."""
        end = len(self.text) if self.looped_at is None else self.looped_at
        return "".join(self.text[:end])

    @property
    def generated(self) -> str:
        return "".join(self.text)

    def feed(self, piece: str) -> str:
        """Take the next piece; return the text that may be shown now. After a loop is found,
        returns the rest of what is kept and ignores further pieces."""
        if self.looped_at is not None:
            return ""
        for ch in piece:
            if self._add(ch):
                return self._release(self.looped_at or 0)
        return self._release(len(self.text) - int(self._runs.max(initial=0)))

    def finish(self) -> str:
        """The generation ended: whatever was held back and is kept."""
        return self._release(len(self.kept))

    def _release(self, upto: int) -> str:
        if upto <= self.released:
            return ""
        out = "".join(self.text[self.released : upto])
        self.released = upto
        return out

    def _add(self, ch: str) -> bool:
        """Append one character and update every lag's run; True when the text now loops."""
        n = len(self.text)
        self.text.append(ch)
        if n >= len(self._codes):
            self._codes.resize(2 * len(self._codes), refcheck=False)
        code = ord(ch)
        self._codes[n] = code
        runs = self._runs
        valid = min(n, self.max_period)  # lags that reach back into the text
        if valid == 0:
            return False
        same = self._codes[n - self._lags[:valid]] == code
        runs[:valid] = (runs[:valid] + 1) * same
        # A loop: a run at lag p covering min_copies copies of a block that is not itself
        # made of a shorter unit (whose own run would be at least as long as the block).
        short = int(runs[: self.min_period - 1].max(initial=0))
        lags = self._lags[:valid]
        found = (
            (lags >= self.min_period)
            & (runs[:valid] >= lags * (self.min_copies - 1))
            & (runs[:valid] + lags >= self.loop_chars)
            & (short < lags)
        )
        if not found.any():
            return False
        p = int(found.argmax())  # the shortest such lag: the loop's own block
        self.looped_at = n + 1 - int(runs[p])
        return True
