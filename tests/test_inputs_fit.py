"""Big piped input is cut to fit each worker's context, visibly: a note on stderr and a marker
in the prompt, never silently."""

from __future__ import annotations

import json
from pathlib import Path

from conductor_cli.run.inputs import Attachment, attachment_budget, fit_attachments
from conductor_cli.testing.fake_openai import FakeOpenAIServer

from .conftest import run_cli

PROSE = "The quick brown fox jumps over the lazy dog while the band plays on. "


def test_fit_keeps_small_input_and_marks_the_cut_of_big_input() -> None:
    small = [Attachment("stdin", "short text")]
    assert fit_attachments(small, 100) == (small, 0)
    big = [Attachment("a.txt", "x" * 50), Attachment("stdin", "y" * 200)]
    kept, cut = fit_attachments(big, 120)
    assert cut == 130
    assert kept[0] == big[0]  # the first fits whole
    assert kept[1].text.startswith("y" * 70)
    assert "cut the remaining 130 of 200 characters of stdin" in kept[1].text
    assert attachment_budget(8192, 512, 100) == (8192 - 512 - 1024) * 3 - 100
    assert attachment_budget(1000, 512, 10_000) == 0


def test_megabytes_of_stdin_reach_each_worker_cut_to_its_context(
    tmp_path: Path, fast_config: Path
) -> None:
    server = FakeOpenAIServer(["ok"], answer="summary")
    try:
        config = tmp_path / "config.toml"
        config.write_text(
            fast_config.read_text(encoding="utf-8").replace(
                "[conductor]", "[conductor]\nn_ctx = 2048"
            )
            + '\n[[workers]]\nname = "remote"\nmodel = "openai/fake"\n'
            + f'api_base = "{server.api_base}"\ncontext_tokens = 4000\nmax_tokens = 100\n',
            encoding="utf-8",
        )
        workflow = tmp_path / "wf.json"
        workflow.write_text(
            json.dumps(
                {
                    "steps": [
                        {"worker": "local", "task": "Summarise the attached text.", "sees": []},
                        {"worker": "remote", "task": "Summarise the attached text.", "sees": []},
                    ]
                }
            ),
            encoding="utf-8",
        )
        stdin = PROSE * (3_000_000 // len(PROSE))  # ~3 MB
        proc = run_cli(
            "run", "--config", str(config), "--json", str(workflow), "Summarise this.",
            input=stdin,
        )  # fmt: skip
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("conductor: note:")]
    assert any("local (2,048-token context)" in n for n in notes), proc.stderr
    assert any("remote (4,000-token context)" in n for n in notes), proc.stderr
    # The remote worker got the head of the text and the marker, within its budget.
    prompt = server.requests[0]["body"]["messages"][-1]["content"]
    assert "conductor cut the remaining" in prompt and f"of {len(stdin):,} characters" in prompt
    assert len(prompt) < (4000 - 100) * 3
    # The local GGUF step ran within llama.cpp's 2048-token window instead of failing.
    doc = json.loads(proc.stdout)
    assert len(doc["steps"]) == 2 and all(s["output"].strip() for s in doc["steps"])
