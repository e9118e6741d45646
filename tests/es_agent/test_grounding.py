"""The lexical goal prior on action targets (es_agent.grounding, PolicyConfig.goal_prior)."""

from __future__ import annotations

from typing import Any

import pytest

from es_agent.grounding import add_goal_prior, content_words, goal_overlap, target_overlaps
from es_agent.policy import LLMPolicy, PolicyConfig

PAGE = "\n".join([
    "[1] RootWebArea 'Forum' focused: True",
    "\t[4] link 'Most commented'",
    "\t[5] link 'Top'",
    "\t[7] button 'Upvote Best Kennywood in Oakland?'",
    "\t[8] link 'Best Kennywood in Oakland?'",
    "\t[9] searchbox 'Search query'",
    "\t[12] StaticText '42 comments'",
])


def test_content_words_drop_stop_words_and_cut_stems() -> None:
    assert content_words("Show me the posts of f/DIY, sorted by number of comments") == {
        "show", "posts", "diy", "sorte", "numbe", "comme"}
    assert content_words("Order #000000497 costs $12") == {"order", "000000497", "costs", "12"}
    assert content_words("the of a") == frozenset()


def test_goal_overlap_is_the_jaccard_of_content_words() -> None:
    # goal {upvot, post, best, kenny, oakla, pitts}; button {upvot, best, kenny, oakla}: 4 / 6
    goal = 'Upvote the post "Best Kennywood in Oakland?" in f/pittsburgh'
    assert goal_overlap(goal, "Upvote Best Kennywood in Oakland?") == pytest.approx(4 / 6)
    assert goal_overlap(goal, "Best Kennywood in Oakland?") == pytest.approx(3 / 6)
    assert goal_overlap(goal, "Downvote Best Kennywood in Oakland?") == pytest.approx(3 / 7)
    assert goal_overlap(goal, "") == 0.0 and goal_overlap("", "Top") == 0.0


def test_target_overlaps_score_only_named_targets() -> None:
    cands = ["click [4]", "click [7]", "type [9] [Kennywood]", "hover [8]", "stop [Top]", "scroll [down]",
             "click [99]"]
    got = target_overlaps(cands, PAGE, "Upvote the most commented post")
    # goal {upvot, most, comme, post}
    assert got == pytest.approx([2 / 4, 1 / 7, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert add_goal_prior([0.0, -1.0, float("-inf")], [0.5, 0.25, 1.0], 4.0) == [2.0, 0.0, float("-inf")]


def test_goal_prior_is_validated() -> None:
    for bad in (-1.0, float("nan"), float("inf"), True, "2"):
        with pytest.raises(ValueError, match="goal_prior must be a finite number >= 0"):
            PolicyConfig(goal_prior=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="goal_prior needs constrained_method='score'"):
        PolicyConfig(goal_prior=1.0, constrained_method="greedy")
    assert PolicyConfig(goal_prior=0.0, constrained_method="greedy").goal_prior == 0.0


@pytest.mark.parametrize("scoring", ["mean", "calibrated"])
def test_goal_prior_moves_the_real_policy_to_the_target_the_goal_names(
        tiny: tuple[Any, Any], pools: Any, make_obs: Any, scoring: str) -> None:
    """On a real tiny-model forward: off, the policy picks by its scores alone; with a large weight, the
    candidate whose target shares most of the goal wins, and the model still ranks the rest."""
    model, tok = tiny
    genome = pools.baseline("no_skill")
    obs = make_obs(PAGE, "Upvote the post 'Best Kennywood in Oakland?'")
    plain = LLMPolicy(model, tok, genome, PolicyConfig(scoring=scoring))  # type: ignore[arg-type]
    scored = plain.score_step(obs)
    assert plain.act(obs) == scored.choice(scoring)
    weighted = LLMPolicy(model, tok, genome, PolicyConfig(scoring=scoring, goal_prior=1e4))  # type: ignore[arg-type]
    assert weighted.act(obs) == "click [7]"
    overlaps = target_overlaps(scored.candidates, PAGE, obs["goal"])
    small = LLMPolicy(model, tok, genome, PolicyConfig(scoring=scoring, goal_prior=0.5))  # type: ignore[arg-type]
    expected = add_goal_prior(scored.scores(scoring), overlaps, 0.5)
    assert small.act(obs) == scored.candidates[max(range(len(expected)), key=expected.__getitem__)]
