"""Text charts drawn with unicode blocks (no plotting library): sparklines, bars, column charts."""

from __future__ import annotations

from collections.abc import Sequence

_LEVELS = " ▁▂▃▄▅▆▇█"
_EIGHTHS = " ▏▎▍▌▋▊▉█"


def value_range(values: Sequence[float | None], unit: bool = True) -> tuple[float, float]:
    """Axis range for ``values``: ``[0, 1]`` widened to fit when ``unit``, else ``[min(0, lo), hi]``."""
    present = [v for v in values if v is not None]
    lo = min([0.0, *present])
    hi = max([1.0 if unit else 0.0, *present])
    return (lo, hi) if hi > lo else (lo, lo + 1.0)


def _level(value: float, lo: float, hi: float, steps: int) -> int:
    frac = (value - lo) / (hi - lo) if hi > lo else 0.0
    return max(0, min(steps, round(frac * steps)))


def sparkline(values: Sequence[float | None], lo: float, hi: float) -> str:
    """One character per value (``▁`` to ``█``); missing values are blanks, values at ``lo`` are ``▁``."""
    return "".join(" " if v is None else _LEVELS[max(1, _level(v, lo, hi, 8))] for v in values)


def column_chart(values: Sequence[float | None], lo: float, hi: float, height: int) -> list[str]:
    """A ``height``-row column chart, top row first, one column per value, eighth-block resolution."""
    rows = [""] * height
    for v in values:
        units = 0 if v is None else max(1, _level(v, lo, hi, 8 * height))
        for r in range(height):
            fill = units - 8 * (height - 1 - r)
            rows[r] += _LEVELS[max(0, min(8, fill))]
    return rows


def hbar(fraction: float, width: int) -> str:
    """A horizontal bar ``width`` cells long filled to ``fraction`` (eighth-cell resolution)."""
    width = max(0, width)
    units = max(0, min(8 * width, round(max(0.0, min(1.0, fraction)) * 8 * width)))
    full, part = divmod(units, 8)
    bar = "█" * full + (_EIGHTHS[part] if part else "")
    return bar.ljust(width)


def progress_bar(fraction: float, width: int) -> tuple[str, str]:
    """A progress bar as (done, remaining) strings: heavy ``━`` (half-cell ``╸``) then light ``─``."""
    halves = max(0, min(2 * width, int(max(0.0, min(1.0, fraction)) * 2 * width)))
    done = "━" * (halves // 2) + ("╸" if halves % 2 else "")
    return done, "─" * (width - len(done))


def tail(values: Sequence[float | None], width: int) -> list[float | None]:
    """The last ``width`` values (the chart scrolls once the run outgrows it)."""
    return list(values[-width:]) if width > 0 else []
