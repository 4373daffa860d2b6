"""The planning policy: what a trained conductor needs when it plans, on every `ask`: the
registry of trained conductors (the user's and the shipped ones), reading a trained head or step
head, the features it reads from the conductor's hidden state, the workflow shapes it chooses
from, and the chooser that plans with them. Learning them is train/'s job, which builds on this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conductor_cli.exports import lazy_exports

# The package's public surface (what the CLI and library users import), loaded on first use.
_EXPORTS = {
    "find": "registry",
    "list_trained": "registry",
    "pool_note": "registry",
}
__all__ = ["find", "list_trained", "pool_note"]
__getattr__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from conductor_cli.policy.registry import (
        find,
        list_trained,
        pool_note,
    )
