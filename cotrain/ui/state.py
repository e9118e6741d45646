"""Plain dashboard state: everything the UI shows, pushed in by the searcher and the rollout pool.

The state holds no lock and reads no clock: callers pass times in (``now=``) and serialise access
(``RichDashboardLogger`` does both), so the render function stays pure and tests stay deterministic.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

WorkerId = int | str


@dataclass(frozen=True)
class EvalSummary:
    """One held-out evaluation (a status's ``centre_eval`` or ``start_eval``) as the UI shows it."""

    split: str
    """The held-out split."""
    success_rate: float
    """Fraction of the tasks solved."""
    n_tasks: int
    """Tasks evaluated."""
    generation: int | None = None
    """The generation whose centre was scored (0: the start), when known."""

    @property
    def solved(self) -> int:
        """Tasks solved."""
        return round(self.success_rate * self.n_tasks)

    @property
    def fraction(self) -> str:
        """``"3/12"``."""
        return f"{self.solved}/{self.n_tasks}"

    @classmethod
    def from_status(cls, value: Any, generation: int | None = None) -> EvalSummary | None:
        """From a ``centre_eval``/``start_eval`` dict (``generation`` when the dict carries none); ``None``
        when it is absent or lacks ``success_rate``/``n_tasks``."""
        if not isinstance(value, Mapping):
            return None
        rate, n = _scalar(value.get("success_rate")), _scalar(value.get("n_tasks"))
        if rate is None or n is None or n < 1:
            return None
        gen = _scalar(value.get("generation"))
        return cls(str(value.get("split", "held-out")), rate, int(n),
                   int(gen) if gen is not None else generation)


def format_held_out(start: EvalSummary | None, centre: EvalSummary | None, *,
                    generation: bool = True) -> str | None:
    """``"held-out success (test): start 3/12 -> centre 7/12 (gen 10)"`` (the centre's generation left out
    with ``generation=False``), or the part that exists; ``None`` when neither does."""
    shown = centre if centre is not None else start
    if shown is None:
        return None
    parts = []
    if start is not None:
        parts.append(f"start {start.fraction}")
    if centre is not None:
        at = f" (gen {centre.generation})" if generation and centre.generation is not None else ""
        parts.append(f"centre {centre.fraction}{at}")
    return f"held-out success ({shown.split}): " + " -> ".join(parts)


@dataclass
class GenerationRecord:
    """Scalars of one finished generation (``None`` where the status lacked the key)."""

    gen: int
    reward_mean: float | None = None
    reward_max: float | None = None
    reward_min: float | None = None
    success_rate: float | None = None
    sigma: float | None = None
    centre_success: float | None = None
    centre_split: str | None = None
    seconds_rollout: float | None = None
    seconds_perturb: float | None = None
    seconds_update: float | None = None
    bytes_exchanged: int | None = None
    ended_at: float | None = None
    centre_eval: EvalSummary | None = None
    start_eval: EvalSummary | None = None
    update_empty: bool | None = None
    update_empty_reason: str | None = None
    rewards_tied: bool | None = None

    @property
    def update_kind(self) -> str | None:
        """What moved the weights: ``rewards``, ``tie-break only`` (every reward tied; the confidence
        tie-break made the update), ``empty`` (nothing moved), ``non-empty`` (a status without
        ``rewards_tied``); ``None`` when the status did not say."""
        if self.update_empty:
            return "empty"
        if self.update_empty is None:
            return None
        if self.rewards_tied:
            return "tie-break only"
        return "rewards" if self.rewards_tied is not None else "non-empty"


@dataclass
class WorkerHealth:
    """One rollout worker as the dashboard sees it."""

    alive: bool = True
    restarts: int = 0
    checksum: str | None = None
    checksum_ok: bool | None = None
    in_flight: int = 0
    done: int = 0


def _scalar(value: Any) -> float | None:
    """A float from a number, a 0-d/1-element tensor, or the mean of a vector; ``None`` if not numeric."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        if hasattr(value, "numel") and value.numel() > 1:
            value = value.float().mean()
        result = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return result if math.isfinite(result) else None


def _flag(status: Mapping[str, Any], key: str) -> bool | None:
    value = status.get(key)
    return bool(value) if isinstance(value, bool | int) else None


def _first(status: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        if key in status:
            found = _scalar(status[key])
            if found is not None:
                return found
    return None


@dataclass
class DashboardState:
    """What the dashboard shows; mutate only through the ``on_*`` methods."""

    run_name: str = "run"
    total_generations: int | None = None
    started_at: float = 0.0
    now: float = 0.0
    generation: int = 0
    generation_started_at: float | None = None
    rollouts_done: int = 0
    rollouts_total: int = 0
    population_size: int | None = None
    history: list[GenerationRecord] = field(default_factory=list)
    workers: dict[WorkerId, WorkerHealth] = field(default_factory=dict)
    checksums_agree: bool | None = None
    prompt_probs: dict[str, list[float]] = field(default_factory=dict)
    best_prompt: dict[str, str] = field(default_factory=dict)
    per_task_success: dict[str, float] = field(default_factory=dict)
    start_eval: EvalSummary | None = None
    """The start's held-out evaluation, once a status carried it."""

    # -- events -------------------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Advance the display clock (elapsed and ETA are computed from ``now - started_at``)."""
        self.now = max(self.now, now)

    def on_generation_start(self, gen: int, rollouts_total: int, now: float | None = None) -> None:
        """A new generation begins with ``rollouts_total`` rollouts to run."""
        if now is not None:
            self.tick(now)
        self.generation = int(gen)
        self.generation_started_at = self.now
        self.rollouts_done = 0
        self.rollouts_total = max(0, int(rollouts_total))
        for worker in self.workers.values():
            worker.in_flight = 0
            worker.done = 0

    def on_rollout_started(self, worker_id: WorkerId, now: float | None = None) -> None:
        """A worker picked up one rollout."""
        if now is not None:
            self.tick(now)
        worker = self.workers.setdefault(worker_id, WorkerHealth())
        worker.alive = True
        worker.in_flight += 1

    def on_rollout_done(self, worker_id: WorkerId, now: float | None = None) -> None:
        """A worker finished one rollout."""
        if now is not None:
            self.tick(now)
        worker = self.workers.setdefault(worker_id, WorkerHealth())
        worker.in_flight = max(0, worker.in_flight - 1)
        worker.done += 1
        self.rollouts_done += 1
        self.rollouts_total = max(self.rollouts_total, self.rollouts_done)

    def on_status(self, status: Mapping[str, Any], now: float | None = None) -> GenerationRecord:
        """Take in one generation's status dict (docs/CONTRACTS.md keys; any may be missing).

        Stock EvoTorch keys stand in where the contract keys are absent: ``mean_eval`` for
        ``reward_mean``, ``pop_best_eval`` for ``reward_max``, the mean of ``stdev`` for ``sigma``.
        """
        if now is not None:
            self.tick(now)
        gen = status.get("iter")
        gen = int(gen) if isinstance(gen, int | float) else max(self.generation, len(self.history) + 1)
        centre = status.get("centre_eval")
        centre = centre if isinstance(centre, Mapping) else {}
        bytes_exchanged = _scalar(status.get("bytes_exchanged"))
        record = GenerationRecord(
            gen=gen,
            reward_mean=_first(status, "reward_mean", "mean_eval"),
            reward_max=_first(status, "reward_max", "pop_best_eval"),
            reward_min=_first(status, "reward_min"),
            success_rate=_first(status, "success_rate"),
            sigma=_first(status, "sigma", "stdev"),
            centre_success=_first(centre, "success_rate"),
            centre_split=str(centre["split"]) if "split" in centre else None,
            seconds_rollout=_first(status, "seconds_rollout"),
            seconds_perturb=_first(status, "seconds_perturb"),
            seconds_update=_first(status, "seconds_update"),
            bytes_exchanged=int(bytes_exchanged) if bytes_exchanged is not None else None,
            ended_at=self.now,
            centre_eval=EvalSummary.from_status(centre, gen),
            start_eval=EvalSummary.from_status(status.get("start_eval"), 0),
            update_empty=_flag(status, "update_empty"),
            update_empty_reason=(str(status["update_empty_reason"]) if status.get("update_empty_reason")
                                 else None),
            rewards_tied=_flag(status, "rewards_tied"),
        )
        if record.start_eval is not None:
            self.start_eval = record.start_eval
        if self.history and self.history[-1].gen == gen:
            self.history[-1] = record
        else:
            self.history.append(record)
        self.generation = max(self.generation, gen)
        self._take_progress(status)
        self._take_prompts(status)
        self._take_workers(status)
        return record

    # -- status helpers -----------------------------------------------------------------------------

    def _take_progress(self, status: Mapping[str, Any]) -> None:
        for key in ("population_size", "rollouts_done", "rollouts_total"):
            value = _scalar(status.get(key))
            if value is not None:
                setattr(self, key, int(value))
        tasks = status.get("per_task_success")
        if isinstance(tasks, Mapping):
            self.per_task_success = {
                str(k): v for k, v in ((k, _scalar(v)) for k, v in tasks.items()) if v is not None
            }

    def _take_prompts(self, status: Mapping[str, Any]) -> None:
        probs = status.get("prompt_probs")
        if isinstance(probs, Mapping):
            self.prompt_probs = {
                str(slot): [p for p in (_scalar(x) for x in values) if p is not None]
                for slot, values in probs.items()
                if isinstance(values, list | tuple)
            }
        best = status.get("best_prompt")
        if isinstance(best, Mapping):
            self.best_prompt = {str(slot): str(text) for slot, text in best.items()}

    def _take_workers(self, status: Mapping[str, Any]) -> None:
        agree = status.get("checksums_agree")
        if isinstance(agree, bool):
            self.checksums_agree = agree
        rows = status.get("workers")
        if not isinstance(rows, list | tuple):
            if self.checksums_agree is not None:
                for worker in self.workers.values():
                    worker.checksum_ok = self.checksums_agree if worker.alive else None
            return
        for row in rows:
            if not isinstance(row, Mapping) or "id" not in row:
                continue
            worker = self.workers.setdefault(row["id"], WorkerHealth())
            worker.alive = bool(row.get("alive", worker.alive))
            worker.restarts = int(row.get("restarts", worker.restarts) or 0)
            worker.in_flight = int(row.get("in_flight", worker.in_flight) or 0)
            worker.done = int(row.get("done", worker.done) or 0)
            if row.get("checksum") is not None:
                worker.checksum = str(row["checksum"])
        self._judge_checksums()

    def _judge_checksums(self) -> None:
        """Per-worker checksum verdict: a live worker is ok when it matches the majority of live workers
        (and, if the searcher says checksums disagree while all live workers match, none is)."""
        live = [w for w in self.workers.values() if w.alive and w.checksum is not None]
        counts = Counter(w.checksum for w in live)
        majority = counts.most_common(1)[0][0] if counts else None
        unanimous_but_wrong = self.checksums_agree is False and len(counts) == 1
        for worker in self.workers.values():
            if not worker.alive:
                worker.checksum_ok = None
            elif worker.checksum is None or self.checksums_agree is True:
                worker.checksum_ok = self.checksums_agree
            else:
                worker.checksum_ok = worker.checksum == majority and not unanimous_but_wrong

    # -- derived values -----------------------------------------------------------------------------

    @property
    def elapsed(self) -> float:
        """Seconds since the run started, by the injected clock."""
        return max(0.0, self.now - self.started_at)

    @property
    def latest_centre_eval(self) -> EvalSummary | None:
        """The latest held-out evaluation of the centre."""
        return next((r.centre_eval for r in reversed(self.history) if r.centre_eval is not None), None)

    @property
    def held_out(self) -> str | None:
        """The start beside the latest centre on the held-out tasks (:func:`format_held_out`, without the
        centre's generation: the dashboard's centre sparkline shows when it was scored)."""
        return format_held_out(self.start_eval, self.latest_centre_eval, generation=False)

    @property
    def update_note(self) -> str | None:
        """How the weight updates went so far: counts of updates from rewards, from the confidence tie-break
        alone (every reward tied) and empty, with the latest empty one's reason; ``None`` when no status
        said (e.g. stock EvoTorch searchers)."""
        kinds = [r.update_kind for r in self.history if r.update_kind is not None]
        if not kinds:
            return None
        counts = [(kinds.count(kind), kind) for kind in ("rewards", "non-empty", "tie-break only", "empty")]
        text = f"weight updates of {len(kinds)} gens: " + ", ".join(
            f"{n} {'from rewards' if kind == 'rewards' else kind}" for n, kind in counts if n)
        reason = next((r.update_empty_reason for r in reversed(self.history) if r.update_empty_reason), None)
        if self.history[-1].update_kind == "tie-break only":
            text += " (latest: every reward tied)"
        elif reason is not None and self.history[-1].update_kind == "empty":
            text += f" (latest: {reason})"
        return text

    @property
    def generations_done(self) -> int:
        """Number of finished generations seen."""
        return len(self.history)

    @property
    def eta(self) -> float | None:
        """Seconds left, from the mean generation time so far; ``None`` when it cannot be estimated."""
        if self.total_generations is None:
            return None
        remaining = self.total_generations - self.generations_done
        if remaining <= 0:
            return 0.0
        last_end = self.history[-1].ended_at if self.history else self.started_at
        last_end = self.started_at if last_end is None else last_end
        in_current = max(0.0, self.now - last_end)
        if self.history:
            per_gen = max(0.0, last_end - self.started_at) / len(self.history)
        elif self.rollouts_done and self.rollouts_total:
            per_gen = in_current * self.rollouts_total / self.rollouts_done
        else:
            return None
        return max(0.0, remaining * per_gen - in_current)

    def seconds_split(self, cumulative: bool = False) -> dict[str, float]:
        """Seconds in rollouts, perturbation and update: of the latest generation or summed over all."""
        records = self.history if cumulative else self.history[-1:]
        return {
            phase: sum(getattr(r, f"seconds_{phase}") or 0.0 for r in records)
            for phase in ("rollout", "perturb", "update")
        }
