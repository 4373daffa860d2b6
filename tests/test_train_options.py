"""`conductor train`'s options reach the method as the records they fill (train/shared.py's
HeadOptions, LoraOptions and TrainOptions, each field the `--option` of its name): the CLI
builds them by name, so a new option is a field and a typer parameter of the same name."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conductor_cli import train
from conductor_cli.cli.app import app
from conductor_cli.train.shared import HeadOptions, LoraOptions, TrainOptions


def test_each_option_fills_the_field_of_its_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[TrainOptions] = []

    def recording_trainer_fake(config: Any, problems: Any, options: Any, method: str, *_: Any):
        seen.append(options)
        return {"name": options.name, "method": method, "dry_run": True}

    monkeypatch.setitem(
        train.TRAINERS, "head", train.Method("head", "a fake", recording_trainer_fake)
    )
    config = tmp_path / "config.toml"
    config.write_text('[[workers]]\nname = "local"\nmodel = "gguf:smollm2-135m-instruct"\n')
    monkeypatch.setenv("CONDUCTOR_CONFIG", str(config))
    data = tmp_path / "qa.jsonl"
    data.write_text(
        "".join(f'{{"question": "q{i}?", "answer": "a{i}"}}\n' for i in range(5)), encoding="utf-8"
    )
    done = CliRunner().invoke(app, [
        "train", "qa", str(data), "--out", "mine", "--step-cost", "0.05", "--learn-words", "2",
        "--shapes", "local; local > local<0", "--holdout", "0.4", "--seed", "3",
        "--samples", "5", "--engine", "trl", "--tasks", "fixed", "--cost-weight", "0.5",
    ])  # fmt: skip
    assert done.exit_code == 0, done.output
    (options,) = seen
    assert (options.name, options.dataset, options.holdout, options.seed) == ("mine", "qa", 0.4, 3)
    assert options.cost_weight == 0.5
    head = options.head
    assert (head.step_cost, head.learn_words, head.tasks) == (0.05, 2, "fixed")
    assert head.shapes == ("local", "local > local<0")
    assert head.pca_dims == HeadOptions().pca_dims  # no option of that name: its default
    assert (options.lora.samples, options.lora.engine) == (5, "trl")


def test_every_field_but_a_few_is_an_option_of_train() -> None:
    import inspect

    from conductor_cli.cli.train_cmd import train_cmd

    params = set(inspect.signature(train_cmd).parameters)
    no_option = {"pca_dims", "evaluate_before", "head", "lora", "name"}  # name: --out
    for record in (HeadOptions, LoraOptions, TrainOptions):
        missing = {f.name for f in fields(record)} - params - no_option
        assert not missing, (record.__name__, missing)
