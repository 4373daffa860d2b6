"""`conductor train --method expert-iteration | grpo`: a LoRA on the conductor's weights, trained
in torch (transformers + peft, the real SmolLM2 GGUF), sampled and evaluated in llama.cpp with
the exported adapter, on a simulation of specialist workers (testing/simulated_pool.py)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the LoRA methods need the train extra")

from conductor_cli.errors import InputError
from conductor_cli.policy.registry import conductors_dir
from conductor_cli.testing.simulated_pool import TWO_SPECIALISTS, SimulatedPool, make_questions
from conductor_cli.train import adapter_gguf, base_copy
from conductor_cli.train.export_check import PROMPTS, check_export
from conductor_cli.train.lora_method import Sample, minibatches, select_experts
from conductor_cli.train.lora_model import Policy, pick_device
from conductor_cli.train.routing import routing_mask

from .conftest import assert_one_line_error, run_cli, start_cli


@pytest.fixture(scope="module")
def simulation() -> Iterator[SimulatedPool]:
    sim = SimulatedPool(make_questions(["arith", "words"], 6), TWO_SPECIALISTS)
    yield sim
    sim.close()


@pytest.fixture
def sim_files(simulation: SimulatedPool, tmp_path: Path, gguf_path: Path) -> tuple[Path, Path]:
    return simulation.files(tmp_path)


def test_a_conversion_parses_each_gguf_once_and_leaves_gguf_as_it_was(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_tensor("token_embd.weight", np.ones((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with base_copy._parsed_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first  # transformers asks by str
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is gguf.get_tensor_name_map(
            gguf.MODEL_ARCH.LLAMA, 2
        )
        assert first.tensors[0].name == "token_embd.weight"
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader_class, name_map)
    assert gguf.GGUFReader(path) is not first


def test_the_loss_sees_only_routing_decisions() -> None:
    reply = (
        b'{"steps": [{"worker": "w0", "task": "Solve it.", "sees": []}, '
        b'{"worker": "w1", "task": "Check it.", "sees": [0]}]}'
    )
    # One byte a token: the mask is exactly the decision bytes.
    mask = routing_mask([bytes([b]) for b in reply], reply)
    chosen = bytes(b for b, m in zip(reply, mask, strict=True) if m).decode()
    assert chosen == '"w0", "w1"[0]]'  # workers, what step 1 sees, another step?, the end
    assert "Solve" not in chosen and "task" not in chosen


def test_expert_iteration_keeps_the_best_shape_and_a_questions_samples_together() -> None:
    def sample(q: str, i: int, shape: str, correct: float) -> Sample:
        steps = shape.count(">") + 1
        return Sample(q, i, "{...}", shape, steps, False, 0.5 + correct / 2, correct, 1)

    samples = [
        sample("a", 0, "w0", 1.0),  # one lucky answer of a shape that is mostly wrong
        sample("a", 1, "w0", 0.0),
        sample("a", 2, "w0", 0.0),
        sample("a", 3, "w0 > w1<0", 1.0),
        sample("a", 4, "w0 > w1<0", 1.0),
        sample("b", 0, "w1", 0.0),  # nothing right: nothing kept
    ]
    kept = select_experts(samples)
    assert {(s.q, s.shape) for s in kept} == {("a", "w0 > w1<0")}
    chosen = [sample(f"q{i // 3}", i, "w0", 1.0) for i in range(20)]
    batches = minibatches(chosen, 16, random.Random(0), epochs=2)
    assert sorted(i for b in batches for i in b) == sorted(list(range(20)) * 2)
    for batch in batches:
        questions = {chosen[i].q for i in batch}
        assert all(sum(chosen[i].q == q for i in batch) == 3 for q in questions if q != "q6")


def test_exported_adapter_gives_torchs_greedy_continuations_in_llama_cpp(
    gguf_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    policy = Policy(gguf_path, device="cpu", rank=8, seed=1)
    # The dequantized base is kept (train/base_copy.py): the next load reads it, bit for bit,
    # instead of converting the GGUF again; `cache clear` removes it.
    kept = [
        p
        for p in base_copy.copies_dir().iterdir()
        if p.is_dir() and p.name[0] != "." and not p.name.endswith(".tokenizer")
    ]
    assert len(kept) == 1 and (kept[0] / "config.json").is_file()
    again = base_copy.load_base(gguf_path)
    base_weights = {
        k.replace(".base_layer", ""): v
        for k, v in policy.model.get_base_model().state_dict().items()
        if "lora_" not in k
    }
    assert base_weights.keys() == again.state_dict().keys()
    assert all(torch.equal(base_weights[k], v) for k, v in again.state_dict().items())
    for name, p in policy.model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: give the adapter something to say
            torch.nn.init.normal_(p, std=0.1)
    adapter = tmp_path / "adapter.gguf"
    policy.export(adapter)
    # Two of the check's five prompts (the suite's time; the expert-iteration test below
    # passes all five through `conductor train`).
    result = check_export(policy, gguf_path, adapter, PROMPTS[:2])
    assert result["prompts"] == 2 and result["tokens"] == 32
    assert result["identical"] == 2, result["results"]
    # The check has teeth: the adapter changes what torch writes, and an adapter exported
    # without llama.cpp's Q/K row order does not pass it.
    prompt = [504, 3575, 282, 4649, 314]
    with policy.model.disable_adapter():
        plain = policy.greedy(prompt, 32)
    adapted = policy.greedy(prompt, 32)
    assert plain != adapted
    # The check reads torch's choices in one pass over a continuation: along torch's own
    # greedy continuation they are that continuation, along another they part where it does.
    assert policy.argmax_after(prompt, adapted) == adapted
    parted = next(i for i, (a, b) in enumerate(zip(adapted, plain, strict=True)) if a != b)
    along_plain = policy.argmax_after(prompt, plain)
    assert along_plain[: parted + 1] == adapted[: parted + 1] and along_plain != plain
    monkeypatch.setattr(adapter_gguf, "rope_permute", lambda rows, n_head: rows)
    unpermuted = tmp_path / "unpermuted.gguf"
    policy.export(unpermuted)
    assert check_export(policy, gguf_path, unpermuted, PROMPTS[:2])["identical"] < 2
    # The float32 GGUF both checks loaded was made once and kept beside the torch copy.
    assert [p.name for p in base_copy.copies_dir().glob("*.f32.gguf")] == [
        f"{kept[0].name}.f32.gguf"
    ]


def test_a_big_conductor_on_the_cpu_is_refused_in_one_line(tmp_path: Path) -> None:
    big = tmp_path / "big.gguf"
    with big.open("wb") as f:
        f.truncate(4_400_000_000)  # sparse: a 7B Q4 conductor's size
    with pytest.raises(InputError, match="needs a GPU"):
        pick_device("cpu", big)
    with pytest.raises(InputError, match="--device"):
        pick_device("tpu", big)


def test_expert_iteration_fits_exports_and_ask_plans_with_the_adapter(
    simulation: SimulatedPool, sim_files: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = sim_files
    proc = run_cli(
        "train", "qa", str(data), "--config", str(config), "--out", "ei",
        "--method", "expert-iteration", "--iterations", "1", "--samples", "2",
        "--epochs", "1", "--repeats", "1", "--holdout", "0", "--limit", "6", "--json",
        timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    curve = record["curve"]
    assert [e["iteration"] for e in curve] == [1]
    # The round's fit takes: the rewarded samples' routing decisions are likelier after it.
    # One small round (the suite's time); held-out accuracy round after round is the learning
    # curve bench/train_lora.py measures (docs/train.md).
    fit = curve[0]["experts_logprob"]
    assert fit["after"] > fit["before"], curve
    assert record["export_check"]["identical"] == 5
    directory = conductors_dir() / "ei"
    assert (directory / "adapter.gguf").is_file() and (directory / "peft").is_dir()
    assert not (conductors_dir() / ".ei.training").exists()

    use = tmp_path / "use.toml"
    use.write_text(config.read_text().replace("max_steps = 2", 'max_steps = 2\nmodel = "ei"'))
    asked = run_cli("ask", "--config", str(use), "--json", simulation.questions[1].text)
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["answer"]
    base = run_cli("ask", "--config", str(config), "--json", simulation.questions[1].text)
    # The adapter is part of the model's identity: never a reply cached for the base.
    assert json.loads(asked.stdout)["plan"]["cached"] is False
    assert base.returncode == 0
    info = json.loads(run_cli("models", "info", "ei", "--json").stdout)
    assert info["method"] == "expert-iteration" and info["curve"] == curve


def test_ctrl_c_in_grpo_then_resume_trains_no_step_twice(
    sim_files: tuple[Path, Path],
) -> None:
    config, data = sim_files
    args = [
        "train", "qa", str(data), "--config", str(config), "--out", "g",
        "--method", "grpo", "--steps", "2", "--samples", "2", "--questions-per-step", "1",
        "--repeats", "1", "--holdout", "0.34", "--eval-every", "2", "--json",
    ]  # fmt: skip
    proc = start_cli(*args)
    state = conductors_dir() / ".g.training" / "state.json"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if state.exists() and json.loads(state.read_text())["done"] >= 1:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "--resume" in err
    done = json.loads(state.read_text())["done"]
    assert done == 1
    resumed = run_cli(*args, "--resume", timeout=1200)
    assert resumed.returncode == 0, resumed.stderr
    record = json.loads(resumed.stdout)
    assert [e["step"] for e in record["curve"]] == [1, 2]
    assert "held_out" in record["curve"][-1]
    weights = adapter_weights(conductors_dir() / "g" / "adapter.gguf")
    assert any(np.abs(b).sum() > 0 for name, b in weights.items() if name.endswith("lora_b"))


def test_bad_lora_training_input_is_one_line(sim_files: tuple[Path, Path]) -> None:
    config, data = sim_files
    proc = run_cli(
        "train", "qa", str(data), "--config", str(config), "--method", "grpo",
        "--device", "cuda",
    )  # fmt: skip
    if proc.returncode != 0:  # a machine with CUDA would train here
        assert_one_line_error(proc, 2, "--device cuda")
    proc = run_cli("train", "qa", str(data), "--config", str(config), "--method", "ppo")
    assert_one_line_error(proc, 2, "--method 'ppo'")
    without_torch = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['torch'] = None; sys.argv[0] = 'conductor'; "
            "from conductor_cli.cli.entry import main; main()",
            *("train", "qa", str(data), "--config", str(config), "--method", "grpo"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(without_torch, 2, "need torch", "conductor-cli[train]", "--method head")


def adapter_weights(path: Path) -> dict[str, np.ndarray]:
    import gguf

    return {t.name: np.array(t.data) for t in gguf.GGUFReader(str(path)).tensors}
