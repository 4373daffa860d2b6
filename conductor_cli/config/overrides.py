"""The command line's changes to a config (`--worker`, `--conductor`, `--max-steps`, `--seed`,
`--rounds`), applied in one place: by `ask` in-process and by a server for the CLI's runs."""

from __future__ import annotations

from conductor_cli.config.settings import Config, restrict_workers, with_conductor
from conductor_cli.wire import Overrides


def apply_overrides(config: Config, overrides: Overrides) -> Config:
    """`config` with the workers narrowed to those named (in their order) and the conductor's
    settings replaced where given; a bad value is one ConfigError naming the option."""
    config = restrict_workers(config, list(overrides.workers))
    return with_conductor(
        config,
        model=overrides.conductor,
        max_steps=overrides.max_steps,
        max_rounds=overrides.max_rounds,
        seed=overrides.seed,
    )
