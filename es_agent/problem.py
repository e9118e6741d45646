"""``AgentProblem``: the EvoTorch Problem whose solutions are compact candidate rows of a web agent.

A solution is a float64 row ``(noise seed, signed sigma, env seed, prompt id per slot)``
(:mod:`es_agent.rows`); its fitness is the mean terminal reward of one episode per task of the generation's
task batch, with the weights ``theta + sigma * eps(seed)`` and the prompt genome of its ids. Evals: column 0
the fitness, columns ``1..len(task_batch)`` the per-task rewards, NaN beyond (:mod:`es_agent.problem_base`).

Workers. Each Ray actor (and the driver itself when ``num_actors`` is ``None``: the same code path) holds one
:class:`~es_agent.worker.Replica` (model, tokenizer, env), built lazily on first use and never pickled, so the
Problem travels in kilobytes. The centre moves by an update log of small records
(:class:`~es_agent.update_log.UpdateLog`; ``push_update``: a :class:`~es_agent.updates.WeightUpdate`;
``set_prompt_pools``: new pools). Before an evaluation ``_sync_before`` sends each actor the records it lacks
(tracked per actor by log position); after it ``_sync_after`` collects each worker's weight checksum, timings
and rows done, and raises :class:`ReplicaDivergenceError` when live replicas disagree (with each other or with
``expected_checksum``). A worker created later replays the whole log (it travels in the pickle).

Dispatch (:mod:`es_agent.dispatch`). With actors, rows go out ``rows_per_piece`` at a time (default 1), one
piece in flight per actor; a piece whose actor died is queued again and the actor replaced, so no evaluation
is lost. ``last_bytes_exchanged`` counts the pickled bytes of everything sent to and from actors in the last
evaluation (sync data, pieces, results, reports, replacement Problems).

EvoTorch 0.6.1: ``num_actors=1`` is refused and ``seed()`` is defined (:mod:`es_agent.problem_base`); fitness
is float32 (``eval_dtype``); ``_fill`` makes valid random rows.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import ray
import torch
from evotorch import SolutionBatch

from es_agent.dispatch import ActorDispatcher, Job, ProgressFn, nbytes
from es_agent.errors import ReplicaDivergenceError, SpecError, WorkerLostError
from es_agent.problem_base import AgentProblemBase
from es_agent.rows import FIXED_COLUMNS, SEED_BOUND, CandidateRow, check_rows, encode_rows
from es_agent.specs import AgentSpec, EnvSpec, TaskId
from es_agent.update_log import UpdateLog, check_agreement
from es_agent.updates import UpdateRecord, WeightUpdate
from es_agent.worker import Replica, ReplicaStats

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.prompts import PromptPools

__all__ = ["AgentProblem", "ProgressFn", "ReplicaDivergenceError", "WorkerLostError"]

_REPORT_TIMINGS = ("seconds_perturb", "seconds_rollout", "seconds_update", "seconds_build", "seconds_credit")
_T = TypeVar("_T")


class AgentProblem(AgentProblemBase):
    """Candidate rows of a web agent, evaluated by whole episodes on a task batch (see the module docstring).

    ``max_batch_tasks`` sizes the eval data (per-task rewards); ``task_ids`` (optional) is the task set the
    batches must come from. ``rows_per_piece`` rows go to an actor at a time; a piece is given up after
    ``max_piece_attempts`` worker deaths. ``fill_sigma`` is the sigma of rows made by ``_fill`` (EvoTorch's
    own sampling; the co-evolution searcher writes its own rows). ``num_actors``: ``None`` evaluates in this
    process; ``1`` is refused; an EvoTorch string such as ``"max"`` that resolves to one actor also means
    in-process evaluation. An ``agent`` with ``dtype="auto"`` is resolved here, in the driver
    (:meth:`AgentSpec.resolved`), so that all workers build the same weights.
    """

    def __init__(self, agent: AgentSpec, env: EnvSpec, *, max_batch_tasks: int = 8,
                 task_ids: Sequence[TaskId] | None = None, num_actors: int | str | None = None,
                 actor_config: Mapping[str, Any] | None = None, rows_per_piece: int = 1,
                 max_piece_attempts: int = 3, fill_sigma: float = 0.0, seed: int | None = None,
                 credit_scale: float | None = None) -> None:
        if rows_per_piece < 1 or max_piece_attempts < 1:
            raise SpecError("rows_per_piece and max_piece_attempts must be >= 1")
        if credit_scale is not None and not (isinstance(credit_scale, int | float)
                                             and not isinstance(credit_scale, bool)
                                             and math.isfinite(credit_scale) and credit_scale > 0):
            raise SpecError(f"credit_scale must be a finite number > 0 (or None: off), got {credit_scale!r}")
        agent = agent.resolved()  # "auto" dtype chosen once, here: every replica gets the same weights
        pools = agent.load_pools()
        super().__init__(agent, env, solution_length=FIXED_COLUMNS + len(pools.slots), dtype=torch.float64,
                         max_batch_tasks=max_batch_tasks, task_ids=task_ids, num_actors=num_actors,
                         actor_config=actor_config, seed=seed)
        self.rows_per_piece = int(rows_per_piece)
        """Rows sent to an actor at a time."""
        self.max_piece_attempts = int(max_piece_attempts)
        """Worker deaths on one piece after which :class:`WorkerLostError` is raised."""
        self.fill_sigma = float(fill_sigma)
        """Sigma of the rows made by ``_fill``."""
        self.credit_scale = None if credit_scale is None else float(credit_scale)
        """When set, a generation's candidates also measure their reference credit on every task
        (:mod:`es_agent.reference_credit`, margins squashed with this scale): :attr:`last_credits`."""
        self.expected_checksum: str | None = None
        """Checksum the centre must have after the whole log (set by a driver that keeps its own replica)."""
        self.on_progress: ProgressFn | None = None
        """Progress callback (driver only, never pickled)."""
        self.last_bytes_exchanged = 0
        """Pickled bytes sent to and from actors during the last evaluation."""
        self.checksums_agree: bool | None = None
        """Whether the live replicas' checksums agreed after the last evaluation (``None``: none live)."""
        self._updates = UpdateLog(pools)
        self._dispatcher: ActorDispatcher | None = None

    # ================================================================== EvoTorch hooks
    @property
    def _nonserialized_attribs(self) -> list[str]:
        return [*super()._nonserialized_attribs, "on_progress", "_dispatcher"]

    def _get_cloned_state(self, *, memo: dict) -> dict:
        # Remote replicas keep no state worth collecting (they are rebuilt from the log), and a dead actor
        # must not stop the Problem from being pickled into its replacement: skip EvoTorch's actor round trip.
        actors = self._actors
        self._actors = None
        try:
            return super()._get_cloned_state(memo=memo)
        finally:
            self._actors = actors

    def _fill(self, values: torch.Tensor) -> None:
        """Random valid rows: fresh noise seeds, ``+-fill_sigma``, one env seed, uniform prompt ids."""
        n, g = values.shape[0], self._generator
        cols = [torch.randint(0, SEED_BOUND, (n,), generator=g).double(),
                (torch.randint(0, 2, (n,), generator=g) * 2 - 1).double() * self.fill_sigma,
                torch.randint(0, SEED_BOUND, (1,), generator=g).double().expand(n)]
        cols += [torch.randint(0, size, (n,), generator=g).double() for size in self.pools.sizes().values()]
        values[:] = torch.stack(cols, dim=1).to(values.device)

    def _parallelize(self) -> None:
        fresh = self._actors is None
        super()._parallelize()
        if fresh and self._actors is not None:
            self._dispatcher = ActorDispatcher(self, len(self._actors), max_attempts=self.max_piece_attempts)
            self._dispatcher.pending += len(self._actors) * nbytes(self)

    def _sync_before(self) -> bool:
        if not self.is_main:
            return False
        dispatch = self._dispatch
        dispatch.begin()
        if self._actors is not None:
            dispatch.sync(lambda since: self._make_sync_data_for_actors(since=since), self._updates.offset)
        return True  # without actors the one replica is here: it catches up in _run_rows

    def _sync_after(self) -> None:
        if not self.is_main:
            return
        dispatch = self._dispatch
        reports = ([self._make_sync_data_for_main()] if self._actors is None else dispatch.collect_reports())
        self.last_bytes_exchanged = dispatch.bytes
        self._use_sync_data_from_actors(reports)

    def _make_sync_data_for_actors(self, since: int | None = None) -> dict[str, Any] | None:
        """The log records from position ``since`` (default: the least any actor has) as
        ``{"start": int, "records": [...]}``; ``None`` when there is nothing new."""
        if since is None:
            since = min((w.applied for w in self._dispatch.workers), default=self._updates.offset)
        return self._updates.sync_data(since)

    def _use_sync_data_from_main(self, received: Mapping[str, Any]) -> None:
        """Worker side: append the new records to this copy's log and apply them to the replica if built."""
        self._updates.extend(int(received["start"]), received["records"])
        if self._replica is not None:
            self._replica.catch_up(self._updates.records, self._updates.offset)

    def _make_sync_data_for_main(self) -> dict[str, Any]:
        """Worker side: weight checksum (after catching up), log position, timings and rows of the replica."""
        rep = self._replica
        if rep is not None:
            rep.catch_up(self._updates.records, self._updates.offset)
        stats = rep.stats.take() if rep is not None else ReplicaStats().take()
        return {"pid": os.getpid(), "torch_threads": torch.get_num_threads(), "built": rep is not None,
                "applied": rep.applied if rep else None,
                "checksum": rep.checksum() if rep else None, "rows_total": rep.rows_total if rep else 0,
                **stats}

    def _use_sync_data_from_actors(self, received: list) -> None:
        """Driver side: record the reports; raise :class:`ReplicaDivergenceError` on disagreeing checksums."""
        self._dispatch.record_reports(received)
        try:
            self.checksums_agree = check_agreement(received, self.log_end, self.expected_checksum)
        except ReplicaDivergenceError:
            self.checksums_agree = False
            raise

    def _evaluate_all(self, batch: SolutionBatch) -> None:
        # Not EvoTorch's split into actor pieces: the dispatcher sends pieces itself (retries, replacement).
        self._evaluate_batch(batch)

    def _batch_rewards(self, batch: SolutionBatch) -> torch.Tensor:
        return self._batch_outcomes(batch)[0]

    def _batch_outcomes(self, batch: SolutionBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        values = torch.tensor(batch.values.tolist(), dtype=torch.float64).reshape(len(batch), -1)
        rewards, confidences, self.last_credits = self._evaluate_values(values, self.task_batch, sample=True)
        return rewards, confidences

    # ================================================================== driver API
    @property
    def pools(self) -> PromptPools:
        """The current prompt pools (:class:`~es_agent.prompts.PromptPools`)."""
        return self._updates.pools

    @property
    def log_end(self) -> int:
        """Number of update records since the start of the run (the centre's version)."""
        return self._updates.end

    @property
    def update_log(self) -> tuple[UpdateRecord, ...]:
        """The records after the base (spec model or snapshot)."""
        return self._updates.records

    def push_update(self, generation: int, update: WeightUpdate, *,
                    expected_checksum: str | None = None) -> UpdateRecord | None:
        """Append a weight update ``theta += sum_i coeffs[i] * eps(seeds[i])``; replicas apply it before the
        next evaluation. Empty updates are not logged. ``expected_checksum``: the centre's checksum after
        it (checked against every worker's report)."""
        record = self._updates.push_weights(generation, update)
        self.expected_checksum = expected_checksum
        return record

    def set_prompt_pools(self, pools: PromptPools | Mapping[str, Any], *,
                         generation: int | None = None) -> UpdateRecord:
        """Replace the prompt pools (same slots; variants may change); travels with the weight updates."""
        from es_agent.prompts import PromptPools

        new = pools if isinstance(pools, PromptPools) else PromptPools.from_dict(dict(pools))
        return self._updates.push_pools(new, generation)

    def rebase(self, snapshot: str) -> None:
        """Fold the whole log into ``snapshot`` (a safetensors file holding the current centre, e.g. from
        :meth:`save_centre`): workers built from now on load it instead of replaying the log."""
        self.agent = replace(self.agent, snapshot=str(snapshot))
        self._updates.rebase()

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
                      task_ids: Sequence[TaskId] | None = None, *, sample: bool = True) -> torch.Tensor:
        """Per-task rewards ``(N, len(tasks))`` of candidate rows (float64 tensor or ``CandidateRow``s), as
        a generation's candidates are scored (``sample``: their actions drawn at the policy's temperature,
        greedy when it is 0; ``False``: greedy)."""
        values = encode_rows(rows) if not isinstance(rows, torch.Tensor) else rows.to(torch.float64)
        tasks = self.task_batch if task_ids is None else self._check_tasks(task_ids, "task_ids")
        self._check_rows(values)  # before any actor starts
        return self._with_sync(lambda: self._evaluate_values(values, tasks, sample=sample))[0]

    def evaluate_centre(self, task_ids: Sequence[TaskId], prompt_ids: Sequence[int], *,
                        env_seed: int = 0) -> dict[TaskId, float]:
        """Reward per task of the unperturbed centre (sigma 0) with the prompt genome ``prompt_ids``; with
        actors the tasks are spread over the workers."""
        tasks = self._check_tasks(task_ids, "task_ids", limit=False)
        values = torch.tensor([[0.0, 0.0, float(env_seed), *map(float, prompt_ids)]], dtype=torch.float64)
        self._check_rows(values)
        self._parallelize()
        if self._actors is None:
            jobs = [Job([], values, tasks)]
        else:
            jobs = [Job([], values, (t,)) for t in tasks]
        outs = self._with_sync(lambda: self._run_jobs(jobs))
        rewards = [float(v) for job, out in zip(jobs, outs, strict=True) for v in out[0, :len(job.tasks)]]
        return dict(zip(tasks, rewards, strict=True))

    def worker_status(self) -> list[dict[str, Any]]:
        """One dict per worker: ``id``, ``alive``, ``in_flight``, ``done``, ``checksum``, ``restarts``,
        ``applied``, ``pid``, ``torch_threads`` (its intra-op threads; the searcher's ``workers`` status
        key)."""
        return self._dispatch.status()

    def _reports(self) -> list[dict[str, Any]]:
        return [w.report for w in self._dispatch.workers if w.report is not None]

    @property
    def last_env_steps(self) -> int:
        """Env steps (actions) of the last evaluation's episodes, summed over workers."""
        return sum(int(r.get("steps", 0)) for r in self._reports())

    @property
    def last_credit_steps(self) -> int:
        """Reference steps scored teacher-forced for the reference credit in the last evaluation, summed over
        workers (0 without :attr:`credit_scale`)."""
        return sum(int(r.get("credit_steps", 0)) for r in self._reports())

    @property
    def last_timings(self) -> dict[str, float]:
        """Seconds in perturb/restore, rollouts, updates, builds and the reference credit, summed over
        workers, last evaluation."""
        reports = self._reports()
        return {name: float(sum(r[name] for r in reports)) for name in _REPORT_TIMINGS}

    def restart_worker(self, index: int) -> None:
        """Replace worker ``index`` by a fresh one that rebuilds the centre from the base and the log (in
        process: rebuild the local replica)."""
        if self._actors is None:
            if self._replica is not None:
                self._replica.close()
            self._replica = None
            return
        self._dispatch.replace(index, "restart requested")

    @property
    def local_replica(self) -> Replica:
        """The driver's own replica, caught up with the log (only without actors)."""
        if self._actors is not None:
            raise SpecError("this problem evaluates on actors; the driver holds no replica")
        return self._ensure_replica()

    # ================================================================== worker side
    def _run_rows(self, values: Sequence[Sequence[float]], task_ids: Sequence[TaskId], *,
                  sample: bool = False) -> list[list[float]]:
        """Per row, the reward of each task and then the confidence of each episode
        (:attr:`~es_agent.rollout.EpisodeResult.confidence`), in this process's replica (an actor, or the
        driver without actors), then, for training candidates of a problem with :attr:`credit_scale`, the
        reference credit of each task. Plain lists in and out: they pickle in a fraction of a tensor's bytes
        (floats keep seeds exact). ``sample``: training candidates, whose actions are drawn at the policy's
        temperature (:meth:`Replica.run_rows <es_agent.worker.Replica.run_rows>`)."""
        rep = self._ensure_replica()
        rows = check_rows(values, list(rep.pools.sizes().values()), rep.pools.slot_names)
        scale = self.credit_scale if sample else None
        rewards = rep.run_rows(rows, tuple(task_ids), sample=sample, credit_scale=scale)
        parts = [rewards.to(torch.float64), rep.last_confidences.to(torch.float64)]
        if scale is not None:
            assert rep.last_credits is not None
            parts.append(rep.last_credits)
        return torch.cat(parts, dim=1).tolist()

    def _ensure_replica(self) -> Replica:
        rep, log = self._replica, self._updates
        if rep is not None and rep.applied < log.offset:
            rep.close()
            rep = None
        if rep is None:
            rep = self._replica = Replica(self.agent, self.env_spec, log.base_pools, log.offset)
        rep.catch_up(log.records, log.offset)
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
    @property
    def _dispatch(self) -> ActorDispatcher:
        """The driver's dispatcher (made on first use: it is not pickled, and clones start without one)."""
        if self._dispatcher is None:
            workers = 1 if self._actors is None else len(self._actors)
            self._dispatcher = ActorDispatcher(self, workers, max_attempts=self.max_piece_attempts)
        return self._dispatcher

    def _check_rows(self, values: torch.Tensor) -> None:
        check_rows(values, list(self.pools.sizes().values()), self.pools.slot_names)

    def _with_sync(self, fn: Callable[[], _T]) -> _T:
        self._parallelize()
        self._sync_before()
        out = fn()
        self._sync_after()
        return out

    def _evaluate_values(self, values: torch.Tensor, tasks: tuple[TaskId, ...], *, sample: bool
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Per-task rewards, episode confidences and (training candidates with :attr:`credit_scale`)
        reference credits, each ``(len(values), len(tasks))``; the credits are ``None`` when not measured."""
        self._check_rows(values)
        step = self.rows_per_piece
        jobs = [Job(list(range(s, min(s + step, len(values)))), values[s:s + step], tasks, sample=sample)
                for s in range(0, len(values), step)]
        out = torch.cat(self._run_jobs(jobs), dim=0)
        credit = sample and self.credit_scale is not None
        parts = 3 if credit else 2
        n = len(tasks)
        if out.shape[1] != parts * n:
            raise SpecError(f"a worker returned {out.shape[1]} values per row for {n} task(s); expected "
                            f"{parts * n} (the rewards, then the confidences"
                            f"{', then the reference credits' if credit else ''})")
        return out[:, :n], out[:, n:2 * n], out[:, 2 * n:] if credit else None

    def _run_jobs(self, jobs: list[Job]) -> list[torch.Tensor]:
        return self._dispatch.run(jobs, lambda job: self._run_rows(job.values.tolist(), job.tasks,
                                                                   sample=job.sample))
