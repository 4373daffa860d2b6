"""What a new user sees (issue 32): the README's first command and twelve everyday prompts,
asked with the real `conductor` program on the embedded default (no config file, fresh cache
and data dirs, default settings), one command each, as a user types them.

For each answer: its length, whether it loops (a line of 12+ characters three or more times,
or a step cut at max_tokens), how each step's generation ended (`finish_reason`: stop, length,
loop), the steps planned and the wall time. Targets: the README question names Paris in one
short answer (<= 300 characters, nothing repeated); no everyday prompt loops.

Run alone on an idle machine (llama.cpp): .venv/bin/python bench/first_answer.py [--json FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import Any

from _common import CONDUCTOR, isolated_env, temp_root, timed

README_Q = "What is the capital of France?"
EVERYDAY = [
    "Why is the sky blue?",
    "Write a Python function that reverses a string.",
    "What is 17 * 23?",
    "Give me three tips for better sleep.",
    "Translate 'good morning' into Spanish.",
    "Write a haiku about autumn.",
    "What does HTTP stand for?",
    "Summarize the plot of Romeo and Juliet in two sentences.",
    "How do I make a cup of tea?",
    "What is the difference between a list and a tuple in Python?",
    "Suggest a name for a coffee shop.",
    "Explain recursion to a child.",
]


def repeats(text: str) -> bool:
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 12]
    return any(n >= 3 for n in collections.Counter(lines).values())


def ask(env: dict[str, str], question: str) -> dict[str, Any]:
    done = timed([CONDUCTOR, "ask", "--json", "--no-server", question], env)
    if done.returncode != 0:
        return {"question": question, "error": done.stderr.strip()[-300:]}
    result = json.loads(done.stdout)
    finishes = [s.get("finish_reason", "?") for s in result["steps"]]
    answer = result["answer"]
    return {
        "question": question,
        "answer": answer,
        "chars": len(answer),
        "steps": len(result["steps"]),
        "finish": finishes,
        "loops": repeats(answer) or "length" in finishes,
        "seconds": round(done.seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    env = isolated_env(temp_root())
    rows = [ask(env, q) for q in [README_Q, *EVERYDAY]]
    print("| prompt | steps | how each step ended | chars | loops | seconds | answer (start) |")
    print("| --- | ---: | --- | ---: | --- | ---: | --- |")
    for r in rows:
        if "error" in r:
            print(f"| {r['question']} | error: {r['error']} |")
            continue
        start = r["answer"].replace("\n", " ").replace("|", "\\|")[:70]
        print(
            f"| {r['question']} | {r['steps']} | {', '.join(r['finish'])} | {r['chars']} | "
            f"{'**yes**' if r['loops'] else 'no'} | {r['seconds']} | {start} |"
        )
    first = rows[0]
    ok = "error" not in first and "paris" in first["answer"].lower() and first["chars"] <= 300
    looping = sum(1 for r in rows[1:] if r.get("loops") or "error" in r)
    print(
        f"\nREADME question: {'names Paris' if ok else 'FAILS'}"
        f" ({first.get('chars')} chars); everyday prompts looping: {looping} of {len(EVERYDAY)}",
        file=sys.stderr,
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
