"""DenseAgentProblem: a small parameter subset as the solution vector, tuned by stock EvoTorch searchers on a
tiny Qwen agent in a toy text env."""

from __future__ import annotations

import pickle
import string
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import pytest
import torch
from evotorch.algorithms import CEM, PGPE, SNES
from gymnasium import spaces

from es_agent.dense import DenseAgentProblem
from es_agent.perturb import weights_checksum
from es_agent.specs import AgentSpec, EnvSpec, SpecError

TOY_ID = "EsAgentToyWebDense-v0"
CHARSET = string.printable
ANSWERS = {0: "19.99", 1: "red", 2: "Wireless Mouse"}
GOALS = {0: "What is the price?", 1: "What colour is it?", 2: "Which product is shown?"}


class ToyShopEnv(gym.Env):
    """One shop page; ``stop [answer]`` earns 1 when it contains the task's answer; three steps at most."""

    def __init__(self) -> None:
        text = spaces.Text(max_length=4096, min_length=0, charset=CHARSET)
        keys = ("axtree", "url", "goal", "tabs", "last_action_error")
        self.observation_space = spaces.Dict({k: text for k in keys})
        self.action_space = spaces.Text(max_length=512, min_length=0, charset=CHARSET)

    def _obs(self) -> dict[str, str]:
        b = self._base
        tree = "\n".join([f"[{b}] RootWebArea 'Toy Shop' focused: True",
                          f"\t[{b + 1}] heading 'Wireless Mouse'", f"\t[{b + 2}] StaticText '19.99'",
                          f"\t[{b + 3}] StaticText 'red'", f"\t[{b + 4}] button 'Add to Cart'"])
        return {"axtree": tree, "url": "http://toy.local/", "goal": GOALS[self._task],
                "tabs": "Tab 0 (current): Toy Shop", "last_action_error": ""}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        self._task = int((options or {})["task_id"])
        self._base = 1 + int(self.np_random.integers(0, 20))
        self._steps = 0
        return self._obs(), {"task_id": self._task}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        self._steps += 1
        if action.startswith("stop ["):
            reward = float(ANSWERS[self._task].lower() in action.lower())
            return self._obs(), reward, True, False, {"task_id": self._task}
        return self._obs(), 0.0, False, self._steps >= 3, {"task_id": self._task}


if TOY_ID not in gym.registry:
    gym.register(id=TOY_ID, entry_point=ToyShopEnv)

ENV = EnvSpec(env_id=TOY_ID, module=None, max_steps=3)
AGENT = AgentSpec(model="tiny:0", params=("model.norm.weight",), policy={"max_prompt_tokens": 512})


@pytest.fixture
def make_problem() -> Iterator[Callable[..., DenseAgentProblem]]:
    made: list[DenseAgentProblem] = []

    def make(agent: AgentSpec = AGENT, **kwargs: Any) -> DenseAgentProblem:
        kwargs.setdefault("seed", 0)
        problem = DenseAgentProblem(agent, ENV, **kwargs)
        problem.set_task_batch([0, 1, 2], env_seed=3)
        made.append(problem)
        return problem

    yield make
    for problem in made:
        problem.close()


def test_solution_is_the_selected_parameters(make_problem: Callable[..., DenseAgentProblem]) -> None:
    agent = AgentSpec(model="tiny:0", params=("model.norm.weight", "model.layers.1.self_attn.q_proj.bias"))
    problem = make_problem(agent)
    model = problem.local_replica.model
    # named_parameters() order, whatever the order of the patterns
    layers, norm = model.model.layers, model.model.norm
    expected = torch.cat([layers[1].self_attn.q_proj.bias.detach(), norm.weight.detach()])
    assert problem.solution_length == expected.numel() == 128
    assert torch.equal(problem.initial_solution(), expected)
    assert problem.layout == (("model.layers.1.self_attn.q_proj.bias", (64,)), ("model.norm.weight", (64,)))
    assert problem.dtype == torch.float32 and problem.eval_dtype == torch.float32
    assert len(pickle.dumps(problem)) < 32_000


def test_evaluation_writes_then_restores_exactly(make_problem: Callable[..., DenseAgentProblem]) -> None:
    problem = make_problem()
    model = problem.local_replica.model
    before = weights_checksum(model)
    x0 = problem.initial_solution()
    gen = torch.Generator().manual_seed(0)
    values = torch.stack([x0, x0 + 0.5 * torch.randn(x0.shape, generator=gen), x0])
    batch = problem.generate_batch(3, empty=True)
    batch.set_values(values)
    problem.evaluate(batch)
    assert weights_checksum(model) == before
    per_task = problem.per_task_rewards(batch)
    torch.testing.assert_close(batch.evals[:, 0], per_task.mean(dim=1))
    # the same vector twice: the same fitness and per-task rewards
    torch.testing.assert_close(batch.evals[0], batch.evals[2], rtol=0, atol=0, equal_nan=True)


def test_stock_pgpe_runs_a_few_generations(make_problem: Callable[..., DenseAgentProblem]) -> None:
    problem = make_problem()
    before = weights_checksum(problem.local_replica.model)
    searcher = PGPE(problem, popsize=4, center_learning_rate=0.05, stdev_learning_rate=0.1, stdev_init=0.1,
                    center_init=problem.initial_solution())
    searcher.run(3)
    assert searcher.step_count == 3
    assert 0.0 <= searcher.status["mean_eval"] <= 1.0
    assert searcher.status["center"].shape == (problem.solution_length,)
    assert weights_checksum(problem.local_replica.model) == before


@pytest.mark.parametrize("make_searcher", [
    lambda p: SNES(p, stdev_init=0.1, popsize=4, center_init=p.initial_solution()),
    lambda p: CEM(p, popsize=4, parenthood_ratio=0.5, stdev_init=0.1, center_init=p.initial_solution()),
], ids=["SNES", "CEM"])
def test_other_stock_searchers_run(make_problem: Callable[..., DenseAgentProblem],
                                   make_searcher: Callable[[DenseAgentProblem], Any]) -> None:
    problem = make_problem()
    searcher = make_searcher(problem)
    searcher.run(1)
    assert searcher.population.evals.shape[0] == 4 and not torch.isnan(searcher.population.evals[:, 0]).any()


def test_bad_configurations_are_refused(make_problem: Callable[..., DenseAgentProblem]) -> None:
    with pytest.raises(SpecError, match="needs AgentSpec.params"):
        DenseAgentProblem(AgentSpec(model="tiny:0"), ENV)
    with pytest.raises(SpecError, match="max_solution_length=100"):
        DenseAgentProblem(AgentSpec(model="tiny:0", params=("model.embed_tokens.weight",)), ENV,
                          max_solution_length=100)
    with pytest.raises(SpecError, match="num_actors=1"):
        DenseAgentProblem(AGENT, ENV, num_actors=1)
    problem = make_problem()
    with pytest.raises(SpecError, match="at most max_batch_tasks=8"):
        problem.set_task_batch(list(range(9)))
