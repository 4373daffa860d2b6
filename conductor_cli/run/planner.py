"""The conductor: turns a question and a pool into a validated workflow.

A conductor run in llama.cpp is forced by a grammar built for the pool at hand, so even a
135M model always writes a valid workflow. A conductor served through litellm gets no grammar:
its reply is parsed (JSON or the paper's list form), repaired where the intent is clear, and on
failure it is asked once more with the error shown to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from conductor_cli.backends.base import Backend, Completion, Request
from conductor_cli.config.settings import CODE_RETRIES
from conductor_cli.errors import WorkflowError
from conductor_cli.models.spec import ModelSpec
from conductor_cli.run.inputs import Attachment
from conductor_cli.run.user_tests import with_user_tests
from conductor_cli.run.workflow import (
    TASK_VERBS,
    TOOL_VERBS,
    Step,
    Workflow,
    gbnf_grammar,
    max_plan_tokens,
    parse_workflow,
)
from conductor_cli.tools import default_description

FREE_PLAN_MAX_TOKENS = 1024
_PREVIEW_CHARS = 200


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    description: str
    tool: bool = False  # a tool worker (tool:python): its tasks may say "Run" or "Execute"
    runs_programs: bool = False  # a tool that runs programs (ModelSpec.runs_programs)


@dataclass(frozen=True)
class Plan:
    workflow: Workflow
    messages: tuple[dict[str, str], ...]
    reply: str
    attempts: int
    tokens_in: int
    tokens_out: int
    seconds: float
    cached: bool = False
    # The conductor wrote no valid workflow in two tries: one step for the best-described worker.
    fallback: bool = False


# The prompt's example workflows, one per shape, each on a topic unlike the questions users ask.
# The paper found that examples from other kinds of task teach the format without handing the
# conductor a strategy to copy (a 135M conductor copied generic "easy/hard" examples word for
# word). Each is (question, steps); a step is (task, sees). Tasks are short and faithful to
# their question, which every worker reads too. The one-step example comes last: the 135M
# conductor leans on the last example, and most questions need one step (bench/copy_rate.py).
EXAMPLES: tuple[tuple[str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = (
    (  # solve, then check
        "White has a king and a rook against a lone king. How does White force mate?",
        (
            ("Work out the mating plan for White, move by move.", ()),
            ("Check every move for mistakes and give the corrected plan.", (0,)),
        ),
    ),
    (  # two attempts in parallel, then compare
        "Write a regex that matches a 24-hour time such as 23:59.",
        (
            ("Write the regex and test it on a few times.", ()),
            ("Write your own regex and test it on edge cases like 24:00.", ()),
            ("Compare both regexes and give the one that is right.", (0, 1)),
        ),
    ),
    (  # plan, write, review
        "Write a knitting pattern for a striped scarf.",
        (
            ("Choose the yarn, needles, width and stripe colours.", ()),
            ("Write the pattern row by row from that plan.", (0,)),
            ("Review the pattern for errors and give the final version.", (1,)),
        ),
    ),
    (  # one step; its task names no operation a short question could borrow (with "convert
        # the cups to grams" here, the 135M conductor asked for grams on capitals and dates)
        "Which planet in the solar system is the largest?",
        (("Name the planet in a few words.", ()),),
    ),
)


def example_workflows(names: Sequence[str], max_steps: int) -> list[tuple[str, Workflow]]:
    """The examples that fit `max_steps`, their workers taken in turn from the pool's names."""
    usable = list(names)
    out: list[tuple[str, Workflow]] = []
    turn = 0
    for question, steps in EXAMPLES:
        if len(steps) > max_steps:
            continue
        chosen = []
        for task, sees in steps:
            chosen.append(Step(usable[turn % len(usable)], task, sees))
            turn += 1
        out.append((question, Workflow(tuple(chosen))))
    return out


def _examples(names: Sequence[str], max_steps: int) -> str:
    return "\n".join(
        f"Question: {q}\n{w.to_json()}" for q, w in example_workflows(names, max_steps)
    )


def system_prompt(pool: Sequence[WorkerInfo], max_steps: int) -> str:
    roster = "\n".join(f"- {w.name}: {w.description or 'no description'}" for w in pool)
    names = [w.name for w in pool]
    size = (
        "Use one step."
        if max_steps == 1
        else "A question with a short answer (a fact, a number, a date) needs one step; a hard "
        f"one up to {max_steps}."
    )
    return (
        "You are the conductor of a team of AI workers. You do not answer the question "
        "yourself: you write a workflow, a short list of steps, and each step gives one worker "
        "one short instruction. Every worker reads the question too.\n"
        "A step may read the outputs of earlier steps: list their numbers (counting from 0) in "
        '"sees". The output of the last step is the final answer, so the last step must '
        f"produce the complete answer. {size}\n\n"
        f"The workers:\n{roster}\n\n"
        "Reply with the workflow as JSON only. Examples on other topics (write your own "
        "instructions for each question):\n"
        f"{_examples(names, max_steps)}"
    )


def user_prompt(question: str, attachments: Sequence[Attachment]) -> str:
    parts = [f"Question: {question}"]
    for a in attachments:
        preview = a.text[:_PREVIEW_CHARS].rstrip()
        more = " …" if len(a.text) > _PREVIEW_CHARS else ""
        parts.append(
            f"Attached {a.name} ({a.size} bytes; every worker sees all of it), "
            f"beginning:\n{preview}{more}"
        )
    return "\n\n".join(parts)


def plan_messages(
    question: str, pool: Sequence[WorkerInfo], attachments: Sequence[Attachment], max_steps: int
) -> tuple[dict[str, str], ...]:
    return (
        {"role": "system", "content": system_prompt(pool, max_steps)},
        {"role": "user", "content": user_prompt(question, attachments)},
    )


# The earlier answer as a re-planning conductor reads it (the steps see all of it).
ANSWER_BUDGET_CHARS = 1500
KEEP_REPLY = '{"steps": []}'


def replan_messages(
    question: str,
    pool: Sequence[WorkerInfo],
    attachments: Sequence[Attachment],
    max_steps: int,
    previous: Workflow,
    answer: str,
) -> tuple[dict[str, str], ...]:
    """Round k > 1: the first round's conversation, its workflow as the conductor's reply, then
    the choice (keep the answer, or correct it) and last the team's answer (cut to
    ANSWER_BUDGET_CHARS). The answer comes last so that the prompt's final hidden state, which
    a head trained with `--rounds` decides from, has just read it (train/round_head.py)."""
    shown = answer.strip()[:ANSWER_BUDGET_CHARS]
    if len(answer.strip()) > ANSWER_BUDGET_CHARS:
        shown += " …(cut)"
    return (
        *plan_messages(question, pool, attachments, max_steps),
        {"role": "assistant", "content": previous.to_json()},
        {
            "role": "user",
            "content": "Your team ran that workflow. If its final answer below is right and "
            f"complete, reply {KEEP_REPLY} to keep it. Otherwise reply with a corrective "
            "workflow: every step of it reads that answer too, so a step can check it or fix "
            f"it.\n\nYour team's final answer:\n{shown}",
        },
    )


FALLBACK_TASK = "Answer the question completely and directly, using any attached material."


def one_step_fallback(pool: Sequence[WorkerInfo], error: WorkflowError) -> Workflow:
    """One step for the worker with the longest description (ties: the first listed)."""
    best = max(pool, key=lambda w: len(w.description))  # max keeps the first of equals
    return Workflow(
        (Step(best.name, FALLBACK_TASK, ()),),
        repairs=(f"no valid workflow in two tries ({error}); one step for {best.name}",),
    )


class ShapeChooser(Protocol):
    """A trained part that decides the workflow's shape (workers, what each step sees) from the
    planning prompt; the conductor then writes only the tasks (see policy/chooser.py)."""

    # Lines said with every answer it plans: what its training never measured of this pool.
    notes: tuple[str, ...]

    def grammar(self, messages: tuple[dict[str, str], ...], question: str) -> str:
        """The grammar of the shape it chooses from the planning prompt and the question."""
        ...

    def fixed_reply(self, messages: tuple[dict[str, str], ...], question: str) -> str | None:
        """The whole workflow when the trained part fixes the tasks too (`--tasks fixed`): the
        conductor has nothing to write, so nothing is generated; None when it writes tasks."""
        ...

    def replan_grammar(self, messages: tuple[dict[str, str], ...]) -> str | None:
        """A later round's decision from the re-planning prompt: the empty workflow (keep the
        answer) or a corrective shape; None when it was not trained for rounds."""
        ...

    def close(self) -> None: ...


class Conductor:
    def __init__(
        self,
        backend: Backend,
        *,
        temperature: float,
        seed: int,
        chooser: ShapeChooser | None = None,
        step_penalty: float = 0.0,
        code_retries: int = CODE_RETRIES,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        self.backend = backend
        self.code_retries = code_retries
        self.temperature = temperature
        self.seed = seed
        self.chooser = chooser
        self.step_penalty = step_penalty
        self.cancelled = cancelled  # the run's cancel flag: planning stops between tokens

    def plan(
        self,
        question: str,
        pool: Sequence[WorkerInfo],
        attachments: Sequence[Attachment],
        max_steps: int,
        *,
        tests: bool = True,
    ) -> Plan:
        """The conductor's plan for `question`, then (`tests`) the test steps the question's
        own tests or examples call for (run/user_tests.py); an agent's turn gets none: its
        last step is the one that may call the client's tools."""
        plan = self._first_plan(question, pool, attachments, max_steps)
        if not tests:
            return plan
        workflow = with_user_tests(
            plan.workflow, pool, attachments, question, retries=self.code_retries
        )
        return plan if workflow is plan.workflow else replace(plan, workflow=workflow)

    def _first_plan(
        self,
        question: str,
        pool: Sequence[WorkerInfo],
        attachments: Sequence[Attachment],
        max_steps: int,
    ) -> Plan:
        messages = plan_messages(question, pool, attachments, max_steps)
        chooser = self.chooser
        if chooser is not None:
            start = time.monotonic()
            reply = chooser.fixed_reply(messages, question)
            if reply is not None:
                try:
                    workflow = parse_workflow(reply, [w.name for w in pool], max_steps)
                except WorkflowError:
                    chooser = None  # more steps than --max-steps allows: the conductor plans
                else:
                    return Plan(workflow, messages, reply, 1, 0, 0, time.monotonic() - start)
        grammar = None
        if self.backend.supports_grammar:
            names = [w.name for w in pool]
            grammar = (
                chooser.grammar(messages, question)
                if chooser is not None
                else gbnf_grammar(names, max_steps, verbs=task_verbs(pool))
            )
        return self._plan(messages, pool, max_steps, grammar, replan=False)

    def replan(
        self,
        question: str,
        pool: Sequence[WorkerInfo],
        attachments: Sequence[Attachment],
        max_steps: int,
        previous: Workflow,
        answer: str,
    ) -> Plan:
        """A later round: the conductor reads its previous workflow and the team's answer, and
        writes a corrective workflow or the empty one (keep the answer). Raises WorkflowError
        when no valid reply comes in two tries (the run then keeps the answer it has)."""
        messages = replan_messages(question, pool, attachments, max_steps, previous, answer)
        grammar = None
        if self.backend.supports_grammar:
            # A chooser trained with rounds decides keep or the corrective shape; otherwise the
            # re-plan is the conductor's own.
            if self.chooser is not None:
                grammar = self.chooser.replan_grammar(messages)
            if grammar is None:
                grammar = gbnf_grammar(
                    [w.name for w in pool], max_steps, allow_empty=True, verbs=task_verbs(pool)
                )
        return self._plan(messages, pool, max_steps, grammar, replan=True)

    def _plan(
        self,
        messages: tuple[dict[str, str], ...],
        pool: Sequence[WorkerInfo],
        max_steps: int,
        grammar: str | None,
        *,
        replan: bool,
    ) -> Plan:
        names = [w.name for w in pool]
        start = time.monotonic()
        if grammar is not None:
            done = self._call(messages, max_plan_tokens(max_steps), grammar)
            try:
                workflow = parse_workflow(done.text, names, max_steps, allow_empty=replan)
            except WorkflowError as e:
                # The grammar makes this unreachable unless max_tokens cut the reply short.
                raise WorkflowError(
                    f"the conductor's constrained reply did not parse: {e}"
                ) from None
            return Plan(
                workflow,
                messages,
                done.text,
                1,
                done.tokens_in,
                done.tokens_out,
                time.monotonic() - start,
                done.cached,
            )
        return self._plan_free(messages, pool, max_steps, start, replan=replan)

    def _call(
        self, messages: tuple[dict[str, str], ...], max_tokens: int, grammar: str | None
    ) -> Completion:
        return self.backend.complete(
            Request(
                messages=messages,
                max_tokens=max_tokens,
                temperature=self.temperature,
                seed=self.seed,
                grammar=grammar,
                # A grammar's price per further step (a served conductor has no grammar).
                step_penalty=self.step_penalty if grammar is not None else 0.0,
                fixed_messages=1,  # the system prompt: instructions and pool, same every time
                cancelled=self.cancelled,
            )
        )

    def _plan_free(
        self,
        messages: tuple[dict[str, str], ...],
        pool: Sequence[WorkerInfo],
        max_steps: int,
        start: float,
        *,
        replan: bool = False,
    ) -> Plan:
        names = [w.name for w in pool]
        first = self._call(messages, FREE_PLAN_MAX_TOKENS, None)
        try:
            workflow = parse_workflow(first.text, names, max_steps, allow_empty=replan)
            return Plan(
                workflow,
                messages,
                first.text,
                1,
                first.tokens_in,
                first.tokens_out,
                time.monotonic() - start,
                first.cached,
            )
        except WorkflowError as e:
            error = e
        keep = ' (or {"steps": []} to keep the answer)' if replan else ""
        retry_messages = (
            *messages,
            {"role": "assistant", "content": first.text},
            {
                "role": "user",
                "content": f"That workflow is invalid: {error} Reply again with only the "
                f"corrected JSON workflow{keep}, using only these workers: {', '.join(names)}.",
            },
        )
        second = self._call(retry_messages, FREE_PLAN_MAX_TOKENS, None)
        fallback = False
        try:
            workflow = parse_workflow(second.text, names, max_steps, allow_empty=replan)
        except WorkflowError as e:
            if replan:
                raise WorkflowError(f"no valid re-plan in two tries ({e})") from None
            # Still nothing usable: the question goes, whole, to the worker whose description
            # says the most about it (the pool's own account of its strongest member).
            workflow = one_step_fallback(pool, e)
            fallback = True
        return Plan(
            workflow,
            retry_messages,
            second.text,
            2,
            first.tokens_in + second.tokens_in,
            first.tokens_out + second.tokens_out,
            time.monotonic() - start,
            first.cached and second.cached,
            fallback,
        )


class _Described(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def tool(self) -> bool: ...
    @property
    def spec(self) -> ModelSpec: ...


def task_verbs(pool: Sequence[WorkerInfo]) -> tuple[str, ...]:
    """The verbs a task may open with: a pool with a tool adds the verbs its tasks need (and
    only then, so a pool of models plans under the same grammar as before)."""
    return TASK_VERBS + TOOL_VERBS if any(w.tool for w in pool) else TASK_VERBS


def worker_infos(workers: Sequence[_Described]) -> list[WorkerInfo]:
    """The pool as the conductor's planning prompt lists it (training uses the same)."""
    # Training passes config entries (WorkerConfig), whose description is the file's own.
    return [
        WorkerInfo(
            w.name, w.description or default_description(w.spec), w.tool, w.spec.runs_programs
        )
        for w in workers
    ]
