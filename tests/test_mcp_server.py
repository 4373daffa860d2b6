"""`conductor mcp`: the real program over stdio, driven by the real `mcp` 2.x client."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from .conftest import FAST_CONFIG


def test_ask_over_stdio(fast_config: Path, tmp_path: Path) -> None:
    good = fast_config.read_text(encoding="utf-8")
    assert good == FAST_CONFIG
    # The server starts on a broken config: that is each call's error, never the server's end.
    fast_config.write_text(good.replace("max_steps", "max_stepz"), encoding="utf-8")
    notes = tmp_path / "notes.txt"
    notes.write_text("The meeting is on Tuesday.\n", encoding="utf-8")
    missing = tmp_path / "missing.txt"

    async def session() -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "conductor_cli", "mcp", "--config", str(fast_config)],
            env=os.environ.copy(),  # the child otherwise gets only HOME, PATH and a few more
        )
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["ask"]
            schema = tools[0].input_schema
            assert schema["required"] == ["question"]
            assert set(schema["properties"]) == {"question", "files"}
            assert tools[0].output_schema is not None

            broken = await client.call_tool("ask", {"question": "hi"})
            assert broken.is_error
            (text,) = [c.text for c in broken.content]
            assert "conductor.max_stepz" in text and "\n" not in text, text

            fast_config.write_text(good, encoding="utf-8")  # fixed: the next call reads it
            gone = await client.call_tool("ask", {"question": "hi", "files": [str(missing)]})
            assert gone.is_error
            (text,) = [c.text for c in gone.content]
            assert str(missing) in text and "no such file" in text and "\n" not in text, text

            done = await client.call_tool(
                "ask", {"question": "What day is the meeting?", "files": [str(notes)]}
            )
            assert not done.is_error, done.content
            (answer,) = [c.text for c in done.content]
            assert answer.strip()
            summary = done.structured_content
            assert summary is not None and summary["answer"] == answer
            assert [s["worker"] for s in summary["steps"]]
            assert summary["totals"]["model_calls"] >= 1
            trace = json.loads(Path(summary["trace"]).read_text(encoding="utf-8"))
            assert [i["name"] for i in trace["inputs"]] == [str(notes)]

    asyncio.run(asyncio.wait_for(session(), timeout=240))
