"""Moving a worker's weights between population members, with the work hidden behind env resets.

A worker evaluates one member after another: restore the last member's weights, apply the updates that
arrived, perturb for the next member. :class:`PerturbationPipeline` does these moves with the exact machinery
of :func:`es_agent.perturbed` (the next member's perturbation is an open ``perturbed(...)`` block, restored
bit for bit by leaving it) and can run them on a background thread while the next member's first env reset
waits on the browser and the sites: torch kernels release the GIL, and the policy's first forward waits for
the weights (:meth:`wait`). Restores and updates are deferred until the next move or until the centre is
asked for (:meth:`settle`), so in a worker that gets one row at a time the last member's restore and the
generation's update also run during the next member's reset.

States. The weights are at the centre (plus every queued update once applied) or at one open member; at
most one move is in flight. A move that fails while perturbing leaves the weights at the centre (``perturbed``
undoes what it had done) and re-raises; one that fails while restoring or updating leaves them in an unknown
state: the pipeline is then broken and every later call raises :class:`WeightsStateError` naming the first
failure (the replica must be rebuilt from its snapshot and log).

Not thread-safe: one owner thread calls the methods; only the move itself runs on the background thread.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from es_agent.errors import WeightsStateError

_log = logging.getLogger(__name__)


@dataclass
class MoveTimes:
    """Seconds of the weight work done by one move, by part (wall time on the thread that did it)."""

    restore: float = 0.0
    """Leaving the open member's ``perturbed`` block (exact restore)."""
    update: float = 0.0
    """Applying queued updates."""
    perturb: float = 0.0
    """Entering the next member's ``perturbed`` block."""

    @property
    def total(self) -> float:
        """All parts."""
        return self.restore + self.update + self.perturb


@dataclass
class _Move:
    """One move in flight (or done): its thread, its outcome and its timings."""

    target: tuple[int, float] | None
    thread: threading.Thread | None = None
    error: BaseException | None = None
    times: MoveTimes = field(default_factory=MoveTimes)


class PerturbationPipeline:
    """The weights of ``model`` between the centre and one population member at a time.

    ``perturb_kwargs`` are the ``mode``, ``rank`` and ``params`` of :func:`es_agent.perturbed` and
    :func:`es_agent.apply_update`. With ``overlap`` moves run on a background thread and restores and
    updates wait for the next move; without it every move runs at once in the caller (the weights are at the
    centre between members, as plain ``with perturbed(...)`` blocks would leave them).
    """

    def __init__(self, model: nn.Module, perturb_kwargs: Mapping[str, Any], *, overlap: bool = True) -> None:
        self.model = model
        self.perturb_kwargs = dict(perturb_kwargs)
        self.overlap = bool(overlap)
        self._open: AbstractContextManager[Any] | None = None
        self._point: tuple[int, float] | None = None
        self._queued: list[tuple[tuple[int, ...], tuple[float, ...]]] = []
        self._move: _Move | None = None
        self._broken: BaseException | None = None

    # ------------------------------------------------------------------ state
    @property
    def point(self) -> tuple[int, float] | None:
        """``(seed, sigma)`` of the member the weights are at (or moving to); ``None``: the centre."""
        return self._move.target if self._move is not None else self._point

    @property
    def busy(self) -> bool:
        """Whether a move is in flight on the background thread."""
        return self._move is not None and self._move.thread is not None and self._move.thread.is_alive()

    @property
    def pending(self) -> bool:
        """Whether anything stands between the weights and the centre (an open member, queued updates or a
        move not waited for)."""
        return self._open is not None or bool(self._queued) or self._move is not None

    def _check(self) -> None:
        if self._broken is not None:
            raise WeightsStateError(
                f"the weights of this {type(self.model).__name__} are in an unknown state: "
                f"{type(self._broken).__name__}: {self._broken}; rebuild the replica from its snapshot and "
                "update log") from self._broken

    # ------------------------------------------------------------------ moves
    def queue_update(self, seeds: Sequence[int], coeffs: Sequence[float]) -> None:
        """Make ``theta += sum_i coeffs_i * eps(seeds_i)`` part of the centre: applied by the next move or
        :meth:`settle` (at once without ``overlap``)."""
        self._check()
        self._queued.append((tuple(int(s) for s in seeds), tuple(float(c) for c in coeffs)))
        if not self.overlap:
            self.settle()

    def start(self, seed: int, sigma: float) -> None:
        """Begin moving to the member ``theta + sigma * eps(seed)`` (``sigma == 0``: the centre itself) with
        every queued update applied first. Call :meth:`wait` before reading the weights."""
        self._check()
        self.wait()
        target = None if sigma == 0 else (int(seed), float(sigma))
        move = _Move(target)
        if self.overlap:
            move.thread = threading.Thread(target=self._run, args=(move, torch.get_num_threads()),
                                           name="perturbation-move", daemon=True)
            self._move = move
            move.thread.start()
        else:
            self._move = move
            self._run(move, None)

    def wait(self) -> MoveTimes | None:
        """Wait for the move in flight; returns its timings (``None`` when there was none). Re-raises its
        failure: after a failed perturbation the weights are at the centre; after a failed restore or
        update, :class:`WeightsStateError`."""
        move = self._move
        if move is None:
            self._check()
            return None
        if move.thread is not None:
            move.thread.join()
        self._move = None
        self._check()
        if move.error is not None:
            raise move.error
        return move.times

    def close(self) -> None:
        """Wait for a move in flight without raising (for shutting the worker down: its failure is
        logged, and a broken pipeline stays broken)."""
        move, self._move = self._move, None
        if move is None:
            return
        if move.thread is not None:
            move.thread.join()
        if move.error is not None:
            _log.warning("a weight move failed before the worker closed: %s: %s", type(move.error).__name__,
                         move.error)

    def settle(self) -> MoveTimes | None:
        """Bring the weights to the centre with every queued update applied, in this thread (after waiting
        for a move in flight); returns the timings of that work (``None`` when there was nothing to do)."""
        self.wait()
        if self._open is None and not self._queued:
            return None
        move = _Move(None)
        self._move = move
        self._run(move, None)
        return self.wait()

    def _run(self, move: _Move, threads: int | None) -> None:
        """The move: leave the open block, apply the queued updates, enter the target's block. Failures are
        kept in ``move.error`` (and in ``_broken`` when the weights are left in an unknown state)."""
        from es_agent.perturb import apply_update, perturbed

        if threads is not None:
            torch.set_num_threads(threads)  # a new thread does not inherit the worker's thread count
        try:
            if self._open is not None and (self._queued or move.target != self._point):
                t0 = time.perf_counter()
                block, self._open, self._point = self._open, None, None
                self._stage(lambda: block.__exit__(None, None, None), "restoring member weights")
                move.times.restore += time.perf_counter() - t0
            while self._queued:
                t0 = time.perf_counter()
                seeds, coeffs = self._queued[0]
                self._stage(functools.partial(apply_update, self.model, seeds, coeffs, **self.perturb_kwargs),
                            "applying an update")
                self._queued.pop(0)
                move.times.update += time.perf_counter() - t0
            if move.target is not None and self._open is None:
                t0 = time.perf_counter()
                block = perturbed(self.model, *move.target, **self.perturb_kwargs)
                block.__enter__()  # on failure perturbed() has restored what it wrote: weights at the centre
                self._open, self._point = block, move.target
                move.times.perturb += time.perf_counter() - t0
        except BaseException as exc:  # handed to the owner thread by wait()
            move.error = exc

    def _stage(self, work: Callable[[], Any], what: str) -> None:
        try:
            work()
        except BaseException as exc:
            self._broken = exc
            exc.add_note(f"while {what} ({type(self.model).__name__}); the weights are in an unknown state")
            raise
