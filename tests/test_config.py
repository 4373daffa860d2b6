"""Config loading, validation messages (file, key, fix), saving, and the config commands."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest

from conductor_cli.config.settings import (
    Config,
    load_config,
    restrict_workers,
    save_config,
    with_conductor,
)
from conductor_cli.errors import ConfigError

from .conftest import assert_one_line_error, run_cli

GOOD = """
[conductor]
model = "smollm2-135m-instruct"
max_steps = 3
temperature = 0

[[workers]]
name = "coder"
model = "openai/smol"
api_base = "http://127.0.0.1:9/v1"
description = "writes code"

[[workers]]
name = "local"
model = "gguf:smollm2-135m-instruct"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_file_gives_the_embedded_default() -> None:
    cfg = load_config()
    assert cfg.source is None
    # The trained team (tests/test_team.py): SmolLM2, Qwen2.5-Coder-1.5B and the python tool.
    assert cfg.conductor.model == "coder-team-1.5b-public"
    assert [w.name for w in cfg.workers] == ["local", "coder", "python"]
    assert [w.model for w in cfg.workers] == [
        "gguf:smollm2-135m-instruct",
        "gguf:qwen2.5-coder-1.5b-instruct",
        "tool:python",
    ]


def test_a_valid_file_loads_with_types(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.conductor.max_steps == 3
    assert cfg.conductor.temperature == 0.0 and isinstance(cfg.conductor.temperature, float)
    assert [w.name for w in cfg.workers] == ["coder", "local"]
    assert cfg.worker("coder").api_base == "http://127.0.0.1:9/v1"


def test_config_env_var_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_CONFIG", str(write(tmp_path, GOOD)))
    assert load_config().conductor.max_steps == 3
    monkeypatch.setenv("CONDUCTOR_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match=r"missing\.toml: config file not found"):
        load_config()


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("[conductor\nmodel = 1", ["invalid TOML", "line 1"]),
        ("[conductor]\nmax_step = 3\n", ["conductor.max_step: unknown key", "max_steps"]),
        ("[conductr]\n", ["[conductr]: unknown section", "conductor"]),
        ('[conductor]\nn_ctx = "big"\n', ["conductor.n_ctx: expected an integer", "'big'"]),
        ("[conductor]\nmax_steps = 50\n", ["conductor.max_steps", "between 1 and 10"]),
        ("[cache]\nenabled = 1\n", ["cache.enabled: expected true or false"]),
        ("[conductor]\nstep_penalty = -1\n", ["conductor.step_penalty", "between 0"]),
        ("[conductor]\ncode_retries = 6\n", ["conductor.code_retries", "between 0 and 5"]),
        (
            '[[workers]]\nname = "a"\nmodel = "x"\nstop_loops = "yes"\n',
            ["workers[0].stop_loops: expected true or false"],
        ),
        (
            '[[workers]]\nname = "a"\nmodel = "x"\n[[workers]]\nname = "a"\nmodel = "y"\n',
            ["workers[1].name: duplicate worker name 'a'"],
        ),
        ('[[workers]]\nname = "a"\n', ["workers[0].model: missing"]),
        ('[[workers]]\nname = "conductor"\nmodel = "x"\n', ["reserved"]),
        ('[[workers]]\nname = "a"\nmodel = "x"\nmax_token = 3\n', ["max_tokens"]),
        (
            '[[workers]]\nname = "a"\nmodel = "openai/x"\napi_key = "sk-planted-123456"\n',
            ["workers[0].api_key: keys never go in the config file", "api_key_env"],
        ),
        (
            '[conductor]\nmodel = "litellm:openai/x"\ntoken = "sk-planted-123456"\n',
            ["conductor.token: keys never go in the config file", "api_key_env"],
        ),
    ],
)
def test_errors_name_the_file_and_key(tmp_path: Path, text: str, needles: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert "\n" not in message
    for needle in needles:
        assert needle in message
    assert "sk-planted" not in message  # a key written into the file is never echoed


def test_save_round_trips_privately(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    out = tmp_path / "sub" / "saved.toml"
    save_config(cfg, out)
    again = load_config(out)
    assert again.conductor == cfg.conductor and again.workers == cfg.workers
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert stat.S_IMODE(out.parent.stat().st_mode) == 0o700


def test_overrides_and_worker_restriction(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    assert [w.name for w in restrict_workers(cfg, ["local"]).workers] == ["local"]
    with pytest.raises(ConfigError, match=r"--worker codr: no such worker.*'coder'"):
        restrict_workers(cfg, ["codr"])
    assert with_conductor(cfg, max_steps=2, seed=None).conductor.max_steps == 2
    with pytest.raises(ConfigError, match="max_steps"):
        with_conductor(Config(), max_steps=0)


def test_config_commands(tmp_path: Path, isolated_home: Path) -> None:
    path = run_cli("config", "path").stdout.strip()
    assert path == str(isolated_home / "config" / "conductor" / "config.toml")
    shown = run_cli("config", "show")
    assert shown.returncode == 0
    assert "embedded default" in shown.stdout
    assert tomllib.loads(shown.stdout)["workers"][0]["name"] == "local"
    init = run_cli("config", "init")
    assert init.returncode == 0 and Path(path).exists()
    assert stat.S_IMODE(Path(path).stat().st_mode) == 0o600
    assert load_config(Path(path)).workers == Config().workers
    again = run_cli("config", "init")
    assert_one_line_error(again, 2, "already exists", "--force")


def test_bad_config_on_the_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[conductor]\nmax_step = 3\n")
    proc = run_cli("ask", "--config", str(path), "hello there")
    assert_one_line_error(proc, 2, str(path), "conductor.max_step", "Did you mean 'max_steps'")
    proc = run_cli("--config", str(write(tmp_path, "[conductor\n")), "config", "show")
    assert_one_line_error(proc, 2, "invalid TOML", "line 1")
    proc = run_cli("ask", "--config", str(write(tmp_path, '[conductor]\nseed = "x"\n')), "hi")
    assert_one_line_error(proc, 2, "conductor.seed: expected an integer")


def test_an_unreadable_config_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    not_utf8 = tmp_path / "latin1.toml"
    not_utf8.write_bytes(b'[conductor]\nmodel = "caf\xe9"\n')
    a_dir = tmp_path / "dir.toml"
    a_dir.mkdir()
    cases = [(not_utf8, "cannot read config file"), (a_dir, "is a directory")]
    if os.geteuid() != 0:  # root reads any file whatever its mode
        locked = tmp_path / "locked.toml"
        locked.write_text("[conductor]\n", encoding="utf-8")
        locked.chmod(0)
        cases.append((locked, "Permission denied"))
    for path, needle in cases:
        monkeypatch.setenv("CONDUCTOR_CONFIG", str(path))
        assert_one_line_error(run_cli("config", "show"), 2, str(path), needle)
