"""``DenseAgentProblem``: the solution vector *is* a small selected subset of the agent's parameters (the
final norm's weight, the biases of one layer...), so stock EvoTorch searchers (PGPE, SNES, CEM, CMA-ES) can
tune it.

Evaluating a vector writes it into the selected parameters, runs one episode per task of the task batch with a
fixed prompt genome, and restores the parameters exactly (copied back from a snapshot taken just before).
Fitness is the mean terminal reward; per-task rewards go to EvoTorch's eval data. The model and env are built
lazily in each worker from the specs (:mod:`es_agent.worker`) and never pickled. The driver builds the model
once at construction to read the selection's shapes and values.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from evotorch import SolutionBatch

from es_agent.problem_base import AgentProblemBase, check_num_actors
from es_agent.specs import AgentSpec, EnvSpec, SpecError, TaskId
from es_agent.worker import Replica


class DenseAgentProblem(AgentProblemBase):
    """Dense parameter-subset ES on a web agent (see the module docstring).

    ``agent.params`` must select the subset (a few thousand values, at most ``max_solution_length``);
    ``prompt_ids`` fixes the prompt genome (default: variant 0 of every slot). ``init_radius`` sets
    ``initial_bounds`` around the current values (EvoTorch's ``_fill`` samples there). The other arguments
    are :class:`~es_agent.problem_base.AgentProblemBase`'s.
    """

    def __init__(self, agent: AgentSpec, env: EnvSpec, *, prompt_ids: Sequence[int] | None = None,
                 task_ids: Sequence[TaskId] | None = None, max_batch_tasks: int = 8, env_seed: int = 0,
                 init_radius: float = 0.05, max_solution_length: int = 1 << 20,
                 num_actors: int | str | None = None, actor_config: Mapping[str, Any] | None = None,
                 seed: int | None = None) -> None:
        if agent.params is None:
            raise SpecError("DenseAgentProblem needs AgentSpec.params naming a small parameter subset "
                            "(e.g. ('model.norm.weight',)); the whole model is no dense solution")
        check_num_actors(num_actors)  # before the model is built
        pools = agent.load_pools()
        ids = tuple(int(i) for i in prompt_ids) if prompt_ids is not None else (0,) * len(pools.slots)
        pools.from_indices(ids)  # validates slot count and ranges (PromptPoolError names the slot)
        replica = Replica(agent, env, pools, applied=0)
        selected = _select(replica, agent)
        x0 = torch.cat([sp.param.detach().reshape(-1).to(torch.float32).cpu() for sp in selected])
        if x0.numel() > max_solution_length:
            raise SpecError(f"the selection {agent.params} has {x0.numel()} values, more than "
                            f"max_solution_length={max_solution_length}: use AgentProblem for large subsets")
        super().__init__(agent, env, solution_length=x0.numel(), dtype=torch.float32,
                         initial_bounds=((x0 - init_radius).tolist(), (x0 + init_radius).tolist()),
                         max_batch_tasks=max_batch_tasks, task_ids=task_ids, num_actors=num_actors,
                         actor_config=actor_config, seed=seed)
        self.prompt_ids = ids
        """The fixed prompt genome (one variant id per slot)."""
        self.env_seed = int(env_seed)
        """Env seed of every evaluation (set with :meth:`set_task_batch`)."""
        self.layout = tuple((sp.name, tuple(sp.param.shape)) for sp in selected)
        """``(name, shape)`` of each selected parameter, in solution order."""
        self._x0 = x0
        self._pools = pools
        self._replica = replica if self._num_actors == 0 else None

    # ------------------------------------------------------------------ EvoTorch hooks
    def _make_sync_data_for_actors(self) -> dict[str, Any]:
        return {"task_batch": self._task_batch, "env_seed": self.env_seed}

    def _use_sync_data_from_main(self, received: Mapping[str, Any]) -> None:
        self._task_batch = received["task_batch"]
        self.env_seed = int(received["env_seed"])

    def _make_sync_data_for_main(self) -> None:
        return None

    def _batch_rewards(self, batch: SolutionBatch) -> torch.Tensor:
        tasks = self.task_batch
        rep = self._ensure_replica()
        genome = rep.pools.from_indices(self.prompt_ids)
        values = batch.values.as_subclass(torch.Tensor)
        rewards = torch.empty(len(batch), len(tasks), dtype=torch.float32)
        for i in range(len(batch)):
            with self._written(rep, values[i]):
                rewards[i] = torch.tensor(rep.run_tasks(genome, tasks, self.env_seed))
            rep.stats.rows += 1
        return rewards

    # ------------------------------------------------------------------ public API
    def initial_solution(self) -> torch.Tensor:
        """The selected parameters' current values, flattened in :attr:`layout` order (float32)."""
        return self._x0.clone()

    def set_task_batch(self, task_ids: Sequence[TaskId], *, env_seed: int | None = None) -> None:
        """Set the task batch (at most ``eval_data_length`` tasks) and optionally the env seed."""
        super().set_task_batch(task_ids)
        if env_seed is not None:
            self.env_seed = int(env_seed)

    # ------------------------------------------------------------------ internals
    def _ensure_replica(self) -> Replica:
        if self._replica is None:
            self._replica = Replica(self.agent, self.env_spec, self._pools, applied=0)
        return self._replica

    @contextmanager
    def _written(self, rep: Replica, vector: torch.Tensor) -> Iterator[None]:
        """Write ``vector`` into the selected parameters; restore them exactly on exit."""
        started = time.perf_counter()
        selected = _select(rep, self.agent)
        if vector.numel() != self.solution_length:
            raise SpecError(f"a solution has {vector.numel()} values, the selection {self.solution_length}")
        with torch.no_grad():
            saved = [sp.param.detach().clone() for sp in selected]
            offset = 0
            for sp in selected:
                n = sp.param.numel()
                sp.param.detach().copy_(vector[offset:offset + n].view(sp.param.shape))
                offset += n
        rep.stats.seconds_perturb += time.perf_counter() - started
        try:
            yield
        finally:
            started = time.perf_counter()
            with torch.no_grad():
                for sp, old in zip(selected, saved, strict=True):
                    sp.param.detach().copy_(old)
            rep.stats.seconds_perturb += time.perf_counter() - started


def _select(rep: Replica, agent: AgentSpec) -> list[Any]:
    from es_agent.perturb import select_parameters

    return select_parameters(rep.model, agent.param_spec())
