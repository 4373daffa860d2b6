"""The shipped head's picks and planning seconds, its features read from SmolLM2's Q4_1 file
against its 16-bit copy (backends/f16_copy.py), on every question the README's figures stand
on: the public mix's test draws (seeds 0 and 13, 8 a set; seed 7, 20 a set), the eight
withheld kinds (seed 2, 20 each), the six typed letter sets, the 48 everyday facts and the 20
letter questions; and the head's own 114 training questions. A pick that is the same both
ways plans the same workflow, whose workers then answer the same (same call, same answer):
every figure measured with the file stands.

    .venv/bin/python bench/f16_features.py

No worker runs. Each reading keeps what planning keeps (the planning prompt's fixed part, held
from the question before; nothing on disk), so a question costs its own tokens, as in `ask`;
both read each question one after the other in one process, so the seconds are a ratio on one
machine. Run alone (llama.cpp)."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np
from _common import temp_root
from familiar_shipped import SHIPPED, training_problems

from conductor_cli.backends.f16_copy import f16_copy
from conductor_cli.config import load_config
from conductor_cli.evals import load_dataset, select
from conductor_cli.evals.datasets import fingerprint
from conductor_cli.models.catalog import file_sha256
from conductor_cli.policy.chooser import read_as
from conductor_cli.policy.features import PromptFeatures
from conductor_cli.run.planner import plan_messages, worker_infos
from conductor_cli.runtime import Runtime

DATA = Path(__file__).parent / "data"
MIX = ("gsm8k", "arc-challenge", "bbh:object_counting", "bbh:date_understanding", "nq-open")
WITHHELD = (
    "bbh:navigate", "bbh:sports_understanding", "bbh:word_sorting", "bbh:temporal_sequences",
    "bbh:causal_judgment", "bbh:penguins_in_a_table", "bbh:word_unscrambling", "openbookqa",
)  # fmt: skip
FILES = (
    *(f"typed_letters{s}.jsonl" for s in ("", "_b", "_c", "_d", "_e", "_f")),
    "everyday_facts48.jsonl",
    "letters.jsonl",
)


def questions() -> list[tuple[str, str]]:
    drawn = [(name, 8, 0) for name in MIX] + [(name, 8, 13) for name in MIX]
    drawn += [(name, 20, 7) for name in MIX] + [(name, 20, 2) for name in WITHHELD]
    out = [
        (f"{name} seed {seed}", p.question)
        for name, n, seed in drawn
        for p in select(load_dataset(name, None), sample=n, seed=seed)
    ]
    for file in FILES:
        for line in (DATA / file).read_text(encoding="utf-8").splitlines():
            out.append((file, json.loads(line)["question"]))
    # The head's own 114 training questions, rebuilt and checked against its record.
    trained = training_problems(temp_root())
    record = json.loads((SHIPPED / "record.json").read_text(encoding="utf-8"))
    if fingerprint(trained) != record["dataset"]["fingerprint"]:
        raise SystemExit("the rebuilt training questions are not the ones the head trained on")
    return out + [("training", p.question) for p in trained]


def main() -> None:
    config = load_config(None)
    infos = worker_infos(config.workers)
    asked = questions()
    with Runtime(config) as runtime:
        chooser = runtime.chooser()
        assert chooser is not None
        head, copy = chooser.head, chooser.features.model
        file = _native_path(runtime)
        assert f16_copy(file, file_sha256(file)) == copy, "the head does not read the file's copy"
        readers = {
            "q4_1": PromptFeatures(file, n_ctx=4096, kept=False),
            "f16": PromptFeatures(copy, n_ctx=4096, kept=False),
        }
        seconds: dict[str, list[float]] = {k: [] for k in readers}
        flips, margins = [], []
        for tag, question in asked:
            messages = plan_messages(question, infos, (), config.conductor.max_steps)
            messages = read_as("prompt", messages, question)
            scores = {}
            for name, read in readers.items():
                start = time.perf_counter()
                state = read(messages)
                seconds[name].append(time.perf_counter() - start)
                scores[name] = head.project(state)[0] @ head.weights
            top = np.sort(scores["q4_1"])
            margins.append(float(top[-1] - top[-2]))
            if int(np.argmax(scores["q4_1"])) != int(np.argmax(scores["f16"])):
                flips.append((tag, question[:80]))
        for read in readers.values():
            read.close()
    print(f"{len(asked)} questions; picks that differ: {len(flips)}")
    for tag, text in flips:
        print(f"  {tag}: {text!r}")
    print(f"smallest score margin of a Q4_1 pick: {min(margins):.3f}")
    for name, times in seconds.items():
        print(f"{name}: {sum(times):.1f} s in all, median {statistics.median(times):.3f} s")
    print(f"F16 / Q4_1 seconds: {sum(seconds['f16']) / sum(seconds['q4_1']):.2f}")


def _native_path(runtime: Runtime) -> Path:
    from conductor_cli.backends.llamacpp import LlamaCppBackend
    from conductor_cli.policy.conductor import conductor_backend

    backend = conductor_backend(runtime.config, runtime.catalog, runtime.models, runtime.litellm)
    assert isinstance(backend, LlamaCppBackend)
    return backend.path


if __name__ == "__main__":
    main()
