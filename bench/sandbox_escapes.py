"""Issue 56's table: the six ways out of the sandbox (and the variants after them), before
and after, as root and as an ordinary user, each checked from outside.

    .venv/bin/python bench/sandbox_escapes.py --before DIR [--user NAME] [--python PATH]

DIR is a checkout of the code to compare with (`git worktree add DIR cdb5a23`). The hostile
programs are this checkout's conductor_cli/testing/hostile.py in every column; only the
sandbox they run in comes from DIR or from here. With --user, the same runs happen as that
user (an interpreter it may run: --python, /usr/bin/python3 by default). Prints a Markdown
table: "out" where something was seen outside, "held" where nothing was. Real processes and
a real kernel; no simulation.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
HOSTILE = HERE / "conductor_cli" / "testing" / "hostile.py"

# Runs hostile.py's main() with the sandbox of the checkout first on sys.path.
_RUN = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("hostile", {str(HOSTILE)!r})
module = sys.modules["hostile"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.argv = ["hostile", "--limits", '{{"file_mb": 1}}']
module.main()
"""


def column(checkout: Path, python: str, user: str | None) -> dict[str, object]:
    env = {"PATH": os.defpath, "LANG": "C.UTF-8", "PYTHONPATH": str(checkout.resolve())}
    drop: dict[str, object] = {}
    cwd = "/tmp"
    if user:
        entry = pwd.getpwnam(user)
        drop = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        env["HOME"] = cwd = entry.pw_dir
    else:
        env["HOME"] = os.path.expanduser("~")
    ran = subprocess.run(
        [python, "-c", _RUN], env=env, cwd=cwd, capture_output=True, text=True, **drop
    )
    if ran.returncode != 0:
        raise SystemExit(f"{checkout} as {user or 'this user'}: {ran.stderr[-500:]}")
    return json.loads(ran.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--user")
    parser.add_argument("--python", default="/usr/bin/python3")
    args = parser.parse_args()
    who = "root" if os.geteuid() == 0 else "this user"
    columns = {
        f"{who}, before": column(args.before, sys.executable, None),
        f"{who}, after": column(HERE, sys.executable, None),
    }
    if args.user:
        columns[f"{args.user}, before"] = column(args.before, args.python, args.user)
        columns[f"{args.user}, after"] = column(HERE, args.python, args.user)
    # Every attempt any column made, in the first order seen (a root-only attempt, such as
    # swapping a root run's program as `nobody`, is "-" in a user's columns).
    found = {a["name"]: a for report in columns.values() for a in report["attempts"]}
    print("| # | attempt | " + " | ".join(columns) + " |")
    print("| --- | --- |" + " --- |" * len(columns))
    for name, first in found.items():
        cells = []
        for report in columns.values():
            attempt = next((a for a in report["attempts"] if a["name"] == name), None)
            if attempt is None:
                cells.append("-")
                continue
            shown = attempt["seen"] and ("memory" in name or attempt["group"] in (7, 8))
            seen = f" ({attempt['seen']})" if shown else ""
            cells.append(("**out**" if attempt["escaped"] else "held") + seen)
        print(f"| {first['group'] or '-'} | {name} | " + " | ".join(cells) + " |")
    for title, report in columns.items():
        print(f"\n{title}: {report['isolation']}")


if __name__ == "__main__":
    main()
