"""Reading answers out of model replies and scoring them: choice letters, numbers, final
answers and programs. Replies come from models of every size, so each reader expects prose,
markdown and second thoughts around the answer, and says None rather than guess wildly."""

from __future__ import annotations

import ast
import math
import re
import string
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from conductor_cli.evals.math_answers import math_number, normalize_math, score_math
from conductor_cli.problems import LETTERS, Problem, final_answer, plain_text
from conductor_cli.sandbox.fences import PYTHON_TAGS, code_blocks

RELATIVE_TOLERANCE = 1e-6

# --- choice letters ---------------------------------------------------------------------------

# A choice letter as models write it: "(B)", "[B]", a bare capital "B", or a bare small "b"
# that ends a phrase ("the answer is b."). A bare small letter inside prose ("a bit") is not one.
_TOKEN = (
    r"(?:\(\s*(?P<p>[A-Za-z])\s*\)"
    r"|\[\s*(?P<b>[A-Za-z])\s*\]"
    r"|(?P<u>[A-Z])(?![\w'-])"
    r"|(?P<l>[a-z])(?=\s*(?:$|[.,;:!?)\]])))"
)
_BEFORE = r"(?<![\w'-])"

# Statements that name the answer on purpose; among these the last one wins, since models
# often correct themselves ("... so A? No: the answer is C").
_STATEMENTS = (
    # "The answer is (B)", "Answer: C", "the correct choice is B", "final answer: option D"
    re.compile(
        r"(?i:\b(?:answer|choice|option)\b)"
        r"(?:\s*(?:[:=]|-(?=\s))|[ \t]*\n"
        r"|\s+(?i:is|would\s+be|should\s+be|must\s+be|will\s+be|seems\s+to\s+be|appears\s+to\s+be)"
        r"\b)"
        r"[\s:]*(?:(?i:therefore|thus|clearly|definitely|probably|likely|indeed|then)[\s,:]+)?"
        r"(?:(?i:option|choice|letter)\s*)?" + _TOKEN
    ),
    # "Option C is correct", "(B) is the right answer", "B is the best choice"
    re.compile(
        _BEFORE + _TOKEN + r"\s+(?i:is|would\s+be|seems\s+to\s+be)\s+(?:(?i:the)\s+)?"
        r"(?i:correct|right|best|true|answer)\b"
    ),
    # "I'd choose B", "I'll go with (C)"
    re.compile(
        r"(?i:\b(?:choose|chose|pick|picked|select|go\s+with|going\s+with|opt\s+for))\s+"
        r"(?:(?i:option|choice|answer|letter)\s+)?" + _TOKEN
    ),
    re.compile(r"\\boxed\{\s*(?:\\text\{\s*)?" + _TOKEN),
)
_LOOSE = re.compile(
    _BEFORE + r"(?:\(\s*(?P<p>[A-Za-z])\s*\)|\[\s*(?P<b>[A-Za-z])\s*\]"
    r"|(?P<u>[A-Z])(?![\w'-]))"
)
_ONLY_LETTER = re.compile(r"^\W*([A-Za-z])\W*$")
_LEADING_LETTER = re.compile(r"^\s*[(\[]?([A-Za-z])[)\].:](?:\s|$)")
_LINE_LABEL = re.compile(r"(?m)^([ \t]*)[(\[]?([A-Za-z])[)\].:](?=\s|$)")
_NEXT_WORD = re.compile(r"\s+([a-z]+)")
# Words after which a capital "A" or "I" is still a choice ("A is correct", "A, because");
# after any other small word it is the article or the pronoun ("A capital city", "I think").
_LETTER_FOLLOWERS = frozenset(
    {
        *("is", "was", "would", "seems", "should", "must", "because", "since", "as", "and"),
        *("or", "but", "which", "so", "than", "then", "too", "instead", "rather", "here"),
    }
)


def extract_choice(text: str, choices: Sequence[str]) -> str | None:
    """The letter ("A".."Z") of the choice a reply picks, or None when it picks none clearly.

    In order: the last explicit statement ("the answer is B", "Option C is correct"); a reply
    that is only a letter; a reply that starts with "B) ..."; the last stray capital letter;
    a reply that restates exactly one choice's text. Letters past the last choice are ignored.
    """
    n = min(len(choices), len(LETTERS))
    clean = plain_text(text)
    found: list[tuple[int, str]] = []
    for pattern in _STATEMENTS:
        for m in pattern.finditer(clean):
            letter = _letter(m, clean, n)
            if letter is not None:
                found.append((_letter_pos(m), letter))
    if found:
        return max(found)[1]
    m = _ONLY_LETTER.match(clean)
    if m and (letter := _in_range(m.group(1), n)):
        return letter
    labels = {m.group(2).upper() for m in _LINE_LABEL.finditer(clean)}
    if len(labels) > 1:
        # A reply that lists the options back ("A) ...\nB) ...") has chosen none of them.
        clean = _LINE_LABEL.sub(r"\1", clean)
    else:
        m = _LEADING_LETTER.match(clean)
        if m and (letter := _in_range(m.group(1), n)):
            return letter
    loose = [x for m in _LOOSE.finditer(clean) if (x := _letter(m, clean, n))]
    if loose:
        return loose[-1]
    return _restated_choice(clean, choices[:n])


def _letter(m: re.Match[str], text: str, n: int) -> str | None:
    groups = m.groupdict()
    upper = groups.get("u")
    if upper in ("A", "I"):
        after = _NEXT_WORD.match(text, m.end("u"))
        if after and after.group(1) not in _LETTER_FOLLOWERS:
            return None
    raw = upper or groups.get("p") or groups.get("b") or groups.get("l")
    return _in_range(raw, n) if raw else None


def _letter_pos(m: re.Match[str]) -> int:
    for name in ("u", "p", "b", "l"):
        if m.groupdict().get(name):
            return m.start(name)
    return m.start()


def _in_range(letter: str, n: int) -> str | None:
    index = LETTERS.find(letter.upper())
    return LETTERS[index] if 0 <= index < n else None


def _restated_choice(text: str, choices: Sequence[str]) -> str | None:
    reply = normalize_text(text)
    hits: list[tuple[int, str]] = []
    for i, choice in enumerate(choices):
        needle = normalize_text(choice)
        if needle and _contains(reply, needle):
            hits.append((i, needle))
    # "Paris, Texas" also restates "Paris"; the longer choice is the one meant.
    kept = [i for i, s in hits if not any(s != t and s in t for _, t in hits)]
    return LETTERS[kept[0]] if len(kept) == 1 else None


# --- numbers ----------------------------------------------------------------------------------

_NUMBER = (
    r"(?<![\w.])(?P<neg>-)?(?:\$\s?)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s*/\s*(?P<den>\d+(?:\.\d+)?))?(?!\d)"
)
_NUMBER_RE = re.compile(_NUMBER)
# "Answer: 42" names the number; "Answer: 2 + 3 = 5" starts a sum, whose last number counts.
_ANSWER_NUMBER = re.compile(
    r"(?i:\b(?:answer|result)\b)\s*(?:(?i:is|would\s+be|will\s+be|should\s+be)\b|[:=])?"
    r"[\s:=~≈]*(?:(?i:approximately|about|roughly|exactly|therefore|thus)\s+)?"
    + _NUMBER
    + r"(?!\s*(?:[-+*=^\u00d7\u00f7]|x\s*\d))"
)
_TEX_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?[\d.,]+)\s*\}\s*\{\s*([\d.,]+)\s*\}")
_BOXED = "\\boxed{"


def extract_number(text: str) -> float | None:
    """The number a reply ends on: after a GSM8K-style "####", else inside the last
    \\boxed{}, else right after the last "answer is"/"Answer:", else the last number.
    Reads "1,234", "-3.5", "$12", "12%", "3/4" and \\frac{3}{4}."""
    clean = _TEX_FRAC.sub(r"\1/\2", plain_text(text).replace("{,}", ","))
    if "####" in clean:
        after = _numbers(clean.rsplit("####", 1)[1])
        if after:
            return after[0]
    boxed = _last_boxed(clean)
    if boxed is not None and (inside := _numbers(boxed)):
        return inside[-1]
    stated = [v for m in _ANSWER_NUMBER.finditer(clean) if (v := _value(m)) is not None]
    if stated:
        return stated[-1]
    numbers = _numbers(clean)
    return numbers[-1] if numbers else None


def _numbers(text: str) -> list[float]:
    return [v for m in _NUMBER_RE.finditer(text) if (v := _value(m)) is not None]


def _value(m: re.Match[str]) -> float | None:
    value = float(m.group("num").replace(",", ""))
    if m.group("den") is not None:
        den = float(m.group("den"))
        if den == 0:
            return None
        value /= den
    return -value if m.group("neg") else value


def _last_boxed(text: str) -> str | None:
    start = text.rfind(_BOXED)
    if start < 0:
        return None
    depth, i = 1, start + len(_BOXED)
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return text[i:]


def canonical_number(value: float) -> str:
    """One spelling per number, so 0.75 and 3/4 (or 12 and 12.0) vote together."""
    rounded = float(f"{value:.9g}")
    if rounded == 0:
        return "0"
    if rounded.is_integer() and abs(rounded) < 1e15:
        return str(int(rounded))
    return repr(rounded)


# --- free-text answers --------------------------------------------------------------------------

_TRAILING = ".!?,;:"
_QUOTES = "\"'"


def normalize_text(text: str) -> str:
    """Case, spacing, markdown, quotes and trailing punctuation do not make answers differ."""
    s = " ".join(plain_text(text).lower().split())
    previous = None
    while s != previous:
        previous = s
        s = s.strip().strip(_QUOTES).rstrip(_TRAILING)
    return s


def _contains(haystack: str, needle: str) -> bool:
    # A reference "4" is not found in "14", nor "cat" in "category".
    left = r"(?<!\w)" if re.match(r"\w", needle[0]) else ""
    right = r"(?!\w)" if re.match(r"\w", needle[-1]) else ""
    return re.search(left + re.escape(needle) + right, haystack) is not None


_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normal(text: str) -> str:
    """SQuAD's answer normalization (NQ-open and TriviaQA score with it): lower case, no
    punctuation, no articles, single spaces."""
    text = "".join(c for c in text.lower() if c not in string.punctuation)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _alias(reply: str, reference: str, aliases: Sequence[str]) -> tuple[bool, str]:
    extracted = final_answer(reply)
    wanted = {squad_normal(a) for a in (*aliases, reference)} - {""}
    return squad_normal(extracted) in wanted, extracted


def _numeric(reply: str, reference: str, aliases: Sequence[str]) -> tuple[bool, str]:
    got = extract_number(reply)
    want = extract_number(reference)
    if got is None:
        return False, ""
    ok = want is not None and math.isclose(got, want, rel_tol=RELATIVE_TOLERANCE)
    return ok, canonical_number(got)


def _exact(reply: str, reference: str, aliases: Sequence[str]) -> tuple[bool, str]:
    extracted = final_answer(reply)
    return normalize_text(extracted) == normalize_text(reference), extracted


def _contains_reference(reply: str, reference: str, aliases: Sequence[str]) -> tuple[bool, str]:
    needle = normalize_text(reference)
    ok = bool(needle) and _contains(normalize_text(reply), needle)
    return ok, final_answer(reply)


def _answered(reply: str, reference: str, aliases: Sequence[str]) -> tuple[bool, str]:
    from conductor_cli.tools.python_tool import is_failure

    return bool(reply.strip()) and not is_failure(reply), final_answer(reply)


def _number_key(extracted: str) -> str:
    value = extract_number(extracted)
    return "" if value is None else canonical_number(value)


def _math_key(extracted: str) -> str:
    normal = normalize_math(extracted)
    value = math_number(normal)
    return normal if value is None else canonical_number(value)


@dataclass(frozen=True)
class QaScorer:
    """One way to score a free answer: everything about it in one entry."""

    name: str
    about: str  # one line for the CLI's help and the docs
    score: Callable[[str, str, Sequence[str]], tuple[bool, str]]  # (reply, reference, aliases)
    vote_key: Callable[[str], str] = normalize_text  # what majority voting compares


QA_SCORERS: dict[str, QaScorer] = {
    s.name: s
    for s in (
        QaScorer("exact", "the final answer equals the reference up to case, spacing and "
                 "trailing punctuation", _exact),
        QaScorer("numeric", "the number in the reply equals the reference's", _numeric,
                 _number_key),
        QaScorer("contains", "the reference appears, as whole words, anywhere in the reply",
                 _contains_reference),
        QaScorer("answered", "an open request: any answer that is not a tool's failure report",
                 _answered),
        QaScorer("alias", "the final answer equals the reference or any of its aliases after "
                 "SQuAD's normalization (NQ-open, TriviaQA)", _alias, squad_normal),
        QaScorer("math", "the final answer (the last \\boxed{}, else the Answer: line) equals "
                 "the reference after Minerva's normalization, or is the same number (MATH)",
                 score_math, _math_key),
    )
}  # fmt: skip


def score_qa(
    reply: str, reference: str, scorer: str, aliases: Sequence[str] = ()
) -> tuple[bool, str]:
    """(correct, extracted) for a free-answer question, by the scorer of that name
    (QA_SCORERS)."""
    entry = QA_SCORERS.get(scorer)
    if entry is None:
        raise ValueError(f"unknown QA scorer {scorer!r}; expected one of {', '.join(QA_SCORERS)}")
    return entry.score(reply, reference, aliases)


def score_choice(reply: str, problem: Problem) -> tuple[bool, str]:
    """(correct, letter) for a multiple-choice problem; the letter is "" when none was found."""
    letter = extract_choice(reply, problem.choices)
    return letter == problem.answer, letter or ""


# --- code -------------------------------------------------------------------------------------

_IMPORT_LINE = re.compile(r"^(?:from\s+\S+\s+)?import\s.+$", re.M)


def extract_code(reply: str, problem: Problem) -> str:
    """The program to test for a code problem (without the tests).

    The code is the first ```python block (else the first bare ``` block, else the whole
    reply). Code that does not define the entry point is a function body and is put under
    the prompt; code that does gets what it uses from the prompt but lacks (imports, helper
    functions such as HumanEval/10's is_palindrome).
    """
    defines = re.compile(
        rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(problem.entry_point)}\s*\(", re.M
    )
    code = _fenced_code(reply.replace("\r\n", "\n"), defines)
    if not problem.prompt:
        # Nothing to complete (MBPP shows a task, not a signature): the code as written, even
        # where it names its function otherwise than the tests (their NameError says so).
        return textwrap.dedent(code).strip("\n") + "\n"
    if problem.entry_point and defines.search(code):
        code = textwrap.dedent(code).strip("\n") + "\n"
        context = _missing_context(problem.prompt, code, problem.entry_point)
        return "\n\n\n".join([*context, code]) if context else code
    return _complete_body(code, problem.prompt)


def _fenced_code(reply: str, defines: re.Pattern[str]) -> str:
    """The first block that defines the function (Python-tagged blocks first, then bare
    ones), else the code between fences that do not pair up, else the first Python block,
    else the first bare one, else the whole reply. A reply to a question with a file attached
    may echo the message's layout ("```python\nAttached stdin:\n```" then the code, closed by
    a stray fence: Qwen2.5-Coder-1.5B on humaneval-fix), and that block is no one's answer."""
    blocks = code_blocks(reply)
    kinds = (lambda tag: tag in PYTHON_TAGS, lambda tag: tag == "")
    for wanted in kinds:
        for tag, body in blocks:
            if wanted(tag) and defines.search(body):
                return body
    if blocks and (unfenced := _unfenced_code(reply, defines)) is not None:
        return unfenced
    for wanted in kinds:
        for tag, body in blocks:
            if wanted(tag):
                return body
    return reply


_CODE_START = re.compile(r"^(?:from |import |def |async def |class |@)")


def _unfenced_code(reply: str, defines: re.Pattern[str]) -> str | None:
    """The code of a reply whose fences do not pair up around it (the echoed layout above:
    the code sits between one block's end and a stray fence): the fence lines dropped, from
    the first top-level line of code on, where that compiles and defines the function."""
    lines = [line for line in reply.split("\n") if not line.strip().startswith("```")]
    starts = [i for i, line in enumerate(lines) if _CODE_START.match(line)]
    for start in starts:
        code = "\n".join(lines[start:]).strip("\n") + "\n"
        if defines.search(code) and _compiles(code):
            return code
    return None


def _complete_body(body: str, prompt: str) -> str:
    head = prompt if prompt.endswith("\n") or not prompt else prompt + "\n"
    lines = body.strip("\n").rstrip().split("\n")
    if lines == [""]:
        return head + "    pass\n"
    text = "\n".join(lines) + "\n"
    indented = head + textwrap.indent(textwrap.dedent(text), "    ")
    # A model that drops the indentation of the first line only ("for x in y:\n        ...")
    # needs that line alone indented.
    first_fixed = head + "    " + text
    candidates = [head + text, indented] if lines[0][:1] in (" ", "\t") else [indented]
    candidates.append(first_fixed)
    for candidate in candidates:
        if _compiles(candidate):
            return candidate
    return candidates[0]


def _compiles(source: str) -> bool:
    try:
        compile(source, "<candidate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError):
        return False
    return True


def _missing_context(prompt: str, code: str, entry_point: str) -> list[str]:
    """The prompt's imports and other top-level definitions that `code` lacks, in order."""
    try:
        prompt_tree = ast.parse(prompt)
        code_tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        present = {line.strip() for line in code.splitlines()}
        return [
            m.group(0) for m in _IMPORT_LINE.finditer(prompt) if m.group(0).strip() not in present
        ]
    bound: set[str] = set()
    for node in ast.walk(code_tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
    lines = prompt.splitlines()
    context: list[str] = []
    for node in prompt_tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = {(a.asname or a.name).split(".")[0] for a in node.names}
            if not names <= bound:
                context.append(ast.get_source_segment(prompt, node) or ast.unparse(node))
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name != entry_point
            and node.name not in bound
        ):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            context.append("\n".join(lines[first - 1 : node.end_lineno]))
    return context


def program_for(code: str, problem: Problem) -> str:
    """The program a sandbox runs: the code, the problem's tests, and the call to them."""
    return code + "\n\n" + problem.test + f"\n\ncheck({problem.entry_point})\n"


# --- voting -----------------------------------------------------------------------------------


def code_key(code: str) -> str:
    """Code as votes compare it: what it means, not its comments or spacing."""
    try:
        # Unparsing drops comments, blank lines and spacing but keeps the meaning.
        return ast.unparse(ast.parse(textwrap.dedent(code)))
    except (SyntaxError, ValueError, RecursionError):
        kept = []
        for line in code.splitlines():
            line = re.sub(r"#.*$", "", line).rstrip()
            if line.strip():
                indent = len(line) - len(line.lstrip())
                kept.append(" " * indent + " ".join(line.split()))
        return "\n".join(kept)
