"""The policy's KV-cache reuse across steps (longest common prefix with the slot's last prompt): the same
scores as an uncached prefill, and never a cache computed under other weights."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from es_agent.perturb import perturbed
from es_agent.policy import LLMPolicy, PolicyConfig
from es_agent.prefix_cache import PromptKVCache, common_prefix, weights_fingerprint
from es_agent.tiny import tiny_qwen

from .conftest import FORUM_AXTREE, SHOP_AXTREE


def _episode(make_obs: Any) -> list[dict[str, str]]:
    goal = "Search for 'wireless mouse' and tell me its price"
    return [make_obs(SHOP_AXTREE, goal), make_obs(SHOP_AXTREE + "\n\t[40] link 'Next Page'", goal),
            make_obs(FORUM_AXTREE, goal, error="Element [99] not found"), make_obs(SHOP_AXTREE, goal)]


@pytest.mark.parametrize("method", ["score", "greedy"])
def test_lcp_cache_gives_the_scores_of_a_full_prefill(tiny: tuple[Any, Any], pools: Any, make_obs: Any,
                                                      method: str) -> None:
    model, tok = tiny  # fp32
    genome = pools.baseline("default")
    config = {"constrained_method": method}
    cached = LLMPolicy(model, tok, genome, PolicyConfig(prefix_cache="lcp", **config))  # type: ignore[arg-type]
    plain = LLMPolicy(model, tok, genome, PolicyConfig(prefix_cache="off", **config))  # type: ignore[arg-type]
    for step, obs in enumerate(_episode(make_obs)):
        assert cached.act(obs) == plain.act(obs)
        a, b = cached.last_info[0], plain.last_info[0]
        assert a["prompt_tokens"] == b["prompt_tokens"] == b["prefilled_tokens"]
        if method == "score":
            assert a["score"] == pytest.approx(b["score"], abs=1e-5)
        if step:  # the system message, the objective and the older history come from the cache
            assert a["prefilled_tokens"] < a["prompt_tokens"] - 100
    with torch.inference_mode():  # the logits after a cached prefix equal those of a plain prefill
        from es_agent.decoding import prefill

        ids = cached._build_prompt(_episode(make_obs)[0], 0).ids
        cached._prefill(0, ids)
        row, reused = cached._prefill(0, ids)  # the same prompt again: all but its last token cached
        assert reused == len(ids) - 1
        assert torch.allclose(row.logits, prefill(model, ids).logits, atol=1e-5)


def test_lcp_cache_shares_across_slots_and_batches_equal_single_acts(tiny: tuple[Any, Any], pools: Any,
                                                                     make_obs: Any) -> None:
    model, tok = tiny
    genome = pools.baseline("no_skill")
    batched = LLMPolicy(model, tok, genome, PolicyConfig())
    observations = [make_obs(), make_obs(FORUM_AXTREE, "Open the books forum")]
    actions = batched.act_batch(observations)
    assert batched.last_info[1]["prefilled_tokens"] < batched.last_info[1]["prompt_tokens"] - 100  # system
    for i, obs in enumerate(observations):
        single = LLMPolicy(model, tok, genome, PolicyConfig(prefix_cache="off"))
        assert single.act(obs) == actions[i]
        assert single.last_info[0]["score"] == pytest.approx(batched.last_info[i]["score"], abs=1e-5)


@pytest.mark.parametrize("change", ["in_place", "lowrank_hooks", "system_mode"])
def test_a_stale_cache_is_never_used_after_the_weights_change(pools: Any, make_obs: Any, change: str) -> None:
    """No reset between the steps: the fingerprint check alone must drop the cache of the old weights."""
    model, tok = tiny_qwen(seed=0)  # its own model: this test changes weights
    mode = "system" if change == "system_mode" else "lcp"
    genome = pools.baseline("default")
    cached = LLMPolicy(model, tok, genome, PolicyConfig(prefix_cache=mode))  # type: ignore[arg-type]
    plain = LLMPolicy(model, tok, genome, PolicyConfig(prefix_cache="off"))
    first, second = _episode(make_obs)[:2]
    assert cached.act(first) == plain.act(first)
    if change == "lowrank_hooks":
        context = perturbed(model, seed=7, scale=0.5, mode="lowrank", rank=2)
    else:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        context = None
    if context is None:
        cached.act(second), plain.act(second)
    else:
        with context:
            cached.act(second), plain.act(second)
    assert cached.last_info[0]["score"] == pytest.approx(plain.last_info[0]["score"], abs=1e-5)
    if mode == "lcp":
        assert cached._kv.stats["invalidations"] == 1
        assert cached.last_info[0]["prefilled_tokens"] == cached.last_info[0]["prompt_tokens"]


def test_weights_fingerprint_sees_in_place_writes_casts_and_hooks() -> None:
    model, _ = tiny_qwen(seed=0)
    base = weights_fingerprint(model)
    assert weights_fingerprint(model) == base
    with torch.no_grad():
        next(model.parameters()).detach().mul_(1.0)  # a write, even of the same values
    moved = weights_fingerprint(model)
    assert moved != base
    handle = model.model.layers[0].mlp.register_forward_hook(lambda *a: None)
    assert weights_fingerprint(model) != moved
    handle.remove()
    assert weights_fingerprint(model) == moved
    model.to(torch.bfloat16)
    assert weights_fingerprint(model) != moved


def test_prompt_kv_cache_keeps_at_least_one_token_to_run(tiny: tuple[Any, Any]) -> None:
    model, _ = tiny
    from es_agent.decoding import prefill

    kv = PromptKVCache(model)
    ids = list(range(5, 25))
    with torch.inference_mode():
        kv.store(0, ids, prefill(model, ids))
        assert kv.lookup(0, ids) is not None and len(kv.lookup(0, ids).ids) == len(ids) - 1  # type: ignore[union-attr]
        assert len(kv.lookup(3, ids[:10] + [1, 2]).ids) == 10  # type: ignore[union-attr]  # other slot
        assert kv.lookup(0, [99, 98]) is None
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0
    kv.clear()
    assert not len(kv)
