"""Testing code on the examples a question shows (issue 69): the `test` words of the python
tool. The examples are what the user can see: doctest lines (`>>> f(2)` then what it gives)
and `assert` lines in the question and its attachments; a benchmark's hidden tests are never
in either. The harness runs in the sandbox with the code, and prints one report a model can
act on: how many passed, and for each that failed its call, what was expected and what came.
"""

from __future__ import annotations

import json
import re

# The words that ask for this (policy/words.py names them `test`), and what the tool says.
TEST = "Test the code from step 0 on the examples the question shows."
REPAIR = (
    "Reply with the whole code from step 0 in one ```python block, fixed where a test "
    "failed; unchanged where every test passed."
)
ALL_PASS = "All {n} examples pass."
_ALL_PASSED = re.compile(re.escape(ALL_PASS).replace(re.escape("{n}"), r"\d+"))
NO_EXAMPLES = "No examples to test: the question shows no `>>>` lines and no asserts."
NO_CODE = "No code to test: the step it tests wrote no ```python block."
# Asserts as MBPP shows them: whole top-level lines (one inside a function is that function's
# own check, not an example).
_ASSERT = re.compile(r"^(assert[ \t]+[^\n]+)$", re.M)
MAX_EXAMPLES = 20


_DOCSTRING = re.compile(r'("""|\'\'\')(.*?)\1', re.S)


def examples(text: str) -> list[tuple[str, str]]:
    """(source, want) of each example `text` shows: doctest examples, read from each
    triple-quoted docstring as doctest reads a docstring (want: the output it compares) and
    from the text itself, then top-level assert lines (want '')."""
    import doctest  # 10 ms; only a test step needs it
    import inspect

    parser = doctest.DocTestParser()
    found: list[tuple[str, str]] = []
    # Each docstring read as doctest reads one, then the rest of the text (docstrings out, so
    # a docstring's closing quotes never end up in an example's expected output).
    texts = [inspect.cleandoc(m.group(2)) for m in _DOCSTRING.finditer(text)]
    texts.append(_DOCSTRING.sub("", text))
    for part in texts:
        try:
            parsed = parser.get_examples(part)
        except ValueError:  # inconsistent indentation: nothing read there
            continue
        for ex in parsed:
            pair = (ex.source.rstrip("\n"), ex.want.rstrip("\n"))
            if pair not in found:
                found.append(pair)
    for part in texts:
        for m in _CALL_LINE.finditer(part):
            pair = _call_example(m.group(1), m.group(2))
            if pair is not None and pair not in found:
                found.append(pair)
    for m in _ASSERT.finditer(text):
        line = m.group(1).strip()
        if (line, "") not in found:
            found.append((line, ""))
    return found[:MAX_EXAMPLES]


# "f(3, 4) == 6.00", "f([1, 2]) => 1", "f(2) ➞ True", "f(148, 412) should return 16.": an
# example as docstrings write it in prose, where the call's arguments and the value are
# Python literals (a call of a bare word, `is_happy(a)`, is not one).
_CALL_LINE = re.compile(
    r"^[ \t]*([A-Za-z_]\w*\(.*\))[ \t]*"
    r"(?:==|=>|➞|->|→|=|should return|returns|should be|is)[ \t]+(.+?)[ \t]*\.?[ \t]*$",
    re.M,
)


def _call_example(call: str, value: str) -> tuple[str, str] | None:
    import ast

    try:
        tree = ast.parse(call, mode="eval").body
        want = ast.literal_eval(value)
        if not isinstance(tree, ast.Call) or tree.keywords:
            return None
        for arg in tree.args:
            ast.literal_eval(arg)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    return call, repr(want)


def nothing_to_repair(report: str) -> bool:
    """Whether a test step's report leaves its code as it is: every example passed, or the
    question shows none (the run/engine keeps the code without asking the writer again)."""
    said = report.strip()
    return said == NO_EXAMPLES or _ALL_PASSED.fullmatch(said) is not None


# The harness: the code is run first (a failure there is reported as such), then each example
# as doctest would (an expression's repr against `want`, or its printed output), and asserts.
_HARNESS = """
import ast, contextlib, io, json, math, traceback
_examples = json.loads({examples!r})
_said = lambda e: "".join(traceback.format_exception_only(type(e), e)).strip()
_n = len(_examples)


def _same(value, got, want, is_expr):
    # As a reader takes an example: equal values where the expected output is a literal
    # ("21" and '21', 6.00 and 6.0, None), else the same text up to spacing.
    try:
        expected = ast.literal_eval(want)
    except Exception:
        return " ".join(got.split()) == " ".join(want.split())
    if not is_expr:
        try:
            value = ast.literal_eval(got)
        except Exception:
            return " ".join(got.split()) == " ".join(want.split())
    if isinstance(value, float) or isinstance(expected, float):
        try:
            return math.isclose(value, expected, rel_tol=1e-6, abs_tol=1e-9)
        except TypeError:
            return False
    return value == expected
_failed = []
_ns = {{"__name__": "__main__"}}
try:
    exec(compile({code!r}, "code.py", "exec"), _ns)
except BaseException as e:
    print("The code failed to load: " + _said(e))
    raise SystemExit(0)
for _source, _want in _examples:
    _out = io.StringIO()
    try:
        _value, _is_expr = None, True
        with contextlib.redirect_stdout(_out):
            try:
                _code = compile(_source, "example", "eval")
            except SyntaxError:
                _is_expr = False
                exec(compile(_source, "example", "exec"), _ns)
            else:
                _value = eval(_code, _ns)
        _printed = _out.getvalue().rstrip("\\n")
        _got = _printed if not _is_expr or (_value is None and _printed) else repr(_value)
        if _want and not _same(_value, _got, _want, _is_expr):
            _failed.append(">>> " + _source + "\\nexpected: " + _want + "\\ngot: " + _got)
    except AssertionError:
        _left = ""
        if _source.startswith("assert ") and "==" in _source:
            try:
                _left = repr(eval(_source[7:].split("==")[0], _ns))
            except BaseException:
                _left = ""
        _failed.append(_source + "\\nfailed" + (": the left side is " + _left if _left else ""))
    except BaseException as e:
        _failed.append(">>> " + _source + "\\nraised " + _said(e))
if _failed:
    print(str(_n - len(_failed)) + " of " + str(_n) + " examples pass. Failed:")
    print("\\n\\n".join(_failed))
else:
    print({all_pass!r}.format(n=_n))
"""


def harness(code: str, shown: list[tuple[str, str]]) -> str:
    """The program the sandbox runs: `code`, then each example, then the report."""
    return _HARNESS.format(examples=json.dumps(shown), code=code, all_pass=ALL_PASS)
