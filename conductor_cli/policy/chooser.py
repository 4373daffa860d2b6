"""A trained head at planning time: the planning prompt's hidden state picks the shape, and the
conductor writes the tasks under a grammar that fixes it (`Conductor(chooser=...)`); a head
trained with `--tasks fixed` fixes the tasks too, to the words its rewards were measured with."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from conductor_cli.config.settings import ConductorSettings, WorkerConfig
from conductor_cli.errors import ModelError, WorkflowError
from conductor_cli.policy.familiar import Familiar, QuestionEmbedder
from conductor_cli.policy.features import FEATURES, PromptFeatures, features_model
from conductor_cli.policy.head import Head, read_head
from conductor_cli.policy.registry import TrainedConductor
from conductor_cli.policy.shapes import Shape, fixed_grammar, shape_grammar
from conductor_cli.policy.step_head import StepHead
from conductor_cli.problems import bare_question

# The planning prompt is short (attachments appear as 200-character previews).
FEATURES_CTX = 4096


TASKS = ("written", "fixed")


def read_as(
    reads: str, messages: tuple[dict[str, str], ...], question: str
) -> tuple[dict[str, str], ...]:
    """The planning prompt as a head that `reads` it sees it, in training and at planning time
    alike: as asked ("prompt"), or with the question bare ("question": its set's format line
    cut)."""
    if reads != "question":
        return messages
    bare = bare_question(question)
    return tuple(
        {**m, "content": m["content"].replace(f"Question: {question}", f"Question: {bare}", 1)}
        if m["role"] == "user"
        else m
        for m in messages
    )


def recorded(trained: TrainedConductor, key: str, default: str, known: Sequence[str]) -> str:
    """The hyperparameter `key` of `trained`'s record (`default` where absent, a conductor
    trained before it was recorded), which must be one of the `known` values."""
    value = trained.record.get("hyperparameters", {}).get(key, default)
    if value not in known:
        raise WorkflowError(
            f"conductor.model {trained.name!r}: its record says {key} {value!r}, which this "
            f"version does not know ({', '.join(known)}): upgrade conductor, or train it again."
        )
    return str(value)


def embedder_path(head: Head, where: Path) -> Path:
    """The GGUF a head that reads "embedding" embeds questions with: the file it was trained
    with, checked by its sha256 (a catalog model's is the catalog's)."""
    from conductor_cli.models.catalog import load_catalog, resolve_gguf

    resolved = resolve_gguf(head.embedder, load_catalog(), f"{where}: its embedder")
    if resolved.sha256() != head.embedder_sha256:
        raise ModelError(
            f"{where}: its embedder {head.embedder!r} ({resolved.path}) is not the file it was "
            "trained with (another sha256); train it again"
        )
    return resolved.path


def load_head(path: Path) -> Head | StepHead:
    """The trained head in `path`: a shape head, or a step policy ("kind": "step-head")."""

    def build(data: dict) -> Head | StepHead:
        return (StepHead if data.get("kind") == "step-head" else Head).from_dict(data)

    return read_head(path, build)


class HeadChooser:
    def __init__(
        self,
        head: Head | StepHead,
        features: PromptFeatures,
        tasks: str = "written",
        round_head: Head | None = None,
        notes: tuple[str, ...] = (),
        familiar: tuple[Familiar, QuestionEmbedder] | None = None,
        embedder: QuestionEmbedder | None = None,
    ) -> None:
        self.head = head
        # A head that reads "embedding": the model that embeds the bare question.
        self.embedder = embedder
        # A question unlike the training questions goes to the member that earned most alone.
        self.familiar = familiar
        # Said with every answer it plans (`ask`, `serve`, `eval`): workers it never measured.
        self.notes = notes
        self.features = features
        self.tasks = tasks
        # `train --rounds N`: from the re-planning prompt (the team's answer in it), the empty
        # shape (keep the answer) or a corrective one.
        self.round_head = round_head

    @classmethod
    def load(
        cls,
        trained: TrainedConductor,
        base: Path,
        pool: Sequence[WorkerConfig],
        settings: ConductorSettings,
        *,
        kept: bool = True,
    ) -> HeadChooser:
        """`kept`: hidden states read once are kept on disk (off with the cache)."""
        head = load_head(trained.head_path)
        round_path = trained.round_head_path
        round_head = Head.load(round_path) if round_path is not None else None
        named = {*head.workers, *(round_head.workers if round_head else ())}
        names = [w.name for w in pool]
        missing = sorted(named - set(names))
        if missing:
            renamed = [(m, trained.renamed(m, pool)) for m in missing]
            said = ", ".join(f"{m} (renamed {r}?)" if r else m for m, r in renamed)
            raise WorkflowError(
                f"conductor.model {trained.name!r} was trained for the pool "
                f"{', '.join(trained.pool)}, and this pool lacks {said}: train it again on "
                f"this pool (conductor train ... --out {trained.name} --force: the runs of "
                "the workers that stayed are reused), or plan with its base model "
                f"({trained.base_model})."
            )
        tasks = recorded(trained, "tasks", "written", TASKS)
        read_from = recorded(trained, "features", "native", FEATURES)
        features = PromptFeatures(
            features_model(base, read_from),
            n_ctx=min(settings.n_ctx, FEATURES_CTX),
            n_threads=settings.n_threads,
            kept=kept,
        )
        note = trained.unmeasured_note(pool)
        familiar = None
        if trained.familiar_path is not None:
            familiar = (
                Familiar.load(trained.familiar_path),
                QuestionEmbedder(base, n_threads=settings.n_threads),
            )
        embedder = None
        if getattr(head, "reads", "prompt") == "embedding":
            assert isinstance(head, Head)
            path = embedder_path(head, trained.head_path)
            embedder = QuestionEmbedder(path, n_threads=settings.n_threads)
        notes = (note,) if note else ()
        return cls(head, features, tasks, round_head, notes, familiar, embedder)

    def knows(self, question: str) -> bool:
        """Whether `question` is like the training questions (True without a familiarity)."""
        if self.familiar is None:
            return True
        familiar, embed = self.familiar
        return familiar.knows(embed(question))

    def choose(self, messages: tuple[dict[str, str], ...], question: str) -> Shape:
        if not self.knows(question):
            assert self.familiar is not None
            return self.familiar[0].fallback
        reads = getattr(self.head, "reads", "prompt")  # a step head reads the prompt
        if reads == "embedding":
            if self.embedder is None:
                raise WorkflowError("a head that reads an embedding was given no embedder")
            return self.head.choose(self.embedder(question))
        return self.head.choose(self.features(read_as(reads, messages, question)))

    def grammar(self, messages: tuple[dict[str, str], ...], question: str) -> str:
        return self._grammar(self.choose(messages, question))

    def fixed_reply(self, messages: tuple[dict[str, str], ...], question: str) -> str | None:
        if self.tasks != "fixed":
            return None
        return self.choose(messages, question).workflow().to_json()

    def replan_grammar(self, messages: tuple[dict[str, str], ...]) -> str | None:
        if self.round_head is None:
            return None
        return self._grammar(self.round_head.choose(self.features(messages)))

    def _grammar(self, shape: Shape) -> str:
        # The empty shape (keep) makes the one sentence {"steps": []} either way.
        return fixed_grammar(shape) if self.tasks == "fixed" else shape_grammar(shape)

    def close(self) -> None:
        self.features.close()
        if self.familiar is not None:
            self.familiar[1].close()
        if self.embedder is not None:
            self.embedder.close()
