"""A model named in the config, parsed once: where it runs (llama.cpp or litellm) and its name.

Config files spell a model as `gguf:NAME` (a catalog name or a .gguf path, run in-process by
llama.cpp), `litellm:MODEL` (anything litellm reaches) or, for workers, `tool:NAME` (a built-in
tool such as `tool:python`, conductor_cli/tools) or `mcp:SERVER/TOOL` (a tool of an MCP server
in the config's [mcp_servers], conductor_cli/tools/mcp_tool.py). Workers default to litellm (a bare
`gpt-4o-mini`), the conductor to llama.cpp (a bare catalog name, path or trained conductor).
Everything else reads the typed value instead of testing string prefixes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GGUF_PREFIX = "gguf:"
LITELLM_PREFIX = "litellm:"
TOOL_PREFIX = "tool:"
MCP_PREFIX = "mcp:"

Kind = Literal["gguf", "litellm", "tool", "mcp"]


@dataclass(frozen=True)
class ModelSpec:
    kind: Kind
    # gguf: catalog name, .gguf path or trained conductor; litellm: its model id; tool: its name;
    # mcp: SERVER/TOOL
    name: str

    @property
    def local(self) -> bool:
        return self.kind == "gguf"

    @property
    def tool(self) -> bool:
        """A built-in or MCP tool: deterministic, no tokens, no cost."""
        return self.kind in ("tool", "mcp")

    @property
    def mcp_server(self) -> str:
        """An mcp: model's SERVER ("" when the model has no `/TOOL`)."""
        server, slash, _ = self.name.partition("/")
        return server if slash else ""

    @property
    def mcp_tool(self) -> str:
        """An mcp: model's TOOL ("" when the model has no `/TOOL`)."""
        return self.name.partition("/")[2]

    @property
    def remote(self) -> bool:
        """Reached through litellm: the only kind that needs keys, prices and litellm."""
        return self.kind == "litellm"

    @classmethod
    def for_worker(cls, text: str) -> ModelSpec:
        if text.startswith(GGUF_PREFIX):
            return cls("gguf", text.removeprefix(GGUF_PREFIX))
        if text.startswith(TOOL_PREFIX):
            return cls("tool", text.removeprefix(TOOL_PREFIX))
        if text.startswith(MCP_PREFIX):
            return cls("mcp", text.removeprefix(MCP_PREFIX))
        return cls("litellm", text.removeprefix(LITELLM_PREFIX))

    @classmethod
    def for_conductor(cls, text: str) -> ModelSpec:
        if text.startswith(LITELLM_PREFIX):
            return cls("litellm", text.removeprefix(LITELLM_PREFIX))
        if text.startswith(TOOL_PREFIX):
            return cls("tool", text.removeprefix(TOOL_PREFIX))  # refused by the config
        if text.startswith(MCP_PREFIX):
            return cls("mcp", text.removeprefix(MCP_PREFIX))  # refused by the config
        return cls("gguf", text.removeprefix(GGUF_PREFIX))

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"
