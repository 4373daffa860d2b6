"""A package's public names, imported on first use (PEP 562): the CLI and library users import
`from conductor_cli.PKG import NAME`, and only the module that defines NAME is loaded, so a
command pays for what it uses and nothing else (start-up stays fast)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: str, table: dict[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` for `package` that finds NAME in `table[NAME]`, a submodule."""

    def __getattr__(name: str) -> object:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{module}"), name)

    return __getattr__


def resolve(path: str) -> Any:
    """The function a "module:function" entry of a table names, imported on first use (the
    strategy and tool tables name their code this way, so a table imports none of it)."""
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)
