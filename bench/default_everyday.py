"""Which default a new user should meet (issue 41, part 4): each candidate answers 48 everyday
factual questions through `conductor ask`, as a user types them, on this machine.

Run alone (llama.cpp on every core; about 20 minutes on 2 cores):
    .venv/bin/python bench/default_everyday.py [--only NAME,...] [--json]

The questions (bench/data/everyday_facts48.jsonl, written for this bench and kept apart from
anything tuned: no training, prompt or guard was chosen on them) each list the answers that
count ("7" or "seven"); a reply is right when one of them appears in it as whole words, case
and accents aside. Candidates (nothing simulated):
- default: the embedded default (no config file), since issue 41 the team of SmolLM2,
  Qwen2.5-Coder-1.5B and the python tool planned by the head trained for them
  (models/conductors/coder-team-1.5b);
- smollm2: the default before it (`config init --preset smollm2`: SmolLM2-135M plans and is
  the one worker);
- coder-0.5b, coder-1.5b: a config of that one Qwen2.5-Coder model as the only worker;
- small-team: `config init --preset small-team`, the team with the 0.5B coder
  (models/conductors/coder-team).
Reported per candidate: share right with its Wilson 95 % interval, the longest answer in
characters, answers over 1,200 characters, answers with a line (of 16+ characters) three times,
and seconds a question (model load included, as `ask` pays it).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
import unicodedata
from collections import Counter
from pathlib import Path

from _common import CONDUCTOR, REPO, isolated_env, team_config, temp_root, timed, wilson

from conductor_cli.config.starter import starter_config

QUESTIONS = REPO / "bench" / "data" / "everyday_facts48.jsonl"
LONG = 1200


def single(model: str) -> str:
    return f'[[workers]]\nname = "local"\nmodel = "gguf:{model}"\n'


CANDIDATES: dict[str, str | None] = {
    "default": None,
    "smollm2": starter_config("smollm2"),
    "coder-0.5b": single("qwen2.5-coder-0.5b-instruct"),
    "coder-1.5b": single("qwen2.5-coder-1.5b-instruct"),
    "small-team": starter_config("small-team"),
}


def fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in text if not unicodedata.combining(c))


def right(reply: str, accept: list[str]) -> bool:
    body = fold(reply)
    return any(re.search(rf"(?<!\w){re.escape(fold(a))}(?!\w)", body) for a in accept)


def repeated_line(reply: str) -> bool:
    lines = Counter(line.strip() for line in reply.splitlines() if len(line.strip()) >= 16)
    return any(n >= 3 for n in lines.values())


def run(
    name: str, config: str | None, rows: list[dict], root: Path, trained: Path | None = None
) -> dict:
    (root / name).mkdir(parents=True, exist_ok=True)
    env = isolated_env(root / name, config)
    if trained is not None:  # the trained conductor, where the config's conductor.model finds it
        shutil.copytree(trained, root / name / "data" / "conductors" / trained.name)
    oks, lengths, seconds, loops, answers = [], [], [], [], []
    for row in rows:
        got = timed([CONDUCTOR, "ask", row["question"]], env)
        reply = got.stdout.strip() if got.returncode == 0 else ""
        oks.append(right(reply, row["accept"]))
        lengths.append(len(reply))
        loops.append(repeated_line(reply))
        seconds.append(got.seconds)
        answers.append({"id": row["id"], "right": oks[-1], "reply": reply[:300],
                        "error": got.stderr.strip()[-200:] if got.returncode else ""})  # fmt: skip
    low, high = wilson(sum(oks), len(oks))
    return {
        "right": round(sum(oks) / len(oks), 3),
        "low": round(low, 3),
        "high": round(high, 3),
        "longest": max(lengths),
        "over_1200": sum(n > LONG for n in lengths),
        "line_three_times": sum(loops),
        "seconds": round(sum(seconds) / len(seconds), 2),
        "answers": answers,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="comma-separated candidates")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--trained",
        type=Path,
        action="append",
        default=[],
        help="a trained conductor's folder (DATA_DIR/conductors/NAME): a candidate NAME, the "
        "embedded default team planned by it",
    )
    args = parser.parse_args()
    rows = [json.loads(x) for x in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    only = [c for c in args.only.split(",") if c]
    root = temp_root()
    out = {}
    for name, config in CANDIDATES.items():
        if only and name not in only:
            continue
        start = time.monotonic()
        out[name] = run(name, config, rows, root)
        print(f"{name}: {time.monotonic() - start:.0f} s", flush=True)
    for folder in args.trained:
        start = time.monotonic()
        out[folder.name] = run(folder.name, team_config(folder.name), rows, root, folder)
        print(f"{folder.name}: {time.monotonic() - start:.0f} s", flush=True)
    (root / "report.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{len(rows)} questions; answers in {root}/report.json")
    print("| default | right [95 %] | longest | over 1,200 chars | a line 3 times | s / question |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, r in out.items():
        print(
            f"| {name} | {r['right']:.2f} [{r['low']:.2f}, {r['high']:.2f}] | {r['longest']} | "
            f"{r['over_1200']} | {r['line_three_times']} | {r['seconds']} |"
        )


if __name__ == "__main__":
    main()
