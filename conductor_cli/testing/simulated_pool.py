"""SimulatedPool: a simulation of specialist workers behind one OpenAI-compatible server on
127.0.0.1, for learning checks where the right policy is known.

Each question carries a tag `[Q<n>]`; the simulation knows its kind and answer. A worker (the
request's model name) answers right with a probability that depends on the question's kind
and on which workers' outputs it sees; otherwise it gives a wrong answer. Draws are
deterministic in (worker, question, seed, what it sees), so a rerun with the same seed gives
the same answer and repeats with other seeds differ. Names and descriptions say nothing of
the skills: only learning can tell the workers apart.

The kind "cue" (opt-in: only a bank made with it has such questions) is for rounds (issue 20),
where the conductor reads the first answer before it keeps it or corrects it: a wrong answer
to a cue question is another code of the same form, marked "(unsure)" ("Answer: a123
(unsure)"), a right one is unmarked ("Answer: a456"), so the mark is the only thing that tells
them apart. A worker whose prompt carries an earlier round's answer (the attachment "answer of
round K") sees the helper ROUND_ANSWER, so `helped[w]["cue"] = (ROUND_ANSWER, p)` makes w a
checker that is right with probability p in a corrective round; which round's answer it reads
is part of its draw, so a later round's check is a new draw. Every other kind's replies and
draws are as they were.

The kind "calc" (opt-in too) is for tool workers (issue 33): "What is N * 7919 + 13?", whose
answer is the number. `programs[w]["calc"] = p` makes w a worker that cannot compute but, asked
for a program (its message ends with run/messages.py's PROGRAM_REQUEST, as when a later
`tool:python` step sees it), writes one that computes the answer with probability p (else one
that computes something else); the real python tool runs it. Asked for a program, a worker
with no such skill writes none.

Words (issue 57, `train --learn-words`): `worded[w][kind] = (phrase, p)` makes w right with
probability p on that kind when its request carries `phrase` (the words of its step), and as
its skill says otherwise: a simulation where the words of a step decide, as they do for a real
model, by an amount set here.
"""

from __future__ import annotations

import hashlib
import http.server
import itertools
import json
import random
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from conductor_cli.run.messages import PROGRAM_REQUEST

TAG = re.compile(r"\[Q(\d+)\]")
# A seen step comes as an earlier exchange whose user turn names it (run/messages.py).
SEEN = re.compile(r"^Step \d+ \(([^)]+)\): ", re.MULTILINE)
# A later round's step reads the answer so far as an attachment (run/rounds).
ROUND_SEEN = re.compile(r"^Attached answer of round (\d+):", re.MULTILINE)
# The helper a cue question's worker "sees" when its prompt carries an earlier round's answer.
ROUND_ANSWER = "answer of an earlier round"


@dataclass(frozen=True)
class SimulatedQuestion:
    number: int
    kind: str
    answer: str

    @property
    def text(self) -> str:
        return f"[Q{self.number}] {KIND_TEXT[self.kind].format(n=self.number)}"


KIND_TEXT = {
    "arith": "What is {n} plus {n} plus seven, computed exactly?",
    "words": "Which English word is spelled by the letters of 'stone' reversed, case {n}?",
    "geo": "Name the river that flows through the capital in riddle number {n}.",
    "logic": "If all blips are blops and item {n} is a blip, what is item {n}?",
    "chain": "Draft an attempt, then refine it: puzzle {n} about hidden symbols.",
    "cue": "Recall the code word that opens locker number {n}.",
    "calc": "What is {n} * 7919 + 13?",
    "join": "Compare two independent drafts, then settle case {n} of the ledger audit.",
    # Kinds that only a composition of partial workers answers (issue 44): a draft to be
    # checked, two fragments to be read together.
    "pcheck": "Sketch the fragment, then have it verified: cipher sheet {n}.",
    "pjoin": "Gather both halves of the record, then reconcile archive entry {n}.",
    # More kinds, for a training broad enough to withhold whole kinds (train/head_fit.KINDS_OUT).
    "color": "Which colour does the painter mix for canvas {n} of the gallery?",
    "animal": "Which animal sleeps in burrow {n} of the meadow survey?",
    "planet": "Which moon orbits the planet catalogued as body {n}?",
    "coin": "What is stamped on the back of the coin from hoard {n}?",
}


def calc_expression(number: int, right: bool) -> str:
    return f"{number} * 7919 + 13" if right else f"{number} * 7919 - 13"


# Two kinds of question, each with one specialist: the training tests' testbed.
TWO_SPECIALISTS = {"w0": {"arith": 0.95, "words": 0.2}, "w1": {"arith": 0.2, "words": 0.95}}


@dataclass
class SimulatedPool:
    """skills[worker][kind]: P(right) alone; helped[worker][kind] = (helper, P(right) when it
    sees an output of `helper`; "w0+w1": when it sees outputs of both)."""

    questions: Mapping[int, SimulatedQuestion]
    skills: Mapping[str, Mapping[str, float]]
    helped: Mapping[str, Mapping[str, tuple[str, float]]] = field(default_factory=dict)
    programs: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    worded: Mapping[str, Mapping[str, tuple[str, float]]] = field(default_factory=dict)
    calls: int = 0
    # (worker, the workers whose steps it saw) of every call, in order
    log: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    port: int = 0  # 0: any free one; a bench that resumes an eval binds the same one again

    def __post_init__(self) -> None:
        sim = self
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # /v1/models: doctor's reachability probe
                self._send({"data": [{"id": w} for w in sim.skills]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    sim.calls += 1
                text = sim.reply(body)
                self._send(
                    {
                        "id": "sim",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", ""),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
                    }
                )

            def _send(self, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.api_base = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def probability(self, worker: str, kind: str, seen: set[str], text: str = "") -> float:
        words = self.worded.get(worker, {}).get(kind)
        if words is not None and words[0] in text:
            return words[1]
        helper = self.helped.get(worker, {}).get(kind)
        # A helper is one worker, or several ("w0+w1") whose outputs must all be seen.
        if helper is not None and set(helper[0].split("+")) <= seen:
            return helper[1]
        return self.skills.get(worker, {}).get(kind, 0.0)

    def draw(
        self,
        worker: str,
        number: int,
        seed: object,
        seen: set[str],
        rounds: list[str] | None = None,
    ) -> float:
        """The uniform draw behind a reply: deterministic in (worker, question, request seed,
        what it sees), and for a cue question's later round, in which rounds it read."""
        key = f"{worker}|{number}|{seed}|{sorted(seen)}"
        if rounds:  # each round's check is a draw of its own
            key += f"|rounds {rounds}"
        return random.Random(hashlib.sha256(key.encode()).digest()).random()

    def answers_right(
        self, worker: str, question: SimulatedQuestion, seen: set[str], seed: object
    ) -> bool:
        """What `reply` would say, without a request: whether `worker`, having seen the steps
        of `seen`, answers `question` right under the request seed `seed` (rounds aside)."""
        draw = self.draw(worker, question.number, seed, seen)
        return draw < self.probability(worker, question.kind, seen)

    def reply(self, body: dict) -> str:
        worker = str(body.get("model", "")).split("/")[-1]
        user = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        tag = TAG.search(user)
        if tag is None or int(tag.group(1)) not in self.questions:
            return "Answer: unknown"
        q = self.questions[int(tag.group(1))]
        seen = set(SEEN.findall(user))
        # An earlier exchange not named by a "Step N" turn is the worker's own step, continued
        # (run/messages.py `own`): it sees its own output.
        messages = [m for m in body.get("messages", []) if m.get("role") != "system"]
        if any(
            m.get("role") == "assistant" and not SEEN.match(str(prev.get("content", "")))
            for prev, m in itertools.pairwise(messages)
        ):
            seen.add(worker)
        self.log.append((worker, frozenset(seen)))
        rounds = ROUND_SEEN.findall(user) if q.kind == "cue" else []
        if rounds:
            seen.add(ROUND_ANSWER)
        draw = self.draw(worker, q.number, body.get("seed"), seen, rounds)
        last = str(body.get("messages", [{}])[-1].get("content", ""))
        if last.rstrip().endswith(PROGRAM_REQUEST):
            skill = self.programs.get(worker, {}).get(q.kind)
            if skill is None or q.kind != "calc":
                return "I cannot write a program for that."
            code = calc_expression(q.number, draw < skill)
            return f"Here is the program:\n```python\nprint({code})\n```"
        right = draw < self.probability(worker, q.kind, seen, user)
        if q.kind == "cue":
            return f"Answer: {q.answer}" if right else f"Answer: {cue_wrong(q, draw)} (unsure)"
        return f"Answer: {q.answer if right else 'wrong-' + q.answer}"

    def config(self, path: Path, *, max_steps: int = 2) -> Path:
        """A conductor config whose pool is these workers, with identical descriptions."""
        lines = [f"[conductor]\nmax_steps = {max_steps}\n"]
        for worker in self.skills:
            lines.append(
                f'[[workers]]\nname = "{worker}"\nmodel = "openai/{worker}"\n'
                f'api_base = "{self.api_base}"\ndescription = "a general assistant"\n'
                "max_tokens = 16\nretries = 0\n"
            )
        path.write_text("\n".join(lines), encoding="utf-8")
        return path

    def files(
        self, directory: Path, *, as_typed: bool = False, with_kinds: bool = False
    ) -> tuple[Path, Path]:
        """(a config for this pool, the question bank as a qa dataset) in `directory`."""
        return self.config(directory / "sim.toml"), write_dataset(
            self.questions, directory / "sim.jsonl", as_typed=as_typed, with_kinds=with_kinds
        )

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def cue_wrong(q: SimulatedQuestion, draw: float) -> str:
    """A wrong code of the right answer's form (a<number>), never the right one; which one
    follows the draw, so it is as deterministic as the rest."""
    offset = 1 + int(draw * (10**6 - 1))  # 1 .. 10**6 - 1: never a whole turn
    return f"a{(int(q.answer[1:]) + offset) % 10**6}"


def make_questions(kinds: list[str], per_kind: int, seed: int = 0) -> dict[int, SimulatedQuestion]:
    rng = random.Random(seed)
    questions = {}
    number = 1
    for _ in range(per_kind):
        for kind in kinds:
            code = f"a{rng.randrange(10**6)}"
            answer = str(number * 7919 + 13) if kind == "calc" else code
            questions[number] = SimulatedQuestion(number, kind, answer)
            number += 1
    return questions


def write_dataset(
    questions: Mapping[int, SimulatedQuestion],
    path: Path,
    *,
    as_typed: bool = False,
    with_kinds: bool = False,
) -> Path:
    """An exact-answer qa file; the kind is kept out of it (no category field) unless
    `with_kinds` (what a training that learns each kind's words reads). `as_typed`: asked as a
    user types them (`"instruction": false`, no answer-format line added), as `ask` asks them:
    a head trained on them reads the planning prompt `ask` builds."""
    with path.open("w", encoding="utf-8") as out:
        for q in questions.values():
            line = {"id": f"q{q.number}", "question": q.text, "answer": q.answer}
            line |= {"category": q.kind} if with_kinds else {}
            out.write(json.dumps(line | ({"instruction": False} if as_typed else {})) + "\n")
    return path
