"""A batched population in low-rank mode, EGGROLL-style: K members act in lockstep, one env each, and every
step of all of them is ONE batched forward under :func:`es_agent.perturb.perturbed_batch`.

Semantics. Member ``k`` runs the episode that :func:`es_agent.rollout.run_episode` would run with an
:class:`~es_agent.policy.LLMPolicy` of its own genome under ``perturbed(model, seed_k, scale_k,
mode="lowrank")``: the same prompts (the policy's own prompt building and history), the same candidate actions
and the same choice (the candidate of best mean token log-probability, first on ties), the same
:class:`~es_agent.rollout.EpisodeResult` (trajectory, errors, ``max_steps`` truncation, rewards). Only the
model work is shared: row ``k`` of each batched forward is member ``k``
(:func:`es_agent.decoding.prefill_batch` and :func:`es_agent.decoding.score_candidates_batch`); scores agree
with the sequential path up to float rounding (tests/es_agent/test_population.py checks actions and rewards).
Members whose episode ended drop out: the hooks are re-entered for the members left (their factors are
regenerated from the seeds) and the batch cache keeps their rows, so the group structure (one equal group per
member) stays valid.

Only constrained decoding by candidate scoring is batched (``PolicyConfig(decoding="constrained",
constrained_method="score")``, the default); other policies run member by member on the worker's per-row path.

Env exceptions propagate (never a reward of 0); :class:`PopulationRunner` retries an infrastructure failure
once for the whole group on rebuilt envs and then raises
:class:`~es_agent.worker.EpisodeInfrastructureError`, as the worker's per-row path does for one episode.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from es_agent import interrupt
from es_agent.actions_space import build_candidates
from es_agent.decoding import (
    BatchState,
    action_kind,
    add_kind_bias,
    best_index,
    prefill_batch,
    score_candidates_batch,
    score_margin,
)
from es_agent.rollout import EpisodeResult, StepRecord, _digest, _head

if TYPE_CHECKING:  # pragma: no cover
    import gymnasium as gym

    from es_agent.perturb import ParamSpec
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptGenome
    from es_agent.rows import CandidateRow
    from es_agent.specs import AgentSpec, TaskId
    from es_agent.worker import Replica

_log = logging.getLogger(__name__)

DEFAULT_GROUP = 8
"""Members per lockstep group in :class:`PopulationRunner` (the K of one batched forward; one env each)."""


@dataclass(frozen=True)
class Member:
    """One population member of a lockstep group."""

    genome: PromptGenome
    """Its prompt genome."""
    seed: int
    """Noise seed of its low-rank perturbation."""
    scale: float
    """Signed perturbation scale (0: the centre)."""


def batchable(config: PolicyConfig) -> bool:
    """Whether the batched path reproduces this policy's choices (constrained decoding by scoring, by mean
    token log-probability: the batched scorer's combination, greedy; other ``scoring`` and a ``temperature``
    above 0 run on the per-row path)."""
    return (config.decoding == "constrained" and config.constrained_method == "score"
            and config.scoring == "mean"  # issue #13 (engineer F): PolicyConfig.scoring
            and not config.temperature)  # sampled training actions run on the per-row path


def batched_enabled(agent: AgentSpec, config: PolicyConfig, n_rows: int) -> bool:
    """Whether :meth:`Replica.run_rows <es_agent.worker.Replica.run_rows>` takes the batched path: low-rank
    mode, a batchable policy, more than one row, and a CUDA replica (on these CPUs one env per member costs a
    browser each, and a batched forward is no faster than K sequential ones: benchmarks/bench_gpu.py)."""
    return (agent.mode == "lowrank" and batchable(config) and n_rows > 1
            and torch.device(agent.device).type == "cuda")


# ----------------------------------------------------------------------------------------- one member

class _MemberPolicy:
    """One member's :class:`LLMPolicy`, driven a step at a time: its own prompt building, history and stats,
    with the model work done outside (batched). Mirrors ``LLMPolicy.act_batch`` for slot 0 in constrained
    ``score`` mode (the test suite compares the two)."""

    def __init__(self, policy: LLMPolicy) -> None:
        if not batchable(policy.config):
            raise ValueError(f"the batched population needs constrained decoding by scoring, got "
                             f"decoding={policy.config.decoding!r}, "
                             f"constrained_method={policy.config.constrained_method!r}")
        self.policy = policy
        self._step: tuple[Any, list[str], str] | None = None

    def prepare(self, obs: Mapping[str, Any]) -> tuple[list[int], list[list[int]]]:
        """Prompt tokens and encoded candidates of the next step on ``obs``."""
        from es_agent.prompts import HistoryEntry

        p = self.policy
        history = p._histories.setdefault(0, [])
        error = str(obs.get("last_action_error") or "")
        if history and error and not history[-1].error:
            history[-1] = HistoryEntry(history[-1].action, error)
        prompt = p._build_prompt(obs, 0)
        cands = build_candidates(prompt.axtree, str(obs.get("goal", "")), p.config.candidates)
        if not cands:
            raise ValueError("no candidate actions: enable extra_actions or stop answers in CandidateConfig")
        fmt = p.genome.action_format
        ids = p.tokenizer([c + fmt.action_suffix for c in cands], add_special_tokens=False)["input_ids"]
        encoded = [list(seq) + ([] if fmt.action_suffix else [p._end_ids[0]]) for seq in ids]
        self._step = (prompt, cands, str(obs.get("goal", "")))
        return list(prompt.ids), encoded

    def finish(self, scores: Sequence[float], seconds: float) -> str:
        """Pick the best-scored candidate of the prepared step, record it as the policy does, return it."""
        from es_agent.prompts import HistoryEntry

        if self._step is None:
            raise RuntimeError("finish() without prepare()")
        prompt, cands, goal = self._step
        self._step = None
        bias = self.policy.config.kind_bias
        if bias:  # as the per-row path adds it (PolicyConfig.kind_bias), then the lexical priors
            scores = add_kind_bias(scores, [action_kind(c) for c in cands], bias)
        scores = self.policy._with_lexical_priors(scores, cands, prompt.axtree, goal,
                                                  len(self.policy._histories[0]))
        best = best_index(scores)
        action = cands[best]
        p = self.policy
        p._histories[0].append(HistoryEntry(action))
        p.last_info[0] = {"mode": "constrained/score", "parse_failed": False, "candidates": len(cands),
                          "score": scores[best], "margin": score_margin(scores, best),
                          "prompt_tokens": len(prompt.ids),
                          "omitted_axtree_lines": prompt.omitted_lines, "seconds": seconds, "batched": True}
        p.stats["acts"] += 1
        p.stats["prompt_tokens"] += len(prompt.ids)
        p.stats["truncated_observations"] += prompt.omitted_lines > 0
        p.stats["candidates"] += len(cands)
        p.stats["seconds"] += seconds
        return action


class _Episode:
    """One member's episode, advanced a step at a time with exactly the bookkeeping of
    :func:`es_agent.rollout.run_episode` (reset, trajectory, errors, termination, ``max_steps``)."""

    def __init__(self, env: gym.Env, policy: LLMPolicy, seed: int | None, options: Mapping[str, Any] | None,
                 max_steps: int | None) -> None:
        self.started = time.perf_counter()
        self.env, self.policy, self.max_steps = env, policy, max_steps
        policy.reset()
        t0 = time.perf_counter()
        obs, info = env.reset(seed=seed, options=dict(options) if options is not None else None)
        self.env_seconds, self.policy_seconds = time.perf_counter() - t0, 0.0
        task_id = info.get("task_id", (options or {}).get("task_id"))
        self.result = EpisodeResult(task_id=task_id, reward=0.0, steps=0, terminated=False, truncated=False,
                                    info=dict(info))
        self.obs = obs
        self.done = False
        if max_steps is not None and max_steps <= 0:
            self._end(truncated=True)

    def step(self, action: str, policy_seconds: float) -> None:
        """Send ``action`` (chosen on :attr:`obs`) to the env and record the step."""
        from es_agent.rollout import step_info

        self.policy_seconds += policy_seconds
        parse_failed, margin = step_info(self.policy)
        t0 = time.perf_counter()
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        self.env_seconds += time.perf_counter() - t0
        obs, result = self.obs, self.result
        error = str(next_obs.get("last_action_error") or "")
        step = result.steps
        result.trajectory.append(StepRecord(
            step=step, url=str(obs.get("url", "")), obs_digest=_digest(str(obs.get("axtree", ""))),
            obs_head=_head(str(obs.get("axtree", ""))), action=action, error=error, reward=float(reward),
            parse_failed=parse_failed, margin=margin))
        if parse_failed:
            result.errors.append(f"step {step}: policy parse failure: {action[:200]!r}")
        if error:
            result.errors.append(f"step {step}: {error}")
        result.reward += float(reward)
        result.steps += 1
        result.terminated, result.truncated, result.info = bool(terminated), bool(truncated), dict(info)
        self.obs = next_obs
        if terminated or truncated:
            self._end(truncated=result.truncated)
        elif self.max_steps is not None and result.steps >= self.max_steps:
            self._end(truncated=True)

    def _end(self, truncated: bool) -> None:
        result = self.result
        result.truncated = truncated
        result.wall_seconds = time.perf_counter() - self.started
        result.policy_seconds, result.env_seconds = self.policy_seconds, self.env_seconds
        if result.task_id is None:
            result.task_id = result.info.get("task_id")
        self.done = True


# ------------------------------------------------------------------------------------------ the group

class LockstepPopulation:
    """Runs the episodes of K members (one env each) in lockstep, each step ONE batched forward.

    ``model`` is shared and never written (low-rank noise lives in forward hooks). ``rank`` and ``params``
    are those of :func:`es_agent.perturb.perturbed_batch`.
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any, config: PolicyConfig, *, rank: int,
                 params: ParamSpec = None) -> None:
        if not batchable(config):
            raise ValueError(f"the batched population needs constrained decoding by scoring, got "
                             f"decoding={config.decoding!r}, "
                             f"constrained_method={config.constrained_method!r}")
        self.model, self.tokenizer, self.config = model, tokenizer, config
        self.rank, self.params = rank, params
        self.seconds_perturb = 0.0
        """Seconds spent installing the members' hooks (factor generation), summed over runs."""
        self.forwards = 0
        """Batched forwards run (two per lockstep step: prefill and scoring)."""
        self.candidates = 0
        """Candidate actions scored, summed over runs."""

    def run(self, envs: Sequence[gym.Env], members: Sequence[Member], *, reset_seeds: Sequence[int | None],
            options: Sequence[Mapping[str, Any] | None], max_steps: int | None = None) -> list[EpisodeResult]:
        """One episode per member: member ``k`` in ``envs[k]``, reset with ``reset_seeds[k]`` and
        ``options[k]``."""
        from es_agent.perturb import perturbed_batch
        from es_agent.policy import LLMPolicy

        k = len(members)
        if not k or not len(envs) == len(reset_seeds) == len(options) == k:
            raise ValueError(f"need one env, seed and options per member: {k} members, {len(envs)} envs, "
                             f"{len(reset_seeds)} seeds, {len(options)} options")
        if max_steps is not None and max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, got {max_steps}")
        policies = [LLMPolicy(self.model, self.tokenizer, m.genome, self.config) for m in members]
        drivers = [_MemberPolicy(p) for p in policies]
        episodes = [_Episode(env, p, s, o, max_steps)
                    for env, p, s, o in zip(envs, policies, reset_seeds, options, strict=True)]
        hooked: list[int] = []
        state: BatchState | None = None
        with ExitStack() as stack:
            while True:
                active = [b for b in range(k) if not episodes[b].done]
                if not active:
                    break
                if active != hooked:  # a member finished: the groups must match the rows again
                    t0 = time.perf_counter()
                    stack.close()
                    stack.enter_context(perturbed_batch(
                        self.model, [members[b].seed for b in active], [members[b].scale for b in active],
                        mode="lowrank", rank=self.rank, params=self.params))
                    self.seconds_perturb += time.perf_counter() - t0
                    if state is not None:
                        state = state.select(self.model, [hooked.index(b) for b in active])
                    hooked = active
                t0 = time.perf_counter()
                with torch.inference_mode():
                    steps = [drivers[b].prepare(episodes[b].obs) for b in active]
                    state = prefill_batch(self.model, [ids for ids, _ in steps], state)
                    scores = score_candidates_batch(self.model, state, [c for _, c in steps])
                self.forwards += 2
                self.candidates += sum(len(c) for _, c in steps)
                seconds = (time.perf_counter() - t0) / len(active)
                actions = [drivers[b].finish(s, seconds) for b, s in zip(active, scores, strict=True)]
                for b, action in zip(active, actions, strict=True):
                    episodes[b].step(action, seconds)
        return [e.result for e in episodes]


# --------------------------------------------------------------------------------- worker integration

class PopulationRunner:
    """The batched path of a worker :class:`~es_agent.worker.Replica`: its rows in lockstep groups of up to
    ``group`` members per task, one env per member (the replica's own env is member 0's; the others are built
    from its :class:`~es_agent.specs.EnvSpec` on first use and kept)."""

    def __init__(self, replica: Replica, group: int = DEFAULT_GROUP) -> None:
        if group < 1:
            raise ValueError(f"group must be >= 1, got {group}")
        agent = replica.agent
        if agent.mode != "lowrank" or agent.rank is None:
            raise ValueError(f"the batched population needs AgentSpec.mode='lowrank', got {agent.mode!r}")
        self.replica = replica
        self.group = group
        self.population = LockstepPopulation(replica.model, replica.tokenizer, replica.policy_config,
                                             rank=agent.rank, params=agent.param_spec())
        self._extra: list[gym.Env | None] = []
        weakref.finalize(self, _close_all, self._extra)

    def env(self, member: int) -> gym.Env:
        """The env of ``member`` within a group (built on first use)."""
        if member == 0:
            return self.replica.env()
        while len(self._extra) < member:
            self._extra.append(None)
        env = self._extra[member - 1]
        if env is None:
            t0 = time.perf_counter()
            env = self._extra[member - 1] = self.replica.env_spec.make()
            self.replica.stats.seconds_build += time.perf_counter() - t0
        return env

    def close(self) -> None:
        """Close the envs this runner built (not the replica's own)."""
        _close_all(self._extra)

    def run_rows(self, rows: Sequence[CandidateRow], task_ids: Sequence[TaskId]) -> torch.Tensor:
        """Per-task rewards ``(len(rows), len(task_ids))``, as :meth:`Replica.run_rows` returns them."""
        from es_agent.worker import episode_seed

        replica = self.replica
        self.population.model = replica.model  # at the centre: deferred updates are applied first
        out = torch.empty(len(rows), len(task_ids), dtype=torch.float32)
        confidences = torch.empty_like(out)
        members = [Member(replica.pools.from_indices(r.prompt_ids), r.noise_seed, r.sigma) for r in rows]
        for start in range(0, len(rows), self.group):
            chunk = range(start, min(start + self.group, len(rows)))
            for j, task in enumerate(task_ids):
                seeds = [episode_seed(rows[i].env_seed, task) for i in chunk]
                results = self._run_group([members[i] for i in chunk], task, seeds)
                for i, result in zip(chunk, results, strict=True):
                    out[i, j] = float(result.reward)
                    confidences[i, j] = result.confidence
        replica.stats.rows += len(rows)
        replica.rows_total += len(rows)
        replica.last_confidences = confidences
        return out

    def _run_group(self, members: list[Member], task: TaskId, seeds: list[int]) -> list[EpisodeResult]:
        """One lockstep group on one task; an infrastructure failure is retried once on rebuilt envs."""
        from es_agent.worker import EpisodeInfrastructureError

        replica = self.replica
        for attempt in (1, 2):
            envs = [self.env(b) for b in range(len(members))]
            interrupt.check()  # a Ctrl-C whose KeyboardInterrupt was lost in a (re)build of the browsers
            perturb_before = self.population.seconds_perturb
            started = time.perf_counter()
            try:
                results = self.population.run(envs, members, reset_seeds=seeds,
                                              options=[{"task_id": task}] * len(members),
                                              max_steps=replica.env_spec.max_steps)
            except Exception as exc:  # narrowed just below: only infrastructure errors are retried
                if not replica.env_spec.is_infrastructure_error(exc):
                    raise
                replica.close_env()
                self.close()
                interrupt.raise_if_requested(exc)  # the browser died of the user's Ctrl-C: stop, do not retry
                if attempt == 2:
                    raise EpisodeInfrastructureError(
                        f"task {task!r}: a lockstep group of {len(members)} members failed twice for an "
                        f"infrastructure reason ({type(exc).__name__}: {exc}); the envs were rebuilt in "
                        "between") from exc
                replica.stats.infra_retries += 1
                _log.warning("task %r: %s: %s; rebuilding the group's envs and retrying once", task,
                             type(exc).__name__, exc)
                continue
            finally:
                perturb = self.population.seconds_perturb - perturb_before
                replica.stats.seconds_perturb += perturb
                replica.stats.seconds_rollout += time.perf_counter() - started - perturb
            replica.stats.episodes += len(results)
            replica.stats.steps += sum(int(r.steps) for r in results)
            return results
        raise AssertionError("unreachable")  # pragma: no cover


def _close_all(envs: list[gym.Env | None]) -> None:
    for i, env in enumerate(envs):
        envs[i] = None
        if env is not None:
            try:
                env.close()
            except Exception as exc:  # a crashed browser may fail to close; the env is dropped either way
                _log.warning("closing a population env raised %s: %s", type(exc).__name__, exc)
