"""How long a grid took, from its runs' result files: the compute, and the wall time some run was going.

Each finished run records ``seconds`` (its whole process: model load, training, the held-out scoring) and
``finished_at``, so it occupied the interval ``[finished_at - seconds, finished_at]``. From those intervals:

* **compute**: the sum of the runs' seconds (job time; with ``--jobs 2`` on 2 cores, each job one core);
* **busy wall time**: the length of the union of the intervals, so a grid run in pieces (a session stops, the
  same command continues it later) counts only the time some run was going, not the gaps between pieces;
* **pieces**: the union's connected parts, each with its span and its runs;
* the most runs going at once (the ``--jobs`` the timing reflects).

Only the last process of a resumed run is in its ``seconds`` (the grid starts the clock when it resumes it),
so an interrupted run's lost work is not counted; runs copied from another grid directory keep the times of
the machine that ran them. A run without both fields is listed, not guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cotrain.errors import GridError

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"
"""How :func:`cotrain.grid.execute_run` writes ``finished_at``."""


@dataclass
class Piece:
    """A connected stretch of busy time: runs going back to back or side by side."""

    start: datetime
    end: datetime
    runs: list[str] = field(default_factory=list)

    @property
    def hours(self) -> float:
        """The piece's length in hours."""
        return (self.end - self.start).total_seconds() / 3600


@dataclass
class GridTime:
    """The time a grid's finished runs took (module docstring)."""

    compute_hours: float
    """Sum of the runs' ``seconds``, in hours."""
    busy_hours: float
    """Length of the union of the runs' intervals, in hours."""
    pieces: list[Piece]
    """The union's connected parts, in time order."""
    max_concurrent: int
    """The most runs going at once."""
    compute_by_tier: dict[str, float]
    """Compute hours per tier, with the starts apart (``"starts"``)."""
    untimed: list[str]
    """Runs without ``seconds`` or ``finished_at``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (times as ISO strings)."""
        return {"compute_hours": self.compute_hours, "busy_hours": self.busy_hours,
                "max_concurrent": self.max_concurrent, "compute_by_tier": dict(self.compute_by_tier),
                "pieces": [{"start": p.start.strftime(TIME_FORMAT), "end": p.end.strftime(TIME_FORMAT),
                            "hours": p.hours, "runs": len(p.runs)} for p in self.pieces],
                "untimed": list(self.untimed)}


def run_interval(key: str, result: Mapping[str, Any]) -> tuple[datetime, datetime] | None:
    """``(started, finished)`` of a run's last process, or ``None`` when it recorded no time."""
    seconds, finished = result.get("seconds"), result.get("finished_at")
    if seconds is None or finished is None:
        return None
    try:
        end = datetime.strptime(str(finished), TIME_FORMAT)
    except ValueError as exc:
        raise GridError(f"run {key}: finished_at {finished!r} is not a time in the format {TIME_FORMAT}") \
            from exc
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not 0 <= seconds < float("inf"):
        raise GridError(f"run {key}: seconds {seconds!r} is not a non-negative number")
    return end - timedelta(seconds=float(seconds)), end


def grid_time(results: Mapping[str, Mapping[str, Any]]) -> GridTime:
    """The compute, busy wall time, pieces and concurrency of ``results`` (run key -> result dict).
    ``finished_at`` has whole seconds, so intervals that touch within a second join one piece and do not
    count as running at once."""
    intervals: list[tuple[datetime, datetime, str]] = []
    untimed: list[str] = []
    by_tier: dict[str, float] = {}
    compute = 0.0
    for key, result in sorted(results.items()):
        span = run_interval(key, result)
        if span is None:
            untimed.append(key)
            continue
        intervals.append((*span, key))
        hours = (span[1] - span[0]).total_seconds() / 3600
        compute += hours
        tier = "starts" if result.get("arm") == "start" else f"tier {result.get('tier')}"
        by_tier[tier] = by_tier.get(tier, 0.0) + hours
    pieces: list[Piece] = []
    slack = timedelta(seconds=1)
    for start, end, key in sorted(intervals):
        if pieces and start <= pieces[-1].end + slack:
            pieces[-1].end = max(pieces[-1].end, end)
            pieces[-1].runs.append(key)
        else:
            pieces.append(Piece(start, end, [key]))
    # finished_at is cut to the second, so a run that follows another on the same job can seem to start up to
    # a second before it ended: ends count a second early, and before a start at the same time
    events = sorted([(s, 1) for s, _, _ in intervals] + [(e - slack, -1) for _, e, _ in intervals],
                    key=lambda ev: (ev[0], ev[1]))
    going = most = 0
    for _, step in events:
        going += step
        most = max(most, going)
    return GridTime(compute_hours=compute, busy_hours=sum(p.hours for p in pieces), pieces=pieces,
                    max_concurrent=most, compute_by_tier=dict(sorted(by_tier.items())), untimed=untimed)


def time_lines(t: Mapping[str, Any]) -> list[str]:
    """The report's time section (from :meth:`GridTime.to_dict`) as Markdown lines."""
    busy = t["busy_hours"]
    mean = f"{t['compute_hours'] / busy:.2f}" if busy > 0 else "-"
    lines = [f"- compute: **{t['compute_hours']:.2f} h** (the runs' seconds summed: model load, training and "
             f"held-out scoring)",
             f"- busy wall time: **{busy:.2f} h** (the union of the runs' intervals) in {len(t['pieces'])} "
             f"piece(s); {mean} runs going at once on average (compute / busy wall time), at most "
             f"{t['max_concurrent']}",
             "- compute per part: " + ", ".join(f"{k} {v:.2f} h" for k, v in t["compute_by_tier"].items())]
    lines += [f"  - piece {i}: {p['start']} to {p['end']}, {p['hours']:.2f} h, {p['runs']} run(s)"
              for i, p in enumerate(t["pieces"], 1)]
    if t["untimed"]:
        lines.append(f"- without a recorded time (not counted): {', '.join(t['untimed'])}")
    return lines
