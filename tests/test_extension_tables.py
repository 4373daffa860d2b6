"""The extension points are tables (docs/architecture.md, "Where to add"): backends by model
kind, built-in tools, eval strategies that call models, training methods. Each table names
exactly what the layer that parses the name accepts, and the code dispatches through it."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from conductor_cli import train
from conductor_cli.backends.llamacpp import LlamaModels
from conductor_cli.config.settings import Config, WorkerConfig
from conductor_cli.errors import InputError
from conductor_cli.evals import runner, strategies
from conductor_cli.models.catalog import load_catalog
from conductor_cli.models.spec import TOOLS, Kind
from conductor_cli.run import pool
from conductor_cli.testing.fake_backend import FakeBackend
from conductor_cli.tools import TOOL_KINDS
from conductor_cli.train.session import TrainOptions


def test_each_table_names_what_its_parser_accepts() -> None:
    assert set(pool.BACKENDS) == set(get_args(Kind))
    assert tuple(TOOL_KINDS) == TOOLS
    assert set(runner.SOLVERS) == set(strategies.BASE)
    assert train.METHODS == tuple(train.TRAINERS) == ("head", "expert-iteration", "grpo")


def test_build_pool_builds_each_worker_through_the_backend_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[tuple[str, int]] = []

    def recording_tool_maker_fake(wc: WorkerConfig, index: int, makers: pool.Makers) -> Any:
        made.append((wc.name, index))
        return FakeBackend("from the table")

    monkeypatch.setitem(pool.BACKENDS, "tool", recording_tool_maker_fake)
    config = Config(
        workers=(WorkerConfig("a", "tool:python"), WorkerConfig("b", "tool:python")),
    )
    built = pool.build_pool(config, load_catalog(), LlamaModels(n_ctx=512))
    assert made == [("a", 0), ("b", 1)]
    assert [w.backend.reply for w in built.workers] == ["from the table"] * 2  # type: ignore[attr-defined]


def test_train_dispatches_through_the_method_table(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def recording_trainer_fake(config: Any, problems: Any, options: Any, method: str, *_: Any):
        seen.append(method)
        return {"name": options.name, "method": method}

    monkeypatch.setitem(train.TRAINERS, "grpo", recording_trainer_fake)
    options = TrainOptions(name="t", dataset="mcq")
    assert train.train(Config(), [], options, "grpo") == {"name": "t", "method": "grpo"}
    assert seen == ["grpo"]
    with pytest.raises(InputError, match="head, expert-iteration, grpo"):
        train.train(Config(), [], options, "ppo")


def test_a_lora_method_refuses_the_head_methods_options_by_name() -> None:
    from dataclasses import replace

    options = TrainOptions(name="t", dataset="mcq")
    options = replace(options, head=replace(options.head, rounds=2))
    with pytest.raises(InputError, match="--rounds 2: only the head method"):
        train.train(Config(), [], options, "expert-iteration")
