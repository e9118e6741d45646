"""CoEvolutionES: every status key of docs/CONTRACTS.md, task batches, ablation switches, EvoTorch loggers;
on a fake problem (pure unit isolation) and on a real AgentProblem (tiny Qwen, toy text env)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch
from evotorch import Problem, SolutionBatch
from evotorch.logging import PandasLogger

from cotrain.distribution import CoEvolutionConfig, CoEvolutionDistribution
from cotrain.errors import ConfigError, DistributionError
from cotrain.protocols import SearchProblem
from cotrain.searcher import CoEvolutionES, draw_task_batch
from cotrain.ui import RichDashboardLogger
from es_agent.prompts import PromptPools
from es_agent.updates import WeightUpdate
from es_agent.worker import evals_from_rewards

CONTRACT_KEYS: dict[str, type | tuple[type, ...]] = {
    "iter": int, "sigma": float, "reward_mean": float, "reward_max": float, "reward_min": float,
    "success_rate": float, "per_task_success": dict, "prompt_probs": dict, "best_prompt": dict,
    "seconds_rollout": float, "seconds_perturb": float, "seconds_update": float, "bytes_exchanged": int,
    "workers": list, "checksums_agree": bool, "population_size": int, "rollouts_done": int,
    "rollouts_total": int, "env_steps": int,
}
WORKER_KEYS = {"id", "alive", "in_flight", "done", "checksum", "restarts"}


class FakeAgentProblem(Problem):
    """AgentProblem's driver interface without models or envs: a candidate solves task ``t`` when its sigma is
    positive and ``(skills id + t) % 2 == 0``."""

    def __init__(self, pools: PromptPools, max_batch_tasks: int = 4) -> None:
        super().__init__("max", solution_length=3 + len(pools.slots), dtype=torch.float64,
                         eval_dtype=torch.float32, eval_data_length=max_batch_tasks)
        self.pools = pools
        self.task_batch: tuple[Any, ...] = ()
        self.updates: list[tuple[int, tuple[int, ...], tuple[float, ...]]] = []
        self.pool_records = 0
        self.last_bytes_exchanged = 123
        self.last_timings = {"seconds_rollout": 1.0, "seconds_perturb": 0.5, "seconds_update": 0.25}
        self.last_env_steps = 0
        self.checksums_agree: bool | None = True
        self.centre_calls: list[tuple[tuple[Any, ...], tuple[int, ...]]] = []
        self.evaluated: list[torch.Tensor] = []
        self.all_tie = False

    def set_task_batch(self, tasks: Sequence[Any]) -> None:
        self.task_batch = tuple(tasks)

    def _rewards(self, values: torch.Tensor, tasks: Sequence[Any]) -> torch.Tensor:
        skills = self.pools.slot_names.index("skills")
        out = torch.zeros(len(values), len(tasks), dtype=torch.float32)
        for i, row in enumerate(values.tolist()):
            for j, t in enumerate(tasks):
                out[i, j] = float(row[1] >= 0 and (int(row[3 + skills]) + int(t)) % 2 == 0)
        return out

    def _evaluate_batch(self, batch: SolutionBatch) -> None:
        values = batch.values.as_subclass(torch.Tensor).clone()
        self.evaluated.append(values)
        rewards = self._rewards(values, self.task_batch)
        if self.all_tie:
            rewards = torch.full_like(rewards, 0.5)
        batch.set_evals(evals_from_rewards(rewards, self.eval_data_length))

    def push_update(self, generation: int, update: WeightUpdate) -> None:
        self.updates.append((generation, update.seeds, update.coeffs))

    def set_prompt_pools(self, pools: PromptPools, *, generation: int | None = None) -> None:
        self.pools = pools
        self.pool_records += 1

    def evaluate_centre(self, tasks: Sequence[Any], prompt_ids: Sequence[int], *, env_seed: int = 0,
                        ) -> dict[Any, float]:
        self.centre_calls.append((tuple(tasks), tuple(prompt_ids)))
        row = torch.tensor([[0.0, 0.0, float(env_seed), *map(float, prompt_ids)]], dtype=torch.float64)
        return dict(zip(tasks, self._rewards(row, tasks)[0].tolist(), strict=True))

    def worker_status(self) -> list[dict[str, Any]]:
        return [{"id": 0, "alive": True, "in_flight": 0, "done": 4, "checksum": "abc", "restarts": 0}]


def make_searcher(pools: PromptPools, *, eval_every: int = 0,
                  problem_cls: type[FakeAgentProblem] = FakeAgentProblem, eval_at_start: bool = False,
                  **config: Any) -> tuple[CoEvolutionES, Any]:
    problem = problem_cls(pools)
    dist = CoEvolutionDistribution.create(list(pools.sizes().values()), base_seed=7,
                                          config=CoEvolutionConfig(**{"total_generations": 5, **config}))
    searcher = CoEvolutionES(problem, dist, popsize=6, train_tasks=[0, 1, 2, 3, 4], tasks_per_generation=3,
                             seed=11, eval_tasks=[10, 11], eval_split="test", eval_every=eval_every,
                             eval_at_start=eval_at_start)
    return searcher, problem


def check_contract(status: dict[str, Any], pools: PromptPools) -> None:
    for key, kind in CONTRACT_KEYS.items():
        assert key in status, key
        assert isinstance(status[key], kind), (key, status[key])
    assert set(status["prompt_probs"]) == set(pools.slot_names) == set(status["best_prompt"])
    for slot, probs in status["prompt_probs"].items():
        assert len(probs) == pools.sizes()[slot] and sum(probs) == pytest.approx(1.0)
    assert all(set(w) >= WORKER_KEYS for w in status["workers"])
    assert all(0.0 <= v <= 1.0 for v in status["per_task_success"].values())
    assert status["reward_min"] <= status["reward_mean"] <= status["reward_max"]
    assert status["rollouts_done"] == status["rollouts_total"] == status["population_size"] * len(
        status["per_task_success"])


def test_every_status_key_each_generation_and_centre_eval_on_schedule(pools: PromptPools) -> None:
    searcher, problem = make_searcher(pools, eval_every=2)
    seen: list[dict[str, Any]] = []
    searcher.log_hook.append(seen.append)
    searcher.run(3)
    assert [s["iter"] for s in seen] == [1, 2, 3]
    for status in seen:
        check_contract(status, pools)
    assert "centre_eval" not in seen[0] and "centre_eval" not in seen[2]
    centre = seen[1]["centre_eval"]
    assert centre["split"] == "test" and centre["n_tasks"] == 2 and 0.0 <= centre["success_rate"] <= 1.0
    assert [t for t, _ in problem.centre_calls] == [(10, 11)]
    assert seen[0]["sigma"] > seen[2]["sigma"]  # cosine schedule
    assert searcher.distribution.generation == 3
    record = searcher.last_record
    assert record is not None and record["iter"] == 3 and len(record["rows"]) == 6
    assert record["task_batch"] == list(searcher.task_batch_for(3)) == seen[2]["task_batch"]
    assert record["distribution"] == searcher.distribution.to_dict()


def test_the_fake_and_the_real_problem_satisfy_the_search_protocol(pools: PromptPools) -> None:
    assert isinstance(FakeAgentProblem(pools), SearchProblem)
    assert not isinstance(object(), SearchProblem)


def test_rows_are_sampled_into_the_batch_and_read_back_from_it(pools: PromptPools) -> None:
    searcher, problem = make_searcher(pools)
    dist = searcher.distribution
    expected = dist.sample_rows(6)
    seen: list[dict[str, Any]] = []
    searcher.log_hook.append(seen.append)
    searcher.step()
    record = searcher.last_record
    assert record is not None
    assert torch.equal(problem.evaluated[0], expected)  # the problem evaluated the distribution's rows
    assert record["rows"] == expected.tolist()
    # the env seed is the distribution's first draw of the generation, kept by the searcher
    gen = dist.make_generator()
    env_seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    assert seen[0]["env_seed"] == record["env_seed"] == env_seed == int(expected[0, 2])


class SkewedFitnessProblem(FakeAgentProblem):
    """Evals whose fitness column is deliberately not the mean of the rewards (10, 11, ...)."""

    def _evaluate_batch(self, batch: SolutionBatch) -> None:
        rewards = self._rewards(batch.values.as_subclass(torch.Tensor), self.task_batch)
        evals = evals_from_rewards(rewards, self.eval_data_length)
        evals[:, 0] = torch.arange(len(batch), dtype=torch.float32) + 10.0
        batch.set_evals(evals)


def test_status_rewards_come_from_the_evals_fitness_column(pools: PromptPools) -> None:
    searcher, _ = make_searcher(pools, problem_cls=SkewedFitnessProblem)
    searcher.step()
    status = searcher.status
    assert (status["reward_min"], status["reward_mean"], status["reward_max"]) == (10.0, 12.5, 15.0)
    record = searcher.last_record
    assert record is not None and all(v in (0.0, 1.0) for row in record["rewards"] for v in row)


def test_an_empty_update_says_why_in_the_status(pools: PromptPools) -> None:
    searcher, problem = make_searcher(pools)
    seen: list[dict[str, Any]] = []
    searcher.log_hook.append(seen.append)
    searcher.step()
    problem.all_tie = True
    searcher.step()
    problem.all_tie = False
    searcher.step()
    assert [s["update_empty"] for s in seen] == [False, True, False]
    assert [s["rewards_tied"] for s in seen] == [False, True, False]
    assert "update_empty_reason" not in seen[0] and "update_empty_reason" not in seen[2]
    assert "ties" in seen[1]["update_empty_reason"] and seen[1]["update_size"] == 0
    assert [g for g, _, _ in problem.updates] == [1, 2, 3] and problem.updates[1][1] == ()
    searcher, _ = make_searcher(pools, evolve_weights=False)
    searcher.step()
    assert searcher.status["update_empty"] is True
    assert "evolve_weights" in searcher.status["update_empty_reason"]


def test_task_batches_are_seeded_distinct_and_from_the_training_tasks() -> None:
    batches = [draw_task_batch([5, 6, 7, 8], 2, seed=1, generation=g) for g in range(1, 6)]
    assert batches == [draw_task_batch([5, 6, 7, 8], 2, seed=1, generation=g) for g in range(1, 6)]
    assert all(len(set(b)) == 2 and set(b) <= {5, 6, 7, 8} for b in batches)
    assert len(set(batches)) > 1
    with pytest.raises(ConfigError, match="tasks_per_generation"):
        draw_task_batch([1], 2, seed=0, generation=1)


def test_updates_reach_the_problem_and_signal_moves_the_prompts(pools: PromptPools) -> None:
    searcher, problem = make_searcher(pools)
    before = searcher.distribution.prompt_probs
    searcher.run(2)
    assert [g for g, _, _ in problem.updates] == [1, 2]
    assert any(seeds for _, seeds, _ in problem.updates)
    assert any(not torch.equal(a, b) for a, b in zip(before, searcher.distribution.prompt_probs, strict=True))


def test_ablation_weights_only_keeps_prompts_fixed(pools: PromptPools) -> None:
    searcher, problem = make_searcher(pools, evolve_prompts=False)
    before = searcher.distribution.prompt_probs
    searcher.run(2)
    after = searcher.distribution.prompt_probs
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert any(seeds for _, seeds, _ in problem.updates)


def test_ablation_prompts_only_sends_no_weight_update(pools: PromptPools) -> None:
    searcher, problem = make_searcher(pools, evolve_weights=False)
    seen: list[dict[str, Any]] = []
    searcher.log_hook.append(seen.append)
    searcher.run(2)
    assert all(seeds == () for _, seeds, _ in problem.updates)
    assert all(s["sigma"] == 0.0 and s["update_size"] == 0 for s in seen)


def test_resumed_searcher_continues_the_generation_count(pools: PromptPools) -> None:
    searcher, problem = make_searcher(pools)
    searcher.run(2)
    resumed = CoEvolutionES(problem, searcher.distribution, popsize=6, train_tasks=[0, 1, 2, 3, 4],
                            tasks_per_generation=3, seed=11, start_generation=2)
    resumed.step()
    assert resumed.status["iter"] == 3 and resumed.distribution.generation == 3
    with pytest.raises(DistributionError, match="generation"):
        CoEvolutionES(problem, searcher.distribution, popsize=6, train_tasks=[0, 1, 2],
                      tasks_per_generation=1, seed=0, start_generation=0)


def test_the_start_is_scored_once_before_generation_1_without_touching_training(pools: PromptPools) -> None:
    """``eval_at_start``: generation 1 scores the generation-0 centre (sigma 0, the initial most probable
    genome) on the held-out tasks before it samples; the rows, rewards and updates are those of a run without
    it (no training random stream drawn), and a resumed searcher never scores the start again."""
    plain, plain_problem = make_searcher(pools, eval_every=2)
    start_dist = plain.distribution
    plain.run(2)
    searcher, problem = make_searcher(pools, eval_every=2, eval_at_start=True)
    seen: list[dict[str, Any]] = []
    searcher.log_hook.append(seen.append)
    searcher.run(2)
    assert [torch.equal(a, b) for a, b in zip(problem.evaluated, plain_problem.evaluated, strict=True)] == [
        True, True]
    assert problem.updates == plain_problem.updates
    assert searcher.distribution.to_dict() == plain.distribution.to_dict()
    start_ids = start_dist.most_probable_prompt_ids()
    assert problem.centre_calls == [((10, 11), start_ids), *plain_problem.centre_calls]
    start = seen[0]["start_eval"]
    assert start["generation"] == 0 and start["split"] == "test" and start["n_tasks"] == 2
    assert "start_eval" not in seen[1] and seen[1]["centre_eval"]["generation"] == 2
    assert seen[0]["bytes_exchanged"] == 2 * problem.last_bytes_exchanged  # the start's transfer counted
    check_contract(seen[0], pools)
    resumed = CoEvolutionES(problem, searcher.distribution, popsize=6, train_tasks=[0, 1, 2, 3, 4],
                            tasks_per_generation=3, seed=11, eval_tasks=[10, 11], eval_every=2,
                            eval_at_start=True, start_generation=2)
    resumed.step()
    assert "start_eval" not in resumed.status and len(problem.centre_calls) == 2
    with pytest.raises(ConfigError, match="eval.at_start"):
        CoEvolutionES(problem, searcher.distribution, popsize=6, train_tasks=[0, 1], tasks_per_generation=1,
                      seed=0, eval_at_start=True, start_generation=2)


def test_evotorch_and_dashboard_loggers_attach_to_the_log_hook(pools: PromptPools) -> None:
    searcher, _ = make_searcher(pools)
    pandas = PandasLogger(searcher)
    dashboard = RichDashboardLogger(searcher, force_terminal=False, total_generations=2)
    searcher.run(2)
    frame = pandas.to_dataframe()
    assert list(frame["reward_mean"].index) == [1, 2]
    assert dashboard.state.generations_done == 2
    assert dashboard.state.prompt_probs.keys() == set(pools.slot_names)


def test_on_a_real_agent_problem_every_key_is_filled(toy_config: Any) -> None:
    from cotrain.checkpoint import RunState, initial_distribution, load_pools
    from cotrain.trainer import build_problem

    cfg = toy_config(eval={"every": 1, "n_tasks": 1})
    pools = load_pools(None)
    dist = initial_distribution(cfg, pools)
    state = RunState(0, dist, pools, None, 0, [], None)
    problem = build_problem(cfg, state, [0, 1, 2, 3, 4])
    try:
        assert isinstance(problem, SearchProblem)
        searcher = CoEvolutionES(problem, dist, popsize=4, train_tasks=[0, 1, 2, 3], tasks_per_generation=2,
                                 seed=0, eval_tasks=[4], eval_split="test", eval_every=1)
        seen: list[dict[str, Any]] = []
        searcher.log_hook.append(seen.append)
        searcher.step()
        status = seen[0]
        check_contract(status, pools)
        assert status["checksums_agree"] is True and status["workers"][0]["checksum"]
        assert status["seconds_rollout"] > 0 and status["centre_eval"]["n_tasks"] == 1
    finally:
        problem.close()


@pytest.mark.parametrize(("option", "match"), [
    ("confidence_tiebreak", "confidence_tiebreak > 0, but FakeAgentProblem measured no episode confidences"),
    ("reference_credit", "reference_credit > 0, but FakeAgentProblem measured no reference credits"),
])
def test_a_shaping_term_whose_measure_is_missing_is_a_config_error(pools: PromptPools, option: str,
                                                                   match: str) -> None:
    from cotrain.shaping import ShapingConfig

    searcher, _ = make_searcher(pools)
    searcher.shaping = ShapingConfig(**{option: 0.1})
    with pytest.raises(ConfigError, match=match):
        searcher.step()


def test_the_confidence_tiebreak_on_a_real_agent_problem_moves_every_generation(toy_config: Any) -> None:
    """The tiny random model fails most toy tasks, so rewards tie; the episodes' margins break the ties."""
    from cotrain.checkpoint import RunState, initial_distribution, load_pools
    from cotrain.shaping import ShapingConfig
    from cotrain.trainer import build_problem

    cfg = toy_config()
    pools = load_pools(None)
    dist = initial_distribution(cfg, pools)
    problem = build_problem(cfg, RunState(0, dist, pools, None, 0, [], None), [0, 1, 2, 3])
    try:
        searcher = CoEvolutionES(problem, dist, popsize=4, train_tasks=[0, 1, 2, 3], tasks_per_generation=2,
                                 seed=0, shaping=ShapingConfig(confidence_tiebreak=0.1))
        seen: list[dict[str, Any]] = []
        searcher.log_hook.append(seen.append)
        tied = 0
        for gen in range(2):
            searcher.step()
            record = searcher.last_record
            rewards, confidences = torch.tensor(record["rewards"]), torch.tensor(record["confidences"])
            assert confidences.shape == rewards.shape == (4, 2)
            assert torch.isfinite(confidences).all() and len(set(confidences.reshape(-1).tolist())) > 1
            tied += bool((rewards.mean(dim=1) == rewards.mean()).all())  # no signal without the tie-break
            # the status says when the rewards tie, so the update came from the tie-break alone
            assert seen[gen]["rewards_tied"] == bool((rewards == rewards[0]).all())
        assert tied >= 1
        assert [s["update_empty"] for s in seen] == [False, False]
        assert any(s["rewards_tied"] for s in seen)  # a generation moved by the tie-break alone, and says so
    finally:
        problem.close()


def test_the_reference_credit_on_a_real_agent_problem_ranks_every_generation(toy_config: Any) -> None:
    """From the config (es.shaping.reference_credit) to the problem (credit_scale) to the update: every
    candidate's credit is measured on every task, recorded, counted, and moves the centre even where all
    rewards tie."""
    from cotrain.checkpoint import RunState, initial_distribution, load_pools
    from cotrain.trainer import build_problem

    cfg = toy_config(es={"shaping": {"reference_credit": 0.5, "confidence_scale": 2.0}})
    assert cfg.es.shaping.reference_credit == 0.5
    pools = load_pools(None)
    dist = initial_distribution(cfg, pools)
    problem = build_problem(cfg, RunState(0, dist, pools, None, 0, [], None), [0, 1, 2, 3])
    assert problem.credit_scale == 2.0
    try:
        searcher = CoEvolutionES(problem, dist, popsize=4, train_tasks=[0, 1, 2, 3], tasks_per_generation=2,
                                 seed=0, shaping=cfg.es.shaping)
        seen: list[dict[str, Any]] = []
        searcher.log_hook.append(seen.append)
        for _ in range(2):
            searcher.step()
            credits = torch.tensor(searcher.last_record["credits"])
            assert credits.shape == (4, 2) and bool((credits.abs() <= 1).all())
            assert len(set(credits.reshape(-1).tolist())) > 1
        assert [s["credit_steps"] for s in seen] == [4 * 2, 4 * 2]  # one reference step per task and row
        assert all(s["seconds_credit"] > 0 for s in seen)
        assert [s["update_empty"] for s in seen] == [False, False]
    finally:
        problem.close()
