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


def test_each_options_default_is_its_records_default() -> None:
    """A default is written twice (the typer parameter and the record field): they agree."""
    import inspect
    from dataclasses import MISSING

    from conductor_cli.cli.train_cmd import train_cmd

    params = inspect.signature(train_cmd).parameters
    compared = 0
    for record in (HeadOptions, LoraOptions, TrainOptions):
        for f in fields(record):
            # --shapes is read from one string ("a; b") into the record's tuple.
            if f.name in params and f.default is not MISSING and f.name != "shapes":
                assert params[f.name].default == f.default, (record.__name__, f.name)
                compared += 1
    assert compared >= 25


def test_an_option_the_method_or_engine_does_not_read_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    from conductor_cli.config.settings import Config
    from conductor_cli.errors import InputError

    base = TrainOptions(name="t", dataset="mcq")
    samples = replace(base, lora=replace(base.lora, samples=5))
    with pytest.raises(InputError, match=r"^--samples 5: only --engine ours and --engine trl "
                       r"read it; leave it out with --method head$"):  # fmt: skip
        train.train(Config(), [], samples, "head")
    tasks = replace(
        base, head=replace(base.head, tasks="fixed"), lora=replace(base.lora, engine="trl")
    )
    with pytest.raises(InputError, match=r"^--tasks fixed: only the head method reads it; leave "
                       r"it out with --method grpo \(a LoRA .*\) --engine trl$"):  # fmt: skip
        train.train(Config(), [], tasks, "grpo")
    calls = replace(base, head=replace(base.head, max_calls=5, dry_run=True))
    said = r"^--max-calls 5: only the head method and --engine trl read it; leave it out with "
    with pytest.raises(InputError, match=said + r"--method grpo \(a LoRA .*\) --engine ours$"):
        train.train(Config(), [], calls, "grpo")

    # A new method says what it reads in its entry; the rest is refused for it alike.
    def never_called_fake(*_: Any) -> dict[str, Any]:
        raise AssertionError("an option it does not read was given")

    entry = train.Method("distill", "made up", never_called_fake, frozenset({"samples"}))
    monkeypatch.setitem(train.TRAINERS, "distill", entry)
    with pytest.raises(InputError, match=r"^--dry-run: only the head method .* --method distill$"):
        train.train(Config(), [], replace(base, head=replace(base.head, dry_run=True)), "distill")
