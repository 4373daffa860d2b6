"""What a server streams of a run's answer (run/answer_stream.py): at the end the pieces are
the run's answer word for word, however the final step's text was cut into tokens, and text
the run cannot reshape goes out as it comes."""

from __future__ import annotations

import random

import pytest

from conductor_cli.run.answer_form import as_asked
from conductor_cli.run.answer_stream import AnswerStream
from conductor_cli.run.workflow import Step, Workflow

SORT = "sort these alphabetically: violin drum flute cello"
TEXTS = [
    "Answer: ['cello', 'drum', 'flute', 'violin']",
    "['cello', 'drum', 'flute', 'violin']\n",
    "The words in order:\n['cello', 'drum', 'flute', 'violin']\nDone.",
    "Here is a program:\n```python\nprint(['b', 'a'])\n['b', 'a']\n```\nAnswer: ['a', 'b']",
    "Sorted: (1, 2, 3) and more",
    "A line far longer than any label could be, with a list after it: ['x', 'y']\nnext",
    "",
    "\n\n  Answer:   ['x']  \n",
    "Answer: [1, [2, 3]]\n(a tuple, not closed",
]
ONE_STEP = Workflow((Step("coder", "Answer the question.", ()),))


def streamed(stream: AnswerStream, text: str, rng: random.Random) -> str:
    stream.plan(ONE_STEP)
    out, at = [], 0
    while at < len(text):
        size = rng.randint(1, 6)
        out.append(stream.piece(0, text[at : at + size]))
        at += size
    out.append(stream.step_done(0, text))
    return "".join(out)


@pytest.mark.parametrize("text", TEXTS)
def test_the_pieces_make_the_runs_answer(text: str) -> None:
    for seed in range(20):
        stream = AnswerStream(SORT)
        live = streamed(stream, text, random.Random(seed))
        answer = as_asked(SORT, text)
        assert answer.startswith(live)
        assert live + stream.finish(answer) == answer


def test_a_printed_list_never_goes_out_as_printed() -> None:
    stream = AnswerStream(SORT)
    live = streamed(stream, "Answer: ['cello', 'drum', 'flute', 'violin']\nok", random.Random(1))
    assert "[" not in live
    assert live.startswith("Answer: cello drum flute violin\n")


def test_text_that_cannot_be_reshaped_goes_out_as_it_comes() -> None:
    stream = AnswerStream(SORT)
    stream.plan(ONE_STEP)
    first = stream.piece(0, "The cello comes first, then the drum, then the flute, ")
    assert first == "The cello comes first, then the drum, then the flute, "
    assert stream.piece(0, "then the violin") == "then the violin"


def test_an_agents_turn_streams_as_written() -> None:
    stream = AnswerStream(None)
    stream.plan(ONE_STEP)
    assert stream.piece(0, "['a', 'b']") == "['a', 'b']"
    assert stream.finish("['a', 'b']") == ""


def test_a_step_that_reads_a_program_run_waits_where_the_question_writes_a_slot() -> None:
    question = 'Count the apples.\nEnd your reply with a line "Answer: <your answer>".'
    plan = Workflow((Step("coder", "Write a program.", ()), Step("python", "Run it.", (0,)),
                     Step("coder", "Check it.", (0, 1))))  # fmt: skip
    stream = AnswerStream(question)
    stream.plan(plan)
    assert stream.piece(2, "The program is right.\nAnswer: <your answer>") == ""
    assert stream.finish("4") == "4"
    # without a slot in the question the same step streams
    plain = AnswerStream("Count the apples.")
    plain.plan(plan)
    assert plain.piece(2, "The program is right.\n") == "The program is right.\n"


def test_later_rounds_hold_everything_to_the_end() -> None:
    stream = AnswerStream(SORT, live=False)
    stream.plan(ONE_STEP)
    assert stream.piece(0, "A first answer.\n") == ""
    assert stream.finish("A corrected answer.") == "A corrected answer."


def test_a_final_step_tried_again_sends_its_answer_at_the_end() -> None:
    said = "Hello there, and a warm welcome to the two of you, friends."
    stream = AnswerStream("Say hello.")
    stream.plan(ONE_STEP)
    assert stream.piece(0, said[:45]) == said[:45]  # past any label: it goes out
    stream.retry(0)  # the worker failed mid-reply; the try again starts from nothing
    assert stream.piece(0, said) == ""
    assert stream.step_done(0, said) == ""
    assert stream.finish(said) == said[45:]


def test_a_retry_before_anything_went_out_keeps_streaming() -> None:
    said = "Hello there, and a warm welcome to the two of you, friends."
    stream = AnswerStream("Say hello.")
    stream.plan(ONE_STEP)
    assert stream.piece(0, "Hel") == ""  # held: it could still be a label
    stream.retry(0)
    assert stream.piece(0, said) == said


def test_whether_rounds_follow_is_read_when_the_plan_is_ready() -> None:
    rounds = [1]
    stream = AnswerStream("Say hello.", live=lambda: rounds[0] <= 1)
    rounds[0] = 2  # the config changed before the run leased it
    stream.plan(ONE_STEP)
    assert stream.piece(0, "Hello there.\n") == ""


def test_other_steps_never_stream() -> None:
    plan = Workflow((Step("coder", "Draft.", ()), Step("coder", "Improve.", (0,))))
    stream = AnswerStream("Say hello.")
    stream.plan(plan)
    assert stream.piece(0, "Hello draft.\n") == ""
    assert stream.piece(1, "Hello there.\n") == "Hello there.\n"


LISTED = "Answer: ['cello', 'drum', 'flute', 'violin']"


@pytest.fixture
def list_server(tmp_path, isolated_home):  # type: ignore[no-untyped-def]
    """The real server, its one worker a fake OpenAI endpoint that answers with a printed
    Python list (fault injection: the form a program's run gives a checking step)."""
    import threading

    from conductor_cli.config.settings import load_config
    from conductor_cli.server.http_api import ConductorServer
    from conductor_cli.testing.fake_openai import FakeOpenAIServer

    fake = FakeOpenAIServer(["ok"], answer=LISTED)
    config = tmp_path / "config.toml"
    config.write_text(
        "[conductor]\nmax_steps = 1\n\n[cache]\nenabled = false\n\n"
        f'[[workers]]\nname = "w"\nmodel = "openai/fake"\napi_base = "{fake.api_base}"\n',
        encoding="utf-8",
    )
    srv = ConductorServer(load_config(config), port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()
    fake.close()


def test_every_api_streams_the_answer_a_complete_reply_gives(list_server) -> None:  # type: ignore[no-untyped-def]
    import anthropic
    import openai

    words = "Answer: cello drum flute violin"
    ask = [{"role": "user", "content": SORT}]
    c = openai.OpenAI(base_url=f"{list_server.url}/v1", api_key="unused", max_retries=0)
    plain = c.chat.completions.create(model="conductor", messages=ask)
    assert plain.choices[0].message.content == words
    pieces = [
        p.choices[0].delta.content or ""
        for p in c.chat.completions.create(model="conductor", messages=ask, stream=True)
        if p.choices
    ]
    assert "".join(pieces) == words
    deltas, done = [], None
    for event in c.responses.create(model="conductor", input=SORT, stream=True):
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        if event.type == "response.output_text.done":
            done = event.text
    assert "".join(deltas) == done == words
    a = anthropic.Anthropic(base_url=list_server.url, api_key="unused", max_retries=0)
    with a.messages.stream(model="conductor", max_tokens=100, messages=ask) as s:
        said = "".join(s.text_stream)
    assert said == words
