"""In-process GGUF models through llama-cpp-python.

A `Llama` object is not thread-safe, and loading one costs memory and seconds, so each GGUF
file is loaded once per `LlamaModels` registry and every call to it holds that model's lock.
The conductor and any local worker using the same file share the one instance.

Every call into a model also runs on that model's own thread. llama.cpp's CPU backend keeps a
team of OpenMP threads per calling thread, and the team of a thread that stays alive keeps
competing for the cores: measured here, once the main thread had planned, a worker step from
an engine thread generated at 29 tokens/s instead of 80. One thread per model, one team.
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from conductor_cli import waiting
from conductor_cli.backends import repack_check
from conductor_cli.backends.abort import AbortSwitch
from conductor_cli.backends.base import Completion, Request, TextSink
from conductor_cli.backends.hardware import physical_cores
from conductor_cli.backends.loop_guard import LoopGuard
from conductor_cli.backends.prefix_state import PrefixStateStore, state_key
from conductor_cli.backends.tool_calls import (
    parse_tool_calls,
    template_calls_tools,
    template_messages,
)
from conductor_cli.config.settings import ConductorSettings
from conductor_cli.errors import ModelError, WorkerError
from conductor_cli.sandbox.fences import program_end

T = TypeVar("T")

# ggml's type ids for the KV cache formats the config offers.
_GGML_TYPES = {"f16": 1, "q4_0": 2, "q8_0": 8}

# Below this many tokens a saved state is not worth a file: reading them again is quick.
MIN_PREFIX_TOKENS = 64

CLOSED = "llama.cpp: the model was closed (the run is ending)"


def stderr_note(message: str) -> None:
    sys.stderr.write(f"conductor: note: {message}\n")


@dataclass
class _Loaded:
    llama: Any
    thread: ThreadPoolExecutor
    abort: AbortSwitch
    lock: threading.Lock = field(default_factory=threading.Lock)
    grammars: dict[str, Any] = field(default_factory=dict)
    step_tokens: Any = None  # constrained.StepTokens, made when a plan first prices its steps
    # The messages of the last plain call that ended well: the context still holds them and
    # the reply read after them, so a call that continues that conversation keeps them
    # (continues). Every call on the model clears it first.
    last_messages: tuple[dict[str, Any], ...] = ()
    # Set by LlamaModels.close(); read under `lock` before every use of `llama`.
    closed: bool = False

    @contextmanager
    def using(self, cancelled: Callable[[], bool] | None) -> Iterator[None]:
        """The model for one call, under its lock, stopped inside a decode once `cancelled()`
        is true (backends/abort.py)."""
        with self.lock:
            if self.closed:
                raise WorkerError(CLOSED)
            with self.abort.watching(self.llama, cancelled):
                yield

    def call(self, work: Callable[[], T]) -> T:
        """Run `work` on the model's own thread and wait for it."""
        if self.closed:
            raise WorkerError(CLOSED)
        try:
            future = self.thread.submit(work)
        except RuntimeError:  # shut down since the check above
            raise WorkerError(CLOSED) from None
        try:
            return waiting.result(future)
        except CancelledError:  # closed before the work started
            raise WorkerError(CLOSED) from None


class LlamaModels:
    """Loads each GGUF file at most once, on first use."""

    def __init__(
        self,
        n_ctx: int = 8192,
        n_gpu_layers: int = -1,
        n_threads: int = 0,
        state_store: PrefixStateStore | None = None,
        kv_cache_type: str = "q8_0",
        note: Callable[[str], None] = stderr_note,
    ) -> None:
        self.n_ctx = n_ctx
        self.note = note
        self.kv_cache_type = kv_cache_type
        self.n_gpu_layers = n_gpu_layers
        self.n_threads = n_threads or physical_cores()
        self.state_store = state_store
        # A base model with a LoRA adapter is another model: keyed by (model, adapter).
        self._models: dict[tuple[Path, Path | None], _Loaded] = {}
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def for_settings(
        cls, c: ConductorSettings, state_store: PrefixStateStore | None = None
    ) -> LlamaModels:
        """A registry with the config's llama.cpp settings (they apply to every local model)."""
        return cls(
            n_ctx=c.n_ctx,
            n_gpu_layers=c.n_gpu_layers,
            n_threads=c.n_threads,
            state_store=state_store,
            kv_cache_type=c.kv_cache_type,
        )

    def get(self, path: Path, adapter: Path | None = None) -> _Loaded:
        key = (path.resolve(), adapter.resolve() if adapter else None)
        with self._lock:
            if self._closed:
                raise WorkerError(CLOSED)
            if key not in self._models:
                thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama.cpp")
                try:
                    llama = waiting.result(thread.submit(self._load, *key))
                except BaseException:
                    thread.shutdown(wait=False)
                    raise
                self._models[key] = _Loaded(llama, thread, AbortSwitch(llama))
            return self._models[key]

    def loaded(self) -> list[str]:
        """The files loaded so far (a LoRA adapter after its base: `base.gguf+adapter.gguf`)."""
        with self._lock:
            return [p.name + (f"+{a.name}" if a else "") for p, a in self._models]

    def _load(self, path: Path, adapter: Path | None) -> Any:
        kv_type = _GGML_TYPES[self.kv_cache_type]
        return load_llama(
            path,
            self.note,
            adapter=adapter,
            n_ctx=self.n_ctx,
            n_gpu_layers=self.n_gpu_layers,
            n_threads=self.n_threads,
            # A quantized V cache needs flash attention in llama.cpp.
            flash_attn=self.kv_cache_type != "f16",
            type_k=kv_type,
            type_v=kv_type,
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for loaded in self._models.values():
                # After Ctrl-C a step's thread may still be inside the model, or about to call
                # it: freeing it under that call crashes the process (seen in CI as a SIGSEGV).
                # A busy model goes with the process; every later call finds it closed.
                loaded.closed = True
                if loaded.lock.acquire(blocking=False):
                    try:
                        loaded.llama.close()
                    finally:
                        loaded.lock.release()
                loaded.thread.shutdown(wait=False, cancel_futures=True)
            self._models.clear()


def load_llama(
    path: Path, note: Callable[[str], None], *, adapter: Path | None = None, **params: Any
) -> Any:
    """A `llama_cpp.Llama` for `path` (with the LoRA `adapter`, a GGUF, applied), loaded the way
    this machine allows (repack_check.py), with a crash's stack going to the crash log. Every
    GGUF load in the project goes here."""
    _log_native_crashes()
    # Before llama.cpp touches the model in this process: a crash here would be silent.
    verdict = repack_check.ensure(path, note)
    from llama_cpp import Llama

    try:
        with repack_check.repacking(verdict.repack):
            # Defaults are wrong for us (verbose, random seed): callers set the rest.
            if adapter is not None:
                params["lora_path"] = str(adapter)
            return Llama(model_path=str(path), seed=0, verbose=False, **params)
    except (ValueError, RuntimeError, OSError) as e:
        if adapter is not None and "LoRA" in str(e):
            raise ModelError(
                f"llama.cpp could not apply the adapter {adapter} to {path}: it is damaged or "
                "was trained for another base model; train the conductor again"
            ) from None
        raise ModelError(
            f"llama.cpp could not load {path} ({e}): the file is truncated or not a model "
            "llama.cpp supports. Re-download it with `conductor models pull NAME`."
        ) from None


def _log_native_crashes() -> None:
    """A crash inside llama.cpp leaves its Python stack in the state dir's crash log.

    Only where nobody enabled faulthandler already (pytest does, and a Python user may).
    """
    if faulthandler.is_enabled():
        return
    log = repack_check.crash_log()
    try:
        from conductor_cli.disk import paths

        paths.private_dir(log.parent)
        faulthandler.enable(file=open(log, "a", encoding="utf-8"))  # noqa: SIM115 (kept open)
    except OSError:
        pass


class LlamaCppBackend:
    """A GGUF in llama.cpp, with an optional LoRA adapter (a trained conductor)."""

    def __init__(
        self,
        models: LlamaModels,
        path: Path,
        sha256: str,
        adapter: Path | None = None,
        adapter_sha256: str = "",
    ) -> None:
        self._models = models
        self.path = path
        self.adapter = adapter
        # What the model computes: the cache key of its replies and of its saved prompt states.
        self.sha256 = sha256 if adapter is None else f"{sha256}+lora-{adapter_sha256}"

    @property
    def identity(self) -> str:
        if self.adapter is not None:
            return f"gguf:{self.path}+lora:{self.adapter}"
        return f"gguf:{self.path}"

    @property
    def fingerprint(self) -> str:
        return f"gguf-sha256:{self.sha256}"

    @property
    def supports_grammar(self) -> bool:
        return True

    def load(self) -> None:
        """Load the model now (a server warming up), not at its first call."""
        self._models.get(self.path, self.adapter)

    @property
    def supports_tools(self) -> bool:
        """Whether its chat template writes tool calls (Qwen2.5's <tool_call> format): asked
        of the answering step's worker, which is loaded for the step anyway."""
        loaded = self._models.get(self.path, self.adapter)
        return template_calls_tools(loaded.llama.metadata.get("tokenizer.chat_template"))

    def complete(self, request: Request, on_text: TextSink | None = None) -> Completion:
        loaded = self._models.get(self.path, self.adapter)
        if request.tools is not None:
            return loaded.call(lambda: self._with_tools(loaded, request, on_text))
        return loaded.call(lambda: self._complete(loaded, request, on_text))

    def _with_tools(
        self, loaded: _Loaded, request: Request, on_text: TextSink | None
    ) -> Completion:
        """An agent's step: the tools go to the chat template, the calls are read back from the
        text (backends/tool_calls.py). Not streamed: a call is known only once it is whole, and
        its markup must not reach the client as text; the text left is sent at the end."""
        assert request.tools is not None
        tools = json.loads(request.tools)
        offered = [t["function"]["name"] for t in tools]
        with loaded.using(request.cancelled):
            loaded.last_messages = ()
            fresh_context(loaded.llama)
            try:
                out = loaded.llama.create_chat_completion(
                    messages=template_messages(request.messages),
                    tools=tools,  # no tool_choice: llama-cpp-python would force one by grammar
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
                    seed=request.seed,
                    repeat_penalty=request.repeat_penalty,
                    stream=on_text is not None,
                )
                if on_text is None:
                    done = _from_response(out)
                else:
                    # Streamed only so that a cancelled run stops between tokens: each piece
                    # is shown as nothing (a call's markup must not reach the client).
                    done = _from_stream(loaded.llama, out, lambda piece: on_text(""))
            except ValueError as e:
                raise WorkerError(f"{self.path.name}: {e}") from None
        parsed = parse_tool_calls(done.text, offered)
        if on_text is not None and parsed.text:
            on_text(parsed.text)
        finish = "tool_calls" if parsed.calls else done.finish_reason
        return replace(done, text=parsed.text, tool_calls=parsed.calls, finish_reason=finish)

    def _complete(self, loaded: _Loaded, request: Request, on_text: TextSink | None) -> Completion:
        kwargs: dict[str, Any] = {}
        with loaded.using(request.cancelled):
            store = self._models.state_store
            warm = store is not None and request.fixed_messages > 0
            constrained = request.grammar is not None and on_text is None
            # Formatted and tokenized once, for both uses below.
            prompt = prompt_tokens(loaded.llama, request.messages) if warm or constrained else None
            last, loaded.last_messages = loaded.last_messages, ()
            if warm and store is not None and prompt is not None:
                _warm_prefix(loaded.llama, store, self.sha256, request, prompt)
            elif not continues(last, request.messages):
                fresh_context(loaded.llama)
            if constrained and prompt is not None:
                return self._constrained(loaded, prompt, request)
            if request.grammar is not None:
                grammar = loaded.grammars.get(request.grammar)
                if grammar is None:
                    from llama_cpp import LlamaGrammar

                    grammar = LlamaGrammar.from_string(request.grammar, verbose=False)
                    loaded.grammars[request.grammar] = grammar
                kwargs["grammar"] = grammar
            # The loop guard reads the text as it comes, so a guarded call always streams.
            guard = LoopGuard() if request.stop_loops else None
            ends = program_end if request.stop_after_program else None
            try:
                out = loaded.llama.create_chat_completion(
                    messages=list(request.messages),
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
                    seed=request.seed,
                    repeat_penalty=request.repeat_penalty,
                    stream=on_text is not None or guard is not None or ends is not None,
                    **kwargs,
                )
                if on_text is None and guard is None and ends is None:
                    done = _from_response(out)
                else:
                    done = _from_stream(loaded.llama, out, on_text, guard, ends)
            except ValueError as e:
                # e.g. "Requested tokens (9000) exceed context window of 8192"
                raise WorkerError(f"{self.path.name}: {e}") from None
            if not warm:
                loaded.last_messages = tuple(request.messages)
            return done

    def _constrained(self, loaded: _Loaded, prompt: list[int], request: Request) -> Completion:
        from conductor_cli.backends.constrained import StepTokens, generate

        llama = loaded.llama
        if request.step_penalty and loaded.step_tokens is None:
            loaded.step_tokens = StepTokens.of(llama)

        room = llama.n_ctx() - len(prompt)
        if room <= 0:
            raise WorkerError(
                f"{self.path.name}: the prompt ({len(prompt)} tokens) does not fit the context "
                f"window of {llama.n_ctx()}; raise conductor.n_ctx in the config."
            )
        assert request.grammar is not None
        out = generate(
            llama,
            prompt,
            request.grammar,
            max_tokens=min(request.max_tokens, room),
            temperature=request.temperature,
            seed=request.seed,
            repeat_penalty=request.repeat_penalty,
            step_penalty=request.step_penalty,
            step_tokens=loaded.step_tokens,
            cancelled=request.cancelled,
        )
        return Completion(
            text=llama.detokenize(out.tokens).decode("utf-8", errors="replace"),
            tokens_in=len(prompt),
            tokens_out=len(out.tokens),
            finish_reason=out.finish_reason,
        )


def fresh_context(llama: Any) -> None:
    """Forget what the context holds, so that the prompt is read whole, in the same batches
    every time. Same call, same answer: llama-cpp-python reuses the prefix the context already
    holds and reads only the rest, and logits computed in other batches differ in the last
    bits; at temperature 0.2 that changed the coder's answer to the very same request asked
    twice in a row (issue 68: the conductor's one-step workflow and `single:coder` disagreed on
    BIG-bench navigate with one prompt). A worker's prompt shares little with the one before,
    so little is read again; the planning prompt keeps its saved prefix (_warm_prefix), and a
    prompt that continues the last call's conversation keeps that (continues)."""
    llama.reset()


def continues(last: Sequence[dict[str, Any]], messages: Sequence[dict[str, Any]]) -> bool:
    """Whether `messages` continue the conversation of the model's last call, whose messages
    were `last`: they begin with all of them. Such a call keeps the context (llama-cpp-python
    reads only what follows the longest prefix of tokens it holds: the last call's prompt, its
    reply as far as the new prompt repeats it), so a step that sees its own worker's program
    and the program's run reads only the run and its task, not the question and the program
    again (run/messages.step_messages). Same call after the same calls, same answer: the kept
    part was read the way the last call read it."""
    n = len(last)
    return 0 < n < len(messages) and tuple(messages[:n]) == tuple(last)


def prompt_tokens(llama: Any, messages: Sequence[dict[str, str]]) -> list[int] | None:
    """The tokens create_chat_completion will feed for `messages` (the GGUF's own template)."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def text(token: int) -> str:
        return llama._model.token_get_text(token) if token != -1 else ""

    formatter = Jinja2ChatFormatter(
        template=template, eos_token=text(llama.token_eos()), bos_token=text(llama.token_bos())
    )
    result = formatter(messages=list(messages))
    return list(
        llama.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )
    )


def fixed_prefix(
    llama: Any,
    messages: Sequence[dict[str, str]],
    fixed: int,
    full: list[int] | None = None,
) -> list[int]:
    """The tokens the whole prompt (`full`, when already tokenized) shares with a prompt of
    only its first `fixed` messages."""
    full = full if full is not None else prompt_tokens(llama, messages)
    head = prompt_tokens(llama, messages[:fixed])
    if full is None or head is None:
        return []
    n = 0
    for a, b in zip(full, head, strict=False):
        if a != b:
            break
        n += 1
    # Leave at least one token to read, so the model computes fresh logits for sampling.
    return full[: min(n, len(full) - 1)]


def _warm_prefix(
    llama: Any, store: PrefixStateStore, sha256: str, request: Request, prompt: list[int]
) -> None:
    """Put the state after the request's fixed prefix into the context: from memory, from disk,
    or by reading it once and saving it. llama-cpp-python then reads only the rest of the prompt
    (its generate() keeps the longest matching prefix of what the context already holds).
    """
    prefix = fixed_prefix(llama, request.messages, request.fixed_messages, prompt)
    n = len(prefix)
    if n < MIN_PREFIX_TOKENS or n >= llama.n_ctx():
        return
    if llama.n_tokens >= n and llama.input_ids[:n].tolist() == prefix:
        return  # this process read it already
    import llama_cpp

    key = state_key(sha256, llama_cpp.__version__, llama.n_ctx(), prefix)
    blob = store.load(key, prefix)
    if blob is not None:
        buffer = (ctypes.c_uint8 * len(blob)).from_buffer_copy(blob)
        if llama_cpp.llama_state_set_data(llama.ctx, buffer, len(blob)) == len(blob):
            llama.input_ids[:n] = prefix
            llama.n_tokens = n
            return
        llama.reset()  # refused by llama.cpp: read the prefix instead
    llama.reset()
    llama.eval(prefix)
    size = llama_cpp.llama_state_get_size(llama.ctx)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_get_data(llama.ctx, buffer, size)
    if 0 < written <= size:
        store.save(key, prefix, ctypes.string_at(buffer, written))


def _from_response(out: dict[str, Any]) -> Completion:
    choice = out["choices"][0]
    usage = out.get("usage") or {}
    return Completion(
        text=choice["message"]["content"] or "",
        tokens_in=int(usage.get("prompt_tokens", 0)),
        tokens_out=int(usage.get("completion_tokens", 0)),
        finish_reason=choice.get("finish_reason") or "stop",
    )


def _from_stream(
    llama: Any,
    chunks: Any,
    on_text: TextSink | None,
    guard: LoopGuard | None = None,
    ends: Callable[[str], int | None] | None = None,
) -> Completion:
    """The streamed reply; with a guard, only what it releases reaches `on_text`, and a loop
    ends the generation (the reply is what the guard keeps). `ends(text)`: where the reply is
    complete, if it is (the generation stops there, and nothing after it is kept)."""
    parts: list[str] = []
    finish = "stop"
    length = 0

    def show(text: str) -> None:
        if text and on_text is not None:
            on_text(text)

    try:
        for chunk in chunks:
            choice = chunk["choices"][0]
            piece = choice.get("delta", {}).get("content")
            end = None
            if piece and ends is not None and "`" in piece:
                end = ends("".join(parts) + piece)
                if end is not None:
                    piece = piece[: max(end - length, 0)]
            if piece:
                parts.append(piece)
                length += len(piece)
                show(guard.feed(piece) if guard is not None else piece)
            finish = choice.get("finish_reason") or finish
            if end is not None:
                finish = "stop"
                break
            if guard is not None and guard.looped:
                finish = "loop"
                break
    finally:
        if hasattr(chunks, "close"):
            chunks.close()  # stops llama.cpp generating at once (a loop, Ctrl-C, a program's end)
    generated = "".join(parts)
    text = generated
    if guard is not None:
        show(guard.finish())
        text = guard.kept
    # A stream carries no usage; n_tokens is everything in the context after the call.
    tokens_out = len(llama.tokenize(generated.encode("utf-8"), add_bos=False)) if parts else 0
    return Completion(
        text=text,
        tokens_in=max(int(llama.n_tokens) - tokens_out, 0),
        tokens_out=tokens_out,
        finish_reason=finish,
    )
