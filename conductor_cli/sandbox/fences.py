"""The fenced code blocks of a model's reply: what eval's code scorer and the python tool run.

One reading of a fence for both: a block opens with ``` and an optional tag (```python, ```py,
a bare ```) and ends at the next ``` or at the end of the reply (a reply cut at max_tokens
leaves its last block open; what it holds is still the model's program). Which block counts
differs: the scorer takes a reply's function (evals/answers.extract_code), the tool the last
program (python_blocks).
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})


def code_blocks(reply: str) -> list[tuple[str, str]]:
    """(lower-cased tag, body) of each block, in order; '' is a bare block's tag."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(reply)]


def python_blocks(reply: str) -> list[str]:
    """The bodies of the blocks tagged as Python, in order, empty ones left out; the bare
    blocks only when none is tagged. Coder models show what their program prints in a bare
    block after it ("When you run this program, it will output: ```28800```"): measured with
    Qwen2.5-Coder-0.5B on "How many seconds are in 8 hours?", that bare block was the last one,
    so it ran, and printed nothing (bench/prove_team.py: unit questions 2 of 10 right)."""
    blocks = [(tag, body) for tag, body in code_blocks(reply) if body.strip()]
    tagged = [body for tag, body in blocks if tag in PYTHON_TAGS]
    return tagged or [body for tag, body in blocks if not tag]


def only_python_blocks(reply: str) -> str:
    """The reply with every block not tagged Python taken out, prose kept: what a coder model
    says its program prints (a bare block after it) is a guess, and wrong as often as not."""
    if not any(tag in PYTHON_TAGS and body.strip() for tag, body in code_blocks(reply)):
        return reply  # python_blocks then runs a bare block: it is the program, not a guess
    kept = _FENCE.sub(lambda m: m.group(0) if m.group(1).lower() in PYTHON_TAGS else "", reply)
    return re.sub(r"\n{3,}", "\n\n", kept).strip()
