"""Shell completion: the scripts in completions/ are current, and a real bash completes
option names, worker names, catalog models and trace ids through them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

sys.path.insert(0, str(REPO / "completions"))
import generate


def test_completion_scripts_are_current() -> None:
    for name, text in generate.scripts().items():
        assert (REPO / "completions" / name).read_text(encoding="utf-8") == text, (
            f"completions/{name} is out of date: run python completions/generate.py"
        )


def bash_complete(*words: str, env: dict[str, str]) -> list[str]:
    """Source the shipped script in a real bash and press Tab after `words`."""
    line = " ".join(f"'{w}'" for w in words)
    script = (
        f"source {REPO / 'completions' / 'conductor.bash'}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}\n"
        "_conductor_completion conductor\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return [x for x in proc.stdout.splitlines() if x]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_bash_completes_options_workers_models_and_trace_ids(tmp_path: Path) -> None:
    env = os.environ.copy()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # our `conductor`
    config = tmp_path / "config.toml"
    config.write_text(
        '[[workers]]\nname = "coder"\nmodel = "openai/x"\n\n'
        '[[workers]]\nname = "critic"\nmodel = "openai/y"\n\n'
        '[[workers]]\nname = "local"\nmodel = "gguf:smollm2-135m-instruct"\n',
        encoding="utf-8",
    )
    env["CONDUCTOR_CONFIG"] = str(config)
    from conductor_cli.storage.trace import traces_dir

    traces = traces_dir()
    traces.mkdir(parents=True)
    for name in ("20261123-101010-aaaaaa", "20261124-090909-bbbbbb"):
        (traces / f"{name}.json").write_text("{}", encoding="utf-8")

    assert bash_complete("conductor", "ask", "--wor", env=env) == ["--worker"]
    assert bash_complete("conductor", "ask", "--worker", "c", env=env) == ["coder", "critic"]
    assert bash_complete("conductor", "replay", "", env=env) == [
        "20261124-090909-bbbbbb",
        "20261123-101010-aaaaaa",
    ]
    assert bash_complete("conductor", "traces", "show", "202611", env=env) == [
        "20261124-090909-bbbbbb",
        "20261123-101010-aaaaaa",
    ]
    assert bash_complete("conductor", "models", "pull", "smol", env=env) == [
        "smollm2-135m-instruct"
    ]
    assert "doctor" in bash_complete("conductor", "d", env=env)
