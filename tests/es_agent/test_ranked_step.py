"""``LLMPolicy.ranked_step``: the final scores constrained decoding picks from, without acting (real forwards
of a tiny Qwen-architecture model), and the exploration-reach summary built on it."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.common import BenchmarkError
from benchmarks.exploration_reach import Pick, per_step, reference_rank, summarize
from es_agent.decoding import best_index
from es_agent.perturb import perturbed
from es_agent.policy import LLMPolicy, PolicyConfig


@pytest.mark.parametrize("config", [PolicyConfig(), PolicyConfig(scoring="calibrated"),
                                    PolicyConfig(scoring="calibrated", goal_prior=150.0, answer_prior=100.0)])
def test_ranked_step_picks_what_act_picks(tiny: tuple[Any, Any], pools: Any, make_obs: Any,
                                          config: PolicyConfig) -> None:
    model, tok = tiny
    obs = make_obs()
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), config)
    scored, scores = policy.ranked_step(obs)
    assert len(scores) == len(scored.candidates)
    assert policy._histories.get(0, []) == []  # no action was taken
    assert policy.act(obs) == scored.candidates[best_index(scores)]
    assert policy.last_info[0]["score"] == pytest.approx(max(scores), abs=1e-4)
    top, runner_up = sorted(scores)[-1], sorted(scores)[-2]
    assert policy.last_info[0]["margin"] == pytest.approx(top - runner_up, abs=1e-4)  # for the tie-break
    plain = scored.scores(config.scoring, config.prior_weight)
    lexical = [s - p for s, p in zip(scores, plain, strict=True)]
    if config.goal_prior:  # the goal names 'wireless mouse': the prior lifts some candidates, not all
        assert max(lexical) > 0 and min(lexical) == 0
    else:
        assert lexical == [0.0] * len(scores)


def test_ranked_step_follows_perturbed_weights(tiny: tuple[Any, Any], pools: Any, make_obs: Any) -> None:
    model, tok = tiny
    obs = make_obs()
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig(scoring="calibrated"))
    _, centre = policy.ranked_step(obs)
    with perturbed(model, 7, 0.5):
        _, moved = policy.ranked_step(obs)  # content-free priors recomputed for the new weights
    _, again = policy.ranked_step(obs)
    assert moved != pytest.approx(centre, abs=1e-3)
    assert again == pytest.approx(centre, abs=1e-5)


def test_reference_rank() -> None:
    assert reference_rank([0.1, 0.5, 0.3], [False, False, True]) == 2
    assert reference_rank([0.1, 0.5, 0.3], [True, True, False]) == 1
    assert reference_rank([0.1, 0.5], [False, False]) is None


def _pick(task: int, index: int, sigma: float, seed: int, sign: int, agrees: bool, rank: int | None = 3,
          pick: str = "") -> Pick:
    return Pick(task, index, sigma, seed, sign, pick or ("ref" if agrees else "other"), agrees,
                1 if agrees else rank)


def test_summarize_counts_gains_losses_and_tasks() -> None:
    # task 1: two steps, the centre gets step 1 wrong; task 2: one step the centre gets right;
    # task 3: unreachable (no candidate is the reference)
    centre = [_pick(1, 0, 0, 0, 0, True), _pick(1, 1, 0, 0, 0, False), _pick(2, 0, 0, 0, 0, True),
              _pick(3, 0, 0, 0, 0, False, rank=None)]
    plus = [_pick(1, 0, 0.1, 1000, 1, True), _pick(1, 1, 0.1, 1000, 1, True),
            _pick(2, 0, 0.1, 1000, 1, False), _pick(3, 0, 0.1, 1000, 1, False, rank=None)]
    minus = [_pick(1, 0, 0.1, 1000, -1, True), _pick(1, 1, 0.1, 1000, -1, False),
             _pick(2, 0, 0.1, 1000, -1, True), _pick(3, 0, 0.1, 1000, -1, False, rank=None)]
    out = summarize(centre + plus + minus)
    assert (out["steps"], out["reachable"], out["tasks"]) == (4, 3, 3)
    assert out["centre"] == {"agree": 2, "tasks_solved": 1, "median_rank": 1.0}
    row = out["by_sigma"]["0.1"]
    assert row["perturbations"] == 2
    assert row["changed"] == [2, 8]           # step (1, 1) under +, step (2, 0) under +
    assert row["gained_per_perturbation"] == [1, 2]
    assert row["gained_by_any"] == [1, 1]
    assert row["lost_per_perturbation"] == [1, 4]
    assert row["tasks_gained"] == [1] and row["tasks_lost"] == [2]


def test_summarize_refuses_picks_without_a_centre() -> None:
    with pytest.raises(BenchmarkError, match="centre"):
        summarize([_pick(1, 0, 0.1, 1000, 1, True)])


def test_per_step_lists_every_perturbation_rank() -> None:
    from es_agent.agreement import ReferenceStep

    steps = [ReferenceStep(1, "tier1_train", 0, {}, "click [4]"),
             ReferenceStep(1, "tier1_train", 1, {}, "stop []")]
    picks = [_pick(1, 0, 0, 0, 0, False, rank=5), _pick(1, 0, 0.1, 1000, -1, True),
             _pick(1, 0, 0.1, 1000, 1, False, rank=7), _pick(1, 1, 0, 0, 0, True)]
    rows = per_step(steps, picks)
    assert rows[0] == {"task_id": 1, "index": 0, "reference": "click [4]", "centre_rank": 5,
                       "centre_agrees": False, "by_sigma": {"0.1": {"ranks": [7, 1], "agree": 1}}}
    assert rows[1]["centre_agrees"] is True and rows[1]["by_sigma"] == {}
