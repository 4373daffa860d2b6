"""The loop guard: loops are stopped with one copy kept; legitimate repetition is left alone;
what streams out is exactly what is kept, however the text is split into pieces."""

from __future__ import annotations

import random

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


def test_after_a_loop_further_pieces_are_ignored() -> None:
    guard, _ = stream("Again and again we go.\n" * 40)
    assert guard.looped
    kept = guard.kept
    assert guard.feed("more text") == ""
    assert guard.finish() == ""
    assert guard.kept == kept
