"""The program's entry point: a signal during start-up ends it quietly.

Importing the CLI takes a tenth of a second; Ctrl-C or SIGTERM in that window would otherwise
print a KeyboardInterrupt traceback (or die by the signal). Nothing has been written yet, so
leaving at once with the interrupted exit code loses nothing.
"""

from __future__ import annotations

import os
import signal

from ..errors import EXIT_INTERRUPTED


def _starting_up(signum: int, frame: object) -> None:
    os._exit(EXIT_INTERRUPTED)


def main() -> None:
    signal.signal(signal.SIGINT, _starting_up)
    signal.signal(signal.SIGTERM, _starting_up)
    from .app import main as run

    run()
