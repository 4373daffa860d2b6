"""Model files: the catalog (data), GGUF headers, and downloading into the models dir."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conductor_cli.exports import lazy_exports

# The package's public surface (what the CLI and library users import), loaded on first use.
_EXPORTS = {
    "load_catalog": "catalog",
    "pull": "fetch",
    "read_gguf": "gguf",
    "ModelSpec": "spec",
    "spellings": "spec",
}
__all__ = ["ModelSpec", "load_catalog", "pull", "read_gguf", "spellings"]
__getattr__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from conductor_cli.models.catalog import (
        load_catalog,
    )
    from conductor_cli.models.fetch import (
        pull,
    )
    from conductor_cli.models.gguf import (
        read_gguf,
    )
    from conductor_cli.models.spec import (
        ModelSpec,
        spellings,
    )
