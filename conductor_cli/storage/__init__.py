"""What a run leaves on disk: the response cache and traces (where they live: disk/paths)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conductor_cli.exports import lazy_exports

# The package's public surface (what the CLI and library users import), loaded on first use.
_EXPORTS = {
    "CacheMode": "cache",
    "list_traces": "trace",
    "load_trace": "trace",
    "resolve_trace_path": "trace",
    "traces_dir": "trace",
}
__all__ = ["CacheMode", "list_traces", "load_trace", "resolve_trace_path", "traces_dir"]
__getattr__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from conductor_cli.storage.cache import (
        CacheMode,
    )
    from conductor_cli.storage.trace import (
        list_traces,
        load_trace,
        resolve_trace_path,
        traces_dir,
    )
