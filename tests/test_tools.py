"""`tool:python`: a worker that runs the Python program of the steps it sees, in the real
sandbox (conductor_cli/sandbox), next to the real embedded model."""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conductor_cli.backends.base import Request
from conductor_cli.sandbox import Limits
from conductor_cli.tools.python_tool import NO_CODE, PythonTool, find_program

from .conftest import assert_one_line_error, run_cli

TOOL_CONFIG = """
[conductor]
max_steps = 2
{seed}

[[workers]]
name = "local"
model = "gguf:smollm2-135m-instruct"
max_tokens = 80

[[workers]]
name = "python"
model = "tool:python"
"""


def _messages(*seen: str, last: str = "What is 6 * 7?") -> tuple[dict[str, str], ...]:
    history: list[dict[str, str]] = []
    for i, output in enumerate(seen):
        history += [
            {"role": "user", "content": f"Step {i} (local): Write the program."},
            {"role": "assistant", "content": output},
        ]
    return (*history, {"role": "user", "content": last})


def _ask(tool: PythonTool, messages: tuple[dict[str, str], ...]) -> str:
    return tool.complete(Request(messages, max_tokens=1, temperature=0.0, seed=0)).text


def test_the_program_is_the_last_python_block_it_sees_else_its_task() -> None:
    first = "```python\nprint(1)\n```"
    second = "Here:\n```py\nprint(2)\n```\nand prose ```bash\nls\n```"
    assert find_program(_messages(first, second)) == "print(2)\n"
    assert find_program(_messages(first, "no code here")) == "print(1)\n"
    assert find_program(_messages(last="Q?\n\n```\nprint(3)\n```")) == "print(3)\n"
    assert find_program(_messages(last="What is 6 * 7?\n\nprint(6 * 7)")) == "print(6 * 7)"
    # English that happens to parse as Python is not a program.
    assert find_program(_messages(last="What is 6 * 7?\n\nCompute")) is None
    assert find_program(_messages(last="What is 6 * 7?\n\nRun the program.")) is None
    # The same reading of fences as eval's code scorer: a block cut off at max_tokens still
    # holds the program; an empty one (a reply that ends on its opening fence) holds none.
    assert find_program(_messages("```python\nprint(4)\nprint(5")) == "print(4)\nprint(5"
    assert find_program(_messages(first, "The answer is 4.\n```python")) == "print(1)\n"
    assert find_program(_messages("```python\n\n```")) is None
    # A coder model shows its program's output in a bare block after it: that is no program.
    shown = "```python\nprint(8 * 3600)\n```\nWhen you run it, it will output:\n```\n28800\n```"
    assert find_program(_messages(shown)) == "print(8 * 3600)\n"
    # Qwen2.5-Coder-1.5B tags that block as Python ("Answer: 17" annotates; it ran and printed
    # nothing where the program above it printed 28: bench/data/typed_letters_d.jsonl, d3).
    tagged = (
        '```python\nresult = 6 ** 35\nprint(f"Answer: {len(str(result))}")\n```\n'
        "When you run this program, it will output:\n\n```python\nAnswer: 17\n```"
    )
    assert (
        find_program(_messages(tagged))
        == 'result = 6 ** 35\nprint(f"Answer: {len(str(result))}")\n'
    )
    for output in ("28800", "['a', 'b']", "x", "Answer: 17\nRest: 2"):
        assert find_program(_messages(f"```python\nprint(1)\n```\n```python\n{output}\n```")) == (
            "print(1)\n"
        )
    # A block that does something is a program, even last and short; a block alone is run
    # whatever it is (its report then says it printed nothing).
    assert find_program(_messages("```python\nprint(1)\n```\n```python\nprint(2)\n```")) == (
        "print(2)\n"
    )
    assert find_program(_messages("```python\nx = 2\n```")) == "x = 2\n"
    assert find_program(_messages("```python\nAnswer: 17\n```")) == "Answer: 17\n"
    # A block ends at ``` that begins or ends a line, not at ``` inside one: the 1.5B coder
    # copied its task's words "in one ```python block" into a comment at the top.
    quoted = "```python\n# prints the answer, in one ```python block.\nprint(23)\n```"
    assert find_program(_messages(quoted)) == (
        "# prints the answer, in one ```python block.\nprint(23)\n"
    )
    assert find_program(_messages("```python\nprint(24)```\nIt prints 24.")) == "print(24)"
    assert find_program(_messages("```python\ns = '```'\nprint(s)\n  ```\n")) == (
        "s = '```'\nprint(s)\n"
    )


def test_what_the_program_does_is_the_steps_output_said_plainly() -> None:
    tool = PythonTool(Limits(wall_s=3.0, cpu_s=10, memory_mb=256, file_mb=1))
    cpu_bound = PythonTool(Limits(wall_s=10.0, cpu_s=1, memory_mb=256, file_mb=1))
    assert _ask(tool, _messages("```python\nprint(37 * 41 + 5)\n```")) == "1522"
    assert _ask(tool, _messages("```python\nx = 1\n```")) == "The program ran and printed nothing."
    failed = _ask(tool, _messages("```python\nprint('half')\n1 / 0\n```"))
    assert failed.startswith("The program failed (exit code 1).")
    assert "half" in failed and "ZeroDivisionError" in failed
    looped = _ask(tool, _messages("```python\nwhile True:\n    pass\n```"))
    assert looped.startswith("The program was stopped: it ran past its time limit (3 s, 10 s")
    # The CPU limit too (inside the namespace unshare reports it as exit 1, not the signal).
    spun = _ask(cpu_bound, _messages("```python\nwhile True:\n    pass\n```"))
    assert spun == "The program was stopped: it ran past its time limit (10 s, 1 s of CPU).", spun
    flood = _ask(tool, _messages("```python\nwhile True:\n    print('x' * 1000)\n```"))
    assert flood.startswith("The program was stopped: it printed more than 1 MB.")
    assert _ask(tool, _messages("no code")) == NO_CODE


def test_past_its_folder_or_memory_the_output_is_one_plain_line_first() -> None:
    tool = PythonTool(Limits(wall_s=10.0, cpu_s=10, memory_mb=256, file_mb=1, disk_mb=3))
    filled = "for i in range(10):\n    open(f'f{i}', 'wb').write(b'x' * 2**20)\n"
    said = _ask(tool, _messages(f"```python\n{filled}```"))
    assert said.startswith("The program was stopped: it filled its folder (3 MB).\n"), said
    assert "No space left on device" in said
    # Three processes of 200 MB: each under the limit, together over it (a cgroup's bound).
    hogs = (
        "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n"
        "        b = bytearray(200 * 2**20)\n        b[::4096] = b'x' * len(b[::4096])\n"
        "        time.sleep(2)\n        os._exit(0)\nprint([os.wait()[1] for _ in range(3)])\n"
    )
    said = _ask(tool, _messages(f"```python\n{hogs}```"))
    if tool.sandbox().isolation.memory:
        assert said.startswith("The program ran out of memory (limit 256 MB, with all it starts)")


def test_a_secret_in_the_environment_never_reaches_the_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "s" * 24)
    tool = PythonTool()
    out = _ask(tool, _messages("```python\nimport os\nprint(sorted(os.environ))\n```"))
    assert "OPENAI_API_KEY" not in out and "sk-test-" not in out


def _code_of(output: str) -> str:
    return re.findall(r"```[ \t]*(?:python|py|python3)?[^\n]*\n(.*?)```", output, re.S)[-1]


def test_the_real_model_writes_and_the_tool_runs_it_cached_by_input(
    tmp_path: Path, gguf_path: Path
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(TOOL_CONFIG.format(seed=""), encoding="utf-8")
    workflow = tmp_path / "wf.json"
    steps = [
        {"worker": "local", "task": "Write a Python program that prints 37 * 41 + 5.", "sees": []},
        {"worker": "python", "task": "Run the program.", "sees": [0]},
    ]
    workflow.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    done = run_cli("--config", str(config), "run", "--json", str(workflow), "What is 37*41+5?")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    written, ran = result["steps"]
    assert ran["worker"] == "python" and ran["tokens_out"] == 0
    if "```" in written["output"]:
        # Whatever the model wrote, the tool's output is what that program prints.
        expected = subprocess.run(
            [sys.executable, "-I", "-c", _code_of(written["output"])],
            capture_output=True, text=True, timeout=30, cwd=tmp_path,
        ).stdout.rstrip()  # fmt: skip
        assert ran["output"] == (expected or "The program ran and printed nothing.")
    else:
        assert ran["output"] == NO_CODE
    assert result["answer"] == ran["output"]

    # A tool is cached by its input alone: the same program under another seed is not run again.
    code_only = tmp_path / "code.json"
    code_only.write_text(
        json.dumps({"steps": [{"worker": "python", "task": "print(2 ** 20)", "sees": []}]}),
        encoding="utf-8",
    )
    seeded = tmp_path / "seeded.toml"
    seeded.write_text(TOOL_CONFIG.format(seed="seed = 7"), encoding="utf-8")
    once = json.loads(run_cli("--config", str(config), "run", "--json", str(code_only), "Q").stdout)
    again = json.loads(
        run_cli("--config", str(seeded), "run", "--json", str(code_only), "Q").stdout
    )
    assert once["answer"] == again["answer"] == "1048576"
    assert once["steps"][0]["source"] == "model" and again["steps"][0]["source"] == "cache"


def test_bad_tool_configs_are_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(TOOL_CONFIG.format(seed="").replace("tool:python", "tool:pyton"))
    proc = run_cli("--config", str(config), "ask", "What is 2+2?")
    assert_one_line_error(proc, 2, "workers[1].model", "tool:pyton", "tool:python")
    config.write_text('[conductor]\nmodel = "tool:python"\n', encoding="utf-8")
    proc = run_cli("--config", str(config), "ask", "What is 2+2?")
    assert_one_line_error(proc, 2, "conductor.model", "is a tool", "[[workers]]")


def test_a_pool_with_a_tool_may_plan_run_tasks_and_a_pool_of_models_plans_as_before() -> None:
    from conductor_cli.run.planner import WorkerInfo, task_verbs
    from conductor_cli.run.workflow import TASK_VERBS, gbnf_grammar

    models = [WorkerInfo("local", "a model")]
    tooled = [*models, WorkerInfo("python", "an interpreter", tool=True)]
    assert task_verbs(models) == TASK_VERBS
    assert {"Run", "Execute"} <= set(task_verbs(tooled))
    before = gbnf_grammar(["local"], 2)
    assert gbnf_grammar(["local"], 2, verbs=task_verbs(models)) == before
    assert '"Run"' in gbnf_grammar(["local", "python"], 2, verbs=task_verbs(tooled))
    assert '"Run"' not in before


def test_eval_baselines_treat_a_tool_as_deterministic_and_propose_with_models(
    tmp_path: Path,
) -> None:
    from conductor_cli.config.settings import load_config
    from conductor_cli.evals.strategies import (
        KNN_VOTE,
        base_strategies,
        default_strategies,
        moa_proposers,
    )

    config_file = tmp_path / "c.toml"
    config_file.write_text(TOOL_CONFIG.format(seed=""), encoding="utf-8")
    config = load_config(config_file)
    strategies = default_strategies(config)
    # single:python is a real baseline (the tool asked the bare question); a vote of three
    # identical runs is not.
    assert "single:python" in strategies and "vote:python" not in strategies
    assert "vote:local" in strategies
    assert "vote:python" not in base_strategies([KNN_VOTE], config)
    assert moa_proposers(config) == ["local"]


def test_workers_test_runs_a_program_through_the_tool(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(TOOL_CONFIG.format(seed=""), encoding="utf-8")
    done = run_cli("--config", str(config), "workers", "test", "python", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["name"] == "python" and row["ok"] and row["reply"] == "OK"


def test_doctor_names_the_tool_worker_and_the_sandbox(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(TOOL_CONFIG.format(seed=""), encoding="utf-8")
    done = run_cli("--config", str(config), "doctor")
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in done.stdout.splitlines()}
    assert rows["worker python"][0] == "ok" and "tool:python" in rows["worker python"][1]
    assert "key" not in rows["worker python"][1]
    assert rows["sandbox"][0] in ("ok", "warn")


def test_a_model_step_that_a_python_step_sees_is_asked_for_a_program() -> None:
    from conductor_cli.config.settings import WorkerConfig
    from conductor_cli.run.messages import PROGRAM_REQUEST, feeds_python, step_messages
    from conductor_cli.run.pool import Pool, Worker
    from conductor_cli.run.workflow import parse_workflow

    local = Worker(WorkerConfig("local", "gguf:smollm2-135m-instruct"), backend=None)  # type: ignore[arg-type]
    python = Worker(WorkerConfig("python", "tool:python"), backend=None)  # type: ignore[arg-type]
    pool = Pool((local, python))
    steps = [
        {"worker": "local", "task": "Compute the answer.", "sees": []},
        {"worker": "python", "task": "Run the program.", "sees": [0]},
        {"worker": "local", "task": "Check the result.", "sees": [0, 1]},
    ]
    workflow = parse_workflow(json.dumps({"steps": steps}), pool.names, 3)
    assert [feeds_python(workflow, i, pool) for i in range(3)] == [True, False, False]
    asked = step_messages("What is 6 * 7?", (), workflow, 0, {}, local, for_python=True)
    assert asked[-1]["content"].endswith(PROGRAM_REQUEST)
    plain = step_messages("What is 6 * 7?", (), workflow, 0, {}, local)
    assert PROGRAM_REQUEST not in plain[-1]["content"]

    # The checking step sees the program and its run: it is shown the program that ran, not
    # its writer's guess at what that prints (letters-14: the run printed 12, the guess said 13).
    from conductor_cli.run.messages import programs_run

    assert [programs_run(workflow, i, pool) for i in range(3)] == [set(), set(), {0}]
    written = "Here:\n```python\nprint(len('hello, world'))\n```\nIt will output:\n```\n13\n```"
    outputs = {0: written, 1: "12"}
    runs = frozenset({0})
    check = step_messages("How long?", (), workflow, 2, outputs, local, programs=runs)
    assert check[1]["content"] == "Here:\n```python\nprint(len('hello, world'))\n```"
    assert check[3]["content"] == "12"
    # A guess in prose goes too (the README's strawberry question: the run printed 3, the
    # check answered the writer's "it will output `2`"); the rest of the prose stays.
    prose = (
        "Count it in a loop:\n```python\nprint('strawberry'.count('r'))\n```\n"
        "When you run this program, it will output `2`, because there are two 'r's. "
        "Strawberries are red."
    )
    guessed = step_messages("How many?", (), workflow, 2, {0: prose, 1: "3"}, local, programs=runs)
    assert guessed[1]["content"] == (
        "Count it in a loop:\n```python\nprint('strawberry'.count('r'))\n```\nStrawberries are red."
    )
    # A guess tagged as Python goes as well.
    tagged = "```python\nprint(len('hello, world'))\n```\nIt prints:\n```python\nAnswer: 13\n```"
    shown = step_messages("How long?", (), workflow, 2, {0: tagged, 1: "12"}, local, programs=runs)
    assert shown[1]["content"] == "```python\nprint(len('hello, world'))\n```"
    whole = step_messages("How long?", (), workflow, 2, outputs, local)
    assert whole[1]["content"] == written.strip()  # a step no tool ran is shown whole
    # With no Python block but an empty one, the tool ran the bare block: it stays.
    bare = "```python\n```\n```\nprint(12)\n```"
    shown = step_messages("How long?", (), workflow, 2, {0: bare, 1: "12"}, local, programs=runs)
    assert shown[1]["content"] == bare

    # A step that sees its own worker's program continues that conversation: the program's
    # step comes as the very messages its writer got, then the program that ran (so a local
    # model keeps what it read and wrote: backends/llamacpp.continues); the run and the task
    # follow as before. A step by another worker is named by its task, as before.
    asked_writer = step_messages("How long?", (), workflow, 0, {}, local, for_python=True)
    own = {0: asked_writer}
    cont = step_messages("How long?", (), workflow, 2, outputs, local, programs=runs, own=own)
    assert cont[: len(asked_writer)] == asked_writer
    assert cont[len(asked_writer)] == {"role": "assistant", "content": check[1]["content"]}
    assert cont[len(asked_writer) + 1 :] == check[2:]
    none = step_messages("How long?", (), workflow, 2, outputs, local, programs=runs, own={})
    assert none == check


def test_doctor_finds_an_mcp_workers_server_command_without_starting_it(tmp_path: Path) -> None:
    from .test_mcp_tool import CONFIG as MCP_CONFIG

    def rows(text: str) -> dict[str, list[str]]:
        config = tmp_path / "c.toml"
        config.write_text(text, encoding="utf-8")
        done = run_cli("--config", str(config), "doctor")
        return {line.split("\t")[0]: line.split("\t")[1:] for line in done.stdout.splitlines()}

    found = rows(MCP_CONFIG)
    assert found["worker shout"][0] == "ok" and "mcp:demo/shout" in found["worker shout"][1]
    missing = rows(MCP_CONFIG.replace(json.dumps(sys.executable), '"no-such-mcp-program"', 1))
    assert missing["worker shout"][0] == "fail"
    assert "no-such-mcp-program" in missing["worker shout"][1]


def test_training_describes_an_undescribed_tool_as_planning_does(tmp_path: Path) -> None:
    from conductor_cli.config.settings import load_config
    from conductor_cli.run.planner import worker_infos

    config_file = tmp_path / "c.toml"
    config_file.write_text(TOOL_CONFIG.format(seed=""), encoding="utf-8")
    infos = {i.name: i for i in worker_infos(load_config(config_file).workers)}
    assert "Python interpreter" in infos["python"].description and infos["python"].tool
    assert infos["local"].description == "" and not infos["local"].tool


def test_a_two_step_workflow_of_hostile_programs_leaks_nothing(tmp_path: Path) -> None:
    """Issue 40's table, through the tool as a user runs it: step 0's program reads what it
    can and writes a program for step 1, which reads what it can; neither reaches a secret,
    the run, its trace and cache are kept, and each step says how it was confined."""
    planted = tmp_path.parent / f"conductor-planted-{secrets.token_hex(4)}"
    planted.mkdir(mode=0o755)
    secret = planted / "credentials"
    secret.write_text(f"aws_secret_access_key = SECRET-{secrets.token_hex(6)}")
    secret.chmod(0o644)  # world-readable: only the sandbox can refuse it
    config = tmp_path / "c.toml"
    config.write_text(
        f'[[workers]]\nname = "python"\nmodel = "tool:python"\n# {secret.read_text()}\n',
        encoding="utf-8",
    )
    step1 = (
        f"for p in [{str(secret)!r}, {str(config)!r}]:\n"
        "    try:\n        print(open(p).read())\n"
        "    except OSError as e:\n        print('refused', type(e).__name__)\n"
    )
    step0 = f"import os\ntry:\n    print(os.listdir({str(Path.home())!r}))\nexcept OSError as e:\n"
    step0 += f"    print('refused', type(e).__name__)\nprint('```python\\n' + {step1!r} + '```')\n"
    workflow = tmp_path / "wf.json"
    steps = [
        {"worker": "python", "task": step0, "sees": []},
        {"worker": "python", "task": "Run the program.", "sees": [0]},
    ]
    workflow.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    try:
        done = run_cli("--config", str(config), "run", "--json", str(workflow), "Q")
    finally:
        shutil.rmtree(planted, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    first, second = result["steps"]
    # Not there at all in its own root (FileNotFoundError), or refused by Landlock.
    refusals = ("refused PermissionError", "refused FileNotFoundError")
    assert first["output"].startswith(refusals), first["output"]
    lines = second["output"].splitlines()
    assert len(lines) == 2 and all(line in refusals for line in lines), second["output"]
    trace = Path(result["trace"]).read_text(encoding="utf-8")
    assert "SECRET-" not in trace and "SECRET-" not in done.stdout
    for step in json.loads(trace)["steps"]:
        assert "reads: Python, system libraries and its folder only" in step["confinement"]
        assert "unix sockets: none (seccomp)" in step["confinement"]
        assert "root: its own" in step["confinement"]
