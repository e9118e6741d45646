"""Live dashboard for cotrain runs: plain state, a pure render function, an EvoTorch logger, and plots.

``state`` and ``render`` need only rich; the logger (which imports evotorch, hence torch) loads on first
use of ``RichDashboardLogger``; ``plot_learning_curve`` imports matplotlib only when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cotrain.ui.plot import plot_learning_curve
from cotrain.ui.render import render_dashboard
from cotrain.ui.state import DashboardState, EvalSummary, GenerationRecord, WorkerHealth, format_held_out

if TYPE_CHECKING:
    from cotrain.ui.logger import RichDashboardLogger, format_status_line

__all__ = [
    "DashboardState",
    "EvalSummary",
    "GenerationRecord",
    "RichDashboardLogger",
    "WorkerHealth",
    "format_held_out",
    "format_status_line",
    "plot_learning_curve",
    "render_dashboard",
]


def __getattr__(name: str) -> Any:
    if name in ("RichDashboardLogger", "format_status_line"):
        from cotrain.ui import logger

        return getattr(logger, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
