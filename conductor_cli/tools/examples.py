"""Testing code on the examples a question shows (issue 69): the `test` words of the python
tool. The examples are what the user can see: doctest lines (`>>> f(2)` then what it gives),
`assert` lines, and the ways docstrings write examples in prose (`f(2) ==> 4`, `Input: x = 2`
then `Output: 4`) in the question and its attachments; a benchmark's hidden tests are never
in either. The harness runs in the sandbox with the code, and prints one report a model can
act on: how many passed, and for each that failed its call, what was expected and what came.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
from dataclasses import dataclass

# The words that ask for this (policy/words.py names them `test`), and what the tool says.
TEST = "Test the code from step 0 on the examples the question shows."
REPAIR = (
    "Reply with the whole code from step 0 in one ```python block, fixed where a test "
    "failed; unchanged where every test passed."
)
# Write again (issue 69): the writer is shown what failed but not its own code, so its next
# try is a fresh one rather than an edit of the wrong one (a 1.5B coder's repairs of its own
# code turned 1 of 56 failing MBPP and HumanEval answers right, written again 13).
RETRY = (
    "Write the code again from scratch, in one ```python block, keeping the names the "
    "question gives: an earlier attempt failed the examples above."
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
_DEFINED_NAMES = re.compile(r"^[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+([A-Za-z_]\w*)", re.M)
_BUILTINS = frozenset(dir(builtins))


def examples(text: str) -> list[tuple[str, str]]:
    """(source, want) of each example `text` shows: doctest examples, read from each
    triple-quoted docstring as doctest reads a docstring (want: the output it compares) and
    from the text itself, then examples written in prose (a call and its value; named
    inputs and an output, for the function whose docstring shows them), then top-level
    assert lines (want '')."""
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
    documented = _documented(text)
    # A prose example in a docstring calls a function the question shows or a builtin (a
    # docstring whose example names another function is wrong, not a test to fail); one in
    # the question's own prose may name the function it asks for.
    callable_names = set(_DEFINED_NAMES.findall(text))
    for part in texts:
        in_prose = part is texts[-1]
        for line in _short_lines(part):
            m = _CALL_LINE.match(line)
            if m is None:
                continue
            called = m.group(1).split("(", 1)[0]
            shown = called in callable_names or called in _BUILTINS
            if not in_prose and callable_names and not shown:
                continue
            if m.group(0).lstrip().startswith("assert"):
                if in_prose:
                    continue  # a top-level assert is read whole, as the assert it is (below)
                pair = _asserted(m.group(1), m.group(2))
            else:
                pair = _call_example(m.group(1), _without_stop(m.group(2)))
            if pair is not None and pair not in found:
                found.append(pair)
    for name, params, doc in documented:
        for pair in _named_examples(name, params, doc):
            if pair not in found:
                found.append(pair)
    for m in _ASSERT.finditer(text):
        line = m.group(1).strip()
        if (line, "") not in found:
            found.append((line, ""))
    return found[:MAX_EXAMPLES]


# "f(3, 4) == 6.00", "f([1, 2]) => 1", "f(2) ==> True", "f(2) # => 'Yes'", "f(148, 412)
# should return 16.", "assert f(1) => 2" (an assert as prose writes it, not always Python): an
# example as docstrings write it in prose, where the call's arguments and the value are
# Python literals (a call of a bare word, `is_happy(a)`, is not one). Matched a line at a
# time, each part of a line bounded by what cannot start or end the next, so that a long line
# costs in proportion to its length.
_VALUE = r"(\S(?:.*\S)?)[ \t]*$"
_CALL_LINE = re.compile(
    r"[ \t]*(?:assert[ \t]+)?([A-Za-z_]\w*\(.*\))[ \t]*(?:#[ \t]*)?"
    r"(?:==>|-->|==|=>|➞|->|→|=|should return|returns|should be|gives|evaluates to|is)"
    r"[ \t]+" + _VALUE
)
# The examples that name their arguments rather than write a call, read for the function
# whose docstring shows them: "Input: arr = [1, 2], k = 3" then "Output: 5" (as programming
# puzzles write them; "Input: 3" too; an Input line without its own Output is none), and
# "For lst = [1, 2] the output should be 5".
_INPUT = re.compile(r"[ \t]*Input[ \t]*:[ \t]*" + _VALUE, re.I)
_OUTPUT = re.compile(r"[ \t]*Output[ \t]*:[ \t]*" + _VALUE, re.I)
_FOR_THE_OUTPUT = re.compile(
    r"[ \t]*For[ \t]+(\S[^,]*(?:,[ \t]*\S[^,]*)*?),?[ \t]+the[ \t]+"
    r"(?:output|result|answer|return value)[ \t]+(?:should be|is|will be)[ \t]+" + _VALUE,
    re.I,
)
# Longer lines are data, not an example written in prose (and the patterns above stay cheap).
MAX_LINE = 2000
# A function and its docstring as a question shows them: the docstring right under the
# signature (the signature may span lines). Top-level functions only: a method is called on
# its object, not by its bare name.
_DEF_DOC = re.compile(
    r"^(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)[ \t]*\(((?:[^()]|\([^()]*\))*)\)[^:\n]*:"
    r"[ \t]*\n[ \t]*(\"\"\"|\'\'\')(.*?)\3",
    re.M | re.S,
)


def _short_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if len(line) <= MAX_LINE]


def _without_stop(value: str) -> str:
    """A value as prose ends it: "should return 16." is 16 (6.00 stays 6.00)."""
    return value[:-1].rstrip() if value.endswith(".") else value


def _asserted(call: str, rest: str) -> tuple[str, str] | None:
    """`assert f(1) == 2, "why"` as the example f(1) giving 2 (its message is no value)."""
    try:
        node = ast.parse(f"assert {call} == {rest}").body[0]
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return _call_example(call, _without_stop(rest))
    test = node.test if isinstance(node, ast.Assert) else None
    if not isinstance(test, ast.Compare) or len(test.comparators) != 1:
        return None  # `assert f(1) == 2 and f(2) == 4`: not one call and its value
    return _call_example(call, ast.unparse(test.comparators[0]))


@dataclass(frozen=True)
class _Signature:
    """What a function takes, from its `def` line: its positional parameters, how many of
    them are required, and whether it takes more (`*args`)."""

    params: tuple[str, ...]
    required: int
    more: bool

    def takes(self, count: int) -> bool:
        return self.required <= count and (self.more or count <= len(self.params))


def _documented(text: str) -> list[tuple[str, _Signature, str]]:
    """(name, signature, docstring) of each top-level function `text` shows with a docstring."""
    found = []
    for m in _DEF_DOC.finditer(text):
        try:
            args = ast.parse(f"def f({m.group(2)}): pass").body[0].args  # type: ignore[attr-defined]
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        params = tuple(a.arg for a in (*args.posonlyargs, *args.args))
        required = len(params) - len(args.defaults)
        if any(d is None for d in args.kw_defaults):
            continue  # a keyword-only parameter without a default: no call by position
        signature = _Signature(params, required, args.vararg is not None)
        found.append((m.group(1), signature, m.group(4)))
    return found


def _named_pairs(doc: str) -> list[tuple[str, str]]:
    """(given inputs, output) of each named example of `doc` (see _INPUT)."""
    pairs: list[tuple[str, str]] = []
    lines = _short_lines(doc)
    for i, line in enumerate(lines):
        given = _INPUT.match(line)
        if given is not None:
            for later in lines[i + 1 : i + 5]:
                if _INPUT.match(later):
                    break
                out = _OUTPUT.match(later)
                if out is not None:
                    pairs.append((given.group(1), out.group(1)))
                    break
        m = _FOR_THE_OUTPUT.match(line)
        if m is not None:
            pairs.append((m.group(1), _without_stop(m.group(2))))
    return pairs


def _named_examples(name: str, signature: _Signature, doc: str) -> list[tuple[str, str]]:
    """The examples `doc` (the docstring of `name`) shows as named inputs and an output, each
    made the call it stands for: in order where the names are the parameters' own in their
    order (a writer that renames a parameter has not failed the example) or where none is a
    parameter's name; by keyword where they are parameters in another order; never where the
    call does not fit the function, nor where the docstring takes the output in any order."""
    if re.search(r"\bany order\b", doc, re.I):
        return []
    found = []
    params = signature.params
    for given, value in _named_pairs(doc):
        try:
            call = ast.parse(f"{name}({given})", mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        if not isinstance(call, ast.Call):
            continue
        named = [k.arg for k in call.keywords]
        if named and (call.args or None in named):
            continue
        if named == list(params[: len(named)]) or not set(named) & set(params):
            call = ast.Call(call.func, [*call.args, *(k.value for k in call.keywords)], [])
            if not signature.takes(len(call.args)):
                continue
        elif not set(params[: signature.required]) <= set(named) <= set(params):
            continue
        pair = _call_example(ast.unparse(call), value)
        if pair is not None:
            found.append(pair)
    return found


def _call_example(call: str, value: str) -> tuple[str, str] | None:
    try:
        tree = ast.parse(call, mode="eval").body
        want = ast.literal_eval(value)
        if not isinstance(tree, ast.Call):
            return None
        for arg in (*tree.args, *(k.value for k in tree.keywords)):
            if isinstance(arg, ast.Starred):
                return None
            ast.literal_eval(arg)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    return call, repr(want)


_DEF = re.compile(r"^[ \t]*def [A-Za-z_]\w*\(", re.M)


def shows_code_examples(text: str) -> bool:
    """Whether `text` shows code examples an answer's code can be tested on: a doctest line
    or a top-level assert (MBPP's shown test), or a prose example beside a function's
    signature (HumanEval's `f(3, 4, 5) == 6.00`). An example alone in prose ("if f(2) = 5,
    ...") is not one. Whether code is asked is the answer's to say: an answer with no code
    is kept as it is (run/engine)."""
    # The cheap looks first: every plan of a pool with a python tool asks this, and reading
    # the examples imports doctest.
    if ">>>" not in text and _ASSERT.search(text) is None and _DEF.search(text) is None:
        return False
    return bool(examples(text))


def nothing_to_repair(report: str) -> bool:
    """Whether a test step's report leaves its code as it is: every example and test passed,
    or the question shows none (the run/engine keeps the code without asking the writer
    again). The report's first line says it; the tests run are listed after."""
    said = report.strip()
    first = said.split("\n", 1)[0]
    return said == NO_EXAMPLES or _ALL_PASSED.fullmatch(first) is not None


# An attachment as a step's message shows it (run/messages.step_messages).
_ATTACHED = re.compile(r"^Attached (.+?):\n```\n(.*?)\n```$", re.S | re.M)


@dataclass(frozen=True)
class TestFile:
    """An attached file of tests: the user's `--file test_bug.py`."""

    __test__ = False  # not a test class itself (pytest collects by the name)
    name: str  # as attached
    source: str
    tests: tuple[str, ...]  # "test_a", and "TestX.test_b" for a method of a test class

    @property
    def module(self) -> str:
        return _stem(self.name)


def _stem(name: str) -> str:
    return name.rsplit("/", 1)[-1].removesuffix(".py")


def _collected(tree: ast.Module) -> tuple[str, ...]:
    """The tests pytest would collect without fixtures: top-level functions named test*
    that take no argument, and test* methods of classes named Test*."""
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            if not node.args.args and not node.args.posonlyargs and not node.args.kwonlyargs:
                found.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            found.extend(
                f"{node.name}.{m.name}"
                for m in node.body
                if isinstance(m, ast.FunctionDef) and m.name.startswith("test")
            )
    return tuple(found)


def holds_tests(source: str) -> bool:
    """Whether a file is tests this tool runs (a test function or a test class's method)."""
    try:
        return bool(_collected(ast.parse(source)))
    except (SyntaxError, ValueError):
        return False


def attached(text: str) -> list[tuple[str, str]]:
    """(name, text) of each file attached in a step's message."""
    return [(m.group(1), m.group(2)) for m in _ATTACHED.finditer(text)]


def code_file(files: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(name, source) of the first of the attached `files` that is code and not tests."""
    for name, source in files:
        if _defined(source) and not holds_tests(source):
            return name, source
    return None


def test_files(files: list[tuple[str, str]]) -> list[TestFile]:
    """The attached `files` (`attached`) that hold tests: Python with a test function or a
    test class."""
    found = []
    for name, source in files:
        try:
            tests = _collected(ast.parse(source))
        except (SyntaxError, ValueError):
            continue
        if tests:
            found.append(TestFile(name, source, tests))
    return found[:MAX_EXAMPLES]


def _defined(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def code_modules(code: str, tests: list[TestFile], files: list[str]) -> set[str]:
    """The modules the tests import that stand for the code under test: the attached files
    that are not tests (`import bug` beside bug.py), and any module all of whose imported
    names the code defines (`from solution import f` where the code defines f: a piped file
    has no name)."""
    others = {t.module for t in tests}
    stems = {_stem(name) for name in files} - others
    defined = _defined(code)
    found: set[str] = set()
    for t in tests:
        for node in ast.walk(ast.parse(t.source)):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = {a.name for a in node.names}
                if node.module in stems or (names <= defined and node.module not in others):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in stems)
    return found


# The harness: the code is run first (a failure there is reported as such), then each example
# as doctest would (an expression's repr against `want`, or its printed output), and asserts,
# then each test of the attached test files. Its data comes in the lines `harness` puts first.
# The test harness's version, and its reader's, in the tool's cache key
# (python_tool.fingerprint): a report cached under an older harness or reader is not this
# one's (2: what the code prints as it loads is left out of the report; 3: a load that failed
# names the code's line, and an assert's left side; 4: examples written with arrows and named
# inputs are read, so a question reported as showing none may show some). Not the tool's
# behaviour version, which trained rewards are kept under: a program's run is unchanged.
HARNESS_KEY = ":harness4"
_HARNESS = """
import ast, contextlib, io, json, math, sys, traceback
_said = lambda e: "".join(traceback.format_exception_only(type(e), e)).strip()
_n = len(_examples) + sum(len(t["tests"]) for t in _tests)


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


def _why(e, file, source):
    # The line of `file` that failed (the test's own, or the code's as it loaded) and, for
    # `assert a == b`, what a was.
    tb, frame, line = e.__traceback__, None, 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == file:
            frame, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    text = source.splitlines()[line - 1].strip() if frame is not None else ""
    if not isinstance(e, AssertionError):
        return (text + "\\n" if text else "") + "raised " + _said(e)
    said = (text + "\\n" if text else "") + "failed"
    try:
        node = ast.parse(text).body[0]
        test = node.test
        if isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.Eq):
            left = ast.Expression(test.left)
            value = eval(compile(left, "assert", "eval"), frame.f_globals, frame.f_locals)
            return said + ": the left side is " + repr(value)
    except BaseException:
        pass
    return said + (": " + str(e).strip() if str(e).strip() else "")


_failed = []
_ns = {"__name__": "__main__"}
try:
    # What the code prints as it loads (its own demo calls) is not the report: the report's
    # first line says whether every example passed.
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(_the_code, "code.py", "exec"), _ns)
except BaseException as e:
    print("The code failed to load: " + _why(e, "code.py", _the_code))
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
_ran = []
if _tests:
    import importlib.abc, importlib.machinery, unittest

    class _TheCode(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        # The modules the tests import the code under test from (`from bug import f`).
        def find_spec(self, name, path=None, target=None):
            if name in _code_modules:
                return importlib.machinery.ModuleSpec(name, self)
            return None

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            module.__dict__.update({k: v for k, v in _ns.items() if not k.startswith("__")})

    sys.meta_path.insert(0, _TheCode())

    for _t in _tests:
        _tns = {"__name__": _t["module"]}
        try:
            exec(compile(_t["source"], _t["file"], "exec"), _tns)
        except BaseException as e:
            _n -= len(_t["tests"]) - 1
            _failed.append(_t["file"] + " failed to load: " + _said(e))
            _ran.append(_t["file"] + " failed to load")
            continue
        for _id in _t["tests"]:
            _label = _t["file"] + "::" + _id.replace(".", "::")
            _cls, _, _meth = _id.rpartition(".")
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    if not _cls:
                        _tns[_id]()
                    else:
                        # A unittest case is made for its method and set up as unittest
                        # would; a plain class as pytest makes one (setup_method).
                        _unit = issubclass(_tns[_cls], unittest.TestCase)
                        _case = _tns[_cls](_meth) if _unit else _tns[_cls]()
                        _up = "setUp" if _unit else "setup_method"
                        _down = "tearDown" if _unit else "teardown_method"
                        getattr(_case, _up, lambda *a: None)(*([] if _unit else [None]))
                        try:
                            getattr(_case, _meth)()
                        finally:
                            getattr(_case, _down, lambda *a: None)(*([] if _unit else [None]))
                _ran.append(_label + " passed")
            except unittest.SkipTest:
                _ran.append(_label + " skipped")
            except BaseException as e:
                _failed.append(_label + "\\n" + _why(e, _t["file"], _t["source"]))
                _ran.append(_label + " failed")
if _failed:
    print(str(_n - len(_failed)) + " of " + str(_n) + " examples pass. Failed:")
    print("\\n\\n".join(_failed))
else:
    print(_all_pass.format(n=_n))
if _ran:
    print("Tests run: " + ", ".join(_ran) + ".")
"""


def harness(
    code: str,
    shown: list[tuple[str, str]],
    tests: list[TestFile] | None = None,
    files: list[str] | None = None,
) -> str:
    """The program the sandbox runs: `code`, then each example and each test of `tests`
    (the modules they import `code` from stand for it; `files`: every attachment's name),
    then the report."""
    tests = tests or []
    data = {
        "_examples": shown,
        "_tests": [
            {"file": t.name, "module": t.module, "source": t.source, "tests": list(t.tests)}
            for t in tests
        ],
    }
    lines = [f"{name} = json.loads({json.dumps(value)!r})" for name, value in data.items()]
    lines.append(f"_the_code = {code!r}")
    lines.append(f"_all_pass = {ALL_PASS!r}")
    lines.append(f"_code_modules = {sorted(code_modules(code, tests, files or []))!r}")
    return "import json\n" + "\n".join(lines) + _HARNESS
