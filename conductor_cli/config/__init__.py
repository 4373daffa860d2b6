"""The user's config file: typed settings, its generated doc, edits and the starter file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conductor_cli.exports import lazy_exports

# The package's public surface (what the CLI and library users import), loaded on first use.
_EXPORTS = {
    "get_value": "edit",
    "load_raw": "edit",
    "save_raw": "edit",
    "set_value": "edit",
    "apply_overrides": "overrides",
    "Config": "settings",
    "MAX_ROUNDS_LIMIT": "settings",
    "MAX_STEPS_LIMIT": "settings",
    "NESTED_RETIRED": "settings",
    "ServerSettings": "settings",
    "config_to_dict": "settings",
    "load_config": "settings",
    "restrict_workers": "settings",
    "rounds_for_depth": "settings",
    "PRESETS": "starter",
    "starter_config": "starter",
}
__all__ = [
    "MAX_ROUNDS_LIMIT",
    "MAX_STEPS_LIMIT",
    "NESTED_RETIRED",
    "PRESETS",
    "Config",
    "ServerSettings",
    "apply_overrides",
    "config_to_dict",
    "get_value",
    "load_config",
    "load_raw",
    "restrict_workers",
    "rounds_for_depth",
    "save_raw",
    "set_value",
    "starter_config",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from conductor_cli.config.edit import (
        get_value,
        load_raw,
        save_raw,
        set_value,
    )
    from conductor_cli.config.overrides import (
        apply_overrides,
    )
    from conductor_cli.config.settings import (
        MAX_ROUNDS_LIMIT,
        MAX_STEPS_LIMIT,
        NESTED_RETIRED,
        Config,
        ServerSettings,
        config_to_dict,
        load_config,
        restrict_workers,
        rounds_for_depth,
    )
    from conductor_cli.config.starter import (
        PRESETS,
        starter_config,
    )
