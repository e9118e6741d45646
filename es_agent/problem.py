"""``AgentProblem``: the EvoTorch Problem whose solutions are compact candidate rows of a web agent.

A solution is a float64 row ``(noise seed, signed sigma, env seed, prompt id per slot)``
(:mod:`es_agent.rows`); its fitness is the mean terminal reward of one episode per task of the generation's
task batch, with the weights ``theta + sigma * eps(seed)`` and the prompt genome of its ids. Per-task rewards
go to EvoTorch's eval data (columns ``1..len(task_batch)``; NaN beyond).

Workers. Each Ray actor (and the driver itself when ``num_actors`` is ``None``: the same code path) holds one
:class:`~es_agent.worker.Replica` (model, tokenizer, env), built lazily on first use and never pickled, so the
Problem travels in kilobytes. The centre moves by an update log of small records (``push_update``: seeds and
coeffs; ``set_prompt_pools``: new pools). Before an evaluation ``_sync_before`` sends each actor the records
it lacks (tracked per actor by log position); after it ``_sync_after`` collects each worker's weight checksum,
timings and rows done, and raises :class:`ReplicaDivergenceError` when live replicas disagree (with each other
or with ``expected_checksum``). A worker created later replays the whole log (it travels in the pickle).

Fault tolerance. With actors, rows go out a piece at a time (``rows_per_piece``, default 1), one piece in
flight per actor, collected with ``ray.wait``. When an actor dies (``RayActorError``), its piece is queued
again and the actor is replaced like EvoTorch's ``_parallelize`` makes one; the piece then runs on whichever
worker is free first, so no evaluation is lost. ``last_bytes_exchanged`` counts the pickled bytes of
everything sent to and from actors in the last evaluation (sync data, pieces, results, reports, replacement
Problems).

EvoTorch 0.6.1: ``num_actors=1`` would silently mean no actors, so it is refused (use ``None`` or ``>= 2``);
``seed()`` is defined (actors call it); fitness is float32 (``eval_dtype``); ``_fill`` makes valid random
rows.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import ray
import torch
from evotorch import Problem, SolutionBatch
from evotorch.core import EvaluationActor
from ray.exceptions import RayActorError
from ray.util import ActorPool

from es_agent.errors import ReplicaDivergenceError, WorkerLostError
from es_agent.noise import derive_seed
from es_agent.rows import FIXED_COLUMNS, CandidateRow, encode_rows
from es_agent.specs import AgentSpec, EnvSpec, SpecError, TaskId, check_task_ids
from es_agent.updates import UpdateRecord, WeightUpdate
from es_agent.worker import Replica, ReplicaStats, check_rows, evals_from_rewards

ProgressFn = Callable[[dict[str, Any]], None]
"""``on_progress(event)`` with ``event = {"worker", "event", "row", "rows", "tasks"}``; ``event`` is one of
``"started"``, ``"done"``, ``"died"``, ``"restarted"`` (the latter with a ``"reason"``)."""

_REPORT_TIMINGS = ("seconds_perturb", "seconds_rollout", "seconds_update", "seconds_build")


@dataclass
class _Job:
    rows: list[int]
    """Row indices of the batch (empty for centre evaluations)."""
    values: torch.Tensor
    """Candidate rows ``(k, 3 + n_slots)`` float64."""
    tasks: tuple[TaskId, ...]
    attempts: int = 0


class AgentProblem(Problem):
    """Candidate rows of a web agent, evaluated by whole episodes on a task batch (see the module docstring).

    ``max_batch_tasks`` sizes the eval data (per-task rewards); ``task_ids`` (optional) is the task set the
    batches must come from. ``rows_per_piece`` rows go to an actor at a time. ``fill_sigma`` is the sigma of
    rows made by ``_fill`` (EvoTorch's own sampling; the co-evolution distribution samples its own rows).
    ``num_actors``: ``None`` evaluates in this process; ``1`` is refused; an EvoTorch string such as ``"max"``
    that resolves to one actor also means in-process evaluation. An ``agent`` with ``dtype="auto"`` is
    resolved here, in the driver (:meth:`AgentSpec.resolved`), so that all workers build the same weights.
    """

    def __init__(self, agent: AgentSpec, env: EnvSpec, *, max_batch_tasks: int = 8,
                 task_ids: Sequence[TaskId] | None = None, num_actors: int | str | None = None,
                 actor_config: Mapping[str, Any] | None = None, rows_per_piece: int = 1,
                 max_piece_attempts: int = 3, fill_sigma: float = 0.0, seed: int | None = None) -> None:
        if num_actors == 1:
            raise SpecError("num_actors=1 would silently mean no actors in EvoTorch 0.6.1: use None "
                            "(evaluate in this process) or 2 or more")
        if not isinstance(max_batch_tasks, int) or max_batch_tasks < 1:
            raise SpecError(f"max_batch_tasks must be a positive integer, got {max_batch_tasks!r}")
        if rows_per_piece < 1 or max_piece_attempts < 1:
            raise SpecError("rows_per_piece and max_piece_attempts must be >= 1")
        agent = agent.resolved()  # "auto" dtype chosen once, here: every replica gets the same weights
        pools = agent.load_pools()
        super().__init__("max", solution_length=FIXED_COLUMNS + len(pools.slots), dtype=torch.float64,
                         eval_dtype=torch.float32, eval_data_length=max_batch_tasks, num_actors=num_actors,
                         actor_config=None if actor_config is None else dict(actor_config), seed=seed)
        self.agent = agent
        self.env_spec = env
        self.rows_per_piece = int(rows_per_piece)
        self.max_piece_attempts = int(max_piece_attempts)
        self.fill_sigma = float(fill_sigma)
        self.expected_checksum: str | None = None
        """Checksum the centre must have after the whole log (set by a driver that keeps its own replica)."""
        self.on_progress: ProgressFn | None = None
        """Progress callback (driver only, never pickled)."""
        self._known_tasks = None if task_ids is None else frozenset(check_task_ids(task_ids, what="task_ids"))
        self._task_batch: tuple[TaskId, ...] | None = None
        self._base_pools = pools
        self._pools = pools
        self._log: list[UpdateRecord] = []
        self._log_offset = 0
        self._replica: Replica | None = None
        self.last_bytes_exchanged = 0
        self.checksums_agree: bool | None = None
        self._reset_bookkeeping(1)

    # ================================================================== EvoTorch hooks
    @property
    def _nonserialized_attribs(self) -> list[str]:
        return [*super()._nonserialized_attribs, "_replica", "on_progress"]

    def _get_cloned_state(self, *, memo: dict) -> dict:
        # Remote replicas keep no state worth collecting (they are rebuilt from the log), and a dead actor
        # must not stop the Problem from being pickled into its replacement: skip EvoTorch's actor round trip.
        actors, self._actors = self._actors, None
        try:
            return super()._get_cloned_state(memo=memo)
        finally:
            self._actors = actors

    def seed(self, seed: int | None) -> None:
        """Seed the Problem's own generator (EvoTorch's actors call this; 0.6.1's Problem lacks it)."""
        self.manual_seed(seed)

    def _fill(self, values: torch.Tensor) -> None:
        """Random valid rows: fresh noise seeds, ``+-fill_sigma``, one env seed, uniform prompt ids."""
        n, g = values.shape[0], self._generator
        cols = [torch.randint(0, 2**31, (n,), generator=g).double(),
                (torch.randint(0, 2, (n,), generator=g) * 2 - 1).double() * self.fill_sigma,
                torch.randint(0, 2**31, (1,), generator=g).double().expand(n)]
        cols += [torch.randint(0, size, (n,), generator=g).double() for size in self._pools.sizes().values()]
        values[:] = torch.stack(cols, dim=1).to(values.device)

    def _parallelize(self) -> None:
        fresh = self._actors is None
        super()._parallelize()
        if fresh and self._actors is not None:
            self._reset_bookkeeping(len(self._actors))
            self._bytes_pending += len(self._actors) * _nbytes(self)

    def _sync_before(self) -> bool:
        if not self.is_main:
            return False
        self._bytes, self._bytes_pending = self._bytes_pending, 0
        if self._actors is None:
            return True  # the one replica is here: it catches up in _run_rows; _sync_after gets its report
        for i in range(len(self._actors)):
            if self._applied[i] < self._log_offset:
                self._replace_actor(i, "its replica predates the snapshot")
        refs = {}
        for i, actor in enumerate(self._actors):
            data = self._make_sync_data_for_actors(since=self._applied[i])
            if data is not None:
                self._bytes += _nbytes(data)
                refs[i] = actor.call.remote("_use_sync_data_from_main", [data], {})
        for i, ref in refs.items():
            try:
                ray.get(ref)
                self._applied[i] = self.log_end
            except RayActorError:
                self._replace_actor(i, "died while syncing")
        return True

    def _sync_after(self) -> None:
        if not self.is_main:
            return
        if self._actors is None:
            reports: list[dict[str, Any] | None] = [self._make_sync_data_for_main()]
        else:
            refs = [actor.call.remote("_make_sync_data_for_main", [], {}) for actor in self._actors]
            reports = []
            for i, ref in enumerate(refs):
                try:
                    report = ray.get(ref)
                    self._bytes += _nbytes(report)
                except RayActorError:
                    self._replace_actor(i, "died before reporting")
                    report = None
                reports.append(report)
        self.last_bytes_exchanged = self._bytes
        self._use_sync_data_from_actors(reports)

    def _make_sync_data_for_actors(self, since: int | None = None) -> dict[str, Any] | None:
        """The log records from position ``since`` (default: the least any actor has) as
        ``{"start": int, "records": [...]}``; ``None`` when there is nothing new."""
        if since is None:
            since = min(self._applied) if self._applied else self._log_offset
        since = max(since, self._log_offset)
        if since >= self.log_end:
            return None
        return {"start": since, "records": self._log[since - self._log_offset:]}

    def _use_sync_data_from_main(self, received: Mapping[str, Any]) -> None:
        """Worker side: append the new records to this copy's log and apply them to the replica if built."""
        self._extend_log(int(received["start"]), received["records"])
        if self._replica is not None:
            self._replica.catch_up(self._log, self._log_offset)

    def _make_sync_data_for_main(self) -> dict[str, Any]:
        """Worker side: weight checksum (after catching up), log position, timings and rows of the replica."""
        rep = self._replica
        if rep is not None:
            rep.catch_up(self._log, self._log_offset)
        stats = rep.stats.take() if rep is not None else ReplicaStats().take()
        return {"pid": os.getpid(), "torch_threads": torch.get_num_threads(), "built": rep is not None,
                "applied": rep.applied if rep else None,
                "checksum": rep.checksum() if rep else None, "rows_total": rep.rows_total if rep else 0,
                **stats}

    def _use_sync_data_from_actors(self, received: list) -> None:
        """Driver side: record the reports; raise :class:`ReplicaDivergenceError` on disagreeing checksums."""
        self._reports = list(received)
        for i, report in enumerate(received):
            if report is not None:
                self._rows_done[i] += int(report["rows"])
        live = [(i, r) for i, r in enumerate(received) if r is not None and r["checksum"] is not None]
        sums = {r["checksum"] for _, r in live}
        lagging = [i for i, r in live if r["applied"] != self.log_end]
        wrong = self.expected_checksum is not None and bool(sums - {self.expected_checksum})
        self.checksums_agree = None if not live else (len(sums) == 1 and not lagging and not wrong)
        if self.checksums_agree is False:
            detail = ", ".join(f"worker {i}: update {r['applied']}, checksum {r['checksum'][:12]}"
                               for i, r in live)
            expected = f"; expected {self.expected_checksum[:12]}" if self.expected_checksum else ""
            raise ReplicaDivergenceError(
                f"model replicas disagree after update {self.log_end} ({detail}{expected}); "
                "restart the diverged worker(s) with restart_worker(i)")

    def _evaluate_all(self, batch: SolutionBatch) -> None:
        values = torch.tensor(batch.values.tolist(), dtype=torch.float64).reshape(len(batch), -1)
        rewards = self._evaluate_values(values, self.task_batch)
        batch.set_evals(evals_from_rewards(rewards, self.eval_data_length))

    def _evaluate_batch(self, batch: SolutionBatch) -> None:
        self._evaluate_all(batch)

    # ================================================================== driver API
    @property
    def task_batch(self) -> tuple[TaskId, ...]:
        """The generation's task batch (set by the searcher with :meth:`set_task_batch`)."""
        if self._task_batch is None:
            raise SpecError("no task batch: call problem.set_task_batch(task_ids) before evaluating")
        return self._task_batch

    def set_task_batch(self, task_ids: Sequence[TaskId]) -> None:
        """Set the tasks every candidate of the next evaluations runs (at most ``eval_data_length``)."""
        self._task_batch = self._check_tasks(task_ids, "task batch")

    @property
    def pools(self) -> Any:
        """The current prompt pools (:class:`~es_agent.prompts.PromptPools`)."""
        return self._pools

    @property
    def log_end(self) -> int:
        """Number of update records since the start of the run (the centre's version)."""
        return self._log_offset + len(self._log)

    @property
    def update_log(self) -> tuple[UpdateRecord, ...]:
        """The records after the base (spec model or snapshot)."""
        return tuple(self._log)

    def push_update(self, generation: int, update: WeightUpdate, *,
                    expected_checksum: str | None = None) -> UpdateRecord | None:
        """Append a weight update ``theta += sum_i coeffs[i] * eps(seeds[i])``; replicas apply it before the
        next evaluation. Empty updates are not logged. ``expected_checksum``: the centre's checksum after
        it (checked against every worker's report)."""
        if not isinstance(update, WeightUpdate):
            raise SpecError(f"push_update takes a WeightUpdate, got {type(update).__name__}")
        self.expected_checksum = expected_checksum
        if update.is_empty:
            return None
        record = UpdateRecord(self.log_end, int(generation), weights=update)
        self._log.append(record)
        return record

    def set_prompt_pools(self, pools: Any, *, generation: int | None = None) -> UpdateRecord:
        """Replace the prompt pools (same slots; variants may change); travels with the weight updates."""
        from es_agent.prompts import PromptPools

        new = pools if isinstance(pools, PromptPools) else PromptPools.from_dict(pools)
        if new.slot_names != self._pools.slot_names:
            raise SpecError(f"new pools have slots {list(new.slot_names)}, the problem's rows have "
                            f"{list(self._pools.slot_names)}: slots cannot change during a run")
        gen = generation if generation is not None else (self._log[-1].generation if self._log else 0)
        record = UpdateRecord(self.log_end, int(gen), pools=new.to_dict())
        self._log.append(record)
        self._pools = new
        return record

    def rebase(self, snapshot: str) -> None:
        """Fold the whole log into ``snapshot`` (a safetensors file holding the current centre, e.g. from
        :meth:`save_centre`): workers built from now on load it instead of replaying the log."""
        self.agent = replace(self.agent, snapshot=str(snapshot))
        self._base_pools = self._pools
        self._log_offset, self._log = self.log_end, []

    def save_centre(self, path: str) -> str:
        """Save the current centre (safetensors) from worker 0 or the local replica; returns its checksum.
        With actors the file is written on that actor's machine."""
        self._parallelize()
        self._sync_before()
        if self._actors is None:
            checksum = self._save_replica(path)
        else:
            checksum = ray.get(self._actors[0].call.remote("_save_replica", [str(path)], {}))
        self._sync_after()
        return checksum

    def evaluate_rows(self, rows: torch.Tensor | Sequence[CandidateRow],
                      task_ids: Sequence[TaskId] | None = None) -> torch.Tensor:
        """Per-task rewards ``(N, len(tasks))`` of candidate rows (float64 tensor or ``CandidateRow``s)."""
        values = encode_rows(rows) if not isinstance(rows, torch.Tensor) else rows.to(torch.float64)
        tasks = self.task_batch if task_ids is None else self._check_tasks(task_ids, "task_ids")
        check_rows(values, list(self._pools.sizes().values()), self._pools.slot_names)
        return self._with_sync(lambda: self._evaluate_values(values, tasks))

    def evaluate_centre(self, task_ids: Sequence[TaskId], prompt_ids: Sequence[int], *,
                        env_seed: int = 0) -> dict[TaskId, float]:
        """Reward per task of the unperturbed centre (sigma 0) with the prompt genome ``prompt_ids``; with
        actors the tasks are spread over the workers."""
        tasks = self._check_tasks(task_ids, "task_ids", limit=False)
        values = torch.tensor([[0.0, 0.0, float(env_seed), *map(float, prompt_ids)]], dtype=torch.float64)
        check_rows(values, list(self._pools.sizes().values()), self._pools.slot_names)
        self._parallelize()
        if self._actors is None:
            jobs = [_Job([], values, tasks)]
        else:
            jobs = [_Job([], values, (t,)) for t in tasks]
        outs = self._with_sync(lambda: self._dispatch(jobs))
        rewards = [float(v) for out in outs for v in out.reshape(-1)]
        return dict(zip(tasks, rewards, strict=True))

    def per_task_rewards(self, batch: SolutionBatch) -> torch.Tensor:
        """``(N, len(task_batch))`` rewards of an evaluated batch (from its eval data)."""
        return batch.evals[:, 1:1 + len(self.task_batch)].clone()

    def worker_status(self) -> list[dict[str, Any]]:
        """One dict per worker: ``id``, ``alive``, ``in_flight``, ``done``, ``checksum``, ``restarts``,
        ``applied``, ``pid``, ``torch_threads`` (its intra-op threads; the searcher's ``workers`` status
        key)."""
        out = []
        for i, report in enumerate(self._reports):
            report = report or {}
            out.append({"id": i, "alive": True, "in_flight": self._in_flight[i], "done": self._rows_done[i],
                        "checksum": report.get("checksum"), "restarts": self._restarts[i],
                        "applied": report.get("applied"), "pid": report.get("pid"),
                        "torch_threads": report.get("torch_threads")})
        return out

    @property
    def last_timings(self) -> dict[str, float]:
        """Seconds in perturb/restore, rollouts, updates and builds, summed over workers, last evaluation."""
        reports = [r for r in self._reports if r is not None]
        return {name: float(sum(r[name] for r in reports)) for name in _REPORT_TIMINGS}

    def restart_worker(self, index: int) -> None:
        """Replace worker ``index`` by a fresh one that rebuilds the centre from the base and the log (in
        process: rebuild the local replica)."""
        if self._actors is None:
            if self._replica is not None:
                self._replica.close()
            self._replica = None
            return
        self._replace_actor(index, "restart requested")

    @property
    def local_replica(self) -> Replica:
        """The driver's own replica, caught up with the log (only without actors)."""
        if self._actors is not None:
            raise SpecError("this problem evaluates on actors; the driver holds no replica")
        return self._ensure_replica()

    def close(self) -> None:
        """Kill the actors and close the local replica's env."""
        if self.is_main and self._actors is not None:
            self.kill_actors()
        if self._replica is not None:
            self._replica.close()

    # ================================================================== worker side
    def _run_rows(self, values: Sequence[Sequence[float]], task_ids: Sequence[TaskId]) -> list[list[float]]:
        """Per-task rewards of rows, in this process's replica (an actor, or the driver without actors).
        Plain lists in and out: they pickle in a fraction of a tensor's bytes (floats keep seeds exact)."""
        rep = self._ensure_replica()
        rows = check_rows(values, list(rep.pools.sizes().values()), rep.pools.slot_names)
        return rep.run_rows(rows, tuple(task_ids)).tolist()

    def _ensure_replica(self) -> Replica:
        rep = self._replica
        if rep is not None and rep.applied < self._log_offset:
            rep.close()
            rep = None
        if rep is None:
            rep = self._replica = Replica(self.agent, self.env_spec, self._base_pools, self._log_offset)
        rep.catch_up(self._log, self._log_offset)
        return rep

    def _save_replica(self, path: str) -> str:
        from es_agent.models import save_weights

        rep = self._ensure_replica()
        save_weights(rep.model, path)
        return rep.checksum()

    def _debug_diverge_replica(self, seed: int, coeff: float) -> None:
        """Test and debugging hook: move this worker's weights off the centre without logging it."""
        from es_agent.perturb import apply_update

        apply_update(self._ensure_replica().model, [int(seed)], [float(coeff)], **self.agent.perturb_kwargs())

    # ================================================================== internals
    def _reset_bookkeeping(self, n: int) -> None:
        self._applied = [self.log_end] * n
        self._restarts = [0] * n
        self._reports: list[dict[str, Any] | None] = [None] * n
        self._rows_done = [0] * n
        self._in_flight = [0] * n
        self._bytes = 0
        self._bytes_pending = 0

    def _check_tasks(self, task_ids: Sequence[TaskId], what: str, limit: bool = True) -> tuple[TaskId, ...]:
        tasks = check_task_ids(task_ids, what=what)
        if limit and len(tasks) > self.eval_data_length:
            raise SpecError(f"{what} has {len(tasks)} tasks; this problem keeps at most max_batch_tasks="
                            f"{self.eval_data_length} per-task rewards")
        if self._known_tasks is not None:
            unknown = [t for t in tasks if t not in self._known_tasks]
            if unknown:
                raise SpecError(f"{what}: unknown task id(s) {unknown[:5]} (not in the problem's task_ids)")
        return tasks

    def _extend_log(self, start: int, records: Sequence[UpdateRecord]) -> None:
        if start > self.log_end:
            raise ReplicaDivergenceError(f"worker log ends at {self.log_end}, received records from {start}")
        for record in records[self.log_end - start:]:
            if record.index != self.log_end:
                raise ReplicaDivergenceError(
                    f"update log out of order: expected record {self.log_end}, got {record.index}")
            self._log.append(record)
            if record.kind == "pools":
                from es_agent.prompts import PromptPools

                self._pools = PromptPools.from_dict(dict(record.pools or {}), source=f"update {record.index}")

    def _with_sync(self, fn: Callable[[], Any]) -> Any:
        self._parallelize()
        self._sync_before()
        out = fn()
        self._sync_after()
        return out

    def _evaluate_values(self, values: torch.Tensor, tasks: tuple[TaskId, ...]) -> torch.Tensor:
        check_rows(values, list(self._pools.sizes().values()), self._pools.slot_names)
        step = self.rows_per_piece
        jobs = [_Job(list(range(s, min(s + step, len(values)))), values[s:s + step], tasks)
                for s in range(0, len(values), step)]
        return torch.cat(self._dispatch(jobs), dim=0)

    def _dispatch(self, jobs: list[_Job]) -> list[torch.Tensor]:
        if self._actors is None:
            outs = []
            for job in jobs:
                self._emit(0, "started", job)
                self._in_flight[0] = 1
                outs.append(torch.tensor(self._run_rows(job.values.tolist(), job.tasks)))
                self._in_flight[0] = 0
                self._emit(0, "done", job)
            return outs
        return self._dispatch_remote(jobs)

    def _dispatch_remote(self, jobs: list[_Job]) -> list[torch.Tensor]:
        results: list[torch.Tensor | None] = [None] * len(jobs)
        queue = deque(range(len(jobs)))
        idle = deque(range(len(self._actors)))
        in_flight: dict[ray.ObjectRef, tuple[int, int]] = {}
        while queue or in_flight:
            while queue and idle:
                w, j = idle.popleft(), queue.popleft()
                args = [jobs[j].values.tolist(), list(jobs[j].tasks)]
                self._bytes += _nbytes(args)
                in_flight[self._actors[w].call.remote("_run_rows", args, {})] = (w, j)
                self._in_flight[w] = 1
                self._emit(w, "started", jobs[j])
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            w, j = in_flight.pop(ready[0])
            self._in_flight[w] = 0
            try:
                out = ray.get(ready[0])
            except RayActorError as exc:
                jobs[j].attempts += 1
                self._emit(w, "died", jobs[j])
                if jobs[j].attempts >= self.max_piece_attempts:
                    raise WorkerLostError(f"workers died {jobs[j].attempts} times on rows {jobs[j].rows} "
                                          f"(tasks {list(jobs[j].tasks)}): giving up") from exc
                queue.appendleft(j)
                self._replace_actor(w, f"died on rows {jobs[j].rows}")
                idle.append(w)
                continue
            self._bytes += _nbytes(out)
            results[j] = torch.tensor(out, dtype=torch.float32)
            self._emit(w, "done", jobs[j])
            idle.append(w)
        return [r for r in results if r is not None]

    def _replace_actor(self, index: int, reason: str) -> None:
        """Kill actor ``index`` (if alive) and start a replacement the way EvoTorch's ``_parallelize`` does;
        it receives this Problem, hence the base spec and the whole log, and rebuilds the centre on first
        use."""
        ray.kill(self._actors[index])
        config = dict(self._actor_config or {})
        if isinstance(self._num_gpus_per_actor, int | float):
            config["num_gpus"] = self._num_gpus_per_actor
        seeds = tuple(derive_seed(index, self._restarts[index] + 1, k) % 2**32 for k in range(4))
        self._bytes += _nbytes(self)
        self._actors[index] = EvaluationActor.options(**config).remote(self, index, seeds, {})
        self._actor_pool = ActorPool(self._actors)
        self._applied[index] = self.log_end
        self._restarts[index] += 1
        self._reports[index] = None
        self._emit(index, "restarted", None, reason=reason)

    def _emit(self, worker: int, event: str, job: _Job | None, **extra: Any) -> None:
        if self.on_progress is None:
            return
        rows = list(job.rows) if job is not None else []
        self.on_progress({"worker": worker, "event": event, "row": rows[0] if rows else None, "rows": rows,
                          "tasks": list(job.tasks) if job is not None else [], **extra})


def _nbytes(obj: Any) -> int:
    """Pickled size of ``obj`` as Ray ships it."""
    return len(ray.cloudpickle.dumps(obj))
