"""``RichDashboardLogger``: an EvoTorch logger that drives one rich ``Live`` (or plain lines off a TTY)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from evotorch.algorithms.searchalgorithm import SearchAlgorithm
from evotorch.logging import Logger
from rich.console import Console, RenderableType
from rich.live import Live

from cotrain.ui.render import render_dashboard
from cotrain.ui.state import DashboardState, GenerationRecord, WorkerId


def format_status_line(record: GenerationRecord, total_generations: int | None = None) -> str:
    """One plain log line for a finished generation; fields missing from the status are left out."""
    parts = [f"gen {record.gen}" + (f"/{total_generations}" if total_generations is not None else "")]
    fields: list[tuple[str, float | None, str]] = [
        ("reward_mean", record.reward_mean, ".3f"),
        ("max", record.reward_max, ".3f"),
        ("success", record.success_rate, ".2f"),
        ("sigma", record.sigma, ".4f"),
        ("centre", record.centre_success, ".2f"),
    ]
    parts += [f"{name}={value:{fmt}}" for name, value, fmt in fields if value is not None]
    if record.start_eval is not None:
        parts.append(f"start={record.start_eval.success_rate:.2f}")
    if record.update_kind is not None:
        parts.append(f"update={record.update_kind.replace(' ', '-')}")
    seconds = [
        ("rollout", record.seconds_rollout),
        ("perturb", record.seconds_perturb),
        ("update", record.seconds_update),
    ]
    parts += [f"{name}={value:.1f}s" for name, value in seconds if value is not None]
    return " ".join(parts)


class RichDashboardLogger(Logger):
    """Shows a live dashboard of a cotrain run; attach it to a searcher and feed it rollout events.

    On a terminal (or with ``force_terminal=True``) it owns one ``rich.live.Live``; otherwise it prints
    one plain line per generation. Progress methods are thread-safe. It only observes: nothing here
    touches the searcher beyond EvoTorch's ``log_hook`` registration.
    """

    def __init__(
        self,
        searcher: SearchAlgorithm | None = None,
        *,
        run_name: str = "run",
        total_generations: int | None = None,
        interval: int = 1,
        after_first_step: bool = False,
        console: Console | None = None,
        force_terminal: bool | None = None,
        refresh_per_second: float = 4.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``searcher=None`` makes a stand-alone logger: call ``log(status)`` yourself."""
        if searcher is not None:
            super().__init__(searcher, interval=interval, after_first_step=after_first_step)
        else:
            self._interval, self._after_first_step, self._steps_count = int(interval), after_first_step, 0
        self._console = console or Console(force_terminal=force_terminal)
        self._clock = clock
        self._lock = threading.RLock()
        start = clock()
        self.state = DashboardState(
            run_name=run_name, total_generations=total_generations, started_at=start, now=start
        )
        self._live_enabled = self._console.is_terminal
        self._refresh_per_second = refresh_per_second
        self._live: Live | None = None
        self._closed = False

    # -- EvoTorch's side ----------------------------------------------------------------------------

    def _log(self, status: dict) -> None:
        self.log(status)

    def log(self, status: Mapping[str, Any]) -> None:
        """Take in one generation's status dict (CONTRACTS.md keys; missing keys are fine)."""
        with self._lock:
            record = self.state.on_status(status, now=self._clock())
            line = format_status_line(record, self.state.total_generations)
        if self._live_enabled:
            self._refresh()
        else:
            print(line, file=self._console.file, flush=True)

    # -- the rollout pool's side (thread-safe) --------------------------------------------------------

    def on_generation_start(self, gen: int, rollouts_total: int) -> None:
        """A generation begins with ``rollouts_total`` rollouts."""
        with self._lock:
            self.state.on_generation_start(gen, rollouts_total, now=self._clock())
        self._refresh()

    def on_rollout_started(self, worker_id: WorkerId) -> None:
        """A worker picked up a rollout."""
        with self._lock:
            self.state.on_rollout_started(worker_id, now=self._clock())

    def on_rollout_done(self, worker_id: WorkerId) -> None:
        """A worker finished a rollout."""
        with self._lock:
            self.state.on_rollout_done(worker_id, now=self._clock())

    def on_status(self, status: Mapping[str, Any]) -> None:
        """Alias of ``log`` for callers that push status without going through EvoTorch."""
        self.log(status)

    # -- display -----------------------------------------------------------------------------------

    def renderable(self) -> RenderableType:
        """The dashboard as of now (built under the lock, so it is safe to draw from any thread)."""
        with self._lock:
            self.state.tick(self._clock())
            return render_dashboard(self.state, width=self._console.width)

    def _refresh(self) -> None:
        """Start the ``Live`` on first use and redraw; never called with ``self._lock`` held."""
        if not self._live_enabled or self._closed:
            return
        if self._live is None:
            self._live = Live(
                get_renderable=self.renderable,
                console=self._console,
                refresh_per_second=self._refresh_per_second,
                transient=False,
            )
            self._live.start(refresh=True)
        else:
            self._live.refresh()

    def start(self) -> RichDashboardLogger:
        """Show the dashboard now rather than at the first event."""
        self._refresh()
        return self

    def close(self) -> None:
        """Stop the live display (leaving its last frame on screen); safe to call twice."""
        self._closed = True
        if self._live is not None:
            self._live.stop()  # draws the final frame
            self._live = None

    def __enter__(self) -> RichDashboardLogger:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
