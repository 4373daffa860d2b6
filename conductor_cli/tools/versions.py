"""Each built-in tool's behaviour version.

What a tool's runs give can change with conductor's own code, so the version is part of every
cache key of its runs (the tool's fingerprint) and of every reward measured with it
(policy/registry.worker_fingerprint). python: 3, reads, unix sockets, memory and disk confined;
4, a bare block after a ```python one is its output shown, not the program.
"""

from __future__ import annotations

VERSIONS = {"python": 4}
