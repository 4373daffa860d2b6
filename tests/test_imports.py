"""The package's import graph, read with `ast`: no circles, and the layers point one way."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "conductor_cli"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The package module an import names (a name imported from a module is that module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Every import inside the package, lazy ones (inside functions) included."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                names = [f"{base}.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] == "conductor_cli":
                    target = _target(name, modules)
                    if target and target != module:
                        deps.add(target)
        graph[module] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_circle() -> None:
    graph = import_graph()
    assert len(graph) > 50
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_planted_circle() -> None:
    graph = import_graph()
    graph["conductor_cli.models.catalog"] = {*graph["conductor_cli.models.catalog"]}
    graph["conductor_cli.models.catalog"].add("conductor_cli.models.fetch")
    assert ["conductor_cli.models.catalog", "conductor_cli.models.fetch"] in cycles(graph)


def test_the_catalog_knows_nothing_of_downloading() -> None:
    assert "conductor_cli.models.fetch" not in import_graph()["conductor_cli.models.catalog"]


# The layers of docs/architecture.md, lowest first: a module imports only modules of its own
# layer or below, lazy imports (inside functions) included. A prefix names a package or module;
# the longest prefix that matches places a module.
# The package's own __init__ ("") hands its public names on lazily (by name, not by import) and
# holds the version: it sits at the bottom.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "errors", "exports", "waiting", "wire", "disk", "problems", "sandbox"),
    ("models.spec", "models.builtin_tools"),
    ("config",),
    ("models",),
    ("public",),
    ("backends",),
    ("tools",),
    ("run",),
    ("storage",),
    ("testing",),
    ("policy",),
    ("runtime",),
    ("api",),
    ("replay", "doctor"),
    ("evals", "server"),
    ("train",),
    ("mcp_server",),
    ("cli", "__main__"),
)


def layer_of(module: str) -> int:
    name = module.removeprefix("conductor_cli").removeprefix(".")
    best, depth = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            hit = name == prefix or name.startswith(prefix + ".")
            if hit and len(prefix) > depth:
                best, depth = i, len(prefix)
    return best


def layer_breaks(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} -> {dep}"
        for module, deps in graph.items()
        for dep in deps
        if layer_of(dep) > layer_of(module)
    )


def test_every_module_imports_only_its_layer_or_below() -> None:
    """Data flows one way (docs/architecture.md): nothing reaches back up; the training package
    is imported only by the CLI."""
    graph = import_graph()
    assert all(layer_of(m) >= 0 for m in graph)
    assert layer_breaks(graph) == []
    users = {
        m for m, deps in graph.items() if any(d.startswith("conductor_cli.train") for d in deps)
    }
    assert {
        m for m in users if not m.startswith(("conductor_cli.train", "conductor_cli.cli"))
    } == set()


def test_the_layer_check_finds_a_planted_climb() -> None:
    graph = import_graph()
    graph["conductor_cli.run.engine"] = {
        *graph["conductor_cli.run.engine"],
        "conductor_cli.runtime",
    }
    assert "conductor_cli.run.engine -> conductor_cli.runtime" in layer_breaks(graph)


def test_every_public_name_resolves() -> None:
    """`from conductor_cli import X` for every name the package lists (they load lazily)."""
    import conductor_cli

    for name in conductor_cli.__all__:
        assert getattr(conductor_cli, name) is not None, name


def cli_reaches_past_the_surface(graph: dict[str, set[str]]) -> list[str]:
    """The CLI's imports of a module inside another package that the package's `__all__` does
    not list as public: the CLI is thin over the library's public functions."""
    import importlib

    modules = _modules()
    found = []
    for module, deps in graph.items():
        if not module.startswith("conductor_cli.cli"):
            continue
        for dep in deps:
            parts = dep.split(".")
            if len(parts) <= 2 or parts[1] == "cli":
                continue  # its own layer, a top-level module or a package's entry point
            package = ".".join(parts[:2])
            public = getattr(importlib.import_module(package), "__all__", ())
            if not (len(parts) == 3 and parts[2] in public and dep in modules):
                found.append(f"{module} -> {dep}")
    return sorted(found)


def test_the_cli_imports_only_the_public_surface() -> None:
    assert cli_reaches_past_the_surface(import_graph()) == []


def test_the_surface_check_finds_a_reach_inside() -> None:
    graph = import_graph()
    graph["conductor_cli.cli.ask"] = {*graph["conductor_cli.cli.ask"], "conductor_cli.run.engine"}
    assert cli_reaches_past_the_surface(graph) == [
        "conductor_cli.cli.ask -> conductor_cli.run.engine"
    ]


def test_every_package_export_resolves() -> None:
    """`from conductor_cli.PKG import NAME` for every name a package lists (they load lazily)."""
    import importlib

    modules = _modules()
    for package in sorted(m for m, p in modules.items() if p.name == "__init__.py"):
        loaded = importlib.import_module(package)
        for name in getattr(loaded, "__all__", ()):
            if f"{package}.{name}" in modules:  # a public module of the package
                importlib.import_module(f"{package}.{name}")
            else:
                assert getattr(loaded, name) is not None, f"{package}.{name}"
