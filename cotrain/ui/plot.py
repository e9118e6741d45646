"""Learning-curve PNG from a run's metrics (JSON lines or a list of status dicts); matplotlib, Agg only."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cotrain.errors import MetricsError
from cotrain.ui.state import DashboardState, GenerationRecord, format_held_out


def load_metrics(source: str | Path | Sequence[Mapping[str, Any]]) -> list[GenerationRecord]:
    """Generation records from a metrics ``.jsonl`` file (one status dict a line) or from dicts."""
    if isinstance(source, str | Path):
        lines = Path(source).read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
    else:
        rows = list(source)
    state = DashboardState()
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise MetricsError(f"metrics row {i} is {type(row).__name__}, expected a JSON object")
        row = dict(row)
        row.setdefault("iter", row.get("generation", row.get("gen", i)))
        state.on_status(row)
    return state.history


def plot_learning_curve(
    source: str | Path | Sequence[Mapping[str, Any]], out_png: str | Path, title: str | None = None
) -> Path:
    """Write a PNG of reward mean/max, success rate and held-out centre eval per generation (with the start,
    when the run scored it, at generation 0 on the same tasks: the title says "start k/n -> centre m/n"),
    sigma on a twin axis; returns the path written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    records = load_metrics(source)
    if not records:
        raise MetricsError(f"no generations in {source!r}: nothing to plot")
    gens = [r.gen for r in records]
    fig = Figure(figsize=(8.0, 4.5), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    series: list[tuple[str, list[float | None], dict[str, Any]]] = [
        ("reward mean", [r.reward_mean for r in records], {"color": "tab:green", "lw": 2}),
        ("reward max", [r.reward_max for r in records], {"color": "tab:green", "ls": "--", "alpha": 0.6}),
        ("success rate", [r.success_rate for r in records], {"color": "tab:purple", "lw": 1.5}),
    ]
    centre = [r.centre_success for r in records]
    start = next((r.start_eval for r in records if r.start_eval is not None), None)
    if start is not None:  # the held-out line starts at the start, generation 0
        gens, centre = [0, *gens], [start.success_rate, *centre]
        series = [(label, [None, *values], style) for label, values, style in series]
    if any(v is not None for v in centre):
        split = next((r.centre_split for r in reversed(records) if r.centre_split), None)
        split = split or (start.split if start is not None else "held-out")
        series.append((f"centre success ({split})", centre, {"color": "tab:orange", "marker": "o", "ms": 4}))
    plotted: list[float] = []
    for label, values, style in series:
        points = [(g, v) for g, v in zip(gens, values, strict=True) if v is not None]
        if points:
            ax.plot(*zip(*points, strict=True), label=label, **style)
            plotted += [v for _, v in points]
    if plotted:  # success rates live in [0, 1]: a flat 0 line stays at the bottom of a 0-1 axis
        ax.set_ylim(min(0.0, *plotted) - 0.05, max(1.0, *plotted) + 0.05)
    if start is not None:
        ax.plot([0], [start.success_rate], ls="none", marker="D", ms=7, color="tab:red",
                label=f"start ({start.split}, gen 0)")
        ax.axhline(start.success_rate, color="tab:red", ls=":", lw=1, alpha=0.6)
    ax.set_xlabel("generation")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("reward / success")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    sigmas = [(r.gen, r.sigma) for r in records if r.sigma is not None]
    if sigmas:
        twin = ax.twinx()
        twin.plot(*zip(*sigmas, strict=True), color="tab:blue", ls=":", label="sigma")
        twin.set_ylabel("sigma", color="tab:blue")
        twin.tick_params(axis="y", colors="tab:blue")
        more_handles, more_labels = twin.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    if handles:
        ax.legend(handles, labels, loc="best", fontsize="small", framealpha=0.8)
    latest = next((r.centre_eval for r in reversed(records) if r.centre_eval is not None), None)
    held_out = format_held_out(start, latest)
    heading = title or "learning curve"
    ax.set_title(f"{heading}\n{held_out}" if held_out else heading, fontsize="medium")
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out
