"""A code file's outline for a fresh try (issue 69): each function that has a docstring, with
its body after the docstring left out. The rest of the file (imports, functions without a
docstring, comments) stays as written.

Why: the embedded 1.5B coder writes 112 of HumanEval's 164 functions right from their
signature and docstring, but fixes only 46 of 100 of the same functions handed to it with one
bug (`fix this`, the file piped in): the buggy body anchors it. A try written again after a
failed fix is shown the outline, so it writes the body from what the docstring says instead
of editing the body that failed.
"""

from __future__ import annotations

import ast

# How a step's message names an outlined attachment (run/messages.step_messages).
OUTLINED = (
    "the bodies of its documented functions left out: write them to do what their docstrings say"
)


def _bodies(tree: ast.Module) -> list[range]:
    """The 0-based lines to leave out: of each function of the module and of its classes (not
    nested in a function) whose body is a docstring and more on lines of their own, the lines
    after the docstring's to the function's last (comments among them)."""
    cut: list[range] = []
    scopes: list[list[ast.stmt]] = [tree.body]
    while scopes:
        for node in scopes.pop():
            if isinstance(node, ast.ClassDef):
                scopes.append(node.body)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                body = node.body
                doc = body[0]
                if (
                    len(body) > 1
                    and isinstance(doc, ast.Expr)
                    and isinstance(doc.value, ast.Constant)
                    and isinstance(doc.value.value, str)
                    and doc.end_lineno is not None
                    and node.end_lineno is not None
                    and body[1].lineno > doc.end_lineno
                ):
                    cut.append(range(doc.end_lineno, node.end_lineno))
    return cut


def outline(source: str) -> str | None:
    """`source` with the body of each documented function cut after its docstring; None where
    it is not Python or has no such function."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    cut = {n for lines in _bodies(tree) for n in lines}
    if not cut:
        return None
    kept = [line for n, line in enumerate(source.splitlines(keepends=True)) if n not in cut]
    return "".join(kept).rstrip() + "\n"
