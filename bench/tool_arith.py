"""Program-aided answering on the embedded model (issue 33): 20 seeded questions "What is
a * b + c?" (two-digit a and b, one-digit c), each asked two ways with hand-written workflows
through the real `conductor run` (no conductor model, real llama.cpp, the real sandbox):

- `single`: the embedded model `local` answers the question;
- `pal`: `local` is asked for a program (a later `tool:python` step sees it, so its message
  ends with run/messages.py's PROGRAM_REQUEST), and `tool:python` runs it.

Right = the exact result appears in the answer. Run alone (llama.cpp; about 2 minutes on 2
cores): .venv/bin/python bench/tool_arith.py
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

from _common import CONDUCTOR, isolated_env, timed

CONFIG = """
[[workers]]
name = "local"
model = "gguf:smollm2-135m-instruct"
max_tokens = 200

[[workers]]
name = "python"
model = "tool:python"
"""
WORKFLOWS = {
    "single": [{"worker": "local", "task": "Answer the question.", "sees": []}],
    "pal": [
        {"worker": "local", "task": "Compute the answer.", "sees": []},
        {"worker": "python", "task": "Run the program.", "sees": [0]},
    ],
}


def questions(n: int = 20, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b, c = rng.randint(10, 99), rng.randint(10, 99), rng.randint(1, 9)
        out.append((f"What is {a} * {b} + {c}?", str(a * b + c)))
    return out


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="conductor-bench-") as tmp:
        root = Path(tmp)
        env = isolated_env(root)
        config = root / "pool.toml"
        config.write_text(CONFIG, encoding="utf-8")
        files = {}
        for name, steps in WORKFLOWS.items():
            files[name] = root / f"{name}.json"
            files[name].write_text(json.dumps({"steps": steps}), encoding="utf-8")
        right = dict.fromkeys(WORKFLOWS, 0)
        endings: dict[str, int] = {}
        for question, answer in questions():
            for name, path in files.items():
                done = timed(
                    [CONDUCTOR, "--config", str(config), "run", "--json", str(path), question],
                    env,
                )
                text = json.loads(done.stdout)["answer"] if done.returncode == 0 else ""
                right[name] += answer in text
                if name == "pal" and answer not in text:
                    ending = text.split("\n", 1)[0][:40] or "(error)"
                    ending = (
                        "other output" if not ending.startswith(("The program", "No ")) else ending
                    )
                    endings[ending] = endings.get(ending, 0) + 1
        n = len(questions())
        print("| workflow | right |\n| --- | ---: |")
        for name, count in right.items():
            print(f"| {name} | {count}/{n} |")
        print("\nwrong pal answers:", json.dumps(endings))


if __name__ == "__main__":
    main()
