"""`mcp:SERVER/TOOL`: a tool of an MCP server (the config's [mcp_servers.SERVER]) as a worker.

Each call starts the server over stdio with the `mcp` 2.x client, finds TOOL, calls it and
returns its text. The child gets the SDK's safe environment (HOME, PATH, ...) plus the server's
own `env`, so the only secrets it sees are the ones the user put there; `${VAR}` and
`${VAR:-default}` in command, args and env come from our environment, as in Claude Code.

Arguments: a tool that takes one string (its only property, or its only required one) gets the
step's task (the question when the task only restated it); a tool with several properties gets
the last JSON object in the outputs of the steps it sees. What the tool says, an error it
reports or arguments that cannot be built are the step's output, said plainly; a server that
cannot start, crashes or hangs, or lacks TOOL, fails the step with one line (WorkerError).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from typing import Any

from conductor_cli.backends.base import Completion, Request, TextSink
from conductor_cli.config.env_refs import VAR_REF
from conductor_cli.config.settings import McpServerConfig
from conductor_cli.errors import WorkerError

# Seconds for the whole call: start, handshake, listing and the tool itself.
TIMEOUT_S = 60.0
# The most characters a tool's output may put into later steps' prompts.
MAX_OUTPUT_CHARS = 20_000
ERROR_PREFIX = "The tool returned an error: "


def expand(text: str, server: str, environ: dict[str, str] | None = None) -> str:
    """`${VAR}` and `${VAR:-default}` from the environment; an unset VAR without default is an
    error naming it (Claude Code refuses such a config too)."""
    env = os.environ if environ is None else environ

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise WorkerError(
            f"MCP server {server}: ${{{name}}} is not set; export {name} or write "
            f"${{{name}:-DEFAULT}} in [mcp_servers.{server}]."
        )

    return VAR_REF.sub(value, text)


def _json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects written in `text`, outermost ones, in order."""
    decoder = json.JSONDecoder()
    found, i = [], text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = text.find("{", end)
    return found


def task_text(messages: tuple[dict[str, str], ...]) -> str:
    """The step's task: the last paragraph of its final user message, or the question when the
    task was left out (run/messages.py leaves out a task that only restates the question, and
    the last paragraph is then an attachment or the question itself)."""
    last = messages[-1]["content"] if messages else ""
    paragraph = last.rsplit("\n\n", 1)[-1].strip()
    if "\n\nAttached " in last and paragraph.endswith("```"):
        return last.split("\n\nAttached ", 1)[0].strip()
    return paragraph


def string_argument(schema: dict[str, Any]) -> str | None:
    """The property that takes the task, when the tool takes one string."""
    props = schema.get("properties") or {}
    strings = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"]
    if len(props) == 1 and strings:
        return strings[0]
    required = schema.get("required") or []
    if len(required) == 1 and required[0] in strings:
        return required[0]
    return None


def arguments(
    schema: dict[str, Any], messages: tuple[dict[str, str], ...], label: str
) -> dict[str, Any] | str:
    """The tool's arguments, or (a str) why there are none, said as the step's output."""
    props = schema.get("properties") or {}
    if not props:
        return {}
    if (key := string_argument(schema)) is not None:
        return {key: task_text(messages)}
    required = [k for k in schema.get("required") or [] if isinstance(k, str)]
    takes = ", ".join(props)
    for message in reversed(messages):
        if message["role"] == "assistant" and (objects := _json_objects(message["content"])):
            args = objects[-1]
            break
    else:
        return (
            f"No arguments for {label}: it takes {takes} as a JSON object in the output of a "
            "step it sees, and found none."
        )
    if missing := [k for k in required if k not in args]:
        return (
            f"{label} needs {', '.join(required)}; the JSON object it got "
            f"({json.dumps(args)[:200]}) lacks {', '.join(missing)}."
        )
    return args


def result_text(result: Any) -> str:
    parts = [c.text for c in result.content or [] if getattr(c, "type", "") == "text"]
    text = "\n".join(parts).strip()
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content)
    if not text:
        text = "The tool returned nothing."
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + f"\n[cut at {MAX_OUTPUT_CHARS:,} characters]"
    return f"{ERROR_PREFIX}{text}" if result.is_error else text


class McpTool:
    """A Backend. The server starts on each call (nothing runs until a step asks)."""

    def __init__(self, server: McpServerConfig, tool: str, timeout_s: float = TIMEOUT_S) -> None:
        self.server = server
        self.tool = tool
        self.timeout_s = timeout_s

    @property
    def identity(self) -> str:
        return f"mcp:{self.server.name}/{self.tool}"

    @property
    def fingerprint(self) -> str:
        # The env's names, never its values (secrets stay out of cache keys and traces).
        shape = [self.server.command, list(self.server.args), sorted(k for k, _ in self.server.env)]
        digest = hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]
        return f"{self.identity}:{digest}"

    @property
    def supports_grammar(self) -> bool:
        return False

    @property
    def label(self) -> str:
        return f"the MCP tool {self.tool} of {self.server.name}"

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        import anyio

        name = self.server.name
        command = expand(self.server.command, name)
        args = [expand(a, name) for a in self.server.args]
        env = {k: expand(v, name) for k, v in self.server.env}
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            try:
                text = anyio.run(self._call, command, args, env, request.messages, errlog)
            except Exception as e:  # whatever the server did: one line
                error = _unwrap(e)
                if isinstance(error, WorkerError):
                    raise error from None
                raise WorkerError(self._failure(command, error, errlog)) from None
        if on_text is not None:
            on_text(text)
        return Completion(text=text, tokens_in=0, tokens_out=0, finish_reason="stop", cost=0.0)

    def _failure(self, command: str, error: BaseException, errlog: Any) -> str:
        name = self.server.name
        if isinstance(error, TimeoutError):
            why = f"did not answer within {self.timeout_s:g} s"
        elif isinstance(error, FileNotFoundError):
            why = f"its command {command!r} was not found"
        else:
            why = f"failed ({type(error).__name__}: {str(error).strip() or 'no detail'})"
        errlog.seek(0)
        said = [line.strip() for line in errlog.read().splitlines() if line.strip()]
        stderr = f"; it said: {said[-1][:200]}" if said else ""
        return (
            f"MCP server {name} {why}{stderr}. Check [mcp_servers.{name}] in the config: run "
            f"`{' '.join([command, *self.server.args])}` yourself to see whether it starts."
        )

    async def _call(
        self,
        command: str,
        args: list[str],
        env: dict[str, str],
        messages: tuple[dict[str, str], ...],
        errlog: Any,
    ) -> str:
        import anyio
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=command, args=args, env=env)
        with anyio.fail_after(self.timeout_s):
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = []
                cursor = None
                for _ in range(100):
                    listed = await session.list_tools(
                        params=None if cursor is None else _page(cursor)
                    )
                    tools += listed.tools
                    cursor = listed.next_cursor
                    if not cursor:
                        break
                found = next((t for t in tools if t.name == self.tool), None)
                if found is None:
                    names = ", ".join(t.name for t in tools) or "none"
                    raise WorkerError(
                        f"MCP server {self.server.name} has no tool {self.tool!r}; its tools "
                        f'are {names}. Fix the worker\'s model = "mcp:{self.server.name}/TOOL".'
                    )
                built = arguments(found.input_schema or {}, messages, self.label)
                if isinstance(built, str):
                    return built
                return result_text(await session.call_tool(self.tool, built))


def _unwrap(error: BaseException) -> BaseException:
    """The one error inside the task groups' ExceptionGroups (anyio wraps what a task raised)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _page(cursor: str) -> Any:
    from mcp.types import PaginatedRequestParams

    return PaginatedRequestParams(cursor=cursor)
