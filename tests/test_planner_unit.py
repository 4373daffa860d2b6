"""The conductor alone, its model a FakeBackend: the constrained path (grammar), the free path
(parse, one retry with the error shown, then the one-step fallback) and the planning prompt."""

from __future__ import annotations

import dataclasses
import json

import pytest

from conductor_cli.backends.base import Completion, Request, TextSink
from conductor_cli.errors import WorkflowError
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.planner import (
    FALLBACK_TASK,
    FREE_PLAN_MAX_TOKENS,
    Conductor,
    ShapeChooser,
    WorkerInfo,
)
from conductor_cli.run.workflow import Step, gbnf_grammar, max_plan_tokens, parse_workflow
from conductor_cli.testing.fake_backend import FakeBackend, user_text

QUESTION = "How many bones does an adult human have?"
POOL = [
    WorkerInfo("coder", "writes and runs Python"),
    WorkerInfo("scholar", "a large general model, careful with facts and long reasoning"),
    WorkerInfo("quiet", ""),
]
NAMES = ["coder", "scholar", "quiet"]


def workflow_json(*steps: tuple[str, str, list[int]]) -> str:
    return json.dumps({"steps": [{"worker": w, "task": t, "sees": s} for w, t, s in steps]})


GOOD = workflow_json(
    ("scholar", "Count the bones in the adult skeleton.", []),
    ("coder", "Check the count and give the number.", [0]),
)


class Replies:
    """A reply script that answers call n with replies[n] (the last one repeats)."""

    def __init__(self, *replies: str) -> None:
        self.replies = replies
        self.n = 0

    def __call__(self, request: Request) -> str:
        text = self.replies[min(self.n, len(self.replies) - 1)]
        self.n += 1
        return text


def conductor(fake: FakeBackend, chooser: ShapeChooser | None = None) -> Conductor:
    """Built as api.plan_question builds it."""
    return Conductor(fake, temperature=0.3, seed=11, chooser=chooser)


# ---------------------------------------------------------------------------- constrained


def test_with_grammar_support_the_pools_grammar_goes_to_the_model() -> None:
    fake = FakeBackend(reply=GOOD, grammar=True)
    plan = conductor(fake).plan(QUESTION, POOL, (), 3)
    (request,) = fake.requests
    assert request.grammar == gbnf_grammar(NAMES, 3)
    assert request.max_tokens == max_plan_tokens(3)
    assert (request.temperature, request.seed) == (0.3, 11)
    # The system prompt repeats across questions: llama.cpp may keep its state.
    assert request.fixed_messages == 1
    assert plan.workflow.steps == (
        Step("scholar", "Count the bones in the adult skeleton.", ()),
        Step("coder", "Check the count and give the number.", (0,)),
    )
    assert (plan.attempts, plan.fallback, plan.reply) == (1, False, GOOD)
    assert plan.messages == request.messages


def test_a_constrained_reply_that_does_not_parse_is_an_error_not_a_retry() -> None:
    # Under a grammar only a cut-short reply can fail to parse; asking again would repeat it.
    fake = FakeBackend(reply='{"steps": [{"worker": "coder", "task": "Cou', grammar=True)
    with pytest.raises(WorkflowError, match="constrained reply did not parse"):
        conductor(fake).plan(QUESTION, POOL, (), 3)
    assert fake.calls == 1


def test_a_shape_chooser_writes_the_grammar_instead_of_the_pool() -> None:
    class Chooser:
        def __init__(self) -> None:
            self.seen: list[tuple[dict[str, str], ...]] = []

        def grammar(self, messages: tuple[dict[str, str], ...], question: str) -> str:
            self.seen.append(messages)
            return 'root ::= "chosen"'

        def fixed_reply(self, messages: tuple[dict[str, str], ...], question: str) -> str | None:
            return self.fixed

        def close(self) -> None:
            pass

        fixed: str | None = None

    chooser = Chooser()
    fake = FakeBackend(reply=GOOD, grammar=True)
    plan = conductor(fake, chooser=chooser).plan(QUESTION, POOL, (), 3)
    assert fake.requests[0].grammar == 'root ::= "chosen"'
    assert chooser.seen == [plan.messages]
    # A head that fixes the tasks too (`--tasks fixed`) leaves the conductor nothing to write:
    # its workflow is the plan, and no model call is made.
    chooser.fixed = GOOD
    fixed = conductor(fake, chooser=chooser).plan(QUESTION, POOL, (), 3)
    assert len(fake.requests) == 1 and fixed.reply == GOOD and fixed.tokens_out == 0
    assert fixed.workflow == parse_workflow(GOOD, [w.name for w in POOL], 3)
    # Under a --max-steps its shape does not fit, the conductor plans alone (the pool's grammar).
    one = workflow_json(("scholar", "Count the bones.", []))
    small = FakeBackend(reply=one, grammar=True)
    alone = conductor(small, chooser=chooser).plan(QUESTION, POOL, (), 1)
    assert small.requests[0].grammar != 'root ::= "chosen"' and alone.reply == one


def test_without_grammar_support_no_grammar_is_sent() -> None:
    fake = FakeBackend(reply=GOOD, grammar=False)
    plan = conductor(fake).plan(QUESTION, POOL, (), 3)
    (request,) = fake.requests
    assert request.grammar is None
    assert request.max_tokens == FREE_PLAN_MAX_TOKENS
    assert request.fixed_messages == 1
    assert [s.worker for s in plan.workflow.steps] == ["scholar", "coder"]
    assert plan.attempts == 1


# ---------------------------------------------------------------------------- free replies


def test_a_workflow_wrapped_in_prose_is_cut_out_without_asking_again() -> None:
    fake = FakeBackend(reply=f"Sure! Here is the plan:\n```json\n{GOOD}\n```\nGood luck.")
    plan = conductor(fake).plan(QUESTION, POOL, (), 3)
    assert fake.calls == 1
    assert len(plan.workflow.steps) == 2
    assert "cut the JSON workflow out of surrounding text" in plan.workflow.repairs


def test_the_papers_list_form_is_read_too() -> None:
    reply = (
        "model_id = [1, 'coder']\n"
        "subtasks = ['Count the bones.', 'Check the count.']\n"
        "access_list = [[], [0]]\n"
    )
    plan = conductor(FakeBackend(reply=reply)).plan(QUESTION, POOL, (), 3)
    assert plan.workflow.steps == (
        Step("scholar", "Count the bones.", ()),
        Step("coder", "Check the count.", (0,)),
    )


def test_a_worker_name_in_another_case_is_read_as_the_pools_name() -> None:
    reply = workflow_json(("  Scholar ", "Count the bones.", []))
    fake = FakeBackend(reply=reply)
    plan = conductor(fake).plan(QUESTION, POOL, (), 3)
    assert fake.calls == 1
    assert plan.workflow.steps[0].worker == "scholar"
    assert any("read as 'scholar'" in r for r in plan.workflow.repairs)


def test_an_unknown_worker_is_shown_to_the_conductor_which_answers_again() -> None:
    first = workflow_json(("gpt-9", "Count the bones.", []))
    fake = FakeBackend(reply=Replies(first, GOOD))
    plan = conductor(fake).plan(QUESTION, POOL, (), 3)
    assert fake.calls == 2
    retry = fake.requests[1]
    # The retry is the first conversation, the conductor's own reply, and the error.
    assert retry.messages[:2] == fake.requests[0].messages
    assert retry.messages[2] == {"role": "assistant", "content": first}
    correction = retry.messages[3]
    assert correction["role"] == "user"
    assert "unknown worker 'gpt-9'" in correction["content"]
    assert "using only these workers: coder, scholar, quiet." in correction["content"]
    assert retry.grammar is None
    assert (plan.attempts, plan.fallback) == (2, False)
    assert [s.worker for s in plan.workflow.steps] == ["scholar", "coder"]
    assert plan.messages == retry.messages
    assert plan.reply == GOOD


def test_a_retried_plan_counts_the_tokens_of_both_calls() -> None:
    prose = "I think scholar should do it."
    fake = FakeBackend(reply=Replies(prose, GOOD))
    plan = conductor(fake).plan(QUESTION, POOL, (), 3)
    first_in = sum(len(m["content"].split()) for m in fake.requests[0].messages)
    second_in = sum(len(m["content"].split()) for m in fake.requests[1].messages)
    assert plan.tokens_in == first_in + second_in
    assert plan.tokens_out == len(prose.split()) + len(GOOD.split())


def test_too_many_steps_is_corrected_on_the_second_try() -> None:
    long = workflow_json(*[("coder", f"Write part {i} of it.", []) for i in range(3)])
    fake = FakeBackend(reply=Replies(long, GOOD))
    plan = conductor(fake).plan(QUESTION, POOL, (), 2)
    assert "the workflow has 3 steps; the limit is 2." in user_text(fake.requests[1])
    assert len(plan.workflow.steps) == 2


def test_two_bad_replies_give_one_step_for_the_best_described_worker() -> None:
    fake = FakeBackend(reply=Replies("no idea", '{"steps": []}'))
    plan = conductor(fake).plan(QUESTION, POOL, (), 3)
    assert fake.calls == 2  # no third try
    assert plan.fallback
    assert plan.attempts == 2
    # scholar's description is the longest: the pool's own account of its strongest member.
    assert plan.workflow.steps == (Step("scholar", FALLBACK_TASK, ()),)
    (repair,) = plan.workflow.repairs
    assert "no valid workflow in two tries" in repair
    assert "the workflow has no steps." in repair


def test_the_fallback_picks_the_longest_description_ties_going_to_the_first() -> None:
    fake = FakeBackend(reply="still no workflow")
    tied = [WorkerInfo("a", "short"), WorkerInfo("b", "short")]
    plan = conductor(fake).plan(QUESTION, tied, (), 3)
    assert plan.workflow.steps == (Step("a", FALLBACK_TASK, ()),)
    longer = [*tied, WorkerInfo("c", "a much longer description")]
    plan = conductor(fake).plan(QUESTION, longer, (), 3)
    assert plan.workflow.steps == (Step("c", FALLBACK_TASK, ()),)


def test_the_plan_is_cached_only_when_every_call_was() -> None:
    assert conductor(FakeBackend(reply=GOOD, cached=True)).plan(QUESTION, POOL, (), 3).cached
    assert not conductor(FakeBackend(reply=GOOD)).plan(QUESTION, POOL, (), 3).cached
    retried = FakeBackend(reply=Replies("nothing", GOOD), cached=True)
    assert conductor(retried).plan(QUESTION, POOL, (), 3).cached

    class FirstCallCached(FakeBackend):
        def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
            done = super().complete(request, on_text)
            return dataclasses.replace(done, cached=self.calls == 1)

    # A retry the cache did not know is a new plan, whatever the first reply was.
    half = FirstCallCached(reply=Replies("nothing", GOOD))
    plan = conductor(half).plan(QUESTION, POOL, (), 3)
    assert (plan.attempts, plan.cached) == (2, False)


# ---------------------------------------------------------------------------- the prompt


def test_the_planning_prompt_lists_every_worker_with_its_description() -> None:
    fake = FakeBackend(reply=GOOD)
    conductor(fake).plan(QUESTION, POOL, (), 3)
    system, user = fake.requests[0].messages
    assert system["role"] == "system"
    assert "- coder: writes and runs Python\n" in system["content"]
    assert f"- scholar: {POOL[1].description}\n" in system["content"]
    assert "- quiet: no description\n" in system["content"]
    assert "up to 3." in system["content"]
    assert user == {"role": "user", "content": f"Question: {QUESTION}"}


def test_the_examples_use_only_the_pools_workers_and_fit_max_steps() -> None:
    fake = FakeBackend(reply=GOOD)
    conductor(fake).plan(QUESTION, POOL, (), 2)
    system = fake.requests[0].messages[0]["content"]
    examples = [json.loads(line) for line in system.splitlines() if line.startswith('{"steps"')]
    assert examples
    assert all(len(e["steps"]) <= 2 for e in examples)
    assert {s["worker"] for e in examples for s in e["steps"]} <= set(NAMES)


def test_a_one_step_limit_asks_for_one_step() -> None:
    fake = FakeBackend(reply=workflow_json(("coder", "Count them.", [])))
    conductor(fake).plan(QUESTION, POOL, (), 1)
    system = fake.requests[0].messages[0]["content"]
    assert "Use one step." in system
    examples = [json.loads(line) for line in system.splitlines() if line.startswith('{"steps"')]
    assert examples and all(len(e["steps"]) == 1 for e in examples)


def test_attachments_are_previewed_not_pasted_whole() -> None:
    text = "femur " * 100
    fake = FakeBackend(reply=GOOD)
    conductor(fake).plan(QUESTION, POOL, [Attachment("bones.txt", text)], 3)
    user = user_text(fake.requests[0])
    assert f"Attached bones.txt ({len(text)} bytes; every worker sees all of it)" in user
    assert text not in user
    assert user.endswith(" …")
