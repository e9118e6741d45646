"""What :class:`~cotrain.searcher.CoEvolutionES` needs from its problem, as a typed :class:`typing.Protocol`
(the way :class:`es_agent.rollout.Policy` lists what ``run_episode`` needs from a policy).

:class:`es_agent.problem.AgentProblem` satisfies it, and so does the fake problem of
``tests/cotrain/test_searcher.py``. The problem is also an EvoTorch ``Problem`` (the searcher's base
``SearchAlgorithm`` takes one), whose ``generate_batch`` and ``evaluate`` are listed here with the types the
searcher relies on. The solution contract the searcher writes and reads:

* values: the candidate rows of :mod:`es_agent.rows` (float64 ``(N, 3 + n_slots)``), written by the searcher
  into the batch before ``evaluate``;
* evals (``es_agent.worker.evals_from_rewards``): column 0 is the fitness (the mean reward over the task
  batch, computed once, where the rewards are produced), columns ``1..len(task_batch)`` the per-task rewards
  (EvoTorch eval data), NaN beyond.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from evotorch import SolutionBatch

    from es_agent.prompts import PromptPools
    from es_agent.updates import WeightUpdate

TaskId = int | str
"""A task id of the env (an int, or a string such as ``embedded.train.3``)."""


@runtime_checkable
class SearchProblem(Protocol):
    """The problem interface of :class:`~cotrain.searcher.CoEvolutionES` (an EvoTorch ``Problem`` too)."""

    @property
    def pools(self) -> PromptPools:
        """The current prompt pools (the slots and variants the rows' prompt ids index)."""
        ...

    @property
    def last_bytes_exchanged(self) -> int:
        """Bytes sent to and from workers during the last evaluation."""
        ...

    @property
    def last_env_steps(self) -> int:
        """Env steps (actions) of the last evaluation's episodes, summed over workers."""
        ...

    @property
    def last_timings(self) -> Mapping[str, float]:
        """``seconds_rollout``, ``seconds_perturb``, ``seconds_update`` (each may be missing) of the last
        evaluation, summed over workers."""
        ...

    @property
    def checksums_agree(self) -> bool | None:
        """Whether the live replicas' weight checksums agreed after the last evaluation (None: unknown)."""
        ...

    def generate_batch(self, popsize: int, *, empty: bool = False) -> SolutionBatch:
        """EvoTorch: a ``SolutionBatch`` of ``popsize`` solutions (``empty=True``: the caller sets values)."""
        ...

    def evaluate(self, batch: SolutionBatch, /) -> None:
        """EvoTorch: fill the batch's evals (layout in the module docstring) from its values (the rows)."""
        ...

    def set_task_batch(self, task_ids: Sequence[TaskId], /) -> None:
        """The tasks every candidate of the next evaluation runs."""
        ...

    def push_update(self, generation: int, update: WeightUpdate, /) -> object:
        """Send the generation's weight update to every replica (an empty one changes nothing)."""
        ...

    def set_prompt_pools(self, pools: PromptPools, /, *, generation: int | None = None) -> object:
        """Replace the prompt pools (same slots) from ``generation`` on."""
        ...

    def evaluate_centre(self, task_ids: Sequence[TaskId], prompt_ids: Sequence[int], /, *,
                        env_seed: int = 0) -> Mapping[Any, float]:
        """Reward per task of the unperturbed centre with the prompt genome ``prompt_ids``."""
        ...

    def worker_status(self) -> list[dict[str, Any]]:
        """One dict per worker (``id``, ``alive``, ``in_flight``, ``done``, ``checksum``, ``restarts``...)."""
        ...
