"""The per-process state of an ES worker: one model replica, its prompt pools and one environment, built
lazily from the specs (in a Ray actor, or in the driver when there are no actors), and the rollouts of
candidate rows.

A replica's centre is the base model (or the spec's snapshot) plus the update log replayed in order;
``applied`` counts the log records folded in, so a replica built late (a restarted worker) catches up by
replaying what it lacks. Evaluating a row perturbs the weights in place from its seed, runs one episode per
task of the batch and restores the weights exactly (:func:`es_agent.perturbed`).

Overlap (default). The weight work runs in a :class:`~es_agent.perturb_pipeline.PerturbationPipeline`: a row's
perturbation, the previous row's restore and the updates that arrived since run on a background thread while
the row's first env reset waits on the browser; the policy's first forward waits for the weights. The restore
of a row and the updates are deferred to the next row (or to the first use of :attr:`Replica.model`, which
always returns the model at the centre). ``overlap=False`` keeps the plain order (perturb, episodes, restore,
in the caller).

Infrastructure failures (:attr:`EnvSpec.infra_errors`, e.g. a browser crash) are retried once on a rebuilt env
and then raised as :class:`EpisodeInfrastructureError`; they are never scored as a reward of 0.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch

from es_agent import interrupt
from es_agent.errors import EpisodeInfrastructureError, ReplicaStateError, SpecError
from es_agent.noise import derive_seed
from es_agent.perturb_pipeline import PerturbationPipeline
from es_agent.rows import SEED_BOUND, CandidateRow
from es_agent.specs import TINY_PREFIX, AgentSpec, EnvSpec, TaskId
from es_agent.updates import UpdateRecord

if TYPE_CHECKING:  # pragma: no cover
    import gymnasium as gym

    from es_agent.agreement import ReferenceStep
    from es_agent.population import PopulationRunner
    from es_agent.prompts import PromptGenome, PromptPools
    from es_agent.rollout import EpisodeResult

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
REFERENCE_CACHE_SIZE = 64
"""Recorded reference trajectories a replica keeps (the oldest go first): a generation's rows share its
(task, reset seed) pairs, and the next generation draws new seeds."""

def episode_seed(env_seed: int, task_id: TaskId) -> int:
    """The reset seed of ``task_id`` under a generation's env seed: the same for every candidate (common
    random numbers) and independent of the task's position in the batch."""
    if isinstance(task_id, int):
        word = task_id & ((1 << 64) - 1)
    else:
        word = int.from_bytes(hashlib.sha1(str(task_id).encode()).digest()[:8], "little")
    return derive_seed(int(env_seed), word) % SEED_BOUND


@dataclass
class ReplicaStats:
    """Counters of a replica since they were last reported (seconds are wall time in this process)."""

    rows: int = 0
    """Candidate rows evaluated."""
    episodes: int = 0
    """Episodes run."""
    steps: int = 0
    """Env steps (actions) of those episodes."""
    seconds_perturb: float = 0.0
    """Waiting for weights to be perturbed or restored (with overlap: the time the first forward of a row
    waited for the background work, which includes updates deferred to it)."""
    seconds_rollout: float = 0.0
    """In episodes (policy and env)."""
    seconds_update: float = 0.0
    """In applying weight updates in the caller (with overlap, updates deferred to a row's background work
    are in ``seconds_overlapped``)."""
    seconds_overlapped: float = 0.0
    """Weight work (perturb, restore, deferred updates) run on the background thread during env resets."""
    seconds_build: float = 0.0
    """In building the model and the env."""
    infra_retries: int = 0
    """Episodes retried after an infrastructure failure."""
    credit_steps: int = 0
    """Reference steps scored teacher-forced for the reference credit (one scoring forward each, no env)."""
    seconds_credit: float = 0.0
    """In recording reference trajectories and scoring them (:mod:`es_agent.reference_credit`)."""

    def take(self) -> dict[str, float]:
        """The counters as a dict, then zero them."""
        out = asdict(self)
        for name in out:
            setattr(self, name, type(getattr(self, name))())
        return out


def load_agent_model(spec: AgentSpec) -> tuple[torch.nn.Module, Any]:
    """The model and tokenizer an :class:`AgentSpec` names, snapshot loaded, in eval mode."""
    model: torch.nn.Module
    tokenizer: Any
    if spec.model.startswith(TINY_PREFIX):
        from es_agent.tiny import tiny_qwen

        model, tokenizer = tiny_qwen(seed=int(spec.model[len(TINY_PREFIX):]))
        torch.nn.Module.to(model, device=spec.device, dtype=spec.torch_dtype())  # transformers: untyped .to
    else:
        from es_agent.models import load_model

        model, tokenizer = load_model(spec.model, dtype=spec.torch_dtype(), device=spec.device)
    if spec.snapshot is not None:
        from es_agent.models import load_weights

        load_weights(model, spec.snapshot)
    model.eval()
    return model, tokenizer


class Replica:
    """One model replica, its prompt pools and one env (built on first use), at centre ``applied``.

    ``overlap``: hide the weight work behind env resets (module docstring); the results are the same bits.
    """

    def __init__(self, agent: AgentSpec, env: EnvSpec, pools: PromptPools, applied: int, *,
                 overlap: bool = True) -> None:
        started = time.perf_counter()
        if agent.torch_threads is not None:
            torch.set_num_threads(agent.torch_threads)
        self.agent = agent
        self.env_spec = env
        self.pools = pools
        self.applied = int(applied)
        self._model, self.tokenizer = load_agent_model(agent)
        self.weights = PerturbationPipeline(self._model, agent.perturb_kwargs(), overlap=overlap)
        """Where the weights are (centre or a row's member) and the work that moves them."""
        self.policy_config = agent.policy_config()
        self.stats = ReplicaStats(seconds_build=time.perf_counter() - started)
        self.rows_total = 0
        self.last_confidences = torch.empty(0, 0, dtype=torch.float32)
        """The :attr:`~es_agent.rollout.EpisodeResult.confidence` of every episode of the last
        :meth:`run_rows` call, ``(len(rows), len(task_ids))`` like its rewards."""
        self.last_credits: torch.Tensor | None = None
        """The reference credit of every (row, task) of the last :meth:`run_rows` call that asked for it
        (``credit_scale``), ``(len(rows), len(task_ids))``; ``None`` when it did not."""
        self._references: dict[tuple[TaskId, int], list[ReferenceStep]] = {}
        """Recorded reference trajectories by (task, reset seed), the last :data:`REFERENCE_CACHE_SIZE`:
        observations do not depend on the policy, and every row of a generation shares its reset seeds."""
        self._env: gym.Env | None = None
        self._move_failure: BaseException | None = None
        self._population: PopulationRunner | None = None
        """The batched population's runner (es_agent.population), built on its first use."""

    # ------------------------------------------------------------------ centre
    @property
    def model(self) -> torch.nn.Module:
        """The model at the centre: deferred restores and updates are finished first (in this thread)."""
        self.settle()
        return self._model

    def settle(self) -> None:
        """Bring the weights to the centre now (a no-op when they are there)."""
        times = self.weights.settle()
        if times is not None:
            self.stats.seconds_perturb += times.restore + times.perturb
            self.stats.seconds_update += times.update

    def catch_up(self, log: Sequence[UpdateRecord], offset: int) -> None:
        """Apply the records of ``log`` (whose first record has index ``offset``) not applied yet."""
        if self.applied < offset:
            raise ReplicaStateError(f"replica at update {self.applied} cannot replay a log starting at "
                                    f"{offset}: records before it were folded into a snapshot; rebuild it")
        for record in log[self.applied - offset:]:
            self.apply(record)

    def follow(self, records: Sequence[UpdateRecord]) -> None:
        """Apply the records of a log slice not applied yet (each record carries its absolute index); a
        :class:`ReplicaStateError` when the slice starts after this replica's position."""
        for record in records:
            if record.index >= self.applied:
                self.apply(record)

    def apply(self, record: UpdateRecord) -> None:
        """Apply the next record of the update log (its index must be ``applied``)."""
        if record.index != self.applied:
            raise ReplicaStateError(f"replica at update {self.applied} was handed record {record.index}")
        started = time.perf_counter()
        if record.weights is not None:
            # applied at once without overlap
            self.weights.queue_update(record.weights.seeds, record.weights.coeffs)
        else:
            from es_agent.prompts import PromptPools

            self.pools = PromptPools.from_dict(dict(record.pools or {}), source=f"update {record.index}")
        self.applied += 1
        if not self.weights.overlap:
            self.stats.seconds_update += time.perf_counter() - started

    def checksum(self) -> str:
        """:func:`es_agent.weights_checksum` of the whole model."""
        from es_agent.perturb import weights_checksum

        return weights_checksum(self.model)

    # ------------------------------------------------------------------ rollouts
    def run_rows(self, rows: Sequence[CandidateRow], task_ids: Sequence[TaskId], *,
                 sample: bool = False, credit_scale: float | None = None) -> torch.Tensor:
        """Per-task rewards ``(len(rows), len(task_ids))`` of rows, each at its perturbed weights (the
        episodes' confidences are in :attr:`last_confidences`). ``sample`` (training candidates): at a policy
        ``temperature`` above 0 the actions are sampled, with the noise every row shares per task
        (:mod:`es_agent.sampling`); otherwise greedy. ``credit_scale``: also score each row's reference
        credit on every task at its weights and genome (:attr:`last_credits`,
        :mod:`es_agent.reference_credit`), squashed with this scale."""
        self.last_credits = None
        # ---- batched low-rank population (es_agent.population, issue #10 item 6; engineer E): rows act in
        # lockstep per task, one env each, every step ONE batched forward; same rewards as the path below
        from es_agent import population

        if credit_scale is None and population.batched_enabled(self.agent, self.policy_config, len(rows)):
            if self._population is None:
                self._population = population.PopulationRunner(self)
            return self._population.run_rows(rows, task_ids)
        # ---- end of the batched population block
        out = torch.empty(len(rows), len(task_ids), dtype=torch.float32)
        confidences = torch.empty_like(out)
        credits = torch.empty(len(rows), len(task_ids), dtype=torch.float64)
        for i, row in enumerate(rows):
            genome = self.pools.from_indices(row.prompt_ids)
            t0 = time.perf_counter()
            self._move_failure = None
            self.weights.start(row.noise_seed, row.sigma)
            try:
                if not self.weights.overlap:
                    self._account(self.weights.wait(), time.perf_counter() - t0)
                results = self.run_episodes(genome, task_ids, row.env_seed,
                                            weights_ready=self._wait_for_weights, sample=sample)
                out[i] = torch.tensor([float(r.reward) for r in results])
                confidences[i] = torch.tensor([r.confidence for r in results])
                if credit_scale is not None:  # the row's weights are still in place
                    credits[i] = torch.tensor(self.reference_credits(genome, task_ids, row.env_seed,
                                                                     credit_scale), dtype=torch.float64)
            except BaseException:
                self._abort_row()
                raise
            if not self.weights.overlap:
                t0 = time.perf_counter()
                self._account(self.weights.settle(), time.perf_counter() - t0)
            self.stats.rows += 1
            self.rows_total += 1
        self.last_confidences = confidences
        self.last_credits = credits if credit_scale is not None else None
        return out

    def reference_credits(self, genome: PromptGenome, task_ids: Sequence[TaskId], env_seed: int,
                          scale: float) -> list[float]:
        """The reference credit of each task (:func:`es_agent.reference_credit.trajectory_credit`) at the
        weights in place now (a row's member inside :meth:`run_rows`) with ``genome``; each task's reference
        trajectory is recorded on first use with the generation's reset seed."""
        from es_agent.policy import LLMPolicy
        from es_agent.reference_credit import trajectory_credit

        started = time.perf_counter()
        try:
            steps = [self.reference(task, episode_seed(env_seed, task)) for task in task_ids]
            llm = LLMPolicy(self._model, self.tokenizer, genome, self.policy_config)
            out = [trajectory_credit(llm, s, self._answer_ok, scale) for s in steps]
            self.stats.credit_steps += sum(len(s) for s in steps)
            return out
        finally:
            self.stats.seconds_credit += time.perf_counter() - started

    def reference(self, task_id: TaskId, seed: int) -> list[ReferenceStep]:
        """Task ``task_id``'s reference trajectory as :class:`~es_agent.agreement.ReferenceStep` objects,
        replayed once through this replica's env with reset ``seed`` (``env.unwrapped.reference_trajectory``;
        an env without one is a :class:`SpecError`), then from memory."""
        from es_agent.agreement import reference_steps

        key = (task_id, int(seed))
        if key not in self._references:
            def replay(env: gym.Env) -> tuple[list[str], list[dict[str, Any]]]:
                record = getattr(env.unwrapped, "reference_trajectory", None)
                if record is None:
                    raise SpecError(f"the reference credit needs an env that replays reference solutions "
                                    f"(env.unwrapped.reference_trajectory, as WebArenaLite-v0's bundled "
                                    f"tasks); {type(env.unwrapped).__name__} has none")
                return cast("tuple[list[str], list[dict[str, Any]]]", record(task_id, seed=int(seed)))

            actions, observations = self._on_env(f"task {task_id!r}: recording its reference", replay)
            self._references[key] = reference_steps(int(task_id), "", observations, actions)
            while len(self._references) > REFERENCE_CACHE_SIZE:  # a new env seed every generation
                del self._references[next(iter(self._references))]
        return self._references[key]

    def _answer_ok(self, step: ReferenceStep, answer: str) -> bool:
        """Whether ``stop [answer]`` answers the step's task right, by the env's own check."""
        return bool(self.env().unwrapped.answer_accepted(step.task_id, answer))  # type: ignore[attr-defined]

    def _wait_for_weights(self) -> None:
        """Block until the row's weights are in place (the first forward of a row calls this). A failed
        move fails every later call of the row too, so that an episode retry never runs at the wrong
        weights."""
        if self._move_failure is not None:
            raise self._move_failure
        t0 = time.perf_counter()
        try:
            times = self.weights.wait()
        except BaseException as exc:
            self._move_failure = exc
            raise
        self._account(times, time.perf_counter() - t0)

    def _account(self, times: Any, waited: float) -> None:
        if times is None:
            return
        if self.weights.overlap:
            self.stats.seconds_perturb += waited
            self.stats.seconds_overlapped += times.total
        else:
            self.stats.seconds_perturb += times.restore + times.perturb
            self.stats.seconds_update += times.update

    def _abort_row(self) -> None:
        """After an exception in a row: weights back to the centre (or a WeightsStateError chained to the
        row's exception when they cannot be)."""
        try:
            self.weights.wait()
        except Exception as exc:  # the move's own failure: reported with the row's exception
            _log.warning("the weight move of the failed row also failed: %s: %s", type(exc).__name__, exc)
        self.weights.settle()

    def run_tasks(self, genome: PromptGenome, task_ids: Sequence[TaskId], env_seed: int, *,
                  weights_ready: Callable[[], None] | None = None) -> list[float]:
        """Terminal rewards of one episode per task at the current weights (timed as rollout).
        ``weights_ready`` is called before the policy's first forward (the env resets before it)."""
        results = self.run_episodes(genome, task_ids, env_seed, weights_ready=weights_ready)
        return [float(r.reward) for r in results]

    def run_episodes(self, genome: PromptGenome, task_ids: Sequence[TaskId], env_seed: int, *,
                     weights_ready: Callable[[], None] | None = None,
                     sample: bool = False) -> list[EpisodeResult]:
        """:meth:`run_tasks` with the whole episodes. ``sample``: the actions are drawn at the policy's
        ``temperature`` (training rows), seeded with each episode's reset seed, which every candidate of a
        generation shares; otherwise greedy (scoring)."""
        from es_agent.policy import LLMPolicy

        llm = LLMPolicy(self._model, self.tokenizer, genome, self.policy_config)
        policy: Any = llm if weights_ready is None else _AfterWeights(llm, weights_ready)
        started = time.perf_counter()
        results = []
        try:
            for task in task_ids:
                seed = episode_seed(env_seed, task)
                llm.set_sample_seed(seed if sample else None)
                results.append(self.episode(policy, task, seed))
            return results
        finally:
            self.stats.seconds_rollout += time.perf_counter() - started

    def centre_trajectories(self, task_ids: Sequence[TaskId], prompt_ids: Sequence[int], env_seed: int,
                            ) -> list[tuple[str, EpisodeResult]]:
        """One episode per task at the centre with the prompt genome ``prompt_ids``, reset with the
        generation's :func:`episode_seed`: per task, the goal of its first observation and the episode (steps
        kept, for reflection). Not timed in :attr:`stats`, not retried."""
        from es_agent.policy import LLMPolicy
        from es_agent.rollout import run_episode

        model = self.model
        genome = self.pools.from_indices(tuple(prompt_ids))
        out = []
        for task in task_ids:
            policy = _GoalRecorder(LLMPolicy(model, self.tokenizer, genome, self.policy_config))
            result = run_episode(self.env(), policy, seed=episode_seed(env_seed, task),
                                 options={"task_id": task}, max_steps=self.env_spec.max_steps)
            out.append((policy.goal, result))
        return out

    def episode(self, policy: Any, task_id: TaskId, seed: int) -> EpisodeResult:
        """One episode; an infrastructure failure is retried once on a rebuilt env, then raised."""
        from es_agent.rollout import run_episode

        result = self._on_env(f"task {task_id!r}: the episode", lambda env: run_episode(
            env, policy, seed=seed, options={"task_id": task_id}, max_steps=self.env_spec.max_steps))
        self.stats.episodes += 1
        self.stats.steps += int(result.steps)
        return result

    def _on_env(self, what: str, work: Callable[[gym.Env], _T]) -> _T:
        """``work(env)``; an infrastructure failure is retried once on a rebuilt env, then raised as an
        :class:`EpisodeInfrastructureError` that starts with ``what``."""
        for attempt in (1, 2):
            env = self.env()
            interrupt.check()  # a Ctrl-C whose KeyboardInterrupt was lost in a (re)build of the browser
            try:
                return work(env)
            except Exception as exc:  # narrowed just below: only infrastructure errors are retried
                if not self.env_spec.is_infrastructure_error(exc):
                    raise
                self.close_env()
                interrupt.raise_if_requested(exc)  # the browser died of the user's Ctrl-C: stop, do not retry
                if attempt == 2:
                    raise EpisodeInfrastructureError(
                        f"{what} failed twice for an infrastructure reason ({type(exc).__name__}: {exc}); "
                        f"the env was rebuilt in between") from exc
                self.stats.infra_retries += 1
                _log.warning("%s: %s: %s; rebuilding the env and retrying once", what, type(exc).__name__,
                             exc)
        raise AssertionError("unreachable")  # pragma: no cover

    def env(self) -> gym.Env:
        """The env, built on first use."""
        if self._env is None:
            started = time.perf_counter()
            self._env = self.env_spec.make()
            self.stats.seconds_build += time.perf_counter() - started
        return self._env

    def close_env(self) -> None:
        """Close and drop the env (the next episode builds a new one)."""
        env, self._env = self._env, None
        if env is not None:
            try:
                env.close()
            except Exception as exc:  # a crashed browser may fail to close; the env is dropped either way
                _log.warning("closing a failed env raised %s: %s", type(exc).__name__, exc)

    def close(self) -> None:
        """Release the env (the model goes with the object) after finishing any weight work in flight."""
        self.weights.close()
        runner = self._population
        if runner is not None:  # the batched population's extra envs (es_agent.population)
            self._population = None
            runner.close()
        self.close_env()


def replica_at(replica: Replica | None, agent: AgentSpec, env: EnvSpec, pools: PromptPools,
               records: Sequence[UpdateRecord], end: int) -> Replica:
    """A replica at version ``end`` of an update log whose retained ``records`` end there: ``replica``
    caught up when it can be, else (``None``, or it predates the records) a new one built at the records'
    base with ``pools`` (the old one closed)."""
    base = records[0].index if records else int(end)
    if replica is not None and replica.applied < base:
        replica.close()
        replica = None
    if replica is None:
        replica = Replica(agent, env, pools, base)
    replica.follow(records)
    if replica.applied != end:
        raise ReplicaStateError(f"replica at update {replica.applied} after the log, which ends at {end}")
    return replica


class _GoalRecorder:
    """Wraps a policy and remembers the goal of the episode's first observation."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.goal = policy, ""

    def reset(self) -> None:
        self.goal = ""
        self.policy.reset()

    def act(self, obs: Mapping[str, Any]) -> str:
        if not self.goal:
            self.goal = str(obs.get("goal", ""))
        return str(self.policy.act(obs))

    @property
    def last_info(self) -> Any:
        return getattr(self.policy, "last_info", None)


class _AfterWeights:
    """A policy whose forwards wait for ``ready()`` first (``reset`` and attributes pass through)."""

    def __init__(self, policy: Any, ready: Callable[[], None]) -> None:
        self._policy = policy
        self._ready = ready

    def reset(self, *args: Any, **kwargs: Any) -> None:
        self._policy.reset(*args, **kwargs)

    def act(self, obs: Any) -> str:
        self._ready()
        return str(self._policy.act(obs))

    def act_batch(self, observations: Sequence[Any]) -> list[str]:
        self._ready()
        return list(self._policy.act_batch(observations))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


def evals_from_rewards(rewards: torch.Tensor, eval_data_length: int) -> torch.Tensor:
    """EvoTorch evals ``(N, 1 + eval_data_length)`` float32 from per-task rewards ``(N, T)``: fitness (the
    mean over tasks, computed here and nowhere else) first, then the per-task rewards, NaN beyond ``T``
    (read back with :func:`split_evals`)."""
    n, t = rewards.shape
    if t > eval_data_length:
        raise SpecError(f"{t} tasks do not fit in eval data of length {eval_data_length} (max_batch_tasks)")
    out = torch.full((n, 1 + eval_data_length), float("nan"), dtype=torch.float32)
    out[:, 0] = rewards.to(torch.float64).mean(dim=1).to(torch.float32)
    out[:, 1:1 + t] = rewards.to(torch.float32)
    return out


def split_evals(evals: torch.Tensor, n_tasks: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fitness ``(N,)`` and the per-task rewards ``(N, n_tasks)`` of evals laid out by
    :func:`evals_from_rewards` (views of ``evals``, same dtype)."""
    if evals.ndim != 2 or not 1 <= n_tasks <= evals.shape[1] - 1:
        raise SpecError(f"evals of shape {tuple(evals.shape)} cannot hold the rewards of {n_tasks} task(s)")
    return evals[:, 0], evals[:, 1:1 + n_tasks]
