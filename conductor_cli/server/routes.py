"""The server's routes as a table, and what a route may use of its request.

Each API module lists its routes (`ROUTES`: method, path, the function that answers) and
server/http_api.py joins the lists into one lookup: adding an API is one module and one line
there. A route answers through `Exchange` (the request's body, the run slots, JSON and
streamed replies, a cancel flag its client's hang-up sets) and never through the HTTP
handler's own internals. `FinalText` is the streaming the APIs share: the run's answer as the
final step generates it, from a run's events.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from threading import Event
from typing import TYPE_CHECKING, Any, Protocol

from conductor_cli.run.answer_stream import AnswerStream
from conductor_cli.run.events import PlanReady, StepFinished, StepRetry, StepToken

if TYPE_CHECKING:
    from conductor_cli.server.app import ServerApp
    from conductor_cli.server.openai_shapes import BadRequest

SSE = "text/event-stream"


class Exchange(Protocol):
    """One request as a route sees it (server/http_api's handler is one)."""

    @property
    def app(self) -> ServerApp: ...

    @property
    def body_read(self) -> bool:
        """Whether the body was read: a refusal of an unread body ends the connection."""
        ...

    @property
    def overrides_allowed(self) -> bool:
        """Whether a run request may change the conductor or the pool ([server]
        allow_overrides; always on the local socket)."""
        ...

    def read_json(self) -> Any:
        """The body as JSON; raises BadRequest for what is not (too big, chunked, not JSON)."""
        ...

    def send_json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None: ...

    def error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        """An error in OpenAI's form."""
        ...

    def refuse(self, e: BadRequest) -> None:
        """A refused request in OpenAI's form (the field it names, its status)."""
        ...

    def slot(self, busy: Callable[[str], None] | None = None) -> AbstractContextManager[bool]:
        """One of the server's run slots for the `with` block, released after it: True; or,
        with every slot taken, a 429 sent (in OpenAI's form, or by `busy` given its
        message) and False."""
        ...

    def start_stream(self, content_type: str = SSE) -> None:
        """A 200 whose body is written as it comes, the connection closed after."""
        ...

    def write(self, data: bytes) -> None:
        """Part of a streamed body, sent at once."""
        ...

    def watched(self) -> AbstractContextManager[Event]:
        """A cancel flag that the client's hang-up sets, for one run."""
        ...


@dataclass(frozen=True)
class Api:
    """What makes one of the server's run APIs (chat completions, responses, messages), for
    server/agent_runs.serve_api: its body parsed into a request (a `model`, a `stream`
    flag), the answer complete or streamed, and refusals in its own error form (OpenAI's
    where None)."""

    name: str
    parse: Callable[[Any], Any]  # the body as JSON -> the request; raises BadRequest
    complete: Callable[[Exchange, Any], None]
    stream: Callable[[Exchange, Any], None]
    refuse: Callable[[Exchange, BadRequest], None] | None = None
    busy: Callable[[Exchange, str], None] | None = None  # a 429 saying its message


@dataclass(frozen=True)
class Route:
    method: str  # "GET" | "POST"
    path: str  # without a query or a trailing slash
    answer: Callable[[Exchange], None]


def table(*lists: tuple[Route, ...]) -> dict[tuple[str, str], Route]:
    """One lookup by (method, path); a path answered twice is a mistake of ours."""
    found: dict[tuple[str, str], Route] = {}
    for route in (r for routes in lists for r in routes):
        key = (route.method, route.path)
        if key in found:
            raise ValueError(f"two routes for {route.method} {route.path}")
        found[key] = route
    return found


class FinalText:
    """The run's answer, piece by piece as the final step generates it: `on_piece` gets each
    new piece once, whether the step streamed its tokens or (cached, or not streaming)
    reported its text only when it finished, and `finish` sends what the run's answer adds,
    so that the pieces make the answer the complete reply gives (run/answer_stream.py holds
    back what the run may still reshape). `on_plan` is called when the plan is known."""

    def __init__(
        self,
        on_piece: Callable[[str], None],
        on_plan: Callable[[], None] | None = None,
        *,
        answer: AnswerStream | None = None,
    ) -> None:
        self.on_piece = on_piece
        self.on_plan = on_plan
        self.answer = answer if answer is not None else AnswerStream(None)

    def on_event(self, event: object) -> None:
        if isinstance(event, PlanReady):
            self.answer.plan(event.workflow)
            if self.on_plan is not None:
                self.on_plan()
        elif isinstance(event, StepToken):
            self._piece(self.answer.piece(event.index, event.text))
        elif isinstance(event, StepFinished):
            self._piece(self.answer.step_done(event.index, event.output))
        elif isinstance(event, StepRetry):
            self.answer.retry(event.index)

    def finish(self, answer: str) -> None:
        """The rest of the run's answer, once it has finished."""
        self._piece(self.answer.finish(answer))

    def _piece(self, piece: str) -> None:
        if piece:
            self.on_piece(piece)


def answer_stream(ex: Exchange, question: str, agent: bool) -> AnswerStream:
    """How a request's answer streams: an agent's turn as its last step writes it (its text
    is not shaped, and it has no later rounds); any other shaped as the run shapes it, and
    held to the end where later rounds may replace it."""
    if agent:
        return AnswerStream(None)
    # Read when the plan is ready: the run has leased the config by then (a changed file
    # is read again at the lease).
    return AnswerStream(question, live=lambda: ex.app.config.conductor.max_rounds <= 1)
