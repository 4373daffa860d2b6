"""`conductor train --shapes`: the workflow shapes a head chooses among, named by their labels
(policy/shapes.parse_shape is Shape.label read back), words included."""

from __future__ import annotations

import pytest

from conductor_cli.errors import InputError
from conductor_cli.policy.shapes import (
    Shape,
    enumerate_shapes,
    join_shapes,
    parse_shape,
    program_shape,
)
from conductor_cli.train.head_method import chosen_shapes

WORKERS = ["local", "coder", "python"]


def test_every_label_reads_back_as_its_shape() -> None:
    shapes = enumerate_shapes(WORKERS, 3) + join_shapes(WORKERS)
    shapes += [
        program_shape("coder", "python"),
        Shape(("coder", "python", "coder"), ((), (0,), (0, 1))),
    ]
    shapes += [Shape(("coder", "python", "coder"), ((), (0,), (0, 1)), ("program", "run", "check"))]
    for shape in shapes:
        assert parse_shape(shape.label, WORKERS) == shape
    assert parse_shape(" coder>python<0 ", WORKERS) == Shape(("coder", "python"), ((), (0,)))


@pytest.mark.parametrize(
    ("label", "said"),
    [
        ("coder > writer<0", "no worker 'writer' in the pool (local, coder, python)"),
        ("coder<0", "step 0 can see only earlier steps"),
        ("coder > python<1", "step 1 can see only earlier steps"),
        ("coder[poem]", "no words 'poem'; use one of answer, check, program, run"),
        ("coder[program] > python<0", "name the words of every step, or of none"),
        ("coder > > python", "step 1 '' is not WORKER[words]<i,j"),
    ],
)
def test_a_wrong_label_is_refused_in_one_line_naming_the_fault(label: str, said: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_shape(label, WORKERS)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_chosen_shapes_start_with_each_member_alone_and_keep_the_order_given() -> None:
    shapes = chosen_shapes(["coder > python<0", "coder", "coder > python<0"], WORKERS, 5, "shapes")
    assert [s.label for s in shapes] == ["local", "coder", "python", "coder > python<0"]


def test_chosen_shapes_refuse_what_the_conductor_cannot_plan() -> None:
    with pytest.raises(InputError, match=r"3 steps, over conductor\.max_steps 2"):
        chosen_shapes(["coder > python<0 > coder<0,1"], WORKERS, 2, "shapes")
    with pytest.raises(InputError, match="--policy shapes"):
        chosen_shapes(["coder"], WORKERS, 5, "steps")


def test_a_pool_with_a_program_tool_measures_programs_by_default() -> None:
    """Without --shapes, each model's program run by the python tool is a candidate, in those
    words (a model asked to answer writes no program, so `coder > python<0` runs nothing)."""
    from dataclasses import replace

    from conductor_cli.config.settings import Config, WorkerConfig
    from conductor_cli.train.head_method import candidate_shapes, pool_programs

    config = Config()  # the embedded default: local, coder, python
    programs = pool_programs(config, 5)
    labels = [s.label for s in programs]
    assert labels == [
        "local[program] > python[run]<0",
        "local[program] > python[run]<0 > local[check]<0,1",
        "coder[program] > python[run]<0",
        "coder[program] > python[run]<0 > coder[check]<0,1",
    ]
    assert [s.label for s in pool_programs(config, 2)] == labels[::2]
    shapes = candidate_shapes(WORKERS, 5, "adaptive", "shapes", programs, frozenset({"python"}))
    assert [s.label for s in shapes[-4:]] == labels
    assert len({s.label for s in shapes}) == len(shapes)
    # A tool step that sees nothing has nothing to run: only python alone keeps one.
    blind = [
        s.label
        for s in shapes
        if any(w == "python" and not v for w, v in zip(s.workers, s.sees, strict=True))
    ]
    assert blind == ["python"]
    assert "local > coder > python<0,1" in [s.label for s in shapes]
    assert "coder > python > python<0,1" not in [s.label for s in shapes]
    assert len(candidate_shapes(WORKERS, 5, "adaptive", "shapes")) > len(shapes) - len(labels)
    # No tool that runs programs (a pool of models only): nothing added.
    models_only = replace(
        config, workers=(WorkerConfig("a", "gguf:x"), WorkerConfig("b", "gguf:y"))
    )
    assert pool_programs(models_only, 5) == []
