"""What the agent's two EvoTorch problems share (:class:`~es_agent.problem.AgentProblem`, rows of seeds and
prompt ids; :class:`~es_agent.dense.DenseAgentProblem`, a dense parameter subset).

Both maximise the mean terminal reward of one episode per task of the generation's task batch, with float32
fitness. The evals layout is EvoTorch's: column 0 the fitness (the mean over the batch, computed once, in
:func:`~es_agent.worker.evals_from_rewards`), columns ``1..len(task_batch)`` the per-task rewards (eval
data), NaN beyond. A :class:`~es_agent.worker.Replica` (model, tokenizer, env) is built lazily in each process
that evaluates and is never pickled.

EvoTorch 0.6.1: ``num_actors=1`` would silently mean no actors, so it is refused (use ``None`` or ``>= 2``);
``seed()`` is defined (actors call it; 0.6.1's ``Problem`` lacks it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from evotorch import Problem, SolutionBatch

from es_agent.errors import SpecError
from es_agent.specs import AgentSpec, EnvSpec, TaskId, check_task_ids
from es_agent.worker import Replica, evals_from_rewards, split_evals


def check_num_actors(num_actors: int | str | None) -> None:
    """Refuse ``num_actors=1``, which EvoTorch 0.6.1 silently takes for no actors."""
    if num_actors == 1:
        raise SpecError("num_actors=1 would silently mean no actors in EvoTorch 0.6.1: use None "
                        "(evaluate in this process) or 2 or more")


class AgentProblemBase(Problem):
    """An EvoTorch ``Problem`` scored by whole episodes of a web agent on a task batch (module docstring).

    ``max_batch_tasks`` sizes the eval data (per-task rewards); ``task_ids`` (optional) is the task set the
    batches must come from; ``num_actors``, ``actor_config`` and ``seed`` go to EvoTorch (``1`` is refused).
    Subclasses give the solution shape and :meth:`_batch_rewards`.
    """

    _actors: list[Any] | None  # EvoTorch's Ray actors (None: evaluation in this process); declared for mypy

    def __init__(self, agent: AgentSpec, env: EnvSpec, *, solution_length: int, dtype: torch.dtype,
                 max_batch_tasks: int, task_ids: Sequence[TaskId] | None, num_actors: int | str | None,
                 actor_config: Mapping[str, Any] | None, seed: int | None,
                 initial_bounds: tuple[list[float], list[float]] | None = None) -> None:
        check_num_actors(num_actors)
        if isinstance(max_batch_tasks, bool) or not isinstance(max_batch_tasks, int) or max_batch_tasks < 1:
            raise SpecError(f"max_batch_tasks must be a positive integer, got {max_batch_tasks!r}")
        super().__init__("max", solution_length=solution_length, dtype=dtype, eval_dtype=torch.float32,
                         initial_bounds=initial_bounds, eval_data_length=max_batch_tasks,
                         num_actors=num_actors, seed=seed,
                         actor_config=None if actor_config is None else dict(actor_config))
        self.agent = agent
        """The agent every replica builds (model, prompt pools, policy, perturbation settings)."""
        self.env_spec = env
        """The env every replica builds."""
        self._known_tasks = None if task_ids is None else frozenset(check_task_ids(task_ids, what="task_ids"))
        self._task_batch: tuple[TaskId, ...] | None = None
        self._replica: Replica | None = None
        self.last_confidences: torch.Tensor | None = None
        """The :attr:`~es_agent.rollout.EpisodeResult.confidence` of every episode of the last batch
        evaluated, ``(len(batch), len(task_batch))`` like its per-task rewards (``None`` before one, and on
        problems that do not measure it). Fitness shaping can break reward ties with it."""
        self.last_credits: torch.Tensor | None = None
        """The reference credit of every (candidate, task) of the last batch evaluated, like the rewards
        (``None`` before one, and where the problem does not measure it: :mod:`es_agent.reference_credit`)."""

    # ------------------------------------------------------------------ EvoTorch hooks
    @property
    def _nonserialized_attribs(self) -> list[str]:
        return [*super()._nonserialized_attribs, "_replica"]

    def seed(self, seed: int | None) -> None:
        """Seed the Problem's own generator (EvoTorch's actors call this; 0.6.1's Problem lacks it)."""
        self.manual_seed(seed)

    def _evaluate_batch(self, batch: SolutionBatch) -> None:
        rewards, self.last_confidences = self._batch_outcomes(batch)
        batch.set_evals(evals_from_rewards(rewards, self.eval_data_length))

    def _batch_rewards(self, batch: SolutionBatch) -> torch.Tensor:
        """Per-task rewards ``(len(batch), len(task_batch))`` of the batch's solutions."""
        raise NotImplementedError(f"{type(self).__name__} must define _batch_rewards")

    def _batch_outcomes(self, batch: SolutionBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The per-task rewards and, where the problem measures them, the episodes' confidences (same
        shape; ``None`` where it does not)."""
        return self._batch_rewards(batch), None

    # ------------------------------------------------------------------ tasks
    @property
    def task_batch(self) -> tuple[TaskId, ...]:
        """The generation's task batch (set with :meth:`set_task_batch`)."""
        if self._task_batch is None:
            raise SpecError("no task batch: call problem.set_task_batch(task_ids) before evaluating")
        return self._task_batch

    def set_task_batch(self, task_ids: Sequence[TaskId]) -> None:
        """Set the tasks every solution of the next evaluations runs (at most ``eval_data_length``)."""
        self._task_batch = self._check_tasks(task_ids, "task batch")

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

    def per_task_rewards(self, batch: SolutionBatch) -> torch.Tensor:
        """``(N, len(task_batch))`` rewards of an evaluated batch (from its eval data)."""
        return split_evals(batch.evals, len(self.task_batch))[1].clone()

    # ------------------------------------------------------------------ replica
    @property
    def local_replica(self) -> Replica:
        """The replica of this process, built on first use (and caught up with the problem's centre)."""
        return self._ensure_replica()

    def _ensure_replica(self) -> Replica:
        raise NotImplementedError(f"{type(self).__name__} must define _ensure_replica")

    def close(self) -> None:
        """Kill the actors and close the local replica's env."""
        if self.is_main and self._actors is not None:
            self.kill_actors()
        if self._replica is not None:
            self._replica.close()
