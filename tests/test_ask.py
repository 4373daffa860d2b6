"""`conductor ask` end to end on the real default model, and its error contract."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import FAST_CONFIG, assert_one_line_error, run_cli, start_cli


def test_ask_with_no_config_answers(gguf_path: Path, coder_pulled: Path) -> None:
    """No config file: the embedded default team (tests/test_team.py tests its routing)."""
    proc = run_cli("ask", "What is the capital of France?")
    assert proc.returncode == 0, proc.stderr
    # Not a terminal: the answer alone on stdout, nothing on stderr without --verbose.
    assert proc.stdout.strip()
    assert proc.stderr == ""
    verbose = run_cli("ask", "-v", "What is the capital of France?")
    assert verbose.returncode == 0, verbose.stderr
    assert verbose.stdout == proc.stdout
    lines = verbose.stderr.splitlines()
    assert lines[0] == "conductor: planning"
    assert any(line.startswith(("step 0 local: ", "step 0 coder: ")) for line in lines), lines
    assert "Paris" in proc.stdout
    assert "\x1b[" not in proc.stdout + verbose.stdout + verbose.stderr


def test_json_output_is_one_document(fast_config: Path) -> None:
    proc = run_cli("ask", "--config", str(fast_config), "--json", "Name a primary colour.")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    steps = doc["workflow"]["steps"]
    assert 1 <= len(steps) <= 2
    assert doc["answer"] == doc["steps"][-1]["output"]
    assert doc["totals"]["model_calls"] == 1 + len(steps)
    assert doc["totals"]["tokens_out"] > 0


def test_stdin_and_files_reach_every_worker(fast_config: Path, tmp_path: Path) -> None:
    attached = tmp_path / "notes.txt"
    attached.write_text("remember MARKER-FILE-4242\n", encoding="utf-8")
    stdin = "def add(a, b):\n    return a - b  # MARKER-STDIN-7731\n"
    proc = run_cli(
        "ask",
        "--config",
        str(fast_config),
        "--json",
        "--file",
        str(attached),
        "Fix the bug in this code.",
        input=stdin,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["steps"]
    for step in doc["steps"]:
        prompt = step["messages"][-1]["content"]
        assert "MARKER-STDIN-7731" in prompt and "MARKER-FILE-4242" in prompt
        assert prompt.startswith("Fix the bug in this code.")
    # Later steps see the outputs they were given, as earlier turns of the conversation.
    for step in doc["steps"]:
        earlier = [m["content"] for m in step["messages"][:-1] if m["role"] == "assistant"]
        assert [doc["steps"][j]["output"].strip() for j in step["sees"]] == earlier


def test_no_stdin_flag_ignores_the_pipe(fast_config: Path) -> None:
    proc = run_cli(
        "ask",
        "--config",
        str(fast_config),
        "--json",
        "--no-stdin",
        "Say hi.",
        input="MARKER-IGNORED",
    )
    assert proc.returncode == 0, proc.stderr
    assert "MARKER-IGNORED" not in proc.stdout


def test_max_steps_and_worker_options(tmp_path: Path, gguf_path: Path) -> None:
    config = tmp_path / "two.toml"
    config.write_text(
        FAST_CONFIG.replace("max_steps = 2", "max_steps = 4")
        + '\n[[workers]]\nname = "other"\nmodel = "gguf:smollm2-135m-instruct"\nmax_tokens = 16\n',
        encoding="utf-8",
    )
    proc = run_cli(
        "ask",
        "--config",
        str(config),
        "--json",
        "--max-steps",
        "1",
        "--worker",
        "other",
        "--seed",
        "3",
        "What is 2 + 2?",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["workflow"]["steps"]) == 1
    assert doc["workflow"]["steps"][0]["worker"] == "other"


@pytest.mark.parametrize(
    ("args", "stdin", "code", "needles"),
    [
        (["ask", "   "], "", 2, ["question is empty"]),
        (
            ["ask", "--file", "/nonexistent/x.py", "hi"],
            "",
            2,
            ["--file /nonexistent/x.py: no such"],
        ),
        (["ask", "--file", "/", "hi"], "", 2, ["is a directory"]),
        (["ask", "--worker", "nobody", "hi"], "", 2, ["--worker nobody: no such worker"]),
        (["ask", "--max-steps", "0", "hi"], "", 2, ["max_steps"]),
        (["ask", "-m", "no-such-model", "hi"], "", 1, ["'no-such-model' is not in the catalog"]),
        (["ask", "-m", "/nonexistent/m.gguf", "hi"], "", 1, ["model file not found"]),
    ],
)
def test_user_errors_are_one_line(
    args: list[str], stdin: str, code: int, needles: list[str], gguf_path: Path
) -> None:
    assert_one_line_error(run_cli(*args, input=stdin), code, *needles)


def test_binary_stdin_is_refused(gguf_path: Path) -> None:
    assert_one_line_error(run_cli("ask", "hi", input=b"\x00\x01\x02binary"), 2, "stdin", "binary")


def test_missing_and_corrupt_model_files(tmp_path: Path, gguf_path: Path) -> None:
    def config_with(model: str) -> str:
        path = tmp_path / "c.toml"
        path.write_text(f'[[workers]]\nname = "w"\nmodel = "gguf:{model}"\n', encoding="utf-8")
        return str(path)

    missing = run_cli("ask", "--config", config_with("/nonexistent/w.gguf"), "hi")
    assert_one_line_error(missing, 1, "c.toml: workers[0].model: model file not found")

    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("hello", encoding="utf-8")
    proc = run_cli("ask", "--config", config_with(str(not_gguf)), "hi")
    assert_one_line_error(proc, 1, "is not a GGUF model file")

    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(gguf_path.read_bytes()[:20_000_000])
    proc = run_cli("ask", "-m", str(truncated), "hi")
    assert_one_line_error(proc, 1, "llama.cpp could not load", "truncated.gguf")


def test_unreachable_worker(tmp_path: Path, gguf_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "remote.toml"
    config.write_text(
        f'[[workers]]\nname = "remote"\nmodel = "openai/gone"\n'
        f'api_base = "http://127.0.0.1:{port}/v1"\n',
        encoding="utf-8",
    )
    proc = run_cli("ask", "--config", str(config), "What is 1 + 1?")
    line = assert_one_line_error(proc, 1, "step 0 (remote)", f"127.0.0.1:{port}")
    assert "onnection" in line


def test_missing_api_key_is_named(
    tmp_path: Path, gguf_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONDUCTOR_TEST_KEY", raising=False)
    config = tmp_path / "keyed.toml"
    config.write_text(
        '[[workers]]\nname = "gpt"\nmodel = "openai/gpt-4.1-mini"\n'
        'api_key_env = "CONDUCTOR_TEST_KEY"\n',
        encoding="utf-8",
    )
    proc = run_cli("ask", "--config", str(config), "hi")
    assert_one_line_error(proc, 2, "CONDUCTOR_TEST_KEY is not set", "workers[0] (gpt)")

    # A worker that the run does not use costs nothing, its missing key included.
    both = tmp_path / "both.toml"
    both.write_text(FAST_CONFIG + config.read_text(encoding="utf-8"), encoding="utf-8")
    workflow = tmp_path / "local-only.json"
    workflow.write_text(
        json.dumps({"steps": [{"worker": "local", "task": "Say hello.", "sees": []}]}),
        encoding="utf-8",
    )
    unused = run_cli("run", "--config", str(both), str(workflow), "hi")
    assert unused.returncode == 0, unused.stderr
    assert unused.stdout.strip() and unused.stderr == ""


def test_text_that_is_not_utf8_is_refused_with_where(tmp_path: Path, gguf_path: Path) -> None:
    latin1 = tmp_path / "notes.txt"
    latin1.write_bytes("caf\u00e9 au lait\n".encode("latin-1"))
    with latin1.open("rb") as stdin:  # raw bytes: run_cli's text input would re-encode them
        piped = subprocess.run(
            [sys.executable, "-m", "conductor_cli", "ask", "hi"],
            stdin=stdin,
            capture_output=True,
            text=True,
            env=os.environ.copy(),
            timeout=120,
        )
    assert_one_line_error(piped, 2, "stdin: is not UTF-8 text (bad byte at offset 3)", "iconv")
    attached = run_cli("ask", "--file", str(latin1), "hi")
    assert_one_line_error(
        attached, 2, f"--file {latin1}: is not UTF-8 text (bad byte at offset 3)", "iconv"
    )


def test_ctrl_c_stops_cleanly(gguf_path: Path) -> None:
    from conductor_cli.storage.trace import traces_dir

    proc = start_cli("ask", "Write a long essay about the sea.")
    # Stop it once the run has started (its trace is written at its first event), not after a
    # fixed time, which a fast machine outruns by finishing the essay.
    deadline = time.monotonic() + 120
    while not any(traces_dir().glob("*.json")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "conductor: interrupted"


def test_train_names_its_methods_from_the_librarys_table() -> None:
    """`conductor train --method` takes the methods the library lists (no copy in the CLI)."""
    from conductor_cli.train import METHODS

    done = run_cli("train", "humaneval", "--method", "bogus")
    assert_one_line_error(done, 2, "--method 'bogus'", ", ".join(METHODS))


EXTRACT_CONFIG = FAST_CONFIG.replace("max_tokens = 40", "max_tokens = 200")
ONE_STEP = '{"steps": [{"worker": "local", "task": "Answer the question.", "sees": []}]}'


def test_extract_prints_the_answers_code_alone(tmp_path: Path, gguf_path: Path) -> None:
    """-x / --xl as in llm: the answer's first (last) fenced block, its bytes, so that
    `conductor ask -x "fix this" < bug.py > fixed.py` writes code; the whole answer and a note
    when it has none. The real SmolLM2; the second run of a request is the cache's answer."""
    from conductor_cli.sandbox import code_blocks

    config = tmp_path / "x.toml"
    config.write_text(EXTRACT_CONFIG, encoding="utf-8")
    workflow = tmp_path / "one.json"
    workflow.write_text(ONE_STEP, encoding="utf-8")
    question = "Write a Python function add(a, b) that returns their sum."
    whole = run_cli("run", str(workflow), question, "--config", str(config), "--json")
    assert whole.returncode == 0, whole.stderr
    answer = json.loads(whole.stdout)["answer"]
    blocks = [body for _, body in code_blocks(answer)]
    assert blocks and "def " in blocks[0], answer
    first = run_cli("run", str(workflow), question, "--config", str(config), "-x")
    assert first.returncode == 0, first.stderr
    assert first.stdout == blocks[0].rstrip("\n") + "\n"
    assert "```" not in first.stdout and first.stderr == ""
    last = run_cli("run", str(workflow), question, "--config", str(config), "--xl")
    assert last.stdout == blocks[-1].rstrip("\n") + "\n"
    compile(first.stdout, "extracted.py", "exec")  # what was printed is Python, whole

    plain = "Say hello in one short sentence, no code."
    said = run_cli("run", str(workflow), plain, "--config", str(config), "--json")
    assert "```" not in json.loads(said.stdout)["answer"]
    none = run_cli("run", str(workflow), plain, "--config", str(config), "-x")
    assert none.returncode == 0 and none.stdout.strip()
    assert none.stdout.strip() == json.loads(said.stdout)["answer"].strip()
    assert "no fenced code block" in none.stderr

    both = run_cli("ask", "-x", "--json", "--config", str(config), question)
    assert_one_line_error(both, 2, "-x/--xl", "--json")
    twice = run_cli("ask", "-x", "--xl", "--config", str(config), question)
    assert_one_line_error(twice, 2, "-x/--extract", "--xl/--extract-last")
