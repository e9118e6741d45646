"""The batched low-rank population (es_agent.population): K members in lockstep, one env each, every step ONE
batched forward, against each member evaluated on its own under ``perturbed(..., mode="lowrank")`` with the
tiny random Qwen in fp32: batched prefill and scoring equal the single-row primitives (padding changes
nothing), episodes and per-row rewards equal the sequential ones (members finishing at different steps), and
the worker's batched path returns the rewards of its per-row path."""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
from gymnasium import spaces

from es_agent.decoding import prefill, prefill_batch, score_candidates, score_candidates_batch
from es_agent.grounding import answer_type_matches, target_overlaps
from es_agent.perturb import perturbed, perturbed_batch, weights_checksum
from es_agent.policy import LLMPolicy, PolicyConfig
from es_agent.population import LockstepPopulation, Member, PopulationRunner
from es_agent.rollout import run_episode
from es_agent.rows import CandidateRow
from es_agent.specs import AgentSpec, EnvSpec
from es_agent.worker import EpisodeInfrastructureError, Replica

RANK = 2
ENV_ID = "EsAgentToyLockstep-v0"
CHARSET = string.printable
TARGETS = {0: "19.99", 1: "red", 2: "42 reviews"}
GOALS = {0: "What is the price of the mouse?", 1: "What colour is the mouse?",
         2: "How many reviews does the mouse have? See its details"}
CRASHES: dict[str, int] = {}
"""crash key -> how many more steps raise :class:`LockstepCrash`."""


class LockstepCrash(RuntimeError):
    """Stands for a browser crash."""


class GrowingPageEnv(gym.Env):
    """A shop page that grows with the episode: a click opens a detail line, ``scroll [down]`` shows more
    items, typing fails (``last_action_error``), ``stop [answer]`` is scored against the task's target, and
    the env truncates after 5 steps. Pages differ between members as soon as their actions differ."""

    def __init__(self, crash_key: str | None = None) -> None:
        text = spaces.Text(max_length=8192, min_length=0, charset=CHARSET)
        self.observation_space = spaces.Dict({k: text for k in ("axtree", "url", "goal", "tabs",
                                                                 "last_action_error")})
        self.action_space = spaces.Text(max_length=512, min_length=0, charset=CHARSET)
        self.crash_key = crash_key

    def _obs(self, error: str = "") -> dict[str, str]:
        b = self._base
        lines = [f"[{b}] RootWebArea 'Toy Shop' focused: True", f"\t[{b + 1}] link 'Products'",
                 f"\t[{b + 2}] heading 'Wireless Mouse'", f"\t[{b + 3}] StaticText '19.99'",
                 f"\t[{b + 4}] button 'Details'", f"\t[{b + 5}] searchbox 'Search'"]
        lines += [f"\t[{b + 10 + i}] StaticText '{d}'" for i, d in enumerate(self._shown)]
        return {"axtree": "\n".join(lines), "url": f"http://toy.local/{len(self._shown)}",
                "goal": GOALS[self._task], "tabs": "Tab 0 (current): Toy Shop", "last_action_error": error}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        self._task = int((options or {})["task_id"])
        self._base = 1 + int(self.np_random.integers(0, 40))
        self._shown: list[str] = []
        self._steps = 0
        return self._obs(), {"task_id": self._task}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        if self.crash_key and CRASHES.get(self.crash_key, 0) > 0:
            CRASHES[self.crash_key] -= 1
            raise LockstepCrash("toy browser crashed")
        self._steps += 1
        info = {"task_id": self._task}
        if action.startswith("stop ["):
            reward = float(TARGETS[self._task].lower() in action[len("stop ["):-1].lower())
            return self._obs(), reward, True, False, info
        error = ""
        if action.startswith("click"):
            self._shown.append(["red", "42 reviews", "Acme"][len(self._shown) % 3])
        elif action.startswith("scroll"):
            self._shown.append(f"item {len(self._shown)} of the catalogue")
        elif not action.startswith("go_back"):
            error = f"cannot run {action!r} here"
        return self._obs(error), 0.0, False, self._steps >= 5, info


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=GrowingPageEnv)

MEMBERS = [(11, 0.6), (11, -0.6), (12, 0.6), (13, 0.0), (14, 0.6)]
"""(noise seed, signed scale) of the members: an antithetic pair, the centre and two more."""
CONFIG = PolicyConfig(max_prompt_tokens=512)


@pytest.fixture
def envs() -> Iterator[list[gym.Env]]:
    made = [gym.make(ENV_ID) for _ in MEMBERS]
    yield made
    for env in made:
        env.close()


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_batched_prefill_and_scoring_equal_each_row_alone(tiny: tuple[Any, Any], impl: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Prompts of different lengths (padded), a second step that keeps the common prefix of the first, and
    candidate sets of different sizes: each row's scores equal its own prefill + tree scoring under its own
    perturbation; a row's scores do not depend on the other rows (padding)."""
    model, tok = tiny
    monkeypatch.setattr(model.config, "_attn_implementation", impl)
    head = tok("<|im_start|>system\nYou are a web agent.<|im_end|>\n").input_ids
    prompts = [head + tok(t).input_ids for t in (
        "OBJECTIVE: find the price\n[12] link 'Customers'", "[3] button 'Go'",
        "OBJECTIVE: find the price of the mouse\n[13] button 'Search'\n[14] link 'Next page'")]
    texts = [["click [12]", "click [13]", "stop [N/A]"], ["go_back"],
             ["click [123]", "type [5] [price]", "stop [N/A]", "go_back", "click [1]"]]
    cands = [[tok(t).input_ids + [tok.eos_token_id] for t in ts] for ts in texts]
    seeds, scales = [1, 2, 3], [0.3, -0.3, 0.0]
    second = [p + tok(f"\nstep {i} [9] link 'More'").input_ids for i, p in enumerate(prompts)]

    def alone(ps: list[list[int]]) -> list[list[float]]:
        out = []
        for p, c, s, sc in zip(ps, cands, seeds, scales, strict=True):
            with perturbed(model, s, sc, mode="lowrank", rank=RANK):
                out.append(score_candidates(model, prefill(model, p), c))
        return out

    with torch.inference_mode():
        expected = [alone(prompts), alone(second)]
        with perturbed_batch(model, seeds, scales, rank=RANK):
            first = prefill_batch(model, prompts)
            got = [score_candidates_batch(model, first, cands)]
            assert first.common == len(head) and first.valid.shape[1] > max(map(len, prompts)) - len(head)
            state = prefill_batch(model, second, first)
            got.append(score_candidates_batch(model, state, cands))
            again = score_candidates_batch(model, state, cands)  # the state's cache is left intact
        with perturbed_batch(model, seeds[2:], scales[2:], rank=RANK):  # the last row without padding
            single = score_candidates_batch(model, prefill_batch(model, second[2:]), cands[2:])
    for step_expected, step_got in zip(expected, got, strict=True):
        for row_expected, row_got in zip(step_expected, step_got, strict=True):
            assert row_got == pytest.approx(row_expected, abs=1e-4)
    assert again == got[1]
    assert single[0] == pytest.approx(got[1][2], abs=1e-5)


def test_batched_prefill_rejects_bad_input(tiny: tuple[Any, Any]) -> None:
    model, _ = tiny
    with torch.inference_mode(), pytest.raises(ValueError, match=r"non-empty prompts, got lengths \[3, 0\]"):
        prefill_batch(model, [[1, 2, 3], []])
    with torch.inference_mode():
        state = prefill_batch(model, [[1, 2, 3], [1, 2]])
        with pytest.raises(ValueError, match="previous state has 2 rows for 1 prompts"):
            prefill_batch(model, [[1, 2, 3, 4]], state)
        with pytest.raises(ValueError, match="candidate sets for 1 rows, the state has 2"):
            score_candidates_batch(model, state, [[[5]]])


def _sequential(model: Any, tok: Any, genome: Any, env: gym.Env, seed: int, scale: float, task: int,
                reset_seed: int, max_steps: int | None, config: PolicyConfig = CONFIG) -> Any:
    policy = LLMPolicy(model, tok, genome, config)
    with perturbed(model, seed, scale, mode="lowrank", rank=RANK):
        return run_episode(env, policy, seed=reset_seed, options={"task_id": task}, max_steps=max_steps)


@pytest.mark.parametrize(("max_steps", "kind_bias", "goal_prior", "answer_prior", "memory_prior"),
                         [(4, {}, 0.0, 0.0, 0.0), (None, {}, 0.0, 0.0, 0.0),
                          (None, {"stop": -0.5, "click": 0.25}, 0.0, 0.0, 0.0), (None, {}, 40.0, 0.0, 0.0),
                          (None, {}, 0.0, 3.0, 0.0), (None, {}, 0.0, 0.0, 30.0)])
def test_lockstep_episodes_equal_sequential_ones(tiny: tuple[Any, Any], pools: Any, envs: list[gym.Env],
                                                 max_steps: int | None, kind_bias: dict[str, float],
                                                 goal_prior: float, answer_prior: float, memory_prior: float,
                                                 tmp_path: Path) -> None:
    """Same actions, errors, steps, truncation and rewards as run_episode per member; members finish at
    different steps (stop, the env's truncation, max_steps) and drop out of the batch. A kind_bias, a
    goal_prior, an answer_prior and a memory prior (a memory file: click 'Details', then 'Products', then
    stop) are added on both paths alike."""
    model, tok = tiny
    config = dataclasses.replace(CONFIG, kind_bias=kind_bias, goal_prior=goal_prior,
                                 answer_prior=answer_prior, memory_prior=memory_prior)
    if memory_prior:
        from es_agent.memory import Exemplar, ExemplarStep, TrajectoryMemory, save_memory

        steps = (ExemplarStep("click", "Details"), ExemplarStep("click", "Products"), ExemplarStep("stop"))
        goal = "How many reviews does the keyboard have? See its details"
        memory = TrajectoryMemory([Exemplar(goal, steps)])
        config = dataclasses.replace(config, memory_file=str(save_memory(memory, tmp_path / "memory.json")))
    if goal_prior:  # task 2's goal names the toy page's button 'Details'
        obs, _ = envs[0].reset(seed=0, options={"task_id": 2})
        cands = LLMPolicy(model, tok, pools.baseline("no_skill"), config).candidates(obs)
        assert max(target_overlaps(cands, obs["axtree"], obs["goal"])) > 0
    if answer_prior:  # task 0 asks for a price, and the toy page shows one
        obs, _ = envs[0].reset(seed=0, options={"task_id": 0})
        cands = LLMPolicy(model, tok, pools.baseline("no_skill"), config).candidates(obs)
        assert max(answer_type_matches(cands, obs["goal"])) > 0
    genomes = [pools.baseline("no_skill"), pools.from_indices((0, 1, 0))]
    members = [Member(genomes[i % 2], s, sc) for i, (s, sc) in enumerate(MEMBERS)]
    before = weights_checksum(model)
    lockstep = LockstepPopulation(model, tok, config, rank=RANK)
    for task in (0, 2):
        reset_seeds = [100 + task] * len(members)
        got = lockstep.run(envs, members, reset_seeds=reset_seeds, options=[{"task_id": task}] * len(members),
                           max_steps=max_steps)
        for m, result in zip(members, got, strict=True):
            ref = _sequential(model, tok, m.genome, envs[0], m.seed, m.scale, task, 100 + task, max_steps,
                              config)
            assert [s.action for s in result.trajectory] == [s.action for s in ref.trajectory]
            assert result.trajectory == ref.trajectory and result.errors == ref.errors
            assert (result.reward, result.steps, result.terminated, result.truncated, result.task_id) == (
                ref.reward, ref.steps, ref.terminated, ref.truncated, ref.task_id)
        # (stop biased down or clicks up: every member runs to truncation; typed answers lifted: all stop)
        if memory_prior and task == 2:  # the memory's solution, on both paths
            assert [s.action.split(" ")[0] for s in got[0].trajectory] == ["click", "click", "stop"]
        if max_steps is None and not kind_bias and not goal_prior and not answer_prior and not memory_prior:
            assert len({r.steps for r in got}) > 1, "members should finish at different steps"
            assert any(r.terminated for r in got) and any(r.truncated for r in got)
    assert weights_checksum(model) == before  # low-rank noise never writes the weights


def test_lockstep_needs_constrained_scoring(tiny: tuple[Any, Any]) -> None:
    model, tok = tiny
    with pytest.raises(ValueError, match="constrained decoding by scoring, got decoding='free'"):
        LockstepPopulation(model, tok, PolicyConfig(decoding="free"), rank=RANK)


def _replica(crash_key: str | None = None) -> Replica:
    from es_agent.prompts import PromptPools

    agent = AgentSpec(model="tiny:0", mode="lowrank", rank=RANK, policy={"max_prompt_tokens": 512})
    env = EnvSpec(env_id=ENV_ID, module=None, max_steps=4, infra_errors=("LockstepCrash",),
                  kwargs={"crash_key": crash_key} if crash_key else {})
    return Replica(agent, env, PromptPools.load(), applied=0)


ROWS = [CandidateRow(s, sc, 5, (0, 1, 0)) for s, sc in MEMBERS]


def test_worker_batched_path_returns_the_per_row_rewards() -> None:
    replica = _replica()
    try:
        sequential = replica.run_rows(ROWS, [0, 1, 2])  # on CPU the per-row path (batched_enabled is False)
        sequential_confidences = replica.last_confidences
        runner = PopulationRunner(replica, group=3)  # groups of 3 and 2 members
        batched = runner.run_rows(ROWS, [0, 1, 2])
        assert batched.tolist() == sequential.tolist()
        # the same margins (batched and per-row scores agree to float rounding), and they do vary by member
        torch.testing.assert_close(replica.last_confidences, sequential_confidences, atol=1e-3, rtol=1e-3)
        assert sequential_confidences.shape == (len(ROWS), 3) and sequential_confidences.std() > 0
        assert replica.stats.episodes == 2 * len(ROWS) * 3 and runner.population.forwards > 0
    finally:
        runner.close()
        replica.close()


def test_worker_batched_path_retries_infrastructure_failures_once() -> None:
    replica = _replica("lockstep")
    runner = PopulationRunner(replica, group=len(ROWS))
    try:
        clean = runner.run_rows(ROWS, [0])
        CRASHES["lockstep"] = 1
        assert runner.run_rows(ROWS, [0]).tolist() == clean.tolist()  # rebuilt envs, same rewards
        assert replica.stats.infra_retries == 1
        CRASHES["lockstep"] = 2
        with pytest.raises(EpisodeInfrastructureError, match="task 0: a lockstep group of 5 members failed "
                                                             "twice"):
            runner.run_rows(ROWS, [0])
    finally:
        CRASHES.clear()
        runner.close()
        replica.close()


def test_batched_path_is_chosen_for_lowrank_scoring_on_cuda_only() -> None:
    from types import SimpleNamespace

    from es_agent.population import batched_enabled

    cuda = SimpleNamespace(mode="lowrank", device="cuda:0")
    assert batched_enabled(cuda, CONFIG, 8)  # type: ignore[arg-type]
    assert not batched_enabled(cuda, CONFIG, 1)  # type: ignore[arg-type]
    assert not batched_enabled(SimpleNamespace(mode="full", device="cuda"), CONFIG, 8)  # type: ignore[arg-type]
    assert not batched_enabled(SimpleNamespace(mode="lowrank", device="cpu"), CONFIG, 8)  # type: ignore[arg-type]
    assert not batched_enabled(cuda, PolicyConfig(constrained_method="greedy"), 8)  # type: ignore[arg-type]


def test_replica_run_rows_dispatches_to_the_batched_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from es_agent import population

    replica = _replica()
    try:
        sequential = replica.run_rows(ROWS[:3], [1])
        monkeypatch.setattr(population, "batched_enabled", lambda *args: True)
        batched = replica.run_rows(ROWS[:3], [1])
        runner = replica._population
        assert runner is not None and runner.population.forwards > 0
        assert batched.tolist() == sequential.tolist()
    finally:
        if replica._population is not None:
            replica._population.close()
        replica.close()
