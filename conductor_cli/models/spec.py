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

from conductor_cli.models.builtin_tools import BUILTIN


@dataclass(frozen=True)
class ModelKind:
    """One kind of model a config may name: how it is spelled, what it is, and the code that
    builds it, checks it and tells `doctor` about it, by import path ("module:function",
    exports.resolve), so this table on the bottom floor imports none of it. A new kind is a
    backend module and one entry here."""

    name: str  # the prefix before ':' (`gguf` in `gguf:NAME`)
    spelling: str  # as help and errors show it
    description: str
    # Builds a worker's backend: (WorkerConfig, index, run.pool.Makers) -> Backend.
    worker: str
    # Checks a worker's model in the config: (WorkerConfig, where) -> None, raising
    # ConfigError; '' where any name is accepted.
    check: str
    # One doctor row: (what, WorkerConfig, Config, timeout_s) -> doctor.Check.
    doctor: str
    # Builds the conductor's backend: (Config, Catalog, LlamaModels, LiteLLMProcess) ->
    # Backend; '' where the conductor cannot run on this kind.
    conductor: str = ""
    local: bool = False  # in-process llama.cpp: context from conductor.n_ctx, costs nothing
    remote: bool = False  # reached through litellm: keys, prices, litellm's helper
    tool: bool = False  # deterministic, no tokens, no cost

    @property
    def prefix(self) -> str:
        return self.name + ":"


MODEL_KINDS: dict[str, ModelKind] = {
    k.name: k
    for k in (
        ModelKind(
            "gguf", "gguf:NAME|PATH", "a catalog model or a .gguf file, in-process llama.cpp",
            worker="conductor_cli.run.pool:gguf_backend",
            check="",
            doctor="conductor_cli.doctor:gguf_worker",
            conductor="conductor_cli.policy.conductor:gguf_conductor",
            local=True,
        ),
        ModelKind(
            "litellm", "litellm:MODEL", "any model litellm reaches (the bare name of a worker)",
            worker="conductor_cli.run.pool:litellm_backend",
            check="",
            doctor="conductor_cli.doctor:litellm_worker",
            conductor="conductor_cli.policy.conductor:litellm_conductor",
            remote=True,
        ),
        ModelKind(
            "tool", "tool:NAME", "a built-in tool (models/builtin_tools.py), e.g. tool:python",
            worker="conductor_cli.run.pool:tool_worker_backend",
            check="conductor_cli.config.settings:check_tool_model",
            doctor="conductor_cli.doctor:tool_worker",
            tool=True,
        ),
        ModelKind(
            "mcp", "mcp:SERVER/TOOL", "a tool of an MCP server in the config's [mcp_servers]",
            worker="conductor_cli.run.pool:mcp_worker_backend",
            check="conductor_cli.config.settings:check_mcp_model",
            doctor="conductor_cli.doctor:mcp_worker",
            tool=True,
        ),
    )
}  # fmt: skip
# What a name without a known prefix is: a worker's is a litellm model (`gpt-4o-mini`), the
# conductor's a GGUF (a catalog name, a path or a trained conductor).
WORKER_DEFAULT = "litellm"
CONDUCTOR_DEFAULT = "gguf"

# Kept for the code and tests that spell a kind's prefix.
GGUF_PREFIX = MODEL_KINDS["gguf"].prefix
LITELLM_PREFIX = MODEL_KINDS["litellm"].prefix
TOOL_PREFIX = MODEL_KINDS["tool"].prefix
MCP_PREFIX = MODEL_KINDS["mcp"].prefix


def spellings(*, conductor: bool = False) -> str:
    """`gguf:NAME|PATH, litellm:MODEL, ...`: the kinds a worker (or the conductor) may name,
    for help and errors."""
    return ", ".join(k.spelling for k in MODEL_KINDS.values() if not conductor or k.conductor)


@dataclass(frozen=True)
class ModelSpec:
    kind: str  # a key of MODEL_KINDS
    # gguf: catalog name, .gguf path or trained conductor; litellm: its model id; tool: its name;
    # mcp: SERVER/TOOL
    name: str

    @property
    def entry(self) -> ModelKind:
        return MODEL_KINDS[self.kind]

    @property
    def local(self) -> bool:
        return self.entry.local

    @property
    def tool(self) -> bool:
        """A built-in or MCP tool: deterministic, no tokens, no cost."""
        return self.entry.tool

    @property
    def runs_programs(self) -> bool:
        """A built-in tool that runs the program an earlier step wrote (`tool:python`)."""
        tool = BUILTIN.get(self.name) if self.kind == "tool" else None
        return tool is not None and tool.runs_programs

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
        return self.entry.remote

    @classmethod
    def parse(cls, text: str, default: str) -> ModelSpec:
        """`KIND:NAME` for a kind of MODEL_KINDS, else `default`'s kind (its prefix is taken
        off if given)."""
        kind, colon, rest = text.partition(":")
        if colon and kind in MODEL_KINDS:
            return cls(kind, rest)
        return cls(default, text)

    @classmethod
    def for_worker(cls, text: str) -> ModelSpec:
        return cls.parse(text, WORKER_DEFAULT)

    @classmethod
    def for_conductor(cls, text: str) -> ModelSpec:
        """The conductor's model; a tool kind is parsed, and refused by the config check."""
        return cls.parse(text, CONDUCTOR_DEFAULT)

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"
