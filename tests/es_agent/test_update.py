"""Streamed seed-based updates: equal to the dense reference, consistent with what was evaluated, bounded in
memory, and exact restores of updated weights."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from tiny_models import tiny_net
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from es_agent.lowrank import linear_targets, lowrank_delta
from es_agent.noise import CHUNK_SIZE, block_capacity, noise
from es_agent.perturb import apply_update, perturbed, select_parameters

SEEDS = [21, 22, 23, 21]
COEFFS = [0.4, -0.3, 0.2, 0.1]


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


class AllocationTracker(TorchDispatchMode):
    """Records the largest tensor storage created by any op (outputs that alias no input)."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs))
                  if isinstance(t, torch.Tensor)}
        out = func(*args, **kwargs)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.largest = max(self.largest, t.untyped_storage().nbytes())
        return out


def dense_reference(model: nn.Module, mode: str, rank: int | None = None) -> dict[str, torch.Tensor]:
    """theta + sum_i c_i eps_i with every eps materialised as a full tensor, summed in fp32."""
    before = snapshot(model)
    expected = dict(before)
    selected = select_parameters(model)
    if mode == "full":
        deltas = {sp.name: sum(c * noise(s, sp.index, sp.param.shape)
                               for s, c in zip(SEEDS, COEFFS, strict=True))
                  for sp in selected}
    else:
        deltas = {}
        for t in linear_targets(model, selected):
            out_f, in_f = t.module.weight.shape
            if t.weight is not None:
                deltas[t.weight.name] = sum(c * lowrank_delta(s, t.weight.index, out_f, in_f, rank)
                                            for s, c in zip(SEEDS, COEFFS, strict=True))
            if t.bias is not None:
                deltas[t.bias.name] = sum(c * noise(s, t.bias.index, out_f)
                                          for s, c in zip(SEEDS, COEFFS, strict=True))
    for name, delta in deltas.items():
        expected[name] = (before[name].float() + delta).to(before[name].dtype)
    return expected


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_update_equals_dense_reference(dtype: torch.dtype) -> None:
    model = tiny_net(dtype=dtype)
    expected = dense_reference(model, "full")
    apply_update(model, SEEDS, COEFFS)
    tol = 1e-6 if dtype == torch.float32 else 8e-3
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), expected[name], rtol=tol, atol=tol, msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lowrank_update_equals_dense_reference(dtype: torch.dtype) -> None:
    model = tiny_net(dtype=dtype, tie_word_embeddings=True)
    before = snapshot(model)
    expected = dense_reference(model, "lowrank", rank=3)
    apply_update(model, SEEDS, COEFFS, mode="lowrank", rank=3)
    tol = 1e-5 if dtype == torch.float32 else 8e-3
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), expected[name], rtol=tol, atol=tol, msg=name)
    for name in ("model.embed_tokens.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight"):
        assert torch.equal(model.get_parameter(name), before[name]), f"{name} is not a Linear weight"
    assert not torch.equal(model.get_parameter("model.layers.0.mlp.up_proj.weight"),
                           before["model.layers.0.mlp.up_proj.weight"])


def test_full_update_reproduces_the_evaluated_weights_exactly() -> None:
    model = tiny_net(dtype=torch.bfloat16)
    with perturbed(model, 77, -0.03):
        evaluated = snapshot(model)
    apply_update(model, [77], [-0.03])
    for name, p in model.named_parameters():
        assert torch.equal(p, evaluated[name]), name


def test_lowrank_update_reproduces_the_evaluated_function() -> None:
    model = tiny_net()
    x = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        with perturbed(model, 5, 0.2, mode="lowrank", rank=2):
            evaluated = model(x).logits
        apply_update(model, [5], [0.2], mode="lowrank", rank=2)
        torch.testing.assert_close(model(x).logits, evaluated, rtol=1e-4, atol=1e-4)


def test_antithetic_pairs_cancel_and_empty_updates_are_no_ops() -> None:
    model = tiny_net()
    before = snapshot(model)
    apply_update(model, [3, 3], [0.5, -0.5])
    apply_update(model, [], [])
    apply_update(model, [4], [0.0], mode="lowrank", rank=2)
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name])


def test_perturbing_after_an_update_restores_the_updated_weights() -> None:
    model = tiny_net(dtype=torch.bfloat16)
    with perturbed(model, 1, 0.1):
        pass
    apply_update(model, SEEDS, COEFFS)
    updated = snapshot(model)
    with perturbed(model, 2, 0.1):
        pass
    for name, p in model.named_parameters():
        assert torch.equal(p, updated[name]), f"{name} not restored to the updated weights"
    apply_update(model, [9], [0.1], mode="lowrank", rank=2)
    updated = snapshot(model)
    with perturbed(model, 3, 0.1):
        pass
    for name, p in model.named_parameters():
        assert torch.equal(p, updated[name]), f"{name} not restored to the updated weights"


# ------------------------------------------------------------------------------------------------ memory

class Wide(nn.Module):
    """A layer bigger than several noise chunks, next to small ones."""

    def __init__(self) -> None:
        super().__init__()
        self.big = nn.Linear(1536, 2100)  # 3.2M weights: more than three chunks
        self.norm = nn.LayerNorm(2100)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_update_and_perturbation_buffers_stay_within_one_block(dtype: torch.dtype) -> None:
    model = Wide().to(dtype)
    largest_param = max(p.numel() for p in model.parameters()) * 4
    with perturbed(model, 0, 0.1):  # weights this small switch to reused copy buffers, made once, here
        pass
    tracker = AllocationTracker()
    with tracker:
        apply_update(model, list(range(4)), [0.01] * 4)
        with perturbed(model, 1, 0.1):
            pass
    # by design: one noise block and one fp32 accumulator block, whatever the number of seeds
    assert 0 < tracker.largest <= block_capacity("cpu") * 4
    assert tracker.largest * 10 < largest_param


def test_lowrank_update_buffers_stay_within_one_chunk() -> None:
    model = Wide()
    rank, seeds = 4, list(range(8))
    tracker = AllocationTracker()
    with tracker:
        apply_update(model, seeds, [0.01] * 8, mode="lowrank", rank=rank)
    factors = (2100 + 1536) * rank * 4  # one member's fp32 factors of the big layer
    stacked = 2100 * rank * len(seeds) * 4  # the stacked A factors of all members
    assert tracker.largest <= max(CHUNK_SIZE * 4, factors, stacked)
    assert tracker.largest < model.big.weight.numel() * 4 / 2


def test_update_cost_is_independent_of_seed_order_for_merged_seeds() -> None:
    a, b = tiny_net(), tiny_net()
    apply_update(a, [1, 2, 1], [0.1, 0.2, 0.3])
    apply_update(b, [1, 2], [0.1 + 0.3, 0.2])
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb), name


def test_lowrank_scale_matches_full_rank_per_entry_variance() -> None:
    rank = 8
    eps = lowrank_delta(0, 0, 512, 512, rank)
    assert abs(float(eps.std()) - 1.0) < 0.05
    assert math.isclose(float(noise(0, 0, (512, 512)).std()), 1.0, abs_tol=0.01)
