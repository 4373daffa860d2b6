"""Accuracy against cost, one point per strategy (matplotlib, an optional extra)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from conductor_cli.errors import InputError
from conductor_cli.evals.report import Summary


def plot(summaries: Sequence[Summary], path: Path, title: str) -> str:
    """Write a PNG (or any format matplotlib knows by the suffix); returns the x-axis used.

    x is the mean cost per problem in USD; when every strategy is free (local models) it is
    the mean number of tokens per problem instead, the cost that remains.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed, and none is touched
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(
            "--plot needs matplotlib: pip install 'conductor-cli[plot]' (or drop --plot)"
        ) from None
    rows = [s for s in summaries if s.n]
    if not rows:
        raise InputError("--plot: no results to draw")
    costs = [s.cost for s in rows]
    by_cost = all(c is not None for c in costs) and any(c for c in costs)
    xs = [(s.cost or 0.0) / s.n if by_cost else s.tokens_mean for s in rows]
    axis = "mean cost per problem (USD)" if by_cost else "mean tokens per problem"
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    try:
        # Strategies on the same spot (router and oracle with one worker equal `single:`) get
        # one point and one label, not labels drawn over each other.
        spots: dict[tuple[float, float], list[Summary]] = {}
        for s, x in zip(rows, xs, strict=True):
            spots.setdefault((round(x, 9), round(s.accuracy, 9)), []).append(s)
        for (x, _), same in spots.items():
            s = same[0]
            low, high = s.accuracy - s.ci_low, s.ci_high - s.accuracy
            ax.errorbar(x, s.accuracy, yerr=[[low], [high]], fmt="o", capsize=4)
            label = " = ".join(t.strategy for t in same)
            ax.annotate(label, (x, s.accuracy), textcoords="offset points", xytext=(6, 6))
        ax.margins(x=0.2)  # room for the labels of the outermost points
        ax.set_xlabel(axis)
        ax.set_ylabel("accuracy (95% CI)")
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        tmp = path.with_name(f".{path.name}.tmp")
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png")
        tmp.replace(path)
    finally:
        plt.close(fig)
    return axis
