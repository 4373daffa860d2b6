"""`mcp:SERVER/TOOL` workers against a real MCP server (tests/data/mcp_echo_server.py, the `mcp`
2.x server API) started over stdio; hand-written workflows, so no model is needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conductor_cli.backends.base import Request
from conductor_cli.config.settings import McpServerConfig, load_config
from conductor_cli.errors import WorkerError
from conductor_cli.run.pool import Worker
from conductor_cli.tools.mcp_tool import McpTool, arguments, expand, task_text

from .conftest import assert_one_line_error, run_cli

SERVER = Path(__file__).parent / "data" / "mcp_echo_server.py"

CONFIG = f"""
[[workers]]
name = "python"
model = "tool:python"

[[workers]]
name = "shout"
model = "mcp:demo/shout"

[[workers]]
name = "add"
model = "mcp:demo/add"

[[workers]]
name = "fail"
model = "mcp:demo/fail"

[mcp_servers.demo]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}]
env = {{ GREETING = "${{MCP_TEST_GREETING:-hi}}" }}
"""


def _run(tmp_path: Path, steps: list[dict[str, object]], config: str = CONFIG) -> dict:
    (tmp_path / "c.toml").write_text(config, encoding="utf-8")
    (tmp_path / "wf.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    done = run_cli(
        "--config", str(tmp_path / "c.toml"), "run", "--json", str(tmp_path / "wf.json"), "Q"
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_one_string_tool_gets_the_task_and_a_tool_of_several_gets_the_json_it_sees(
    tmp_path: Path,
) -> None:
    shouted = _run(tmp_path, [{"worker": "shout", "task": "Say hello there", "sees": []}])
    (step,) = shouted["steps"]
    assert step["output"] == shouted["answer"] == "SAY HELLO THERE"
    assert step["tokens_out"] == 0 and step["cost"] == 0.0
    added = _run(
        tmp_path,
        [
            {"worker": "python", "task": """print('{"a": 2, "b": 3}')""", "sees": []},
            {"worker": "add", "task": "Add the numbers.", "sees": [0]},
        ],
    )
    assert [s["output"] for s in added["steps"]] == ['{"a": 2, "b": 3}', "5"]
    failed = _run(tmp_path, [{"worker": "fail", "task": "Break", "sees": []}])
    assert failed["answer"].startswith("The tool returned an error"), failed["answer"]
    assert "cannot handle 'Break'" in failed["answer"]
    # Missing required arguments are the step's output, said plainly.
    lacking = _run(
        tmp_path,
        [
            {"worker": "python", "task": """print('{"a": 2}')""", "sees": []},
            {"worker": "add", "task": "Add the numbers.", "sees": [0]},
        ],
    )
    assert lacking["answer"] == (
        'the MCP tool add of demo needs a, b; the JSON object it got ({"a": 2}) lacks b.'
    )


def test_a_missing_tool_or_server_fails_the_step_in_one_line(tmp_path: Path) -> None:
    config = CONFIG.replace("mcp:demo/fail", "mcp:demo/nope")
    (tmp_path / "c.toml").write_text(config, encoding="utf-8")
    (tmp_path / "wf.json").write_text(
        json.dumps({"steps": [{"worker": "fail", "task": "x", "sees": []}]}), encoding="utf-8"
    )
    args = ("--config", str(tmp_path / "c.toml"), "run", str(tmp_path / "wf.json"), "Q")
    assert_one_line_error(run_cli(*args), 1, "has no tool 'nope'", "shout, add, fail")
    config = CONFIG.replace(json.dumps(sys.executable), '"no-such-mcp-server-program"', 1)
    (tmp_path / "c.toml").write_text(config, encoding="utf-8")
    assert_one_line_error(
        run_cli(*args), 1, "MCP server demo", "'no-such-mcp-server-program' was not found"
    )


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        (("mcp:demo/add", "mcp:other/add"), ("workers[2].model", "'other'", "demo")),
        (("mcp:demo/add", "mcp:demo"), ("workers[2].model", "mcp:SERVER/TOOL")),
        (("command = ", "commands = "), ("mcp_servers.demo.commands", "unknown key")),
    ],
)
def test_bad_mcp_configs_are_one_line(
    tmp_path: Path, change: tuple[str, str], needles: tuple[str, ...]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(CONFIG.replace(*change, 1), encoding="utf-8")
    assert_one_line_error(run_cli("--config", str(config), "ask", "Q"), 2, *needles)


def test_a_server_without_command_or_an_mcp_conductor_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[[workers]]\nname = "a"\nmodel = "mcp:demo/add"\n\n[mcp_servers.demo]\nargs = []\n',
        encoding="utf-8",
    )
    proc = run_cli("--config", str(config), "ask", "Q")
    assert_one_line_error(proc, 2, "mcp_servers.demo.command", "missing")
    config.write_text('[conductor]\nmodel = "mcp:demo/add"\n', encoding="utf-8")
    proc = run_cli("--config", str(config), "ask", "Q")
    assert_one_line_error(proc, 2, "conductor.model", "is a tool", "[[workers]]")


def test_config_keeps_the_servers_and_describes_the_worker(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(CONFIG, encoding="utf-8")
    config = load_config(tmp_path / "c.toml")
    server = config.mcp_server("demo")
    assert server.args == (str(SERVER),) and server.env == (
        ("GREETING", "${MCP_TEST_GREETING:-hi}"),
    )
    add = config.worker("add")
    assert add.tool and not add.spec.remote and add.spec.mcp_tool == "add"
    assert Worker(add, McpTool(server, "add")).description == "the MCP tool add of demo"
    shown = run_cli("--config", str(tmp_path / "c.toml"), "config", "show")
    assert "[mcp_servers.demo]" in shown.stdout


def test_fingerprint_has_env_names_not_values_and_vars_expand() -> None:
    one = McpServerConfig("s", "cmd", ("x",), (("KEY", "secret-1"),))
    two = McpServerConfig("s", "cmd", ("x",), (("KEY", "secret-2"),))
    assert McpTool(one, "t").fingerprint == McpTool(two, "t").fingerprint
    assert McpTool(one, "t").fingerprint.startswith("mcp:s/t:")
    assert "secret" not in McpTool(one, "t").fingerprint
    assert expand("a ${X} ${Y:-d}", "s", {"X": "1"}) == "a 1 d"
    with pytest.raises(WorkerError, match=r"\$\{Z\} is not set"):
        expand("${Z}", "s", {})


def test_task_and_arguments_rules() -> None:
    user = {"role": "user", "content": "Question?\n\nAttached a.txt:\n```\nx\n\ny\n```"}
    assert task_text((user,)) == "Question?"
    assert task_text(({"role": "user", "content": "Q\n\nDo it"},)) == "Do it"
    schema = {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    seen = {"role": "assistant", "content": 'first {"a": 1} then {"a": 4, "b": {"c": 1}}'}
    assert arguments({**schema, "required": ["a"]}, (seen, user), "t") == {"a": 4, "b": {"c": 1}}
    assert "found none" in str(arguments(schema, (user,), "t"))


def test_a_server_that_hangs_fails_within_the_timeout(tmp_path: Path) -> None:
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(60)\n", encoding="utf-8")
    tool = McpTool(McpServerConfig("slow", sys.executable, (str(hang),)), "t", timeout_s=1.5)
    request = Request(({"role": "user", "content": "Q"},), max_tokens=1, temperature=0, seed=0)
    with pytest.raises(WorkerError, match=r"MCP server slow did not answer within 1\.5 s"):
        tool.complete(request)
