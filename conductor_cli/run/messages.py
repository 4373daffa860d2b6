"""The messages a worker step receives: the question, the attachments, the outputs it sees and
its task, in the form small and large models both answer well (bench/worker_messages.py).

Small instruct models answer a bare question far better than one wrapped in a team persona
(SmolLM2-135M: "The capital of France is Paris." against a half-French loop), and a strong
model loses nothing by reading the question as the user wrote it. So a step whose task only
restates the question reaches its worker as the question itself. The outputs a step sees come
as earlier turns of the conversation, as the paper lays them out: measured on the embedded
model, that beat putting them inside one user message (bench/worker_messages.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from conductor_cli.run.inputs import Attachment, attachment_budget, fit_attachments
from conductor_cli.run.pool import Pool, Worker
from conductor_cli.run.workflow import Workflow
from conductor_cli.sandbox.fences import only_python_blocks
from conductor_cli.tools.examples import RETRY, TEST, holds_tests
from conductor_cli.tools.outline import OUTLINED, outline

# Words that carry no content of their own in a task: asking for the answer in some form.
_FILLER_WORDS = """a an the of to in on at for and or but is are was were be it its this that these
    those what which who whom whose when where why how do does did can could will would should
    please your you me my i we our answer answers answered question questions reply respond response
    short shortly brief briefly concise concisely clear clearly direct directly simple simply
    exact exactly correct correctly final complete completely full fully given following above
    below one two few word words sentence sentences line lines result results value out up
    about with from by as just only step steps"""
# The instruction verbs that ask for the answer and nothing else.
_ANSWER_VERBS = """answer find give state name determine identify calculate compute solve work tell
    provide say return output print write"""
_FILLER = frozenset(_FILLER_WORDS.split()) | frozenset(_ANSWER_VERBS.split())

_WORD = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _stem(word: str) -> str:
    """Plural and possessive endings off, so "capitals" meets "capital"."""
    for end in ("'s", "es", "s"):
        if len(word) > len(end) + 2 and word.endswith(end):
            return word[: -len(end)]
    return word


def restates(task: str, question: str) -> bool:
    """Whether `task` asks for nothing the question does not already ask: every content word of
    the task (not filler, not an instruction verb) is a word of the question.

    "Find the capital of France." restates "What is the capital of France?"; "Answer the
    question." restates anything; "Translate the answer into German." does not.
    """
    asked = {_stem(w) for w in _words(question)}
    return all(_stem(w) in asked for w in _words(task) if w not in _FILLER)


# What a model step whose output a python tool runs is asked for (see step_messages).
PROGRAM_REQUEST = (
    "Reply with a Python program in one ```python block that computes this and prints the result."
)


def step_messages(
    question: str,
    attachments: Sequence[Attachment],
    workflow: Workflow,
    index: int,
    outputs: Mapping[int, str],
    worker: Worker,
    *,
    for_python: bool = False,
    programs: frozenset[int] = frozenset(),
    own: Mapping[int, Sequence[dict[str, str]]] | None = None,
) -> tuple[dict[str, str], ...]:
    """The step as a conversation (the paper's layout): each step it sees comes first as an
    earlier exchange (that step's task, then its output as the assistant's reply), then one
    user message with the question, the attachments (cut to the worker's context) and the
    task, which is left out when it only restates the question and the step sees nothing.

    `for_python`: a later `tool:python` step sees this one, so the model is asked for the
    program that tool runs (program-aided answering): the workflow's shape says "compute
    this with code", whatever words the conductor chose for the task.

    `programs`: seen steps whose program a seen tool step ran (programs_run); each is shown
    without what its writer said the program prints (fences.only_python_blocks).

    A step that writes code again after failed examples (tools/examples.RETRY) is shown each
    attached code file as its outline (tools/outline): documented functions without the
    bodies that failed, so the try is a fresh one.

    `own`: the messages seen steps run by this same worker were given. The first step seen, if
    among them, comes as that very exchange (its messages, then its output) instead of its
    task alone: the worker continues its own conversation, and a local model keeps what it
    read and wrote then instead of reading the question and its program again
    (backends/llamacpp.continues)."""
    step = workflow.steps[index]
    if step.task == RETRY:
        attachments = [_outlined(a) for a in attachments]
    history: list[dict[str, str]] = []
    for n, j in enumerate(step.sees):
        earlier = workflow.steps[j]
        shown = outputs[j].strip()
        if j in programs:
            shown = only_python_blocks(shown)
        if n == 0 and own is not None and j in own:
            history.extend(dict(m) for m in own[j])
        else:
            history.append(
                {"role": "user", "content": f"Step {j} ({earlier.worker}): {earlier.task}"}
            )
        history.append({"role": "assistant", "content": shown})
    task = [] if restates(step.task, question) and not step.sees else [step.task]
    if for_python and not worker.tool:
        task.append(PROGRAM_REQUEST)
    other = len(question) + sum(len(m["content"]) for m in history) + sum(map(len, task))
    budget = attachment_budget(worker.context_tokens, worker.config.max_tokens, other)
    fitted, _ = fit_attachments(tuple(attachments), budget)
    attached = [f"Attached {a.name}:\n```\n{a.text.rstrip()}\n```" for a in fitted]
    return (*history, {"role": "user", "content": "\n\n".join([question, *attached, *task])})


def _outlined(attachment: Attachment) -> Attachment:
    cut = outline(attachment.text)
    if cut is None or holds_tests(attachment.text):
        return attachment
    return Attachment(f"{attachment.name}, {OUTLINED}", cut)


def _runs_programs(pool: Pool, worker: str) -> bool:
    return pool.get(worker).config.spec.runs_programs


def feeds_python(workflow: Workflow, index: int, pool: Pool) -> bool:
    """Whether a later step of `workflow` that sees step `index` runs its program (a tool
    that runs programs, `tool:python`); one told to test its code on the question's examples
    (tools/examples.TEST) wants the code asked for, not a program that prints an answer."""
    return any(
        index in later.sees and _runs_programs(pool, later.worker) and later.task != TEST
        for later in workflow.steps[index + 1 :]
    )


def programs_run(workflow: Workflow, index: int, pool: Pool) -> frozenset[int]:
    """The steps step `index` sees whose program a tool step it also sees ran. A model step
    shown both is not shown what the writer said its program "will output": a guess the run
    contradicts, which a checking step read over the run (12 printed, 13 answered;
    bench/data/letters.jsonl, letters-14)."""
    if pool.get(workflow.steps[index].worker).config.tool:
        return frozenset()  # a tool reads the whole outputs (python_tool.find_program)
    sees = workflow.steps[index].sees
    return frozenset(
        j
        for k in sees
        if _runs_programs(pool, workflow.steps[k].worker)
        for j in workflow.steps[k].sees
        if j in sees
    )
