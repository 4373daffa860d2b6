"""The map cannot drift (issue 70): every module, file and name the docs (docs/*.md, README.md)
and the code's own docstrings and comments write as a path (`run/planner.py`,
`policy/registry.FAMILIAR`, `api.execute_request`) exists, and every "module:function" entry of
the extension tables resolves. A rename that leaves a mention behind fails here."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "conductor_cli"
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_"))
# `run/planner`, `conductor_cli/run/planner.py`, `policy/registry.FAMILIAR`: a path under the
# package, then names.
_PACKAGES = "|".join(SUBPACKAGES)
_PATH = re.compile(
    rf"(?<![\w/.-])(?:conductor_cli/)?((?:{_PACKAGES})/[A-Za-z_]\w*)((?:\.[A-Za-z_]\w*)*)"
)
# `api.execute_request`, `runtime.py`: a top-level module, then a name.
_MODULES = "|".join(MODULES)
_TOP = re.compile(rf"(?<![\w/.-])({_MODULES})\.([A-Za-z_]\w*)")


@functools.cache
def defined(path: Path) -> frozenset[str]:
    """The names a module defines or imports at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


# What follows a name as a file's extension (problems.jsonl), not a name in the module.
EXTENSIONS = {"py", "json", "jsonl", "toml", "md", "txt", "csv", "gguf", "png", "svg", "npz"}


def _named(module: Path, attrs: str) -> str | None:
    """What is wrong with `module` followed by `.name...` (None: nothing)."""
    first = attrs.split(".")[1] if attrs else ""
    if not first or first in EXTENSIONS:
        return None
    if not module.with_suffix(".py").is_file():
        return "a package has no names of its own here"
    if first not in defined(module.with_suffix(".py")):
        return f"{module.with_suffix('.py').relative_to(ROOT)} has no {first}"
    return None


def unresolved(text: str) -> list[str]:
    """Each mention in `text` of a module, file or name that does not exist, and why."""
    wrong = []
    for m in _PATH.finditer(text):
        path, attrs = m.group(1), m.group(2)
        module = PACKAGE / path
        ext = attrs.split(".")[1] if attrs else ""
        exists = (
            module.with_suffix(".py").is_file()
            or module.is_dir()
            or (ext and module.with_suffix(f".{ext}").exists())
            # the top level's models/conductors, models/catalog.toml
            or (ROOT / path).exists()
            or (ext and (ROOT / f"{path}.{ext}").exists())
        )
        if not exists:
            wrong.append(f"{m.group(0)}: no such module or file")
        elif module.with_suffix(".py").is_file() and (why := _named(module, attrs)):
            wrong.append(f"{m.group(0)}: {why}")
    for m in _TOP.finditer(text):
        name = m.group(2)
        if name not in EXTENSIONS and name not in defined(PACKAGE / f"{m.group(1)}.py"):
            wrong.append(f"{m.group(0)}: conductor_cli/{m.group(1)}.py has no {m.group(2)}")
    return wrong


def prose(path: Path) -> str:
    """What a file says in words: a document whole; of a module, its docstrings and comments
    (its code names its variables, `runtime.close()`, not modules)."""
    import io
    import tokenize

    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return text
    said = [
        t.string
        for t in tokenize.generate_tokens(io.StringIO(text).readline)
        if t.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            said.append(ast.get_docstring(node) or "")
    return "\n".join(said)


def test_a_renamed_module_or_name_is_found() -> None:
    text = "see run/planner.py, run/nowhere.py, `policy/registry.FAMILIAR`, api.gone, api.py"
    assert unresolved(text) == [
        "run/nowhere.py: no such module or file",
        "api.gone: conductor_cli/api.py has no gone",
    ]
    assert unresolved("policy/registry.NOT_THERE") == [
        "policy/registry.NOT_THERE: conductor_cli/policy/registry.py has no NOT_THERE"
    ]


def test_the_docs_and_the_codes_own_words_name_what_exists() -> None:
    sources = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    sources += sorted(PACKAGE.rglob("*.py"))
    wrong = [
        f"{path.relative_to(ROOT)}: {why}" for path in sources for why in unresolved(prose(path))
    ]
    assert not wrong, "\n".join(wrong)


def test_every_module_function_entry_of_the_tables_resolves() -> None:
    """The tables name their code as "module:function" (imported when first used); each
    entry names a function that is there."""
    from importlib import import_module

    from conductor_cli.evals.strategies import STRATEGY_KINDS
    from conductor_cli.exports import resolve
    from conductor_cli.models.builtin_tools import BUILTIN
    from conductor_cli.models.spec import MODEL_KINDS

    entries = [
        value
        for table in (STRATEGY_KINDS, MODEL_KINDS, BUILTIN)
        for entry in table.values()
        for value in vars(entry).values()
        if isinstance(value, str) and re.fullmatch(r"conductor_cli(\.\w+)+:\w+", value)
    ]
    assert len(entries) >= 15, entries
    for entry in entries:
        assert callable(resolve(entry)), entry
    # The lazy exports of each package (exports.lazy_exports): each name is in its module.
    for init in sorted(PACKAGE.rglob("__init__.py")):
        package = ".".join(init.parent.relative_to(ROOT).parts)
        exported = getattr(import_module(package), "_EXPORTS", {})
        for name, module in exported.items():
            assert hasattr(import_module(f"{package}.{module}"), name), (package, name)
