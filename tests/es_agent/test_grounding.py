"""The lexical goal prior on action targets (es_agent.grounding, PolicyConfig.goal_prior)."""

from __future__ import annotations

from typing import Any

import pytest

from es_agent.grounding import (
    add_goal_prior,
    answer_type_matches,
    content_words,
    expected_answer_type,
    goal_overlap,
    target_overlaps,
)
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


@pytest.mark.parametrize("name", ["goal_prior", "answer_prior"])
def test_lexical_prior_weights_are_validated(name: str) -> None:
    for bad in (-1.0, float("nan"), float("inf"), True, "2"):
        with pytest.raises(ValueError, match=f"{name} must be a finite number >= 0"):
            PolicyConfig(**{name: bad})
    with pytest.raises(ValueError, match=f"{name} needs constrained_method='score'"):
        PolicyConfig(**{name: 1.0, "constrained_method": "greedy"})
    assert getattr(PolicyConfig(**{name: 0.0, "constrained_method": "greedy"}), name) == 0.0


@pytest.mark.parametrize(("goal", "kind"), [
    ("What is the email address of the customer who placed order #000000393?", "email"),
    ("What is the phone number of the customer Sarah Kim?", "phone"),  # not a count: phone comes first
    ("How many products in the Snacks category cost less than $10?", "count"),  # not money
    ('How many points does the post "Best pizza?" in f/food have?', "count"),
    ("How much did I pay in total for the order I placed on May 30, 2023?", "money"),
    ("According to the sales report, what was the total of all orders in May 2023?", "money"),
    ("When did I place my most recent order?", "date"),
    ("What is the title of the highest-scoring post in f/food?", None),
    ("Who wrote the most recent review of Orbis Mouse Pad?", None),
    ("Show me the email address of the customer Theodore Pennywhistle", "email"),  # a request's object
    ("Show me the products in the Office Furniture category that cost under $10", None),  # navigation
    ("Change the price of Nordhaus Silicone Baking Mat, Black to $72.99", None),  # an edit, no answer
    ("Cancel order #000000497", None),
])
def test_expected_answer_type_reads_the_question_words(goal: str, kind: str | None) -> None:
    assert expected_answer_type(goal) == kind


def test_answer_type_matches_mark_only_whole_stop_answers_of_the_asked_shape() -> None:
    cands = ["stop [alex.martin@gmail.com]", "stop [Email: alex.martin@gmail.com]", "click [5]",
             "stop [555-570-3252]", "stop [$1,583.95]", "stop [12]", "stop [2023-07-06]", "stop [N/A]",
             "type [9] [alex.martin@gmail.com]"]
    email = answer_type_matches(cands, "What is the email of the customer?")
    assert email == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert answer_type_matches(cands, "What is the phone number of Sarah Kim?")[3] == 1.0
    money = answer_type_matches(cands, "How much did I spend in May?")
    assert [i for i, m in enumerate(money) if m] == [4]
    assert [i for i, m in enumerate(answer_type_matches(cands, "How many comments?")) if m] == [5]
    assert [i for i, m in enumerate(answer_type_matches(cands, "When was it shipped?")) if m] == [6]
    assert answer_type_matches(cands, "Who wrote it?") == [0.0] * len(cands)


def test_answer_prior_moves_the_real_policy_to_an_answer_of_the_asked_type(
        tiny: tuple[Any, Any], pools: Any, make_obs: Any) -> None:
    """On a real tiny-model forward: with a large weight the only count on the page ('42' of '42 comments')
    is the answer; at a small weight the pick is exactly the scores plus the weight on the typed answers."""
    model, tok = tiny
    genome = pools.baseline("no_skill")
    obs = make_obs(PAGE, "How many comments does the post Best Kennywood in Oakland? have")
    scored = LLMPolicy(model, tok, genome, PolicyConfig()).score_step(obs)
    assert "stop [42]" in scored.candidates
    assert LLMPolicy(model, tok, genome, PolicyConfig(answer_prior=1e4)).act(obs) == "stop [42]"
    small = LLMPolicy(model, tok, genome, PolicyConfig(answer_prior=0.3, goal_prior=0.2))
    expected = add_goal_prior(add_goal_prior(scored.scores("mean"),
                                             target_overlaps(scored.candidates, PAGE, obs["goal"]), 0.2),
                              answer_type_matches(scored.candidates, obs["goal"]), 0.3)
    assert small.act(obs) == scored.candidates[max(range(len(expected)), key=expected.__getitem__)]


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
