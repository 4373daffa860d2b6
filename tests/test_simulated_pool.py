"""The simulation's draws can be asked without a request (bench/prove_eight.py scores the plan it
was built around with them): they must be the very draws its server answers with."""

from __future__ import annotations

import json
import urllib.request

from conductor_cli.testing.simulated_pool import SimulatedPool, make_questions


def _ask(sim: SimulatedPool, worker: str, text: str, seen: list[str], seed: int) -> str:
    steps = [
        {"role": "user", "content": f"Step {i + 1} ({w}): the question"} for i, w in enumerate(seen)
    ]
    body = {
        "model": f"openai/{worker}",
        "seed": seed,
        "messages": [*steps, {"role": "user", "content": text}],
    }
    request = urllib.request.Request(
        f"{sim.api_base}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]


def test_answers_right_is_what_the_server_answers() -> None:
    bank = make_questions(["arith", "join"], 6, seed=3)
    skills = {w: {"arith": 0.5, "join": 0.3} for w in ("w1", "w2", "w5")}
    sim = SimulatedPool(bank, skills, {"w5": {"join": ("w1+w2", 0.95)}})
    try:
        outcomes = []
        for q in bank.values():
            for seen in ([], ["w1"], ["w1", "w2"]):
                for seed in (1, 3):
                    reply = _ask(sim, "w5", q.text, seen, seed)
                    said = reply == f"Answer: {q.answer}"
                    assert said == sim.answers_right("w5", q, set(seen), seed), (q, seen, seed)
                    outcomes.append(said)
    finally:
        sim.close()
    assert any(outcomes) and not all(outcomes)


def test_a_worker_continuing_its_own_step_sees_its_own_output() -> None:
    """run/messages.py gives a step whose first seen step is its own worker's that step's very
    messages, not a "Step N (worker)" turn: the simulation counts the worker as seen there."""
    bank = make_questions(["arith"], 1, seed=3)
    q = next(iter(bank.values()))
    sim = SimulatedPool(bank, {"w1": {"arith": 0.5}})
    try:
        body = {
            "model": "openai/w1",
            "seed": 1,
            "messages": [
                {"role": "user", "content": q.text},
                {"role": "assistant", "content": "Answer: 3"},
                {"role": "user", "content": f"{q.text}\n\nCheck it."},
            ],
        }
        request = urllib.request.Request(
            f"{sim.api_base}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10):
            pass
        _ask(sim, "w1", q.text, ["w2"], 1)
        assert sim.log == [("w1", frozenset({"w1"})), ("w1", frozenset({"w2"}))]
    finally:
        sim.close()
