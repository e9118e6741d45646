"""The policy: action extraction, candidate actions, constrained and free decoding, batching, caching."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from es_agent.actions_space import (
    CandidateConfig,
    answer_candidates,
    answer_parts,
    build_candidates,
    comma_names,
    extract_action,
    goal_phrases,
    normalize_action,
)
from es_agent.axtree import parse_axtree
from es_agent.decoding import TokenTrie, TrieChooser, decode, prefill, score_candidates
from es_agent.policy import LLMPolicy, PolicyConfig

from .conftest import FORUM_AXTREE, SHOP_AXTREE

COT = "In summary, the next action I will perform is"


@pytest.mark.parametrize(("text", "expected"), [
    ("click [12]", "click [12]"),
    ("Click [ 12 ]", "click [12]"),
    ("  click [12].", "click [12]"),
    ("1. click [4]", "click [4]"),
    ("- hover [8]", "hover [8]"),
    ("type [5] [wireless mouse]", "type [5] [wireless mouse]"),
    ("type [5] [wireless mouse] [0]", "type [5] [wireless mouse] [0]"),
    ("type [5] [a [b] c] [press_enter_after=1]", "type [5] [a [b] c] [1]"),
    ("press [Ctrl+v]", "press [Ctrl+v]"),
    ("scroll [direction=down]", "scroll [down]"),
    ("SCROLL [Up]", "scroll [up]"),
    ("go_back", "go_back"),
    ("new_tab", "new_tab"),
    ("tab_focus [1]", "tab_focus [1]"),
    ("goto [http://localhost:7770/sales/order/170/]", "goto [http://localhost:7770/sales/order/170/]"),
    ("stop [The price is $5]", "stop [The price is $5]"),
    ("stop [N/A]", "stop [N/A]"),
    ("stop", "stop []"),
    ("`click [3]`", "click [3]"),
    (f"Let's think step-by-step. The box is [5]. {COT} ```type [5] [mouse] [1]```", "type [5] [mouse] [1]"),
    (f"{COT} ```stop [$12.00]```\nI am done.", "stop [$12.00]"),
    (f"First click [3]? No. {COT} `click [4]`", "click [4]"),
    (f"{COT} click [7]", "click [7]"),
    (f"{COT} ```click [7]", "click [7]"),  # cut off by the token bound
    ("The box is [5].\nAction: type [5] [blue shirt]", "type [5] [blue shirt]"),
    ("Sure! Here is the code:\n```python\nprint('hi')\n```\nclick [9]", "click [9]"),
    ("```\nclick [9]\n```", "click [9]"),
    ("I should hover [8] and then maybe click [9]", "hover [8]"),
    ("Answer:\n\nclick [21]\nclick [22]", "click [21]"),
])
def test_extract_action(text: str, expected: str) -> None:
    assert extract_action(text) == expected


def test_extract_action_reasoning_style_takes_last_line() -> None:
    assert extract_action("click [1] would be wrong\nso: click [2]", style="reasoning") == "click [2]"
    assert extract_action("click [1] would be wrong\nso: click [2]", style="direct") == "click [1]"


@pytest.mark.parametrize("text", [
    "", "I think I should click the button.", "I will stop here.", "goto [http://a b]", "click [1 2]",
    "def f():\n    return 1", "type [5]", "scroll [left]", "<|im_end|>",
])
def test_extract_action_finds_nothing(text: str) -> None:
    assert extract_action(text) is None


def test_normalize_action_rejects_prose() -> None:
    assert normalize_action("click [12] please") is None
    assert normalize_action("stop [a] [b]") == "stop [a] [b]"


def test_goal_phrases() -> None:
    assert goal_phrases("Search for 'wireless mouse' and tell me the price", 3) == [
        "wireless mouse", "price"]
    phrases = goal_phrases("How many reviews does the product Sprite Yoga Strap 6 foot have?", 4)
    assert phrases[0] == "Sprite Yoga Strap 6 foot" and "reviews" in phrases
    assert "order 000000170" in goal_phrases("What is the total of order 000000170?", 5)
    assert goal_phrases("", 5) == []


def test_goal_phrases_keep_names_across_commas_and_numbers() -> None:
    goal = "Add 4 of Nexon Instant Print Camera, Kit Edition to my shopping cart, then stop"
    assert comma_names(goal) == ["Nexon Instant Print Camera, Kit Edition"]
    phrases = goal_phrases(goal, 8)
    assert phrases[0] == "Nexon Instant Print Camera, Kit Edition" and "4" in phrases
    assert comma_names("Review Velvetine Cleanser, 2 oz? Answer with a nickname.") == [
        "Velvetine Cleanser, 2 oz"]
    assert comma_names("Open the page, then Stop") == []  # a comma before a stop word ends the name
    assert "GadgetGran" in goal_phrases('Review it with the nickname GadgetGran, the summary "Fine"', 4)


def test_selects_offer_their_options_and_answers_start_near_the_goal() -> None:
    tree = ("[1] combobox 'Sort By' hasPopup: menu expanded: False\n\t[2] MenuListPopup ''\n"
            "\t\t[3] option 'Position' selected: True\n\t\t[4] option 'Price' selected: False\n"
            "[5] searchbox 'Search'\n" + "".join(f"[{10 + i}] StaticText 'filler {i}'\n" for i in range(30))
            + "[50] link 'Casa Verde Blanket, Navy'\n[51] cell '$12.50'\n")
    goal = "How much is Casa Verde Blanket, Navy?"
    cands = build_candidates(tree, goal)
    assert [c for c in cands if c.startswith("type [1]")] == ["type [1] [Position]", "type [1] [Price]"]
    assert "type [5] [Casa Verde Blanket, Navy]" in cands
    answers = answer_candidates(parse_axtree(tree), goal, CandidateConfig(max_answers=4))
    assert answers == ["Casa Verde Blanket, Navy", "$12.50", "filler 0", "N/A"]


@pytest.mark.parametrize(("text", "parts"), [
    ("17 comments on First attempt at pad thai", ["17"]),
    ("3 items", ["3"]),
    (" 3 Reviews", ["3"]),
    ("-4 points", ["-4"]),
    ("Review by Katie, posted on 2023-08-05", ["Katie"]),
    ("Submitted by Mary Ann Lee", ["Mary Ann Lee"]),
    ("Order Date: 2023-07-06", ["2023-07-06"]),
    ("Price: $3.49", ["$3.49"]),
    ("$12.00", []),
    ("Status: ", []),
    ("Score 7", []),
    ("submitted by someone", []),
])
def test_answer_parts_are_the_short_answers_inside_a_text(text: str, parts: list[str]) -> None:
    assert answer_parts(text) == parts


def test_an_answer_inside_a_page_text_is_offered_right_after_it() -> None:
    """The tier-1 answers that no page text equals (a reviewer's nickname, a count): 23 of the 239 held-out
    and tier-1 reference answers before answer_parts."""
    tree = ("[1] heading 'Zentro PS Vita Memory Card 64GB, Black'\n"
            "[2] StaticText 'Review by Katie, posted on 2023-08-05'\n[3] StaticText '3 items'\n")
    goal = "Who wrote the latest review of Zentro PS Vita Memory Card 64GB, Black? Answer with a nickname."
    answers = answer_candidates(parse_axtree(tree), goal, CandidateConfig())
    assert answers == ["Zentro PS Vita Memory Card 64GB, Black", "Review by Katie, posted on 2023-08-05",
                       "Katie", "3 items", "3", "N/A"]


def test_build_candidates_covers_the_page() -> None:
    goal = "Search for 'wireless mouse' and tell me its price"
    cands = build_candidates(SHOP_AXTREE, goal)
    for expected in ("click [10]", "click [11]", "click [19]", "click [33]", "click [34]", "click [17]",
                     "type [17] [wireless mouse]", "type [17] [price]", "scroll [down]", "go_back",
                     "stop [$12.00]", "stop [Wireless Mouse]", "stop [wireless mouse]", "stop [N/A]"):
        assert expected in cands
    never = ("goto", "click [1]", "click [30]", "click [32]", "type [10]")
    assert not any(c.startswith(never) for c in cands)
    assert len(cands) == len(set(cands))
    assert all(normalize_action(c) == c for c in cands)
    small = build_candidates(SHOP_AXTREE, goal, CandidateConfig(max_type_texts=1, max_answers=2,
                                                                 extra_actions=(), include_stop=True))
    assert [c for c in small if c.startswith("type")] == ["type [17] [wireless mouse]"]
    assert [c for c in small if c.startswith("stop")] == ["stop [wireless mouse]", "stop [N/A]"]
    assert "scroll [down]" not in small


def test_answers_never_break_the_grammar() -> None:
    cands = build_candidates("[1] StaticText 'Order [#170] total'", "", CandidateConfig(extra_actions=()))
    assert cands == ["stop [Order (#170) total]", "stop [N/A]"]


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_tree_scoring_equals_scoring_each_candidate_alone(tiny: tuple[Any, Any], impl: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = tiny
    monkeypatch.setattr(model.config, "_attn_implementation", impl)
    prompt = tok("OBJECTIVE: find the price\n[12] link 'Customers'\n[13] button 'Search'").input_ids
    texts = ["click [12]", "click [13]", "click [123]", "type [5] [price]", "stop [N/A]", "go_back"]
    cands = [tok(t).input_ids + [tok.eos_token_id] for t in texts]
    with torch.inference_mode():
        tree = score_candidates(model, prefill(model, prompt), cands)
        for text, cand, score in zip(texts, cands, tree, strict=True):
            logp = torch.log_softmax(model(torch.tensor([prompt + cand])).logits[0].float(), -1)
            alone = sum(float(logp[len(prompt) - 1 + j, t]) for j, t in enumerate(cand)) / len(cand)
            assert score == pytest.approx(alone, abs=1e-4), text


def test_tree_scoring_runs_only_inner_trie_nodes_and_leaves_the_row_intact(tiny: tuple[Any, Any]) -> None:
    """Leaves need no forward (their log-probability comes from the parent's logits), and the row's cache is
    neither extended nor changed by scoring."""
    from es_agent.decoding import _flatten_trie, cache_layers

    model, tok = tiny
    prompt = tok("OBJECTIVE: buy\n[12] link 'Customers'").input_ids
    cands = [tok(t).input_ids + [tok.eos_token_id] for t in ("click [12]", "click [13]", "stop [N/A]")]
    tokens, parents, _, _ = _flatten_trie(cands)
    inner = {p for p in parents if p >= 0}
    fed: list[int] = []
    handle = model.register_forward_pre_hook(lambda m, a, kw: fed.append(kw["input_ids"].shape[1]),
                                             with_kwargs=True)
    try:
        with torch.inference_mode():
            row = prefill(model, prompt)
            before = [(k.clone(), v.clone()) for k, v in cache_layers(row.cache)]
            fed.clear()
            score_candidates(model, row, cands)
    finally:
        handle.remove()
    assert fed == [len(inner)] and len(inner) < len(tokens)
    for (k, v), (k0, v0) in zip(cache_layers(row.cache), before, strict=True):
        assert torch.equal(k, k0) and torch.equal(v, v0)


def test_trie_greedy_decode_yields_a_candidate(tiny: tuple[Any, Any]) -> None:
    model, tok = tiny
    cands = ["click [12]", "click [123]", "click [13]", "stop [N/A]"]
    seqs = [tok(c).input_ids + [tok.eos_token_id] for c in cands]
    with torch.inference_mode():
        rows = [prefill(model, tok(p).input_ids) for p in ("page one", "a much longer second page prompt")]
        chooser = TrieChooser([TokenTrie(seqs), TokenTrie(seqs[:2])])
        outputs = decode(model, rows, chooser, pad_id=tok.pad_token_id)
    assert [seqs[c] for c in chooser.chosen] == outputs
    assert chooser.chosen[1] in (0, 1)
    assert TokenTrie(seqs).branch_points() >= 2


def test_prefill_with_prefix_equals_plain_prefill(tiny: tuple[Any, Any]) -> None:
    from es_agent.decoding import PrefixKV

    model, tok = tiny
    ids = tok("<|im_start|>system\nYou are an agent.<|im_end|>\n<|im_start|>user\n[1] link 'x'").input_ids
    with torch.inference_mode():
        prefix = PrefixKV(ids=tuple(ids[:8]), state=prefill(model, ids[:8]))
        assert torch.allclose(prefill(model, ids, prefix).logits, prefill(model, ids).logits, atol=1e-5)


@pytest.mark.parametrize("method", ["score", "greedy"])
def test_constrained_act_is_always_a_candidate(tiny: tuple[Any, Any], pools: Any, make_obs: Any,
                                               method: str) -> None:
    model, tok = tiny
    for genome in (pools.baseline("no_skill"), pools.baseline("webarena_cot"), pools.genome(action_format=3)):
        policy = LLMPolicy(model, tok, genome, PolicyConfig(constrained_method=method))
        for obs in (make_obs(), make_obs(FORUM_AXTREE, "Open the books forum"), make_obs("", "say hi")):
            action = policy.act(obs)
            assert action in policy.candidates(obs)
            assert normalize_action(action) == action
            assert policy.last_info[0]["candidates"] == len(policy.candidates(obs))
        assert policy.stats["acts"] == 3 and policy.stats["parse_failures"] == 0


@pytest.mark.parametrize(("decoding", "method"), [("constrained", "score"), ("constrained", "greedy"),
                                                  ("free", "score")])
def test_act_batch_equals_individual_acts(tiny: tuple[Any, Any], pools: Any, make_obs: Any, decoding: str,
                                          method: str) -> None:
    model, tok = tiny
    config = PolicyConfig(decoding=decoding, constrained_method=method, max_new_tokens=12)
    observations = [make_obs(), make_obs(FORUM_AXTREE, "Open the books forum"),
                    make_obs(SHOP_AXTREE + "\n\t[40] link 'Next Page'", "Go to the next page")]
    genome = pools.baseline("default")
    batched = LLMPolicy(model, tok, genome, config)
    first = batched.act_batch(observations)
    second = batched.act_batch([dict(o, last_action_error="boom") for o in observations])
    for i, obs in enumerate(observations):
        single = LLMPolicy(model, tok, genome, config)
        assert single.act(obs) == first[i]
        assert single.act(dict(obs, last_action_error="boom")) == second[i]
        assert single.render(obs) == batched.render(obs, slot=i)


@pytest.mark.parametrize("mode", ["lcp", "system"])
def test_prefix_cache_changes_nothing_but_speed(tiny: tuple[Any, Any], pools: Any, make_obs: Any,
                                                mode: str) -> None:
    model, tok = tiny
    genome = pools.baseline("default")
    cached = LLMPolicy(model, tok, genome, PolicyConfig(prefix_cache=mode))  # type: ignore[arg-type]
    plain = LLMPolicy(model, tok, genome, PolicyConfig(prefix_cache="off"))
    for obs in (make_obs(), make_obs(FORUM_AXTREE, "Open the books forum")):
        assert cached.act(obs) == plain.act(obs)
        assert cached.last_info[0]["score"] == pytest.approx(plain.last_info[0]["score"], abs=1e-4)
    assert len(cached._prefixes if mode == "system" else cached._kv) == 1
    assert cached.stats["prefilled_tokens"] < plain.stats["prefilled_tokens"] == plain.stats["prompt_tokens"]
    cached.reset()
    assert not cached._prefixes and not len(cached._kv)  # weights may change between episodes


def test_history_and_errors_reach_the_prompt(tiny: tuple[Any, Any], pools: Any, make_obs: Any) -> None:
    model, tok = tiny
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig(history_len=2))
    first = policy.act(make_obs())
    policy.act(make_obs(error="Element [99] not found"))
    prompt = policy.render(make_obs())
    assert f"1. {first} (failed: Element [99] not found)" in prompt
    policy.act(make_obs())
    assert "1. " not in policy.render(make_obs()) and "3. " in policy.render(make_obs())
    policy.reset()
    assert "PREVIOUS ACTIONS:\nNone" in policy.render(make_obs())


def test_free_mode_counts_parse_failures(tiny: tuple[Any, Any], pools: Any, make_obs: Any) -> None:
    model, tok = tiny  # a random tiny model writes gibberish: never an action
    config = PolicyConfig(decoding="free", max_new_tokens=8)
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), config)
    action = policy.act(make_obs())
    info = policy.last_info[0]
    assert info["parse_failed"] and action == info["raw"].strip()
    assert 1 <= info["generated_tokens"] <= 8
    assert policy.stats["parse_failures"] == 1
    assert policy.stats["generated_tokens"] == info["generated_tokens"]


@pytest.mark.parametrize("observation", ["full", "compact"])
def test_long_axtree_is_truncated_to_budget(tiny: tuple[Any, Any], pools: Any, make_obs: Any,
                                            observation: str) -> None:
    """Truncated as the full text, then (compact) rendered in fewer tokens: the same lines and candidates."""
    model, tok = tiny
    lines = [f"\t[{i}] StaticText 'row {i} of a very long product table'" for i in range(100, 600)]
    lines[250] = "\t[350] textbox 'Email' focused: True"
    obs = make_obs("[1] RootWebArea 'Huge'\n" + "\n".join(lines))
    config = PolicyConfig(max_prompt_tokens=1500, min_axtree_tokens=64,
                          observation=observation)  # type: ignore[arg-type]
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), config)
    action = policy.act(obs)
    tokens = policy.last_info[0]["prompt_tokens"]
    assert 1300 < tokens <= 1500 or observation == "compact" and tokens <= 1500
    assert policy.last_info[0]["omitted_axtree_lines"] > 0 and policy.stats["truncated_observations"] == 1
    prompt = policy.render(obs)
    assert "RootWebArea 'Huge'" in prompt and "[350] textbox 'Email' focused: True" in prompt
    full = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig(
        max_prompt_tokens=1500, min_axtree_tokens=64, observation="full"))
    assert policy.candidates(obs) == full.candidates(obs)
    if observation == "compact":
        assert tokens < len(full._build_prompt(obs, 0).ids) - 50
    candidates = policy.candidates(obs)
    assert action in candidates and any(c.startswith("type [350]") for c in candidates)


def test_policy_config_validation() -> None:
    with pytest.raises(ValueError, match="decoding"):
        PolicyConfig(decoding="sampled")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="constrained_method"):
        PolicyConfig(constrained_method="beam")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PolicyConfig(max_new_tokens=0)
    with pytest.raises(ValueError, match="observation"):
        PolicyConfig(observation="tiny")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix_cache"):
        PolicyConfig(prefix_cache="always")  # type: ignore[arg-type]
    assert PolicyConfig(prefix_cache=True).cache_mode == "lcp"
    assert PolicyConfig(prefix_cache=False).cache_mode == "off"


def test_named_targets_are_scored_with_their_role_and_name_and_acted_as_bare_ids(
        tiny: tuple[Any, Any], pools: Any, make_obs: Any) -> None:
    """``PolicyConfig.name_targets``: the scored text names the target (``scored_texts``), the action taken
    is still a candidate with a bare id, and the scores differ from the default's only on named targets."""
    from es_agent.policy import scored_texts

    tree = ("[1] RootWebArea 'Shop' focused: True\n\t[12] link 'Sunpeak Beef Jerky'\n\t[7] searchbox 'Search'"
            "\n\t[9] button ''")
    cands = ["click [12]", "type [7] [Price]", "click [9]", "stop [N/A]", "hover [12]", "click [5]"]
    assert scored_texts(cands, tree) == [
        "click [12] link 'Sunpeak Beef Jerky'", "type [7] searchbox 'Search' [Price]", "click [9]",
        "stop [N/A]", "hover [12] link 'Sunpeak Beef Jerky'", "click [5]"]
    model, tok = tiny
    genome = pools.baseline("no_skill")
    obs = make_obs(FORUM_AXTREE, "Open the books forum")
    plain = LLMPolicy(model, tok, genome, PolicyConfig()).score_step(obs)
    named_policy = LLMPolicy(model, tok, genome, PolicyConfig(name_targets=True))
    named = named_policy.score_step(obs)
    assert named.candidates == plain.candidates and named.kinds == plain.kinds
    texts = scored_texts(plain.candidates, named_policy._build_prompt(obs, 0).axtree)
    changed = [i for i, (c, t) in enumerate(zip(plain.candidates, texts, strict=True)) if c != t]
    assert changed, "the forum page has named links"
    for i, (a, b) in enumerate(zip(plain.token_logps, named.token_logps, strict=True)):
        assert (len(a) != len(b)) == (i in changed)
    assert named_policy.act(obs) in named_policy.candidates(obs)


@pytest.mark.parametrize("scoring", ["mean", "two_stage"])
def test_kind_bias_moves_the_real_policy_between_kinds(tiny: tuple[Any, Any], pools: Any, make_obs: Any,
                                                       scoring: str) -> None:
    """A large enough bias decides the kind on a real tiny-model forward; within the kind the model still
    chooses (the pick is that kind's best candidate without the bias)."""
    model, tok = tiny
    genome = pools.baseline("no_skill")
    obs = make_obs()
    plain = LLMPolicy(model, tok, genome, PolicyConfig(scoring=scoring))  # type: ignore[arg-type]
    scored = plain.score_step(obs)
    for kind in ("stop", "click"):
        biased = LLMPolicy(model, tok, genome, PolicyConfig(
            scoring=scoring, kind_bias={kind: 1e4}))  # type: ignore[arg-type]
        action = biased.act(obs)
        inside = [i for i, k in enumerate(scored.kinds) if k == kind]
        by_kind = scored.scores("sum" if scoring == "two_stage" else scoring)
        assert action == scored.candidates[max(inside, key=lambda i: (by_kind[i], -i))]
    assert plain.act(obs) == scored.choice(scoring)
