"""The fenced code blocks of a model's reply: what eval's code scorer and the python tool run.

One reading of a fence for both: a block opens with ``` and an optional tag (```python, ```py,
a bare ```) and ends at the next ``` that begins or ends a line, or at the end of the reply (a
reply cut at max_tokens leaves its last block open; what it holds is still the model's
program). Which block counts differs: the scorer takes a reply's function
(evals/answers.extract_code), the tool the last program (python_blocks).
"""

from __future__ import annotations

import ast
import re

# A block ends at ``` that begins or ends a line (CommonMark's closing fence, and a closer
# written straight after the code), not at ``` inside a line: a 1.5B coder copied the words
# "in one ```python block" into a comment at its program's top, and the block ended there
# (the program run was that comment; it printed nothing).
_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:^[ \t]*```|```[ \t]*$|\Z)", re.S | re.M)
PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})


def code_blocks(reply: str) -> list[tuple[str, str]]:
    """(lower-cased tag, body) of each block, in order; '' is a bare block's tag."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(reply)]


def python_blocks(reply: str) -> list[str]:
    """The bodies of the blocks tagged as Python, in order, empty ones and shown output left
    out; the bare blocks only when none is tagged. Coder models show what their program prints
    in a block after it ("When you run this program, it will output: ```28800```"): measured
    with Qwen2.5-Coder-0.5B on "How many seconds are in 8 hours?", that bare block was the last
    one, so it ran, and printed nothing (bench/prove_team.py: unit questions 2 of 10 right).
    Qwen2.5-Coder-1.5B tags that block as Python too ("```python\nAnswer: 17\n```", a valid
    annotation): on "how many digits does 6^35 have" it ran instead of the program above it,
    printed nothing, and the check answered the writer's guess (bench/data/typed_letters_d)."""
    blocks = [(tag, body) for tag, body in code_blocks(reply) if body.strip()]
    tagged = [body for tag, body in blocks if tag in PYTHON_TAGS]
    return _programs(tagged or [body for tag, body in blocks if not tag])


def program_end(text: str) -> int | None:
    """Where the first closed block tagged Python that is a program printing something ends
    in `text` (just after its closing ```), or None: for a step whose program the python
    tool runs, what a writer adds after that block is its guess of what the program prints
    ("When you run this program, it will output: ```Answer: 3```", 20 tokens on most typed
    letter questions), which no step reads (only_python_blocks), so generation may stop
    there (backends/llamacpp.py, Request.stop_after_program). `text` may be cut anywhere: a
    ``` inside a line closes a block only once the line has ended (`print("```")` does
    not). A block that only defines functions, or only shows output, does not end it: a
    later block may call them."""
    for m in _FENCE.finditer(text):
        body = m.group(2)
        closer = m.start(2) + len(body)
        at_line_start = closer == 0 or text[closer - 1] == "\n"
        closed = m.end() > closer and (at_line_start or m.end() < len(text))
        if not closed:
            return None  # the block is still being written
        if m.group(1).lower() in PYTHON_TAGS and _prints(body) and not shows_output(body):
            return m.end()
    return None


_PRINTS = re.compile(r"\bprint\s*\(|\bsys\.stdout\.write\s*\(")


def _prints(body: str) -> bool:
    """Whether a block prints when run: it writes with print (or sys.stdout) and calls
    something outside its definitions (a block of `def`s alone prints nothing)."""
    if not _PRINTS.search(body):
        return False
    try:
        tree = ast.parse(body)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return True  # what the tool runs, if nothing comes after it; it will say the error
    top = [
        s
        for s in tree.body
        if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    return any(isinstance(n, ast.Call) for s in top for n in ast.walk(s))


def _programs(bodies: list[str]) -> list[str]:
    """`bodies` less those that only show output, unless nothing else is left."""
    programs = [body for body in bodies if not shows_output(body)]
    return programs or bodies


def shows_output(body: str) -> bool:
    """Whether a block is what a program prints, not a program: it parses as Python and does
    nothing (`Answer: 17` annotates, `28800` or `['a', 'b']` is a value no one prints)."""
    try:
        tree = ast.parse(body)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return bool(tree.body) and all(_does_nothing(statement) for statement in tree.body)


def _does_nothing(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.AnnAssign):
        return statement.value is None and isinstance(statement.target, ast.Name)
    if isinstance(statement, ast.Expr):
        return not any(isinstance(n, ast.Call | ast.Await) for n in ast.walk(statement.value))
    return False


# A sentence in which the writer says what its program prints: "When you run this program,
# it will output `2`", "The output will be: 28800", "This program prints 5." A guess, and the run
# that a step also sees says what it really printed (the README's strawberry question: the
# run printed 3, the check answered the writer's 2).
_GUESS = re.compile(
    r"\b(will|would|should|is going to|then)\s+(output|print|return|display|show|produce)s?\b"
    r"|\b(output|result)\s+(is|will be|would be|should be)\b"
    r"|\b(outputs?|prints?|returns?)\s*[:`]"
    r"|\bthis (program|code|script)\s+(outputs|prints|returns)\b",
    re.I,
)
_SENTENCE_END = re.compile(r"((?<=[.!?])[ \t]+|\n)")


def _without_guesses(prose: str) -> str:
    """`prose` less its sentences (or lines) that say what the program prints."""
    pieces = _SENTENCE_END.split(prose)  # sentence, separator, sentence, ...
    pairs = zip(pieces[::2], [*pieces[1::2], ""], strict=True)
    return "".join(text + end for text, end in pairs if not _GUESS.search(text))


def only_python_blocks(reply: str) -> str:
    """The reply with every block not tagged Python taken out (and every one that only shows
    output, shows_output), and every sentence of prose that says what the program prints: a
    guess (a block after it, "it will output `2`"), wrong as often as not. The rest of the
    prose stays (a question of fact answered there, beside a program that prints nothing of
    use)."""
    tagged = [body for tag, body in code_blocks(reply) if tag in PYTHON_TAGS and body.strip()]
    if not tagged:
        return reply  # python_blocks then runs a bare block: it is the program, not a guess
    kept = set(_programs(tagged))
    parts, last = [], 0
    for m in _FENCE.finditer(reply):
        parts.append(_without_guesses(reply[last : m.start()]))
        parts.append(m.group(0) if m.group(1).lower() in PYTHON_TAGS and m.group(2) in kept else "")
        last = m.end()
    parts.append(_without_guesses(reply[last:]))
    return re.sub(r"\n{3,}", "\n\n", "".join(parts)).strip()
