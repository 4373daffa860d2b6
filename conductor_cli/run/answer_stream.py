"""The run's answer as it is generated, for a client that reads it streamed (the server's
three APIs): the final step's text, held back only where the run may still change it, so that
what was streamed is, at the end, the run's answer word for word (issue 68, item 5: the
answer in the form the question asks, over the APIs too).

The run changes the last step's text three ways: a line that is a printed Python list becomes
its items (run/answer_form.py), decided line by line, so a line waits only while it could
still be one (a short label, or a list begun); a copied template slot gives way to what a
program printed (run/template_slot.py), which replaces the whole text, so where the question
writes a slot a final step that reads other steps is held whole; later rounds may replace the
answer, so with rounds on nothing goes out before the run ends; a final step tried again
after part of its text went out sends nothing more before the end. `finish` gives what the
answer adds to what was streamed.
"""

from __future__ import annotations

from collections.abc import Callable

from conductor_cli.run import answer_form, template_slot
from conductor_cli.run.workflow import Workflow


class AnswerStream:
    """`question` None: the answer is not shaped (an agent's turn). `live` False (or a
    function that says so when the plan is ready, from the config the run leased): nothing
    goes out before `finish` (later rounds may replace the answer)."""

    def __init__(self, question: str | None, *, live: bool | Callable[[], bool] = True) -> None:
        self.question = question or ""
        self.shaping = question is not None and answer_form.shapes(question)
        self.live = live
        self.final = -1  # the final step's index, once the plan is known
        self.held = False  # the final step is held whole
        self.raw = ""  # the final step's text so far
        self.sent = ""  # what went out
        self.line = ""  # the current line of the final step
        self.line_out = False  # the current line cannot be shaped: it goes out as it comes
        self.fenced = False

    def plan(self, workflow: Workflow) -> None:
        self.final = len(workflow.steps) - 1
        last = workflow.steps[self.final] if workflow.steps else None
        slot = template_slot.may_apply(self.question)
        live = self.live() if callable(self.live) else self.live
        self.held = not live or (last is not None and bool(last.sees) and slot)

    def piece(self, index: int, text: str) -> str:
        """What to send now of a piece of step `index`'s text as it streams."""
        if index != self.final or not text:
            return ""
        self.raw += text
        return "" if self.held else self._out(text)

    def step_done(self, index: int, output: str) -> str:
        """What to send now that step `index` finished with `output` (a cached or unstreamed
        step reports its text only then)."""
        if index != self.final or not output.startswith(self.raw):
            return ""
        return self.piece(index, output[len(self.raw) :])

    def retry(self, index: int) -> None:
        """Step `index` is tried again (a retryable failure, or its fallback worker): its text
        starts over. What was sent of the failed try cannot be taken back, so where some was,
        the rest waits for the run's answer (sent then if it goes on from what was sent)."""
        if index != self.final:
            return
        self.raw, self.line, self.line_out, self.fenced = "", "", False, False
        if self.sent:
            self.held = True

    def finish(self, answer: str) -> str:
        """What the run's answer adds to what went out ('' where they part: a step that was
        tried again after part of its text had gone out)."""
        if not answer.startswith(self.sent):
            return ""
        return self._send(answer[len(self.sent) :])

    def _out(self, text: str) -> str:
        said = []
        for n, part in enumerate(text.split("\n")):
            if n:
                said.append(self._end_line())
            self.line += part
            if self.line_out:
                said.append(part)
            elif not self._may_shape(self.line):
                self.line_out = True
                said.append(self.line)
        return self._send("".join(said))

    def _end_line(self) -> str:
        if self.line_out:
            line = ""  # gone out already
        elif self.fenced or not self.shaping or answer_form.opens_fence(self.line):
            line = self.line
        else:
            line = answer_form.shape_line(self.question, self.line)
        if answer_form.opens_fence(self.line):
            self.fenced = not self.fenced
        self.line, self.line_out = "", False
        return line + "\n"

    def _may_shape(self, line: str) -> bool:
        return self.shaping and not self.fenced and answer_form.may_shape(line)

    def _send(self, text: str) -> str:
        self.sent += text
        return text
