"""Write the shell completion scripts in this folder from the Typer app.

Run: .venv/bin/python completions/generate.py   (tests/test_completions.py fails when the
files here differ from what this writes). The scripts call `conductor` itself on each Tab
with _CONDUCTOR_COMPLETE set, so worker names, catalog models and trace ids stay current.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = {"bash": "conductor.bash", "zsh": "_conductor", "fish": "conductor.fish"}


def scripts() -> dict[str, str]:
    from conductor_cli.cli.complete import COMPLETE_VAR
    from conductor_cli.cli.typer_compat import get_completion_script  # private in typer

    return {
        name: get_completion_script(prog_name="conductor", complete_var=COMPLETE_VAR, shell=shell)
        .strip()
        .replace("\r\n", "\n")
        + "\n"
        for shell, name in FILES.items()
    }


def main() -> None:
    for name, text in scripts().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(HERE / name, file=sys.stderr)


if __name__ == "__main__":
    main()
