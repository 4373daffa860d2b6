"""A model named in the config, parsed once: where it runs (llama.cpp or litellm) and its name.

Config files spell a model as `gguf:NAME` (a catalog name or a .gguf path, run in-process by
llama.cpp) or `litellm:MODEL` (anything litellm reaches). Workers default to litellm (a bare
`gpt-4o-mini`), the conductor to llama.cpp (a bare catalog name, path or trained conductor).
Everything else reads the typed value instead of testing string prefixes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GGUF_PREFIX = "gguf:"
LITELLM_PREFIX = "litellm:"

Kind = Literal["gguf", "litellm"]


@dataclass(frozen=True)
class ModelSpec:
    kind: Kind
    name: str  # gguf: catalog name, .gguf path or trained conductor; litellm: its model id

    @property
    def local(self) -> bool:
        return self.kind == "gguf"

    @classmethod
    def for_worker(cls, text: str) -> ModelSpec:
        if text.startswith(GGUF_PREFIX):
            return cls("gguf", text.removeprefix(GGUF_PREFIX))
        return cls("litellm", text.removeprefix(LITELLM_PREFIX))

    @classmethod
    def for_conductor(cls, text: str) -> ModelSpec:
        if text.startswith(LITELLM_PREFIX):
            return cls("litellm", text.removeprefix(LITELLM_PREFIX))
        return cls("gguf", text.removeprefix(GGUF_PREFIX))

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"
