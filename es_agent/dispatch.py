"""Actor dispatch for :class:`~es_agent.problem.AgentProblem`: jobs of candidate rows run on EvoTorch's Ray
actors (or in the driver when there are none), with retries, replacement of dead actors and a count of the
bytes exchanged.

Jobs. With actors, rows go out a piece at a time (a :class:`Job`), one piece in flight per actor, collected
with ``ray.wait``; the piece runs on whichever worker is free first. When an actor dies (``RayActorError``),
its piece is queued again and the actor is replaced the way EvoTorch's ``_parallelize`` makes one (it receives
the problem, hence the base spec and the whole update log, and rebuilds the centre on first use), so no
evaluation is lost; a piece whose workers died ``max_attempts`` times raises
:class:`~es_agent.errors.WorkerLostError`. Without actors the jobs run one by one in this process.

Bookkeeping. One :class:`WorkerState` per worker: the update-log position its copy of the problem holds,
restarts, its last report, rows done, whether a piece is in flight. :attr:`ActorDispatcher.bytes` counts the
pickled bytes of everything sent to and from actors since :meth:`ActorDispatcher.begin` (sync data, pieces,
results, reports, replacement problems); what was sent before (the problems that started the actors) is
carried into the next count.

The dispatcher lives in the driver only: the problem lists it in ``_nonserialized_attribs``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray
import torch
from evotorch.core import EvaluationActor
from ray.exceptions import RayActorError
from ray.util import ActorPool

from es_agent.errors import WorkerLostError
from es_agent.noise import derive_seed
from es_agent.specs import TaskId

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.problem import AgentProblem

ProgressFn = Callable[[dict[str, Any]], None]
"""``on_progress(event)`` with ``event = {"worker", "event", "row", "rows", "tasks"}``; ``event`` is one of
``"started"``, ``"done"``, ``"died"``, ``"restarted"`` (the latter with a ``"reason"``)."""


@dataclass
class Job:
    """Rows of one evaluation that go to one worker together."""

    rows: list[int]
    """Row indices in the evaluated batch (empty for centre evaluations)."""
    values: torch.Tensor
    """Candidate rows ``(k, 3 + n_slots)`` float64."""
    tasks: tuple[TaskId, ...]
    """Tasks each row runs, one episode each."""
    attempts: int = 0
    """Times a worker died on this job."""
    sample: bool = False
    """Whether the rows' actions are sampled at the policy's temperature (training candidates) or greedy
    (centre evaluations)."""


@dataclass
class WorkerState:
    """What the driver knows of one worker."""

    applied: int
    """Update-log position of the worker's copy of the problem (records sent to it)."""
    restarts: int = 0
    """Times the worker was replaced."""
    report: dict[str, Any] | None = None
    """Its last report (``AgentProblem._make_sync_data_for_main``; ``None``: none since its start)."""
    rows_done: int = 0
    """Rows it evaluated since the problem started."""
    in_flight: int = 0
    """1 while a job runs on it."""


def nbytes(obj: Any) -> int:
    """Pickled size of ``obj`` as Ray ships it."""
    return len(ray.cloudpickle.dumps(obj))


class ActorDispatcher:
    """Runs :class:`Job`\\ s on the actors of ``problem`` (or in process) and keeps the per-worker bookkeeping
    (module docstring). ``problem`` owns the actors (EvoTorch's ``_actors``), the update log and the
    ``on_progress`` callback."""

    def __init__(self, problem: AgentProblem, num_workers: int, *, max_attempts: int) -> None:
        self.problem = problem
        self.max_attempts = int(max_attempts)
        """Deaths on one job after which :class:`WorkerLostError` is raised."""
        self.workers = [WorkerState(problem.log_end) for _ in range(num_workers)]
        """One state per worker (one when the driver evaluates in process)."""
        self.bytes = 0
        """Bytes exchanged with actors since :meth:`begin`."""
        self.pending = 0
        """Bytes sent before :meth:`begin` (actor start-up), counted into the next evaluation."""

    @property
    def _actors(self) -> list[Any]:
        actors = self.problem._actors
        if actors is None:
            raise WorkerLostError("the problem has no actors to dispatch to")
        return actors

    # ------------------------------------------------------------------ evaluation boundaries
    def begin(self) -> None:
        """Start the byte count of an evaluation (with the bytes sent since the last one)."""
        self.bytes, self.pending = self.pending, 0

    def sync(self, data_since: Callable[[int], Mapping[str, Any] | None], offset: int) -> None:
        """Send each actor ``data_since(position)`` (its missing update records; ``None``: nothing) and mark
        it up to date. Actors whose copy predates ``offset`` (records folded into a snapshot) and actors that
        die while syncing are replaced."""
        for i, worker in enumerate(self.workers):
            if worker.applied < offset:
                self.replace(i, "its replica predates the snapshot")
        refs = {}
        for i, actor in enumerate(self._actors):
            data = data_since(self.workers[i].applied)
            if data is not None:
                self.bytes += nbytes(data)
                refs[i] = actor.call.remote("_use_sync_data_from_main", [data], {})
        for i, ref in refs.items():
            try:
                ray.get(ref)
                self.workers[i].applied = self.problem.log_end
            except RayActorError:
                self.replace(i, "died while syncing")

    def collect_reports(self) -> list[dict[str, Any] | None]:
        """Each actor's report (``None`` for one that died before reporting: it is replaced)."""
        refs = [actor.call.remote("_make_sync_data_for_main", [], {}) for actor in self._actors]
        reports: list[dict[str, Any] | None] = []
        for i, ref in enumerate(refs):
            try:
                report = ray.get(ref)
                self.bytes += nbytes(report)
            except RayActorError:
                self.replace(i, "died before reporting")
                report = None
            reports.append(report)
        return reports

    def record_reports(self, reports: Sequence[Mapping[str, Any] | None]) -> None:
        """Keep the workers' reports and add up their rows."""
        for worker, report in zip(self.workers, reports, strict=True):
            worker.report = None if report is None else dict(report)
            if report is not None:
                worker.rows_done += int(report["rows"])

    # ------------------------------------------------------------------ jobs
    def run(self, jobs: list[Job], run_local: Callable[[Job], list[list[float]]]) -> list[torch.Tensor]:
        """Per-task rewards of each job, in job order: on the actors, or through ``run_local`` in this
        process when there are none."""
        if self.problem._actors is None:
            outs = []
            for job in jobs:
                self._emit(0, "started", job)
                self.workers[0].in_flight = 1
                outs.append(torch.tensor(run_local(job)))
                self.workers[0].in_flight = 0
                self._emit(0, "done", job)
            return outs
        return self._run_remote(jobs)

    def _run_remote(self, jobs: list[Job]) -> list[torch.Tensor]:
        actors = self._actors
        results: list[torch.Tensor | None] = [None] * len(jobs)
        queue = deque(range(len(jobs)))
        idle = deque(range(len(actors)))
        in_flight: dict[ray.ObjectRef, tuple[int, int]] = {}
        while queue or in_flight:
            while queue and idle:
                w, j = idle.popleft(), queue.popleft()
                args = [jobs[j].values.tolist(), list(jobs[j].tasks)]
                self.bytes += nbytes(args)
                in_flight[actors[w].call.remote("_run_rows", args, {"sample": jobs[j].sample})] = (w, j)
                self.workers[w].in_flight = 1
                self._emit(w, "started", jobs[j])
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            w, j = in_flight.pop(ready[0])
            self.workers[w].in_flight = 0
            try:
                out = ray.get(ready[0])
            except RayActorError as exc:
                jobs[j].attempts += 1
                self._emit(w, "died", jobs[j])
                if jobs[j].attempts >= self.max_attempts:
                    raise WorkerLostError(f"workers died {jobs[j].attempts} times on rows {jobs[j].rows} "
                                          f"(tasks {list(jobs[j].tasks)}): giving up") from exc
                queue.appendleft(j)
                self.replace(w, f"died on rows {jobs[j].rows}")
                idle.append(w)
                continue
            self.bytes += nbytes(out)
            results[j] = torch.tensor(out, dtype=torch.float32)
            self._emit(w, "done", jobs[j])
            idle.append(w)
        return [r for r in results if r is not None]

    # ------------------------------------------------------------------ actors
    def replace(self, index: int, reason: str) -> None:
        """Kill actor ``index`` (if alive) and start a replacement the way EvoTorch's ``_parallelize`` does;
        it receives the problem, hence the base spec and the whole log, and rebuilds the centre on first
        use."""
        problem, actors = self.problem, self._actors
        ray.kill(actors[index])
        config = dict(problem._actor_config or {})
        if isinstance(problem._num_gpus_per_actor, int | float):
            config["num_gpus"] = problem._num_gpus_per_actor
        worker = self.workers[index]
        seeds = tuple(derive_seed(index, worker.restarts + 1, k) % 2**32 for k in range(4))
        self.bytes += nbytes(problem)
        actors[index] = EvaluationActor.options(**config).remote(problem, index, seeds, {})
        problem._actor_pool = ActorPool(actors)
        worker.applied = problem.log_end
        worker.restarts += 1
        worker.report = None
        self._emit(index, "restarted", None, reason=reason)

    def status(self) -> list[dict[str, Any]]:
        """One dict per worker: ``id``, ``alive``, ``in_flight``, ``done``, ``checksum``, ``restarts``,
        ``applied``, ``pid``, ``torch_threads`` (the last four from its last report)."""
        out = []
        for i, worker in enumerate(self.workers):
            report = worker.report or {}
            out.append({"id": i, "alive": True, "in_flight": worker.in_flight, "done": worker.rows_done,
                        "checksum": report.get("checksum"), "restarts": worker.restarts,
                        "applied": report.get("applied"), "pid": report.get("pid"),
                        "torch_threads": report.get("torch_threads")})
        return out

    def _emit(self, worker: int, event: str, job: Job | None, **extra: Any) -> None:
        on_progress = self.problem.on_progress
        if on_progress is None:
            return
        rows = list(job.rows) if job is not None else []
        on_progress({"worker": worker, "event": event, "row": rows[0] if rows else None, "rows": rows,
                     "tasks": list(job.tasks) if job is not None else [], **extra})
