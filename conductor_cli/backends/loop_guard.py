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

Lines that rotate and repeat (A B C, then B C A, C A B, ...) are no exact period: a second rule
watches whole lines. A line of MIN_LINE or more characters (outside code fences) that was
already written extends a run of repeated lines; a new line ends it; short and blank lines
are neutral. When the run holds LOOP_CHARS and every line in it has come MIN_COPIES times
(counting the first), the output is looping and is kept up to the run's start: each line
once. A chorus between verses, or a call written three times, never makes such a run.

Streaming stays consistent with what is kept: the text that currently continues an earlier
span is held back, and released once the repetition breaks off (or the generation ends).
Ordinary text matches an earlier span only by a few characters, so the hold is short; a loop
is held whole and never shown. A run of repeated lines, and a line that so far is the start of
one already written, are held the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MIN_PERIOD = 8  # characters in the repeated block; shorter ones are rules, rows, stutters
MAX_PERIOD = 512  # a longer block repeating is left to max_tokens
MIN_COPIES = 3  # the block and two more copies
LOOP_CHARS = 200  # the repeated run, first copy included
MIN_LINE = 16  # characters in a line (stripped) that the line rule counts
FENCE = "```"


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
    # The line rule: where the current line starts, the lines written so far (stripped), the
    # ones the current line may still be a copy of, whether inside a code fence, and the run
    # of repeated lines (its start, and its lines).
    _line_start: int = 0
    _seen: set[str] = field(default_factory=set)
    _candidates: list[str] = field(default_factory=list)
    _fenced: bool = False
    _run_start: int | None = None
    _run_lines: list[str] = field(default_factory=list)

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
            if self._add(ch) or self._add_to_line(ch):
                return self._release(self.looped_at or 0)
        upto = len(self.text) - int(self._runs.max(initial=0))
        if self._run_start is not None:
            upto = min(upto, self._run_start)
        elif self._candidates:
            upto = min(upto, self._line_start)
        return self._release(upto)

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

    def _add_to_line(self, ch: str) -> bool:
        """The line rule for the character just added; True when lines rotate and repeat."""
        n = len(self.text)
        if ch != "\n":
            if self._candidates:
                partial = "".join(self.text[self._line_start : n]).lstrip()
                self._candidates = [c for c in self._candidates if c.startswith(partial)]
            return False
        raw = "".join(self.text[self._line_start : n - 1])
        line = raw.strip()
        start, self._line_start = self._line_start, n
        if line.startswith(FENCE):
            self._fenced = not self._fenced
            self._run_start = None
        elif self._fenced or len(line) < MIN_LINE:
            pass  # neutral: neither extends a run nor ends one
        elif line in self._seen:
            if self._run_start is None:
                self._run_start, self._run_lines = start, []
            self._run_lines.append(line)
            chars = sum(len(x) + 1 for x in self._run_lines)
            copies = len(self._run_lines) / len(set(self._run_lines))
            if chars >= self.loop_chars and copies >= self.min_copies - 1:
                self.looped_at = self._run_start
                return True
        else:
            self._seen.add(line)
            self._run_start = None
        self._candidates = [] if self._fenced else list(self._seen)
        return False
