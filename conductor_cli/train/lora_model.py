"""The conductor as a trainable policy: its GGUF loaded into transformers (dequantized) with a
peft LoRA on the attention projections, the log-probability of a reply's routing decisions,
weighted gradient steps, checkpoints, and export to the `adapter.gguf` llama.cpp applies.

The only module of the project that imports torch; `conductor train --method head` never loads
it.
"""

from __future__ import annotations

import importlib.util
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conductor_cli.errors import InputError
from conductor_cli.train.adapter_gguf import MODULES, pairs_from_peft, write_adapter
from conductor_cli.train.base_copy import load_base
from conductor_cli.train.examples import Example
from conductor_cli.train.workdir import replace_dir

TORCH_EXTRA = "pip install 'conductor-cli[train]' (torch, transformers, peft, gguf; about 6 GB)"
# Above this a conductor's GGUF is a multi-billion-parameter model: fitting a LoRA to it on
# a CPU takes hours a round (the 98 MB default takes minutes).
CPU_MAX_BYTES = 1_500_000_000


def require_torch() -> None:
    """One line naming what is missing; looked up, not imported (transformers prints a warning
    on import when torch is absent, and torch takes seconds)."""
    missing = [m for m in ("torch", "transformers", "peft", "gguf") if not installed(m)]
    if missing:
        raise InputError(
            f"the LoRA methods need {', '.join(missing)}: {TORCH_EXTRA}; "
            "or train with --method head, which needs no torch"
        )


def installed(module: str) -> bool:
    """Whether `module` can be imported (looked up, not imported; None in sys.modules: no)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def pick_device(requested: str, base: Path) -> str:
    """`auto`: CUDA when torch sees it, else the CPU; a big conductor on the CPU is refused."""
    import torch

    if requested not in ("auto", "cpu", "cuda"):
        raise InputError(f"--device {requested!r}: use auto, cpu or cuda")
    cuda = torch.cuda.is_available()
    if requested == "cuda" and not cuda:
        raise InputError("--device cuda: torch sees no CUDA device here; use --device cpu")
    device = "cuda" if requested == "cuda" or (requested == "auto" and cuda) else "cpu"
    size = base.stat().st_size
    if device == "cpu" and size > CPU_MAX_BYTES:
        raise InputError(
            f"{base.name} is {size / 1e9:.1f} GB: training its LoRA needs a GPU (on this CPU a "
            "round would take hours); run on a machine with CUDA, or use --method head"
        )
    return device


class Policy:
    def __init__(
        self,
        base: Path,
        *,
        device: str,
        rank: int,
        checkpoint: Path | None = None,
        seed: int = 0,
    ) -> None:
        import torch
        from peft import LoraConfig, PeftModel, get_peft_model
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        torch.manual_seed(seed)
        self.device = device
        self.rank = rank
        self.alpha = 2.0 * rank
        try:
            model = load_base(base)
        except (ValueError, OSError, KeyError, RuntimeError) as e:
            raise InputError(
                f"transformers cannot load {base} for training ({e}); the LoRA methods "
                "need a GGUF of an architecture transformers reads (llama, qwen2, ...), or "
                "use --method head"
            ) from None
        config = model.config
        self.n_head = int(config.num_attention_heads)
        self.n_head_kv = int(getattr(config, "num_key_value_heads", None) or self.n_head)
        if config.model_type != "llama":
            # adapter_gguf.py writes llama's tensor names and Q/K row order, checked only there.
            raise InputError(
                f"{base.name} is a {config.model_type} model; the LoRA methods export adapters "
                "for llama-architecture conductors (SmolLM2, Llama) only; use --method head"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if checkpoint is not None:
                self.model: Any = PeftModel.from_pretrained(
                    model, str(checkpoint), is_trainable=True
                )
            else:
                lora = LoraConfig(
                    r=rank, lora_alpha=self.alpha, target_modules=list(MODULES), lora_dropout=0.0
                )
                self.model = get_peft_model(model, lora)
        self.model.to(device)
        self._params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer: Any = None

    def routing_logprobs(self, examples: Sequence[Example]) -> tuple[Any, Any]:
        """(sum of log p over each reply's routing tokens, their count), with gradients.

        Examples that share a prompt (a question's samples) share one pass over it: the
        prompt is ~90 % of the tokens, so a group of 8 costs about what 2 alone would.
        """
        import torch

        groups: dict[tuple[int, ...], list[int]] = {}
        for i, e in enumerate(examples):
            groups.setdefault(e.prompt, []).append(i)
        sums: list[Any] = [None] * len(examples)
        counts: list[Any] = [None] * len(examples)
        for prompt, members in groups.items():
            group_sums, group_counts = self._group_logprobs(prompt, [examples[i] for i in members])
            for j, i in enumerate(members):
                sums[i] = group_sums[j]
                counts[i] = group_counts[j]
        return torch.stack(sums), torch.stack(counts)

    def _group_logprobs(
        self, prompt: Sequence[int], group: Sequence[Example]
    ) -> tuple[list[Any], list[Any]]:
        import torch

        n_prompt = len(prompt)
        longest = max(len(e.reply) for e in group)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # past_key_values' rename, in transformers 5
            head = self.model(
                input_ids=torch.tensor([list(prompt)], device=self.device),
                use_cache=True,
                logits_to_keep=1,
            )
            cache = head.past_key_values
            cache.batch_repeat_interleave(len(group))
            ids = torch.zeros((len(group), longest), dtype=torch.long)
            attention = torch.zeros((len(group), n_prompt + longest), dtype=torch.long)
            attention[:, :n_prompt] = 1
            for b, e in enumerate(group):  # replies right-padded after the shared prompt
                ids[b, : len(e.reply)] = torch.tensor(e.reply)
                attention[b, n_prompt : n_prompt + len(e.reply)] = 1
            positions = torch.arange(n_prompt, n_prompt + longest)[None].expand(len(group), -1)
            tail = self.model(
                input_ids=ids.to(self.device),
                attention_mask=attention.to(self.device),
                position_ids=positions.to(self.device),
                past_key_values=cache,
            )
        first = torch.log_softmax(head.logits[0, -1].float(), dim=-1)  # predicts reply[0]
        sums = []
        counts = []
        for b, e in enumerate(group):
            reply = torch.tensor(e.reply, device=self.device)
            rest = torch.log_softmax(tail.logits[b, : len(e.reply) - 1].float(), dim=-1)
            token_logp = torch.cat([first[reply[:1]], rest.gather(1, reply[1:, None])[:, 0]])
            mask = torch.tensor(e.mask, device=self.device, dtype=token_logp.dtype)
            sums.append((token_logp * mask).sum())
            counts.append(mask.sum())
        return sums, counts

    def step(
        self,
        examples: Sequence[Example],
        weights: Sequence[float],
        learning_rate: float,
        chunk: int = 8,
    ) -> float:
        """One optimizer step on -sum(w * log p(routing)) / routing tokens, accumulated over
        chunks of examples that share a prompt (memory stays small on a CPU); returns the
        loss."""
        import torch

        if self.optimizer is None:
            self.optimizer = torch.optim.AdamW(self._params, lr=learning_rate, weight_decay=0.0)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total = sum(max(1, sum(e.mask)) for e in examples)
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for i, e in enumerate(examples):
            by_prompt.setdefault(e.prompt, []).append(i)
        loss_value = 0.0
        for members in by_prompt.values():
            for start in range(0, len(members), chunk):
                part = members[start : start + chunk]
                w = torch.tensor([weights[i] for i in part], device=self.device)
                sums, _ = self.routing_logprobs([examples[i] for i in part])
                loss = -(w * sums).sum() / total
                loss.backward()
                loss_value += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(self._params, 1.0)
        self.optimizer.step()
        return loss_value

    def greedy(self, prompt: Sequence[int], n: int) -> list[int]:
        """The next `n` tokens by argmax, end-of-turn included (the export check compares them
        with llama.cpp's; `generate` would stop at, or with min_new_tokens ban, that token)."""
        import torch

        self.model.eval()
        out: list[int] = []
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # past_key_values' rename, in transformers 5
            ids = torch.tensor([list(prompt)], device=self.device)
            past = None
            for _ in range(n):
                result = self.model(input_ids=ids, past_key_values=past, use_cache=True)
                past = result.past_key_values
                token = int(result.logits[0, -1].argmax())
                out.append(token)
                ids = torch.tensor([[token]], device=self.device)
        return out

    def argmax_after(self, prompt: Sequence[int], continuation: Sequence[int]) -> list[int]:
        """The token torch would choose after `prompt` + each prefix of `continuation`, in one
        forward pass: where every choice equals the next token of `continuation`, torch's own
        greedy continuation *is* `continuation` (the export check reads it so, instead of 32
        passes a prompt)."""
        import torch

        self.model.eval()
        tokens = [*prompt, *continuation[:-1]]
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([tokens], device=self.device)).logits
        return [int(t) for t in logits[0, len(prompt) - 1 :].argmax(-1)]

    def export(self, path: Path) -> None:
        """The adapter as llama.cpp loads it (adapter_gguf.py)."""
        state = {k: v.detach().float().cpu().numpy() for k, v in self.model.state_dict().items()}
        write_adapter(
            path,
            pairs_from_peft(state),
            alpha=self.alpha,
            n_head=self.n_head,
            n_head_kv=self.n_head_kv,
            architecture="llama",
        )

    def save_adapter(self, directory: Path) -> None:
        """The peft adapter alone (PeftModel.from_pretrained reads it)."""
        with warnings.catch_warnings():  # peft looks for the base's config.json, absent here
            warnings.simplefilter("ignore")
            self.model.save_pretrained(str(directory))

    def save(self, directory: Path) -> None:
        """The peft adapter and the optimizer's state, replacing `directory` in one rename."""
        import torch

        tmp = directory.with_name(f".{directory.name}.tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        self.save_adapter(tmp)
        if self.optimizer is not None:
            torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        replace_dir(tmp, directory)

    def load_optimizer(self, directory: Path, learning_rate: float) -> None:
        import torch

        state = directory / "optimizer.pt"
        if state.is_file():
            self.optimizer = torch.optim.AdamW(self._params, lr=learning_rate, weight_decay=0.0)
            self.optimizer.load_state_dict(torch.load(state, map_location=self.device))
