"""`conductor mcp`'s protocol side: an MCP server (the `mcp` package, 2.x) with one tool, `ask`.

Stdout is the protocol channel. While it serves, `mcp`'s stdio transport points file
descriptor 1 at stderr, so a stray print (ours, a library's, llama.cpp's) cannot corrupt it;
the tool itself writes only notes, on stderr.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from conductor_cli import __version__
from conductor_cli.api import RunResult
from conductor_cli.mcp_server.answering import AskFailed, AskSession

INSTRUCTIONS = (
    "conductor answers a question with the user's own team of language models: a small local "
    "conductor model plans a workflow (which worker does which step, what each step sees) and "
    "the workers run it. Call `ask` with a self-contained question; attach files by path."
)

ASK_DESCRIPTION = (
    "Answer a question through the user's conductor pool (their config's workers and "
    "conductor): the conductor plans a workflow, the workers run it, the answer comes back as "
    "text, with the workflow's steps and totals as structured content. Runs take seconds to "
    "minutes, depending on the pool."
)


class StepSummary(BaseModel):
    worker: str = Field(description="The worker (config name) that ran the step.")
    task: str = Field(description="What the conductor asked the worker to do.")
    sees: list[int] = Field(description="The earlier steps (0-based) whose outputs it read.")


class AskOutput(BaseModel):
    answer: str = Field(description="The run's answer (the same as the text content).")
    steps: list[StepSummary] = Field(description="The workflow the conductor planned.")
    totals: dict[str, Any] = Field(
        description="seconds, model_calls, cache_hits, tokens_in, tokens_out, cost, rounds."
    )
    trace: str | None = Field(description="The run's trace file (`conductor replay ID`).")
    notes: list[str] = Field(description="What the user should know about the run.")


def result_of(run: RunResult) -> CallToolResult:
    output = AskOutput(
        answer=run.answer,
        steps=[StepSummary(**s.to_dict()) for s in run.workflow.steps],
        totals=run.totals(),
        trace=str(run.trace_path) if run.trace_path else None,
        notes=list(run.notes),
    )
    return CallToolResult(
        content=[TextContent(type="text", text=run.answer)],
        structured_content=output.model_dump(mode="json"),
    )


def failure(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def build(session: AskSession) -> MCPServer[Any]:
    """The MCP server whose `ask` tool answers through `session`."""
    server: MCPServer[Any] = MCPServer(
        name="conductor",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",  # the SDK logs every request at INFO (on stderr)
    )

    @server.tool(name="ask", title="Ask the conductor", description=ASK_DESCRIPTION)
    async def ask(
        question: Annotated[str, Field(description="The question, self-contained.")],
        files: Annotated[
            list[str] | None,
            Field(
                description="Paths of text files to attach, as `conductor ask -f` attaches "
                "them (relative paths: from the server's working directory)."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, AskOutput]:
        cancel = threading.Event()
        run = functools.partial(session.answer, question, files or [], cancel)
        try:
            # A worker thread: the event loop keeps serving (pings, cancellations) meanwhile.
            done = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except AskFailed as e:
            return failure(str(e))
        except anyio.get_cancelled_exc_class():
            cancel.set()  # the client cancelled, or went away: the run ends as interrupted
            raise
        return result_of(done)

    return server


def serve_stdio(config_file: Path | None) -> bool:
    """Serve MCP on stdin/stdout until the client closes them. Returns whether every run
    ended (False: one is still inside a model, and the process should leave at once)."""
    session = AskSession(config_file)
    try:
        build(session).run("stdio")
    finally:
        ended = session.close()
    return ended
