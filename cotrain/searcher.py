"""``CoEvolutionES``: the EvoTorch search algorithm of prompt-parameter co-evolution.

One generation (``step()`` wraps ``_step()``, EvoTorch style; the problem is any
:class:`~cotrain.protocols.SearchProblem`, e.g. ``AgentProblem``):

1. draw the generation's task batch from the training tasks (a generator seeded by ``(seed, generation)``);
   every candidate runs the same tasks with the same env seed (common random numbers);
2. as EvoTorch's Gaussian searchers do: sample the candidate rows into the population
   (``distribution.sample_into(batch.access_values())``, seeded by the distribution's base seed and
   generation; it returns the generation's env seed, which the searcher keeps), ``problem.evaluate`` the
   batch (after ``set_task_batch``), and read back the rows from ``batch.access_values()`` and the fitness
   (evals column 0) and per-task rewards (columns ``1..T``) from ``batch.access_evals()``;
3. shape the per-task rewards and update the distribution (``distribution.step``), and send the weight update
   (a :class:`~es_agent.updates.WeightUpdate`) to the workers with ``problem.push_update``;
4. let the optional :class:`~cotrain.prompt_evolution.PromptEvolver` grow or prune the pools (sent with
   ``problem.set_prompt_pools``);
5. every ``eval_every`` generations, evaluate the centre (sigma 0, most probable prompts) on held-out tasks;
   with ``eval_at_start``, the first generation of a run also evaluates the start (the generation-0 centre:
   base weights, most probable genome of the generation-0 distribution) before it samples anything, on the
   same tasks with the same env seed (``start_eval``; no training random stream is drawn from);
6. report the status keys of ``docs/CONTRACTS.md`` (EvoTorch loggers attached to ``log_hook`` receive them)
   and keep :attr:`last_record`, the generation's entry of the run's update log.

Status keys beyond the contract: ``best_genome`` (slot -> id of the most probable variant), ``task_batch``,
``env_seed``, ``update_size`` (seeds in the weight update), ``update_empty`` (bool) and, only when the update
is empty, ``update_empty_reason`` (e.g. every fitness ties), ``rewards_tied`` (bool: every candidate got the
same reward on every task of the batch, so the rewards carry no signal; a non-empty update in such a
generation came from the confidence tie-break alone, :mod:`cotrain.shaping`), ``pool_sizes``,
``pool_changes`` (count), ``seconds_prompt_evolution``, ``credit_steps`` and ``seconds_credit`` (the
reference steps scored teacher-forced for ``es.shaping.reference_credit``, summed over workers, and their
seconds; 0 when it is off); ``centre_eval`` (present only in the generations
that evaluate the centre) also carries ``reward_mean``, per-task ``rewards`` and the ``generation`` whose
centre it scored; ``start_eval`` (generation 1 of a run with ``eval_at_start`` only) is the same dict for the
start (``generation`` 0). ``reward_mean/max/min`` are over the evals' fitness column.

Ablations come from the distribution's config (``evolve_weights`` / ``evolve_prompts``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from evotorch.algorithms.searchalgorithm import SearchAlgorithm

from cotrain.distribution import CoEvolutionDistribution
from cotrain.errors import ConfigError, DistributionError
from cotrain.prompt_evolution import FailureReport, PoolChange, PromptEvolver
from cotrain.protocols import SearchProblem
from cotrain.shaping import ShapingConfig
from es_agent.worker import split_evals

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.prompts import PromptPools

TaskId = int | str
OPTIONAL_STATUS_KEYS = frozenset({"centre_eval", "start_eval", "update_empty_reason"})
"""Status keys present only in the generations that report them (``centre_eval``: on the ``eval_every``
schedule; ``start_eval``: generation 1 with ``eval_at_start``; ``update_empty_reason``: when the weight update
is empty)."""
_TASK_TAG = 0x7461736B  # "task": the task-batch stream, apart from the distribution's and the evolver's


def rewards_tied(rewards: torch.Tensor) -> bool:
    """Whether every candidate (row) got the same rewards on every task (column): no reward signal."""
    return bool((rewards == rewards[:1]).all()) if rewards.numel() else True


def draw_task_batch(train_tasks: Sequence[TaskId], k: int, seed: int, generation: int) -> tuple[TaskId, ...]:
    """``k`` distinct tasks of ``train_tasks`` for ``generation`` (1-based), a pure function of the seeds."""
    if not 1 <= k <= len(train_tasks):
        raise ConfigError(f"env.tasks_per_generation: cannot draw {k} of {len(train_tasks)} training tasks")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(generation), _TASK_TAG]))
    picks = rng.choice(len(train_tasks), size=k, replace=False)
    return tuple(train_tasks[int(i)] for i in picks)


def prompt_state(distribution: CoEvolutionDistribution, pools: PromptPools,
                 ) -> tuple[dict[str, list[float]], dict[str, str], dict[str, str]]:
    """Per slot: the probabilities, the most probable variant's text, and its id."""
    names = pools.slot_names
    probs = {name: [float(x) for x in p.tolist()]
             for name, p in zip(names, distribution.prompt_probs, strict=True)}
    best = distribution.most_probable_prompt_ids()
    texts = {name: pools.slots[name][i].text for name, i in zip(names, best, strict=True)}
    ids = {name: pools.slots[name][i].id for name, i in zip(names, best, strict=True)}
    return probs, texts, ids


class CoEvolutionES(SearchAlgorithm):
    """Co-evolution of weights and prompts on an ``AgentProblem`` (see the module docstring).

    ``start_generation`` is the number of generations already done (a resumed run); the distribution must be
    at that generation. ``eval_tasks`` (held-out task ids, labelled ``eval_split``) are evaluated every
    ``eval_every`` generations (0: never), and with ``eval_at_start`` once before generation 1 (the start).
    """

    def __init__(self, problem: SearchProblem, distribution: CoEvolutionDistribution, *, popsize: int,
                 train_tasks: Sequence[TaskId], tasks_per_generation: int, seed: int,
                 shaping: ShapingConfig | None = None, prompt_evolver: PromptEvolver | None = None,
                 eval_tasks: Sequence[TaskId] = (), eval_split: str = "held-out", eval_every: int = 0,
                 eval_env_seed: int = 0, eval_at_start: bool = False, start_generation: int = 0) -> None:
        SearchAlgorithm.__init__(self, problem)
        self._search_problem = problem
        if distribution.generation != start_generation:
            raise DistributionError(f"the distribution is at generation {distribution.generation}, the "
                                    f"searcher starts after {start_generation}")
        if distribution.pool_sizes != tuple(problem.pools.sizes().values()):
            raise DistributionError(f"distribution pool sizes {distribution.pool_sizes} != problem pools "
                                    f"{tuple(problem.pools.sizes().values())}")
        self._distribution = distribution
        self.popsize = int(popsize)
        self.train_tasks = tuple(train_tasks)
        self.tasks_per_generation = int(tasks_per_generation)
        draw_task_batch(self.train_tasks, self.tasks_per_generation, seed, 1)  # validates k
        self.seed = int(seed)
        self.shaping = shaping or ShapingConfig()
        self.prompt_evolver = prompt_evolver
        self.eval_tasks = tuple(eval_tasks)
        self.eval_split = eval_split
        self.eval_every = int(eval_every)
        self.eval_env_seed = int(eval_env_seed)
        self.eval_at_start = bool(eval_at_start)
        if self.eval_at_start and not self.eval_tasks:
            raise ConfigError("eval.at_start: no held-out tasks to evaluate the start on")
        self._steps_count = int(start_generation)
        self.last_record: dict[str, Any] | None = None
        """The update-log entry of the last generation (JSON-safe)."""

    @property
    def distribution(self) -> CoEvolutionDistribution:
        """The current search distribution (replaced by a new object every generation)."""
        return self._distribution

    @property
    def population_size(self) -> int:
        """Candidates per generation."""
        return self.popsize

    def task_batch_for(self, generation: int) -> tuple[TaskId, ...]:
        """The task batch of ``generation`` (1-based)."""
        return draw_task_batch(self.train_tasks, self.tasks_per_generation, self.seed, generation)

    # ------------------------------------------------------------------------------------------ a generation

    def _step(self) -> None:
        problem = self._search_problem
        gen = self._steps_count + 1
        dist = self._distribution
        status: dict[str, Any] = {}
        bytes_exchanged = 0
        if self.eval_at_start and gen == 1:  # before anything is sampled or updated: the start itself
            status["start_eval"] = self.evaluate_centre(generation=0)
            bytes_exchanged += int(problem.last_bytes_exchanged)
        tasks = self.task_batch_for(gen)
        problem.set_task_batch(tasks)
        # EvoTorch's flow (GaussianSearchAlgorithm._step_non_distributed): sample into the population,
        # evaluate it, update from its values and evals.
        batch = problem.generate_batch(self.popsize, empty=True)
        env_seed = dist.sample_into(batch.access_values())
        problem.evaluate(batch)
        rows = batch.access_values(keep_evals=True).detach().cpu().clone()
        fitness, rewards = split_evals(batch.access_evals().detach().cpu().to(torch.float64), len(tasks))
        bytes_exchanged += int(problem.last_bytes_exchanged)
        timings = dict(problem.last_timings)
        workers = [dict(w) for w in problem.worker_status()]
        agree = problem.checksums_agree

        confidences = (self._measured("last_confidences", "confidence_tiebreak", "episode confidences")
                       if self.shaping.confidence_tiebreak else None)
        credits = (self._measured("last_credits", "reference_credit",
                                  "reference credits (AgentProblem measures them with credit_scale set)")
                   if self.shaping.reference_credit else None)
        started = time.perf_counter()
        step = dist.step(rows, rewards, self.shaping, confidences, credits)
        new_dist, update = step.distribution, step.update
        problem.push_update(gen, update)
        seconds_update = time.perf_counter() - started

        success = (rewards >= 1.0).to(torch.float64)
        per_task = {t: float(success[:, j].mean()) for j, t in enumerate(tasks)}
        started = time.perf_counter()
        changes: list[PoolChange] = []
        if self.prompt_evolver is not None:
            new_dist, pools, changes = self.prompt_evolver.step(
                new_dist, problem.pools, FailureReport(gen, per_task, env_seed))
            if changes:
                problem.set_prompt_pools(pools, generation=gen)
        seconds_prompts = time.perf_counter() - started
        self._distribution = new_dist

        if self.eval_every and self.eval_tasks and gen % self.eval_every == 0:
            status["centre_eval"] = self.evaluate_centre(generation=gen)
            bytes_exchanged += int(problem.last_bytes_exchanged)
        if step.empty_reason is not None:
            status["update_empty_reason"] = step.empty_reason
        probs, texts, ids = prompt_state(new_dist, problem.pools)
        n_rollouts = rewards.numel()
        status.update({
            "sigma": float(dist.sigma),
            "reward_mean": float(fitness.mean()),
            "reward_max": float(fitness.max()),
            "reward_min": float(fitness.min()),
            "success_rate": float(success.mean()),
            "per_task_success": {str(t): v for t, v in per_task.items()},
            "prompt_probs": probs,
            "best_prompt": texts,
            "best_genome": ids,
            "seconds_rollout": float(timings.get("seconds_rollout", 0.0)),
            "seconds_perturb": float(timings.get("seconds_perturb", 0.0)),
            "seconds_update": float(timings.get("seconds_update", 0.0)) + seconds_update,
            "seconds_prompt_evolution": seconds_prompts,
            "seconds_credit": float(timings.get("seconds_credit", 0.0)),
            "bytes_exchanged": bytes_exchanged,
            "workers": workers,
            "checksums_agree": agree is not False,
            "population_size": self.popsize,
            "rollouts_done": n_rollouts,
            "env_steps": int(problem.last_env_steps),
            "credit_steps": int(getattr(problem, "last_credit_steps", 0)),
            "rollouts_total": n_rollouts,
            "task_batch": list(tasks),
            "env_seed": env_seed,
            "update_size": len(update),
            "update_empty": update.is_empty,
            "rewards_tied": rewards_tied(rewards),
            "pool_sizes": {name: len(v) for name, v in problem.pools.slots.items()},
            "pool_changes": len(changes),
        })
        self.update_status(status)
        self.last_record = {
            "iter": gen,
            "task_batch": list(tasks),
            "env_seed": env_seed,
            "sigma": float(dist.sigma),
            "rows": rows.tolist(),
            "rewards": rewards.tolist(),
            **({"confidences": confidences.tolist()} if confidences is not None else {}),
            **({"credits": credits.tolist()} if credits is not None else {}),
            "update": update.to_dict(),
            "prompt_probs": probs,
            "pool_changes": [c.to_dict() for c in changes],
            "distribution": new_dist.to_dict(),
        }

    def _measured(self, attribute: str, option: str, what: str) -> torch.Tensor:
        """The problem's per-episode ``attribute`` of the batch just evaluated, for the shaping term behind
        ``option`` (the shaping checks its shape against the rewards); a problem that did not measure it is
        a :class:`ConfigError` naming both."""
        values = getattr(self._search_problem, attribute, None)
        if values is None:
            name = type(self._search_problem).__name__
            raise ConfigError(f"es.shaping.{option} > 0, but {name} measured no {what}")
        return torch.as_tensor(values, dtype=torch.float64).detach().cpu()

    # ------------------------------------------------------------------------------------------ status

    def iter_status_keys(self) -> Iterator[Any]:
        """EvoTorch's status keys, without the optional keys (:data:`OPTIONAL_STATUS_KEYS`) this generation
        did not report: EvoTorch keeps every key ever reported, the contract says "present or absent"."""
        return (key for key in super().iter_status_keys()
                if key not in OPTIONAL_STATUS_KEYS or self.is_status_computed(key))

    def has_status_key(self, key: Any) -> bool:
        """Whether ``key`` is in this generation's status (optional keys only when reported)."""
        return bool(super().has_status_key(key)) and (key not in OPTIONAL_STATUS_KEYS
                                                       or bool(self.is_status_computed(key)))

    # ------------------------------------------------------------------------------------------ centre

    def evaluate_centre(self, task_ids: Sequence[TaskId] | None = None,
                        prompt_ids: Sequence[int] | None = None, *,
                        generation: int | None = None) -> dict[str, Any]:
        """Success of the centre (sigma 0) with the most probable prompts (or ``prompt_ids``) on held-out
        tasks: ``{"split", "success_rate", "n_tasks", "reward_mean", "rewards"}``, plus ``"generation"``
        when given (the generation whose centre this is: 0 for the start)."""
        tasks = tuple(task_ids) if task_ids is not None else self.eval_tasks
        if not tasks:
            raise ConfigError("eval: no held-out tasks to evaluate the centre on")
        ids = tuple(prompt_ids) if prompt_ids is not None else self._distribution.most_probable_prompt_ids()
        rewards = self._search_problem.evaluate_centre(tasks, ids, env_seed=self.eval_env_seed)
        values = [float(rewards[t]) for t in tasks]
        out = {"split": self.eval_split, "success_rate": sum(v >= 1.0 for v in values) / len(values),
               "n_tasks": len(values), "reward_mean": sum(values) / len(values),
               "rewards": {str(t): v for t, v in zip(tasks, values, strict=True)}}
        return out if generation is None else {**out, "generation": int(generation)}
