"""`conductor config get/set/edit`: single settings by dotted key, and an editor whose broken
save never reaches the file."""

from __future__ import annotations

import os
import stat
import sys
import tomllib
from pathlib import Path

import pytest

from .conftest import assert_one_line_error, run_cli

START = """\
[conductor]
model = "smollm2-135m-instruct"
max_steps = 4
seed = 7

[[workers]]
name = "helper"
model = "gguf:smollm2-135m-instruct"
description = "a small model"
max_tokens = 100

[[workers]]
name = "remote"
model = "openai/gpt-4.1-mini"
api_key_env = "OPENAI_API_KEY"
fallback = "helper"

[cache]
size_limit_mb = 512
"""


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(START, encoding="utf-8")
    monkeypatch.setenv("CONDUCTOR_CONFIG", str(path))
    return path


def test_set_then_get_round_trips_and_keeps_every_other_key(cfg: Path) -> None:
    before = tomllib.loads(cfg.read_text())
    for key, value in [
        ("conductor.max_steps", "3"),
        ("workers.helper.description", "fast, free, weak; short answers"),
        ("workers.remote.temperature", "0.5"),
        ("cache.enabled", "false"),
    ]:
        proc = run_cli("config", "set", key, value)
        assert proc.returncode == 0, proc.stderr
        assert run_cli("config", "get", key).stdout.strip() == value
    after = tomllib.loads(cfg.read_text())
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600  # rewritten private, as every config
    expected = before
    expected["conductor"]["max_steps"] = 3
    expected["workers"][0]["description"] = "fast, free, weak; short answers"
    expected["workers"][1]["temperature"] = 0.5
    expected["cache"]["enabled"] = False
    assert after == expected
    # Defaults in force are readable too, and a section prints as TOML.
    assert run_cli("config", "get", "conductor.n_ctx").stdout.strip() == "8192"
    assert run_cli("config", "get", "workers.remote.api_base").stdout == "\n"
    section = tomllib.loads(run_cli("config", "get", "workers.helper").stdout)
    assert section["max_tokens"] == 100 and section["name"] == "helper"


@pytest.mark.parametrize(
    ("key", "value", "needles"),
    [
        ("conductor.max_step", "3", ["conductor.max_step", "Did you mean", "max_steps"]),
        ("conductr.max_steps", "3", ["conductr", "Did you mean", "conductor"]),
        ("conductor.max_steps", "many", ["conductor.max_steps", "expected an integer"]),
        ("conductor.max_steps", "99", ["conductor.max_steps", "between 1 and 10"]),
        ("cache.enabled", "maybe", ["cache.enabled", "true or false"]),
        ("workers.helpr.max_tokens", "9", ["no worker named 'helpr'", "helper"]),
        ("workers.helper.fallback", "nobody", ["fallback", "nobody"]),
        ("workers.helper", "x", ["workers.NAME.KEY"]),
        ("server.allowed_origins", "ftp://x/y", ["server.allowed_origins", "scheme://host"]),
        ("server.allowed_hosts", '["box", 3]', ["server.allowed_hosts", "list of strings"]),
    ],
)
def test_a_bad_set_names_the_key_and_leaves_the_file_alone(
    cfg: Path, key: str, value: str, needles: list[str]
) -> None:
    before = cfg.read_bytes()
    assert_one_line_error(run_cli("config", "set", key, value), 2, *needles)
    assert cfg.read_bytes() == before


def test_a_servers_lists_are_set_as_json_or_words(cfg: Path) -> None:
    proc = run_cli("config", "set", "server.allowed_hosts", '["box.lan", "gpu"]')
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("config", "set", "server.allowed_origins", "http://localhost:3000, https://a.b")
    assert proc.returncode == 0, proc.stderr
    server = tomllib.loads(cfg.read_text())["server"]
    assert server["allowed_hosts"] == ["box.lan", "gpu"]
    assert server["allowed_origins"] == ["http://localhost:3000", "https://a.b"]
    got = run_cli("config", "get", "server.allowed_hosts").stdout
    assert got == "box.lan\ngpu\n"


def test_mcp_servers_are_set_like_any_key_and_an_mcp_worker_can_use_them(cfg: Path) -> None:
    # A new server starts with its command; args read as shell words (or a JSON list), even
    # when they start with '-'; env values stay as written (${VAR} is expanded at start).
    no_command = run_cli("config", "set", "mcp_servers.fs.args", "-y pkg")
    assert_one_line_error(no_command, 2, "mcp_servers.fs.command", "missing")
    for key, value in [
        ("mcp_servers.fs.command", "npx"),
        ("mcp_servers.fs.args", "-y @modelcontextprotocol/server-filesystem '/tmp/my dir'"),
        ("mcp_servers.fs.env.TOKEN", "${TOKEN}"),
        ("workers.helper.model", "mcp:fs/read_file"),
    ]:
        proc = run_cli("config", "set", key, value)
        assert proc.returncode == 0, proc.stderr
    raw = tomllib.loads(cfg.read_text())
    assert raw["mcp_servers"]["fs"] == {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp/my dir"],
        "env": {"TOKEN": "${TOKEN}"},
    }
    assert raw["conductor"]["seed"] == 7 and raw["cache"]["size_limit_mb"] == 512
    got = run_cli("config", "get", "mcp_servers.fs.args").stdout.strip()
    assert got == "-y @modelcontextprotocol/server-filesystem '/tmp/my dir'"
    assert run_cli("config", "get", "mcp_servers.fs.env.TOKEN").stdout.strip() == "${TOKEN}"
    as_json = run_cli("config", "set", "mcp_servers.fs.args", '["--root", "/srv"]')
    assert as_json.returncode == 0, as_json.stderr
    assert tomllib.loads(cfg.read_text())["mcp_servers"]["fs"]["args"] == ["--root", "/srv"]
    before = cfg.read_bytes()
    for key, value, needles in [
        ("mcp_servers.fs.bogus", "1", ["mcp_servers.fs.bogus", "mcp_servers.NAME.KEY"]),
        ("mcp_servers.fs.args", '["-y", 3]', ["mcp_servers.fs.args", "list of strings"]),
        ("mcp_servers.fs.args", '-y "open', ["mcp_servers.fs.args", "quote"]),
        ("mcp_servers.fs.env", "x", ["mcp_servers.NAME.env.VAR"]),
        ("mcp_servers.bad/name.command", "x", ["not a valid server name"]),
        ("workers.remote.model", "mcp:nope/tool", ["no MCP server 'nope'", "fs"]),
    ]:
        assert_one_line_error(run_cli("config", "set", key, value), 2, *needles)
    assert cfg.read_bytes() == before
    assert_one_line_error(run_cli("config", "get", "mcp_servers.gh"), 2, "no MCP server", "fs")


def _editor(tmp_path: Path, body: str, exit_code: int = 0) -> str:
    """A scripted editor: a Python program that rewrites the file it is given."""
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys\n"
        "path = sys.argv[1]\n"
        "text = open(path).read()\n"
        f"{body}\n"
        f"sys.exit({exit_code})\n",
        encoding="utf-8",
    )
    return f"{sys.executable} {script}"


def test_edit_keeps_the_old_file_when_the_editor_saves_a_broken_one(
    cfg: Path, tmp_path: Path
) -> None:
    before = cfg.read_bytes()
    broken = _editor(tmp_path, "open(path, 'w').write(text + '\\n[conductor\\nmax_steps = ')")
    os.environ["EDITOR"] = broken
    try:
        proc = run_cli("config", "edit")
    finally:
        del os.environ["EDITOR"]
    line = assert_one_line_error(proc, 2, str(cfg), "invalid TOML", "unchanged")
    assert ".edit.toml" not in line  # the error names the user's file, not the draft
    assert cfg.read_bytes() == before
    assert [p.name for p in cfg.parent.iterdir() if ".edit" in p.name] == []


def test_edit_refuses_a_valid_toml_with_a_bad_value(cfg: Path, tmp_path: Path) -> None:
    before = cfg.read_bytes()
    os.environ["VISUAL"] = _editor(
        tmp_path, "open(path, 'w').write(text.replace('max_steps = 4', 'max_steps = 40'))"
    )
    try:
        proc = run_cli("config", "edit")
    finally:
        del os.environ["VISUAL"]
    assert_one_line_error(proc, 2, "conductor.max_steps", "unchanged")
    assert cfg.read_bytes() == before


def test_edit_saves_a_valid_change_and_respects_the_editors_exit_code(
    cfg: Path, tmp_path: Path
) -> None:
    os.environ["EDITOR"] = _editor(
        tmp_path, "open(path, 'w').write(text.replace('seed = 7', 'seed = 8'))", exit_code=1
    )
    try:
        assert_one_line_error(run_cli("config", "edit"), 2, "exited with status 1", "unchanged")
        assert "seed = 7" in cfg.read_text()
        os.environ["EDITOR"] = _editor(
            tmp_path, "open(path, 'w').write(text.replace('seed = 7', 'seed = 8'))"
        )
        proc = run_cli("config", "edit")
    finally:
        del os.environ["EDITOR"]
    assert proc.returncode == 0, proc.stderr
    assert tomllib.loads(cfg.read_text())["conductor"]["seed"] == 8
    assert oct(cfg.stat().st_mode & 0o777) == oct(0o600)


def test_debug_shows_the_traceback_that_a_plain_error_hides(cfg: Path) -> None:
    plain = run_cli("config", "get", "conductor.nope")
    assert_one_line_error(plain, 2, "conductor.nope", "unknown key")
    debug = run_cli("--debug", "config", "get", "conductor.nope")
    assert debug.returncode != 0
    assert "Traceback" in debug.stderr and "ConfigError" in debug.stderr


def test_init_writes_a_commented_starter_whose_every_example_works(tmp_path: Path) -> None:
    import dataclasses

    from conductor_cli.config.settings import Config, load_config
    from conductor_cli.config.starter import EXAMPLE_MARK

    target = tmp_path / "starter.toml"
    assert run_cli("config", "init", "--config", str(target)).returncode == 0
    text = target.read_text(encoding="utf-8")
    assert dataclasses.replace(load_config(target), source=None) == Config()
    blocks = text.split(EXAMPLE_MARK)[1:]
    titles = [b.splitlines()[0] for b in blocks]
    for kind in ("OpenAI", "Anthropic", "OpenAI-compatible server", "Ollama", "GGUF"):
        assert any(kind in t for t in titles), (kind, titles)
    for block in blocks:
        # Uncomment one example: the file must still load, with that worker added.
        body = "\n".join(line.removeprefix("# ") for line in block.splitlines()[1:])
        one = tmp_path / "one.toml"
        one.write_text(text.split(EXAMPLE_MARK)[0] + body + "\n", encoding="utf-8")
        names = [w.name for w in load_config(one).workers]
        assert len(names) == 4 and names[:3] == ["local", "coder", "python"], (block, names)


def test_config_reference_is_complete_and_current() -> None:
    from conductor_cli.config.doc import KEY_HELP, reference_markdown
    from conductor_cli.config.settings import (
        _CACHE_TYPES,
        _CONDUCTOR_TYPES,
        _SANDBOX_TYPES,
        _SERVER_TYPES,
        _WORKER_TYPES,
    )

    keys = {f"conductor.{k}" for k in _CONDUCTOR_TYPES} | {f"workers.{k}" for k in _WORKER_TYPES}
    keys |= {f"cache.{k}" for k in _CACHE_TYPES} | {f"server.{k}" for k in _SERVER_TYPES}
    keys |= {f"sandbox.{k}" for k in _SANDBOX_TYPES}
    assert keys == set(KEY_HELP), keys ^ set(KEY_HELP)  # every accepted key is documented
    repo = Path(__file__).resolve().parent.parent
    assert (repo / "docs" / "config.md").read_text(encoding="utf-8") == reference_markdown(), (
        "docs/config.md is out of date: python -m conductor_cli.config.doc > docs/config.md"
    )


# --- Issue 60: every command that edits the config changes only the lines of the key it names.
# Compared as text (difflib), not as TOML: comments, blank lines, quoting, key order, dotted
# keys, inline tables and arrays of tables are the user's work.

MINE = """\
# My team: keep the coder cheap.  (a user's note)
cache.size_limit_mb = 256   # a dotted key

[conductor]
max_steps = 3  # more steps cost too much on my laptop
seed = 7

# the OpenAI key lives in OPENAI_API_KEY
[[workers]]
name = 'helper'   # single quotes, as I typed them
model = "gguf:smollm2-135m-instruct"
description = "a small model"

[[workers]]
name = "remote"
model = "openai/gpt-4.1-mini"
api_key_env = "OPENAI_API_KEY"

[mcp_servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
env = { TOKEN = "${TOKEN}" }   # an inline table
"""


def _changed(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added) between two texts."""
    import difflib

    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    body = [d for d in diff if not d.startswith(("---", "+++", "@@"))]
    return [d[1:] for d in body if d[0] == "-"], [d[1:] for d in body if d[0] == "+"]


@pytest.mark.parametrize(
    ("command", "removed", "added"),
    [
        (
            ["config", "set", "conductor.max_steps", "4"],
            ["max_steps = 3  # more steps cost too much on my laptop"],
            ["max_steps = 4  # more steps cost too much on my laptop"],
        ),
        (
            ["config", "set", "cache.size_limit_mb", "512"],
            ["cache.size_limit_mb = 256   # a dotted key"],
            ["cache.size_limit_mb = 512   # a dotted key"],
        ),
        (
            ["config", "set", "workers.helper.max_tokens", "64"],
            [],
            ["max_tokens = 64"],
        ),
        (
            ["config", "set", "workers.helper.description", "tiny"],
            ['description = "a small model"'],
            ['description = "tiny"'],
        ),
        (
            ["config", "set", "mcp_servers.files.env.TOKEN", "${OTHER}"],
            ['env = { TOKEN = "${TOKEN}" }   # an inline table'],
            ['env = { TOKEN = "${OTHER}" }   # an inline table'],
        ),
        (
            ["config", "set", "conductor.max_rounds", "2"],
            [],
            ["max_rounds = 2"],
        ),
        (
            ["workers", "add", "extra", "openai/gpt-4o-mini", "--description", "cheap"],
            [],
            [
                "[[workers]]",
                'name = "extra"',
                'model = "openai/gpt-4o-mini"',
                'description = "cheap"',
                "",
            ],
        ),
    ],
    ids=["set", "dotted-key", "new-worker-key", "worker-key", "inline-table", "new-key", "add"],
)
def test_an_edit_changes_only_the_lines_of_its_key(
    tmp_path: Path, command: list[str], removed: list[str], added: list[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(MINE, encoding="utf-8")
    done = run_cli(*command, "--config", str(path))
    assert done.returncode == 0, done.stderr
    after = path.read_text(encoding="utf-8")
    assert _changed(MINE, after) == (removed, added), after


def test_removing_a_worker_removes_its_lines_alone(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(MINE, encoding="utf-8")
    assert run_cli("workers", "remove", "remote", "--config", str(path)).returncode == 0
    removed, added = _changed(MINE, path.read_text(encoding="utf-8"))
    assert added == []
    assert removed == [
        "[[workers]]", 'name = "remote"', 'model = "openai/gpt-4.1-mini"',
        'api_key_env = "OPENAI_API_KEY"', "",
    ]  # fmt: skip


def test_the_starter_file_keeps_its_examples_through_an_edit(tmp_path: Path) -> None:
    path = tmp_path / "starter.toml"
    assert run_cli("config", "init", "--config", str(path)).returncode == 0
    before = path.read_text(encoding="utf-8")
    assert (
        run_cli("config", "set", "conductor.max_steps", "3", "--config", str(path)).returncode == 0
    )
    removed, added = _changed(before, path.read_text(encoding="utf-8"))
    assert len(removed) <= 1 and len(added) == 1 and "max_steps = 3" in added[0], (removed, added)
    assert before.count("# ") == path.read_text(encoding="utf-8").count("# ")


def test_a_failed_or_refused_edit_leaves_the_file_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(MINE, encoding="utf-8")
    bad = run_cli("config", "set", "conductor.max_steps", "many", "--config", str(path))
    assert_one_line_error(bad, 2, "conductor.max_steps")
    twice = run_cli("workers", "add", "remote", "openai/x", "--config", str(path))
    assert_one_line_error(twice, 2, "remote")
    assert path.read_text(encoding="utf-8") == MINE


def test_an_inline_table_is_edited_where_it_is_and_a_twice_named_worker_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    inline = (
        'conductor = { max_steps = 3 }  # inline\n\n[[workers]]\nname = "a"\nmodel = "openai/x"\n'
    )
    path.write_text(inline, encoding="utf-8")
    assert (
        run_cli("config", "set", "conductor.max_steps", "4", "--config", str(path)).returncode == 0
    )
    assert path.read_text(encoding="utf-8") == inline.replace("= 3 }", "= 4 }")
    twice = inline + '\n[[workers]]\nname = "a"\nmodel = "openai/y"\n'
    path.write_text(twice, encoding="utf-8")
    refused = run_cli("config", "set", "conductor.max_steps", "5", "--config", str(path))
    assert_one_line_error(refused, 2, "duplicate worker name 'a'")
    assert path.read_text(encoding="utf-8") == twice
