"""The loop guard: loops are stopped with one copy kept; legitimate repetition is left alone;
what streams out is exactly what is kept, however the text is split into pieces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from conductor_cli.backends.loop_guard import LOOP_CHARS, LoopGuard

# What SmolLM2-135M printed for the README's question under the old worker messages (issue 32).
ISSUE_BLOCK = (
    'Première: "Ladies and gentlemen of the French language."\n'
    'Bien sûr: "Au-dessus, les Français!"\n'
    'Résummrer: "Ceux et là" (French)\n'
    'Français: "Sans problème" (No problemes)\n'
)
ISSUE_HEAD = "Enfin, l'aujour d'Allemagne. Paris is la capital de la France.\n\n"


def stream(text: str, seed: int = 0) -> tuple[LoopGuard, str]:
    """Feed `text` in random pieces of 1 to 8 characters, as tokens arrive; what was shown."""
    rng = random.Random(seed)
    guard = LoopGuard()
    shown, i = [], 0
    while i < len(text) and not guard.looped:
        k = rng.randint(1, 8)
        shown.append(guard.feed(text[i : i + k]))
        i += k
    shown.append(guard.finish())
    return guard, "".join(shown)


@pytest.mark.parametrize("seed", range(5))
def test_the_issue_loop_is_stopped_after_one_copy(seed: int) -> None:
    guard, shown = stream(ISSUE_HEAD + ISSUE_BLOCK * 6, seed)
    assert guard.looped
    assert shown == guard.kept  # nothing streamed that was not kept
    assert guard.kept.rstrip() == (ISSUE_HEAD + ISSUE_BLOCK).rstrip()
    # It stopped early: the third copy of the block, not the sixth.
    assert len(guard.generated) <= len(ISSUE_HEAD) + 3 * len(ISSUE_BLOCK) + 8


def test_a_repeated_sentence_keeps_one_sentence() -> None:
    guard, shown = stream("The answer is: Paris.\n" * 60)
    assert guard.looped
    assert shown == guard.kept
    assert guard.kept.strip() == "The answer is: Paris."
    assert len(guard.generated) <= LOOP_CHARS + 30


LEGITIMATE = {
    "code with repeated lines": (
        "```python\nimport time\n\ndef blink(led):\n"
        + "    led.toggle()\n    time.sleep(0.5)\n" * 3
        + "    return led\n```\n"
    ),
    "three identical calls": "model = Sequential()\n"
    + "model.add(Dense(64, activation='relu'))\n" * 3
    + "model.add(Dense(10))\n",
    "a numbered list": "".join(f"{i}. Item {i}: buy milk and bread\n" for i in range(1, 41)),
    "a bulleted list sharing its start": "".join(
        f"- The capital of {c} is {k}.\n"
        for c, k in [
            ("France", "Paris"),
            ("Italy", "Rome"),
            ("Spain", "Madrid"),
            ("Peru", "Lima"),
            ("Japan", "Tokyo"),
            ("Chile", "Santiago"),
            ("Egypt", "Cairo"),
            ("Kenya", "Nairobi"),
            ("Cuba", "Havana"),
            ("Iran", "Tehran"),
            ("Mali", "Bamako"),
            ("Laos", "Vientiane"),
        ]
    ),
    "a markdown table": "| a | b | c |\n| --- | --- | --- |\n"
    + "".join(f"| {i} | {i * i} | {i**3} |\n" for i in range(30)),
    "rules and a matrix": "Title\n" + "=" * 120 + "\n" + "0 0 0 0 0 0 0 0\n" * 12,
    "a chorus between verses": "".join(
        f"Verse {i}: the road goes on and on, past the hill number {i}.\n"
        "Chorus: sing along, sing along, the night is young and long.\n"
        for i in range(6)
    ),
}


@pytest.mark.parametrize("name", sorted(LEGITIMATE))
def test_legitimate_repetition_is_not_cut(name: str) -> None:
    text = LEGITIMATE[name]
    guard, shown = stream(text)
    assert not guard.looped, guard.kept[-200:]
    assert shown == guard.kept == text


def test_ordinary_text_is_held_back_only_briefly() -> None:
    text = (
        "Photosynthesis is how plants turn light into chemical energy. In the chloroplasts, "
        "chlorophyll absorbs light; water is split and oxygen released, and the energy made "
        "drives the Calvin cycle, which fixes carbon dioxide into sugars the plant can use."
    )
    guard = LoopGuard()
    shown, behind = [], []
    for i in range(0, len(text), 4):
        shown.append(guard.feed(text[i : i + 4]))
        behind.append(len(guard.text) - guard.released)
    shown.append(guard.finish())
    assert max(behind) <= 12
    assert "".join(shown) == text
    assert not guard.looped


# Lines that rotate and repeat: no exact period, so only the line rule stops them (issue 41: a
# 1,382-character answer of the embedded model whose list lines came round again and again).
ROTATING = [
    "- Drink a glass of water when you wake up.",
    "- Take a short walk after every meal.",
    "- Go to bed at the same time each night.",
]


@pytest.mark.parametrize("seed", range(3))
def test_lines_that_rotate_and_repeat_are_stopped_with_each_line_once(seed: int) -> None:
    head = "Here are some tips for a healthy day:\n"
    a, b, c = ROTATING
    cycles = [[a, b, c], [b, c, a], [c, a, b], [a, c, b], [b, a, c], [c, b, a]] * 3
    text = head + "".join(line + "\n" for cycle in cycles for line in cycle)
    guard, shown = stream(text, seed)
    assert guard.looped
    assert shown == guard.kept  # nothing streamed that was not kept
    assert guard.kept == head + f"{a}\n{b}\n{c}\n"
    assert len(guard.generated) < len(text) // 2  # it stopped early


def test_a_line_said_twice_is_not_a_loop() -> None:
    text = "".join(line + "\n" for line in ROTATING) + ROTATING[0] + "\nThat is all.\n"
    guard, shown = stream(text)
    assert not guard.looped
    assert shown == guard.kept == text


def test_after_a_loop_further_pieces_are_ignored() -> None:
    guard, _ = stream("Again and again we go.\n" * 40)
    assert guard.looped
    kept = guard.kept
    assert guard.feed("more text") == ""
    assert guard.finish() == ""
    assert guard.kept == kept


# ---------------------------------------------------------------------------- the real model


def test_a_real_loop_is_stopped_streamed_as_kept_and_cached_as_kept(
    gguf_path: Path, tmp_path: Path
) -> None:
    """SmolLM2-135M, greedy, counts "1234567890" forever: unguarded it runs to max_tokens;
    guarded it stops after the third copy, keeps one, streams exactly that, and the cache
    gives back the same reply with the same finish_reason."""
    from conductor_cli.backends.base import Request
    from conductor_cli.backends.llamacpp import LlamaCppBackend, LlamaModels
    from conductor_cli.storage.cache import CachedBackend, CacheMode, CallCounter, ResponseCache

    models = LlamaModels(n_ctx=1024)
    backend = LlamaCppBackend(models, gguf_path, "test-sha")
    prompt = "List the numbers from one to ten in words, then do it again, forever."

    def request(guard: bool) -> Request:
        messages = ({"role": "user", "content": prompt},)
        return Request(messages, 300, 0.0, 1, repeat_penalty=1.0, stop_loops=guard)

    try:
        free = backend.complete(request(False))
        assert free.finish_reason == "length" and free.tokens_out == 300
        assert free.text.count("1234567890") >= 10

        counter = CallCounter()
        cached = CachedBackend(backend, ResponseCache(tmp_path / "cache"), CacheMode.USE, counter)
        shown: list[str] = []
        guarded = cached.complete(request(True), shown.append)
        assert guarded.finish_reason == "loop"
        assert guarded.text.count("1234567890") == 1
        assert "".join(shown) == guarded.text  # no repeat reached the stream
        assert guarded.tokens_out < free.tokens_out
        again = cached.complete(request(True))
        assert again.cached and (again.text, again.finish_reason) == (guarded.text, "loop")
        assert counter.model_calls == 1
    finally:
        models.close()
