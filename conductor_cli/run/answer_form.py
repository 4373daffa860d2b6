"""The run's answer in the form its question writes things (issue 68: "words, not a Python
list"). A program the python tool ran prints what Python prints: `['cello', 'drum', 'flute']`
for "sort these alphabetically: violin drum flute cello", and a check step that trusts it
repeats it ("Answer: ['cello', ...]"). Where a line of the answer (or what follows its short
label, "Answer:") is one list or tuple of plain items, the items are that line, separated as
the question separates them: by commas where it writes one after an item, else by spaces.
A question that asks for Python, JSON, an array or a list literal keeps the literal, and code
blocks are left as written.

This shapes the run's answer only: a step's output (the trace, what later steps and rounds
read) stays what the worker said, and no worker's fingerprint or cache key changes."""

from __future__ import annotations

import ast
import re

# A short label before the list ("Answer: ", "Sorted: "), kept as written.
_LABEL = re.compile(r"^(\s*(?:[^\[\](){}'\"`:\n]{1,40}:\s*)?)(.*?)\s*$")
_WANTS_LITERAL = re.compile(r"\b(python|json|array|literal|tuple|code)\b|\[", re.I)
_PLAIN = (str, int, float)


def as_asked(question: str, answer: str) -> str:
    """`answer` with each line that is one printed list (after an optional short label, and
    outside ``` fences) written as its items; the rest as it was."""
    if not shapes(question):
        return answer
    lines = answer.split("\n")
    fenced = False
    for n, line in enumerate(lines):
        if opens_fence(line):
            fenced = not fenced
        elif not fenced:
            lines[n] = shape_line(question, line)
    return "\n".join(lines)


def shapes(question: str) -> bool:
    """Whether answers to `question` are shaped at all (one that asks for Python, JSON, an
    array or a literal keeps what was printed)."""
    return _WANTS_LITERAL.search(question) is None


def opens_fence(line: str) -> bool:
    """Whether `line` opens or closes a ``` fence (the lines between are left as written)."""
    return line.lstrip().startswith("```")


def shape_line(question: str, line: str) -> str:
    """One line outside a fence, as as_asked writes it: a printed list after an optional
    short label becomes its items; any other line as it was."""
    m = _LABEL.match(line)
    if m is None or (items := _items(m.group(2))) is None:
        return line
    joiner = ", " if _commas_after(question, items) else " "
    return m.group(1) + joiner.join(items)


def may_shape(line: str) -> bool:
    """Whether a line of which `line` is the beginning could still be one that shape_line
    rewrites: it is blank, or a short label so far, or a list began right after one. A line
    that cannot may be shown as it comes (run/answer_stream.py)."""
    # Leading whitespace never counts toward a label (_LABEL's \s* takes it all first);
    # stripped, neither pattern backtracks over it.
    rest = line.lstrip()
    return _STARTED_LIST.fullmatch(rest) is not None or _MAY_BE_LABEL.fullmatch(rest) is not None


# The beginnings of a line that shape_line might rewrite, as _LABEL reads a whole line, its
# leading whitespace stripped.
_LABEL_CHARS = r"[^\[\](){}'\"`:\n]"
_STARTED_LIST = re.compile(rf"(?:{_LABEL_CHARS}{{1,40}}:\s*)?[\[(].*", re.S)
_MAY_BE_LABEL = re.compile(rf"{_LABEL_CHARS}{{0,40}}(?::\s*)?")


def _items(text: str) -> list[str] | None:
    """The items of one printed list or tuple of plain values (no bools, nothing nested)."""
    if not text.startswith(("[", "(")) or len(text) > 10_000:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, list | tuple) or not value:
        return None
    if not all(isinstance(v, _PLAIN) and not isinstance(v, bool) for v in value):
        return None
    return [str(v) for v in value]


def _commas_after(question: str, items: list[str]) -> bool:
    return any(re.search(rf"(?<!\w){re.escape(item)}\s*,", question) for item in items)
