"""Which tokens of a conductor's reply are routing decisions: the worker of each step, what a
later step sees, and whether another step follows. The LoRA methods put their loss there only:
measured here, the ~60 free-text task tokens of a workflow drown the 1-3 tokens that choose a
worker, and their advantage is noise (PITFALLS, Learning)."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Over the reply's UTF-8 bytes, as the grammar writes it: {"steps": [{"worker": "w0", ...}]}
_WORKER = re.compile(rb'"worker": ("[^"]*")')
_SEES = re.compile(rb'"sees": (\[[^\]]*\])')
_NEXT = re.compile(rb"\}(, |\])")  # after a step: another step, or the end


def routing_spans(reply: bytes) -> list[tuple[int, int]]:
    """Byte spans of the decisions; the first step's `sees` is always [] and is left out."""
    spans = [m.span(1) for m in _WORKER.finditer(reply)]
    spans += [m.span(1) for m in list(_SEES.finditer(reply))[1:]]
    spans += [m.span(1) for m in _NEXT.finditer(reply)]
    return sorted(spans)


def routing_mask(pieces: Sequence[bytes], reply: bytes) -> list[bool]:
    """For each token (its bytes, in order), whether it overlaps a decision."""
    spans = routing_spans(reply)
    mask = []
    start = 0
    for piece in pieces:
        end = start + len(piece)
        mask.append(any(s < end and start < e for s, e in spans))
        start = end
    return mask
