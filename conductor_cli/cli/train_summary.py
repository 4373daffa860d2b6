"""What `conductor train` prints when it is done: its record (train's return), a line a fact."""

from __future__ import annotations

from typing import Any


def summary(record: dict[str, Any]) -> str:
    """What a training did, a line a fact: rewards, spending, progress, rounds, held-out
    scores, and how to use it."""
    if record.get("dry_run"):
        return f"dry run: no call made; without --dry-run this trains {record['name']}"
    lines = [f"trained conductor {record['name']} (method {record['method']})"]
    parts = (_reward_lines, _kind_lines, _words_lines, _spend_lines, _progress_lines,
             _round_lines, _held_out_lines)  # fmt: skip
    for part in parts:
        lines += part(record)
    lines += _use_lines(record)
    return "\n".join(lines)


def _reward_lines(record: dict[str, Any]) -> list[str]:
    """The head method's reward table: what was measured, reused, stopped or failed."""
    table = record.get("reward_table")
    if not table:
        return []
    search = table.get("search", "all")
    lines = [
        f"  rewards ({search}): {table['workflow_runs']} workflow runs "
        f"({table.get('measured_share', 1):.0%} of every shape on every question), "
        f"{table['worker_calls']} new worker calls; best fixed shape "
        f"{table['best_fixed_shape']} (reward {table['best_fixed_shape_reward']})"
    ]
    hyper = record.get("hyperparameters", {})
    if hyper.get("policy") == "steps":
        lines.append(
            f"  policy: step by step over {len(record.get('pool', []))} workers as vectors "
            f"({hyper.get('weights')} weights; the shape head would score "
            f"{hyper.get('shapes')} shapes)"
        )
    if table.get("reused_runs"):
        lines.append(
            f"  {table['reused_runs']} runs reused from earlier trainings (the same "
            "questions and workers): not called again"
        )
    if table.get("budget_stopped"):
        lines.append(
            "  the budget ended the measuring before the search was done: trained on what "
            "was measured (raise --max-calls/--max-cost and --resume to measure more)"
        )
    for worker in table.get("failed_workers", []):
        lines.append(
            f"  worker {worker} failed every call (its workflows scored as wrong): "
            f"check it with `conductor workers test {worker}`"
        )
    return lines


def _kind_lines(record: dict[str, Any]) -> list[str]:
    """The shape head, kind by kind: where it sends the kind's training questions, and the
    reward its fit earned on them in the cross-validation (questions it did not see) beside
    the kind's best member alone; a kind it gives away is said."""
    fit = record.get("fit") or {}
    kinds = fit.get("kinds") or {}
    picks = (record.get("reward_table") or {}).get("picks_by_kind") or {}
    if not kinds:
        return []
    away = set((fit.get("kinds_given_away") or {}).get(fit.get("chosen"), []))
    withheld = "whole kinds withheld too" if fit.get("withheld") == "questions and kinds" else ""
    lines = [
        "  per kind (training questions; the reward the fit earned on those it did not see"
        + (f", {withheld}" if withheld else "")
        + ", beside the kind's best member alone):"
    ]
    for kind, scores in kinds.items():
        sent = ", ".join(f"{label} {n}" for label, n in picks.get(kind, {}).items())
        best = scores.get("best_member_reward")
        # Records written before a kind's member was named say its reward alone.
        member = scores.get("best_member") or "its best member"
        versus = "" if best is None else f" against {member} {best:.3f}"
        given = ": given away" if kind in away else ""
        earned = f"{scores['held_out_reward']:.3f}{versus}{given}"
        lines.append(f"    {kind or '(no kind)'}: {f'{sent}; ' if sent else ''}{earned}")
    return lines


def _words_lines(record: dict[str, Any]) -> list[str]:
    """`--learn-words`: for each kind searched, whether the written or the learned words won,
    where searched and on the half held out from the search."""
    learned = record.get("learned_words") or {}
    lines = [f"  words: {learned['stopped']}"] if learned.get("stopped") else []
    for search in learned.get("searches", []):
        n, held = search["questions"], search.get("held_out")
        found = f"right {search['right_before']} -> {search['right_after']} of {n} searched"
        if held:
            found += (
                f", {held['right_before']} -> {held['right_after']} of {held['questions']} held out"
            )
        if search.get("shape"):
            verdict = f"learned words kept: {search['shape']}"
        elif held:
            verdict = "the written words kept: the learned ones gained nothing held out"
        elif search["right_after"] > search["right_before"]:
            verdict = "the written words kept: the learned ones gained too little"
        else:
            verdict = "the written words kept: no words did better"
        lines.append(f"  words for {search['kind']} ({search['base']}): {found}; {verdict}")
    return lines


def _spend_lines(record: dict[str, Any]) -> list[str]:
    """Calls and dollars, against the limits given."""
    lines = []
    if record.get("worker_calls") is not None:
        limits = record.get("limits") or {}
        limit = ""
        if limits.get("max_calls") is not None:
            limit = f" of --max-calls {limits['max_calls']}"
        if limits.get("max_cost") is not None:
            limit += f", ${record.get('dollars', 0):.4f} of --max-cost {limits['max_cost']}"
        lines.append(f"  worker calls in all: {record['worker_calls']}{limit}")
    cost = record.get("cost")
    if cost:
        lines.append(
            f"  {cost['workflow_samples']} workflows sampled, {cost['worker_calls']} worker calls"
        )
    return lines


def _progress_lines(record: dict[str, Any]) -> list[str]:
    """The LoRA methods: held-out accuracy along the way, and the export check."""
    lines = []
    for entry in record.get("curve", []):
        held = entry.get("held_out")
        if held and ("iteration" in entry or "step" in entry):
            when = (
                f"round {entry['iteration']}" if "iteration" in entry else f"step {entry['step']}"
            )
            # Our loops count the samples right; TRL's GRPO logs only their mean reward.
            share = entry.get("right_share")
            samples = (
                f"samples right {share:.2f}"
                if share is not None
                else f"samples' mean reward {entry['mean_reward']:.2f}"
            )
            lines.append(f"  held-out after {when}: accuracy {held['accuracy']:.3f} ({samples})")
    export = record.get("export_check")
    if export:
        lines.append(
            f"  export check: {export['identical']} of {export['prompts']} greedy continuations "
            "identical in llama.cpp and torch"
        )
    return lines


def _round_lines(record: dict[str, Any]) -> list[str]:
    """The round head: what it keeps and corrects, and whether it beat always keeping."""
    rounds = record.get("round_table")
    if not rounds:
        return []
    lines = [
        f"  rounds: {rounds['situations']} first answers ({rounds['first_right']} right), "
        f"{rounds['runs']} corrective runs; on them the round head keeps "
        f"{_share(rounds['kept_share_first_right'])} of right and "
        f"{_share(rounds['kept_share_first_wrong'])} of wrong first answers"
    ]
    cv = rounds.get("cross_validation")
    if cv:
        lines.append(
            f"  round head cross-validated ({cv['folds']} folds): reward {cv['head_reward']} "
            f"vs always keeping {cv['keep_reward']}: "
            + ("the head decides" if cv["used"] == "head" else "it always keeps the answer")
        )
    return lines


def _held_out_lines(record: dict[str, Any]) -> list[str]:
    """The untrained and the trained conductor on the held-out questions, or how to prove it
    where none were held out."""
    labels = {"before": "untrained", "after": "trained"}
    lines = []
    for e in record.get("evaluations", []):
        if e.get("when") not in labels:
            continue
        used = ""
        if "max_rounds" in e:
            used = f", up to {e['max_rounds']} rounds (mean {e['rounds']:.2f} used)"
        lines.append(
            f"  held-out, {labels[e['when']]}{used}: accuracy {e['accuracy']:.3f}, reward "
            f"{e['reward']:.3f} ({e['n']} questions)"
        )
    if not record.get("dataset", {}).get("held_out"):
        lines.append(
            "  nothing held out (--holdout 0): prove it on a file of its own with "
            f"conductor eval ... --strategies conductor,conductor:{record['name']},knn-router"
        )
    return lines


def _use_lines(record: dict[str, Any]) -> list[str]:
    lines = [f"  use it: conductor config set conductor.model {record['name']}"]
    trained_rounds = record.get("hyperparameters", {}).get("rounds", 1)
    if trained_rounds > 1:
        lines.append(
            f"  and its rounds: conductor config set conductor.max_rounds {trained_rounds} "
            f"(or ask ... --rounds {trained_rounds})"
        )
    return lines


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
