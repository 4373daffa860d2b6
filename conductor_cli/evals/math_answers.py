"""MATH's scoring, as Minerva scores it (Lewkowycz et al. 2022, appendix): the final answer
read out of a reply (its last \\boxed{}, else its "Answer:" line) and the reference, both
normalized alike, are equal; two numbers equal in value count as equal.

Minerva's code normalizes by plain substring edits, and some of them damage answers: removing
the unit "ft" turns "\\left(" into "\\le(" and "\\infty" into "\\iny", and dropping the commas
of anything that is then all digits turns the list "4,6,14,15" into 461415. The same edits are
made here so that they cannot: \\left and \\right go first, units are removed as whole words
only, and only commas that group thousands are dropped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from conductor_cli.public.readers import last_boxed  # a reference is read the same way

TOLERANCE = 1e-6  # relative, as the numeric scorer's

_ANSWER_LINE = re.compile(r"(?i)\b(?:final\s+)?answer\b\s*(?:is\b|:|=)[\s:]*")
# Minerva's few-shot replies end "The final answer is $X$. I hope it is correct."
_HOPE = re.compile(r"(?i)\s*I hope it is correct\.?\s*$")

# Minerva's units (whole words here, singulars added), and "square units" as one.
_UNIT = (
    r"(?:square\s+)?(?:units?|ways|integers?|dollars?|mph|inch(?:es)?|ft|feet|foot|hours?|km"
    r"|sue|points?|minutes?|digits?|cents?|degrees?|cm|gm|pounds?|meters?|meals?|edges?"
    r"|students?|children\s*tickets|multiples?)"
)
_POWER = r"(?:\^\{?[23]\}?)?"
# A \text{} of units only (or empty, or Minerva's "\text{m}", "\text{s}"), and ordinals.
_TEXT_UNIT = re.compile(
    r"\\(?:text|mbox|mathrm)\{\s*(?:(?:"
    + _UNIT
    + r"|m|s|\.)\s*)*\}"
    + _POWER
    + r"|\^\{?\\(?:text|mathrm)\{(?:st|nd|rd|th)\}\}?"
)
# Hendrycks' rule: a \text{ ...} that ends the answer and starts with a space is its unit.
_TRAILING_TEXT = re.compile(r"(?<=\S)\s*\\text\{\s[^{}]*\}" + _POWER + r"\s*$")
_BARE_UNIT = re.compile(r"(?<![A-Za-z\\])" + _UNIT + _POWER + r"(?![A-Za-z])")
# Sizing and spacing, never part of an answer; a TeX line break "\\\\" (matrices) is kept.
_SIZING = re.compile(r"(\\\\)|\\(?:left|right|displaystyle)(?![A-Za-z])|\\[!,;: ]")
# Wrappers whose content is the answer ("\text{(B)}", "\textbf{5}", "\overline{12}").
_WRAPPERS = ("\\text{", "\\textbf{", "\\mathrm{", "\\mbox{", "\\overline{", "\\boxed{")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_NUMBER = r"-?(?:\d+(?:\.\d*)?|\.\d+)"
_FRACTION = re.compile(rf"(-?)\\frac\{{({_NUMBER})\}}\{{({_NUMBER})\}}")
_SLASH = re.compile(rf"({_NUMBER})/({_NUMBER})")


def _group(text: str, begin: int) -> tuple[str, int] | None:
    """The text from `begin` (just after an opening brace) to its closing one, and the index
    after that brace; None when it never closes."""
    depth = 1
    for i in range(begin, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[begin:i], i + 1
    return None


def extract_math_answer(reply: str) -> str:
    """The final answer of a reply: its last \\boxed{}, else the rest of its last "Answer:"
    ("The final answer is") line, else the reply itself when it is one line; else ""."""
    boxed = last_boxed(reply)
    if boxed is not None:
        return boxed.strip()
    stated = list(_ANSWER_LINE.finditer(reply))
    if stated and (rest := reply[stated[-1].end() :].strip()):
        return _HOPE.sub("", rest.splitlines()[0]).strip()
    lines = reply.strip().splitlines()
    return lines[0].strip() if len(lines) == 1 else ""


def normalize_math(answer: str) -> str:
    """One spelling per answer: Minerva's normalization, made safe (see the module's note)."""
    s = answer.replace("\n", " ").strip()
    s = _SIZING.sub(r"\1", s)  # \left( \right), \! \, \; spacing
    s = s.split("=")[-1]  # "x = 5", "f(x)=3x": the value (Minerva)
    s = s.replace("\\$", "").replace("mbox", "text").replace("{,}", "")
    s = re.sub(r"\\text\s+\{", r"\\text{", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\\(le|ge|ne)q(?![A-Za-z])", r"\\\1", s)
    s = re.sub(r"\^\{?\\circ\}?", "", s)  # 10^\circ is 10 (degrees)
    s = s.replace("\\%", "").replace("%", "").replace('"', "")
    s = s.replace("\\ldots", "").replace("\\dots", "")
    s = re.sub(r",?\s*\\text\{\s*and\s*\}\s*", ",", s)  # "1 \text{ and } 2" is a list
    if (dollars := re.search(r"\$(.*?)\$", s)) is not None:
        s = dollars.group(1)  # "the answer is $16$." -> 16
    s = _TRAILING_TEXT.sub("", s)
    s = _TEXT_UNIT.sub("", s)
    s = _BARE_UNIT.sub("", s)
    for wrapper in _WRAPPERS:
        s = _unwrap(s, wrapper)
    s = re.sub(r"\s+", "", s).replace("$", "").rstrip(".")
    s = _braced_arguments(s, "\\frac", 2)  # \frac12 -> \frac{1}{2}
    s = _braced_arguments(s, "\\sqrt", 1)  # \sqrt2 -> \sqrt{2}
    s = re.sub(r"(?<![\d.])\.(\d)", r"0.\1", s)  # .5 -> 0.5
    s = re.sub(r"(\d)\.0+(?!\d)", r"\1", s)  # 5.0 -> 5
    s = re.sub(r"(\.\d*?[1-9])0+(?!\d)", r"\1", s)  # 2.50 -> 2.5
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")  # 14,400 -> 14400, but a list 4,6,14,15 stays a list
    # ... and one filling a brace group: \frac{12}{5,525}
    s = re.sub(r"\{(-?\d{1,3}(?:,\d{3})+)\}", lambda m: "{" + m[1].replace(",", "") + "}", s)
    if re.fullmatch(r"\([A-Z]\)", s):
        s = s[1]  # a choice "(B)" is B
    return s


def _unwrap(s: str, wrapper: str) -> str:
    """Every `\\cmd{X}` replaced by X (braces balanced)."""
    while (start := s.find(wrapper)) >= 0:
        found = _group(s, start + len(wrapper))
        if found is None:
            return s
        inside, end = found
        s = s[:start] + inside + s[end:]
    return s


def _braced_arguments(s: str, command: str, count: int) -> str:
    """`command`'s first `count` arguments each in braces: a bare one is a single character,
    as TeX reads it (\\frac12 -> \\frac{1}{2}, \\frac{1}2 -> \\frac{1}{2})."""
    out, i = [], 0
    while (start := s.find(command, i)) >= 0:
        j = start + len(command)
        if j < len(s) and s[j].isalpha():  # \fracture, \sqrtx: another command or a letter
            out.append(s[i:j])
            i = j
            continue
        out.append(s[i:j])
        for _ in range(count):
            if j >= len(s):
                break
            if s[j] == "{":
                found = _group(s, j + 1)
                if found is None:
                    break
                out.append("{" + found[0] + "}")
                j = found[1]
            elif s[j] == "[":  # \sqrt[3]{x}: the index stays as written
                break
            else:
                out.append("{" + s[j] + "}")
                j += 1
        i = j
    out.append(s[i:])
    return "".join(out)


def math_number(normal: str) -> float | None:
    """The value of a normalized answer that is one number ("0.5", "-\\frac{1}{2}", "3/4")."""
    try:
        if re.fullmatch(_NUMBER, normal):
            return float(normal)
        if (m := _FRACTION.fullmatch(normal) or _SLASH.fullmatch(normal)) is not None:
            sign = -1.0 if m.re is _FRACTION and m.group(1) else 1.0
            num, den = (m.group(2), m.group(3)) if m.re is _FRACTION else m.groups()
            return sign * float(num) / float(den) if float(den) else None
    except ValueError:
        return None
    return None


def math_equal(got: str, reference: str) -> bool:
    """Whether two answers are the same after normalization, or are numbers of one value."""
    a, b = normalize_math(got), normalize_math(reference)
    if a and a == b:
        return True
    x, y = math_number(a), math_number(b)
    return x is not None and y is not None and math.isclose(x, y, rel_tol=TOLERANCE)


def score_math(reply: str, reference: str, aliases: Sequence[str]) -> tuple[bool, str]:
    """(right, the final answer read) for a MATH-style reply: equal to the reference or any
    alias by `math_equal`."""
    got = extract_math_answer(reply)
    return bool(got) and any(math_equal(got, r) for r in (reference, *aliases) if r), got
