"""The public repair set `humaneval-fix` (issue 69, item 2): HumanEval's canonical solutions,
each with one bug a mutation operator put in (public/mutants.py), kept where the hidden tests
catch it, asked as a user pipes a file: `cat bug.py | conductor ask "fix this"`. The real
sandbox runs the tests."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict

import pytest

from conductor_cli.evals import scoring
from conductor_cli.evals.datasets import fingerprint
from conductor_cli.problems import Problem
from conductor_cli.public import load
from conductor_cli.public.mutants import apply, sites
from conductor_cli.sandbox import Sandbox

CODE = '''def f(xs):
    """Count items below 3 (a docstring: < and 3 here are never touched)."""
    n = 0  # a comment: + stays
    for x in xs:
        if x < 3 and x != -1:
            n += 1
    return n == 2 or False
'''


def test_a_mutant_swaps_one_token_and_keeps_every_other_byte() -> None:
    body = CODE.index("    n = 0")
    found = sites(CODE, after=body)
    tokens = ["0", "<", "3", "and", "!=", "-", "1", "+=", "1", "==", "2", "or", "False"]
    assert [s.token for s in found] == tokens
    assert [s.mutant for s in found][:5] == ["1", "<=", "4", "or", "=="]
    for site in found:
        mutant = apply(CODE, site)
        assert mutant[: site.start] == CODE[: site.start]
        assert mutant[site.start + len(site.mutant) :] == CODE[site.end :]
        compile(mutant, "mutant", "exec")
    assert sites("def broken(:\n  'unclosed", 0) == []


@pytest.fixture(scope="module")
def fixes() -> list[Problem]:
    return load("humaneval-fix", "test")


def test_the_set_is_a_file_piped_in_with_fix_this_and_one_bug_each(fixes: list[Problem]) -> None:
    assert len(fixes) == 148  # of HumanEval's 164: those with a bug its tests catch
    originals = {p.entry_point: p for p in load("humaneval", "test")}
    for p in fixes:
        assert p.question == "fix this" and p.kind == "code" and p.scorer == "tests"
        [(name, buggy)] = p.attachments
        assert name == "stdin"
        source = p.prompt + p.answer
        assert buggy != source and buggy.startswith(p.prompt)  # the docstring as written
        assert p.entry_point in originals
    # A problem without attachments keeps the fingerprint its files had before the field.
    plain = Problem("q1", "qa", "What is 2 + 2?", "4")
    old_row = {k: v for k, v in asdict(plain).items() if k not in ("aliases", "attachments")}
    old = json.dumps([old_row], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert fingerprint([plain]) == hashlib.sha256(old.encode("utf-8")).hexdigest()


def test_the_hidden_tests_catch_each_bug_and_pass_the_fix(fixes: list[Problem]) -> None:
    sandbox = Sandbox()
    for p in random.Random(7).sample(fixes, 8):
        [(_, buggy)] = p.attachments
        fixed = p.prompt + p.answer
        # The answer a user wants: the whole file, fixed, in a block; the input sent back
        # unchanged is wrong.
        right, _, _ = scoring.score(p, f"Here is the fix:\n```python\n{fixed}```\n", sandbox)
        unchanged, _, detail = scoring.score(p, f"```python\n{buggy}```", sandbox)
        assert right and not unchanged, (p.id, detail)
