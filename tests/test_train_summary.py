"""What `conductor train` prints kind by kind (cli/train_summary.py): from a record alone."""

from __future__ import annotations

from conductor_cli.cli.train_summary import summary


def test_each_kind_says_where_it_goes_what_it_earned_unseen_and_a_kind_given_away() -> None:
    program = "coder[program] > python[run]<0 > coder[check]<0,1"
    record = {
        "name": "mine",
        "method": "head",
        "reward_table": {
            "workflow_runs": 30,
            "worker_calls": 30,
            "best_fixed_shape": "coder",
            "best_fixed_shape_reward": 0.8,
            "picks_by_kind": {"letters": {program: 7, "coder": 1}, "units": {"coder": 6}},
        },
        "fit": {
            "chosen": "softmax 0.01",
            "withheld": "questions and kinds",
            "kinds_given_away": {"softmax 0.01": ["units"], "evolution": ["letters"]},
            "kinds": {
                "letters": {
                    "held_out_reward": 0.8227,
                    "best_member_reward": 0.595,
                    "best_member": "coder",
                },
                "units": {
                    "held_out_reward": 0.7733,
                    "best_member_reward": 0.8867,
                    "best_member": "coder",
                },
            },
        },
        "dataset": {"held_out": 0},
    }
    lines = summary(record).splitlines()
    start = lines.index(
        "  per kind (training questions; the reward the fit earned on those it did not see, "
        "whole kinds withheld too, beside the kind's best member alone):"
    )
    assert lines[start + 1] == f"    letters: {program} 7, coder 1; 0.823 against coder 0.595"
    # Only the chosen fit's kinds given away are said.
    assert lines[start + 2] == "    units: coder 6; 0.773 against coder 0.887: given away"
    # A record written before kinds were named and picks counted still reads.
    del record["reward_table"]["picks_by_kind"], record["fit"]["kinds"]["units"]["best_member"]
    assert "    units: 0.773 against its best member 0.887: given away" in summary(record)
    # A record of another method (no fit) prints no such lines.
    assert "per kind" not in summary({"name": "l", "method": "grpo", "dataset": {}})
