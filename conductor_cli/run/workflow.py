"""Workflow records, the grammar that forces a valid workflow for a pool, and the parsers.

Two written forms parse to the same Workflow:
- our JSON: {"steps": [{"worker": "coder", "task": "...", "sees": [0]}, ...]}
- the paper's three Python lists: model_id = [...], subtasks = [...], access_list = [...]

Repairs (recorded in Workflow.repairs), applied only where the intent is clear:
- JSON wrapped in prose or a code fence is cut out of it;
- a worker name differing only in case or surrounding spaces becomes the pool's name;
- `sees` entries are de-duplicated and sorted; "all" means every earlier step;
- references to the step itself or to later steps are dropped (they cannot have run yet);
- surrounding whitespace is stripped from tasks.
Everything else is rejected with a WorkflowError naming the step: an unknown worker, an empty
task, no steps, more than max_steps steps, lists of different lengths, or text with no workflow.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from conductor_cli.config.settings import CONDUCTOR_WORKER, NESTED_RETIRED
from conductor_cli.errors import WorkflowError

_SPACES = "\\x00-\\x20\\x7F\\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000"

# A task is 3..TASK_MAX_WORDS words of at most WORD_MAX_CHARS characters each: the bound makes
# generation finite, and requiring spaces stops a small model from emitting one endless
# identifier such as "loca_loca_loca_..." (seen with SmolLM2 under a plain length bound).
TASK_MIN_WORDS = 3
TASK_MAX_WORDS = 24
WORD_MAX_CHARS = 16
TASK_MAX_CHARS = TASK_MAX_WORDS * (WORD_MAX_CHARS + 1)

# Under the grammar a task opens with one of these verbs: an instruction, never an answer. The
# 135M conductor otherwise wrote its own guesses as tasks ("The answer is: the capital of
# Australia is Sydney."), and the worker repeated them (issue 17: a third of tasks on facts).
TASK_VERBS = (
    "Add", "Analyze", "Answer", "Break", "Calculate", "Check", "Choose", "Classify", "Combine",
    "Compare", "Compute", "Convert", "Correct", "Count", "Create", "Critique", "Debug",
    "Decide", "Define", "Derive", "Describe", "Design", "Determine", "Draft", "Edit",
    "Estimate", "Evaluate", "Explain", "Extract", "Find", "Fix", "Format", "Give", "Identify",
    "Implement", "Improve", "List", "Merge", "Name", "Outline", "Pick", "Plan", "Prove", "Rank",
    "Read", "Recommend", "Refactor", "Review", "Rewrite", "Simplify", "Solve", "Sort", "State",
    "Suggest", "Summarize", "Test", "Translate", "Verify", "Work", "Write",
)  # fmt: skip
# Added where the pool has a tool worker (run/planner.py: task_verbs).
TOOL_VERBS = ("Execute", "Run")


@dataclass(frozen=True)
class Step:
    worker: str
    task: str
    sees: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"worker": self.worker, "task": self.task, "sees": list(self.sees)}


@dataclass(frozen=True)
class Workflow:
    steps: tuple[Step, ...]
    repairs: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [s.to_dict() for s in self.steps]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @property
    def shape(self) -> str:
        """Who does each step and what it sees, without the tasks: `w0 > w3<0`."""
        return " > ".join(
            s.worker + ("<" + ",".join(map(str, s.sees)) if s.sees else "") for s in self.steps
        )


# ---------------------------------------------------------------------------- grammar


def _lit(text: str) -> str:
    return json.dumps(text)  # a GBNF string literal uses the same escapes as JSON


def gbnf_grammar(
    workers: Sequence[str],
    max_steps: int,
    *,
    allow_empty: bool = False,
    verbs: Sequence[str] = TASK_VERBS,
) -> str:
    """A llama.cpp grammar whose every sentence is a valid workflow for this pool.

    Worker names are an enumeration; each task is a bounded run of words; step k may only see
    a strictly increasing subset of 0..k-1, so indices cannot repeat or run on forever; the
    number of steps is 1..max_steps (0..max_steps with `allow_empty`: a re-planning round's
    "keep the answer"). Every rule is finite, so generation always terminates.
    """
    if not workers:
        raise WorkflowError("the pool has no workers to plan for.")
    if max_steps < 1:
        raise WorkflowError("max_steps must be at least 1.")
    rules: list[str] = []
    nested = ""
    for k in range(max_steps - 1, 0, -1):
        nested = f'( ", " step{k} {nested} )?'
    steps = f"( step0 {nested} )?" if allow_empty else f"step0 {nested}"
    rules.append(f'root ::= "{{\\"steps\\": [" {steps} "]}}"')
    rules.append("worker ::= " + " | ".join(_lit(json.dumps(w)) for w in workers))
    rules.extend(task_rules(verbs))
    for k in range(max_steps):
        rules.append(
            f'step{k} ::= "{{\\"worker\\": " worker ", \\"task\\": " task '
            f'", \\"sees\\": " sees{k} "}}"'
        )
        if k == 0:
            rules.append('sees0 ::= "[]"')
            continue
        firsts = " | ".join(f"i{k}-{j}" for j in range(k))
        rules.append(f'sees{k} ::= "[]" | "[" ( {firsts} ) "]"')
        for j in range(k):
            later = " | ".join(f"i{k}-{m}" for m in range(j + 1, k))
            more = f' ( ", " ( {later} ) )?' if later else ""
            rules.append(f'i{k}-{j} ::= "{j}"{more}')
    return "\n".join(rules) + "\n"


def task_rules(verbs: Sequence[str] = TASK_VERBS) -> list[str]:
    """The grammar rules `task` and `word`: a bounded run of words between quotes."""
    return [
        f'task ::= "\\"" verb ( " " word ){{{TASK_MIN_WORDS - 1},{TASK_MAX_WORDS - 1}}} "\\""',
        "verb ::= " + " | ".join(_lit(v) for v in verbs),
        # Not a quote, backslash, control character or any space Python's str.split() splits
        # on (a no-break space inside a "word" made a 24-word task count 25).
        f'word ::= [^"\\\\{_SPACES}]{{1,{WORD_MAX_CHARS}}}',
    ]


def max_plan_tokens(max_steps: int) -> int:
    """An upper bound on the tokens any sentence of the grammar takes (a token is >= 1 char)."""
    worker_chars = 40  # names are at most 32 characters, plus quotes
    per_step = TASK_MAX_CHARS + worker_chars + 36 + 4 * max_steps
    return max_steps * per_step + 24


def json_schema(workers: Sequence[str], max_steps: int) -> dict[str, Any]:
    """The same shape as a JSON schema, for servers that take one instead of a grammar."""
    return {
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_steps,
                "items": {
                    "type": "object",
                    "properties": {
                        "worker": {"enum": list(workers)},
                        "task": {"type": "string", "minLength": 1, "maxLength": TASK_MAX_CHARS},
                        "sees": {
                            "type": "array",
                            "items": {"type": "integer", "minimum": 0},
                            "maxItems": max_steps,
                        },
                    },
                    "required": ["worker", "task", "sees"],
                },
            }
        },
        "required": ["steps"],
    }


# ---------------------------------------------------------------------------- parsing


def _extract_json_object(text: str) -> tuple[Any, bool] | None:
    """The first JSON object in `text` holding "steps"; True when prose had to be cut away."""
    stripped = text.strip()
    try:
        return json.loads(stripped), False
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "steps" in obj:
            return obj, True
    return None


_LIST_RE = {
    name: re.compile(rf"\b{name}\s*=\s*(\[.*?\])\s*(?:\n|$|;)", re.DOTALL)
    for name in ("model_id", "subtasks", "access_list")
}


def _literal(text: str, name: str) -> Any:
    m = _LIST_RE[name].search(text)
    if not m:
        return None
    try:
        return ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        raise WorkflowError(f"{name} is not a valid Python list literal.") from None


def _parse_list_form(text: str, workers: Sequence[str]) -> list[dict[str, Any]] | None:
    model_id = _literal(text, "model_id")
    if model_id is None:
        return None
    subtasks = _literal(text, "subtasks")
    access = _literal(text, "access_list")
    if subtasks is None or access is None:
        raise WorkflowError("the list form needs model_id, subtasks and access_list together.")
    if not all(isinstance(x, list) for x in (model_id, subtasks)) or not isinstance(access, list):
        raise WorkflowError("model_id, subtasks and access_list must each be a list.")
    if not len(model_id) == len(subtasks) == len(access):
        raise WorkflowError(
            f"model_id, subtasks and access_list have different lengths "
            f"({len(model_id)}, {len(subtasks)}, {len(access)})."
        )
    steps = []
    for i, (mid, task, sees) in enumerate(zip(model_id, subtasks, access, strict=True)):
        if isinstance(mid, int) and not isinstance(mid, bool):
            if not 0 <= mid < len(workers):
                raise WorkflowError(
                    f"step {i}: model_id {mid} is outside the pool (0..{len(workers) - 1})."
                )
            worker: Any = workers[mid]
        else:
            worker = mid
        steps.append({"worker": worker, "task": task, "sees": sees})
    return steps


def parse_workflow(
    text: str, workers: Sequence[str], max_steps: int, *, allow_empty: bool = False
) -> Workflow:
    """Parse either written form and validate it against the pool; see the module doc.
    `allow_empty`: no steps is a valid answer (a re-planning round keeps the answer)."""
    repairs: list[str] = []
    found = _extract_json_object(text)
    if found is not None:
        obj, cut = found
        if cut:
            repairs.append("cut the JSON workflow out of surrounding text")
        if not isinstance(obj, dict) or not isinstance(obj.get("steps"), list):
            raise WorkflowError('expected a JSON object with a "steps" list.')
        raw_steps = obj["steps"]
    else:
        listed = _parse_list_form(text, workers)
        if listed is None:
            snippet = " ".join(text.split())[:80]
            raise WorkflowError(f"no workflow found in the conductor's reply: {snippet!r}")
        raw_steps = listed
    return validate_steps(raw_steps, workers, max_steps, repairs, allow_empty=allow_empty)


def validate_steps(
    raw_steps: list[Any],
    workers: Sequence[str],
    max_steps: int,
    repairs: list[str] | None = None,
    *,
    allow_empty: bool = False,
) -> Workflow:
    repairs = list(repairs or [])
    if not raw_steps:
        if allow_empty:
            return Workflow((), tuple(repairs))
        raise WorkflowError("the workflow has no steps.")
    if len(raw_steps) > max_steps:
        raise WorkflowError(f"the workflow has {len(raw_steps)} steps; the limit is {max_steps}.")
    by_folded = {w.strip().casefold(): w for w in workers}
    steps: list[Step] = []
    for i, raw in enumerate(raw_steps):
        if not isinstance(raw, dict):
            raise WorkflowError(f"step {i}: expected an object with worker, task and sees.")
        worker = raw.get("worker")
        if not isinstance(worker, str):
            raise WorkflowError(f"step {i}: worker must be a name, got {worker!r}.")
        if worker not in workers:
            canonical = by_folded.get(worker.strip().casefold())
            if canonical is None and worker == CONDUCTOR_WORKER:
                raise WorkflowError(
                    f"step {i}: worker 'conductor': {NESTED_RETIRED}; give the step to one of "
                    f"{', '.join(workers)}, or ask with --rounds N."
                )
            if canonical is None:
                raise WorkflowError(
                    f"step {i}: unknown worker {worker!r}; the pool has {', '.join(workers)}."
                )
            repairs.append(f"step {i}: worker {worker!r} read as {canonical!r}")
            worker = canonical
        task = raw.get("task")
        if not isinstance(task, str) or not task.strip():
            raise WorkflowError(f"step {i}: the task is empty.")
        if task != task.strip():
            task = task.strip()
        sees = _clean_sees(raw.get("sees", []), i, repairs)
        steps.append(Step(worker=worker, task=task, sees=sees))
    return Workflow(steps=tuple(steps), repairs=tuple(repairs))


def _clean_sees(sees: Any, i: int, repairs: list[str]) -> tuple[int, ...]:
    if sees == "all":
        return tuple(range(i))
    if sees is None:
        return ()
    if not isinstance(sees, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in sees
    ):
        raise WorkflowError(
            f'step {i}: sees must be a list of step numbers or "all", got {sees!r}.'
        )
    valid = sorted({x for x in sees if 0 <= x < i})
    dropped = sorted({x for x in sees if not 0 <= x < i})
    if dropped:
        repairs.append(f"step {i}: dropped references to steps {dropped} (not earlier steps)")
    elif valid != list(sees):
        repairs.append(f"step {i}: sees de-duplicated and sorted")
    return tuple(valid)
