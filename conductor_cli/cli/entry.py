"""The program's entry point: a signal during start-up ends it quietly.

Importing the CLI takes a tenth of a second; Ctrl-C or SIGTERM in that window would otherwise
print a KeyboardInterrupt traceback (or die by the signal). Nothing has been written yet, so
leaving at once with the interrupted exit code loses nothing (see signals.py).
"""

from __future__ import annotations

from conductor_cli.cli.signals import before_command


def main() -> None:
    before_command()
    from conductor_cli.cli.app import main as run

    run()
