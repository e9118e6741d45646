"""Low-rank (EGGROLL-style) perturbations: forward equivalence with dense weights, batched members equal to
one-by-one evaluation, weights never written, scope (Linear only, tied heads excluded)."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_models import tiny_net
from torch import nn

from es_agent.lowrank import linear_targets, lowrank_delta, lowrank_factors
from es_agent.noise import PerturbationError, noise
from es_agent.perturb import perturbed, perturbed_batch, select_parameters


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def tokens(batch: int, seq: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (batch, seq), generator=torch.Generator().manual_seed(seed))


def test_lowrank_linear_forward_equals_dense_perturbed_weights() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(48, 32)
    x = torch.randn(5, 3, 48)
    seed, scale, rank = 17, 0.3, 4
    (w_sp, b_sp) = select_parameters(layer)
    w_dense = layer.weight + scale * lowrank_delta(seed, w_sp.index, 32, 48, rank)
    b_dense = layer.bias + scale * noise(seed, b_sp.index, 32)
    with torch.no_grad(), perturbed(layer, seed, scale, mode="lowrank", rank=rank):
        got = layer(x)
    torch.testing.assert_close(got, nn.functional.linear(x, w_dense, b_dense), rtol=1e-5, atol=1e-5)


def test_lowrank_noise_has_unit_variance_entries_and_rank_r() -> None:
    rank = 4
    a, b = lowrank_factors(3, 0, 256, 192, rank)
    assert a.shape == (256, rank) and b.shape == (192, rank)
    eps = lowrank_delta(3, 0, 256, 192, rank)
    assert torch.linalg.matrix_rank(eps) == rank
    assert abs(float(eps.var()) - 1.0) < 0.1
    assert abs(float(eps.mean())) < 0.05
    other = lowrank_delta(3, 1, 256, 192, rank)  # same shape, next tensor index
    corr = float((eps.flatten() @ other.flatten()) / (eps.norm() * other.norm()))
    assert abs(corr) < 5 / math.sqrt(eps.numel()) * math.sqrt(rank)  # r-fold dependence widens the spread


@pytest.mark.parametrize("rank", [1, 4])
def test_batched_members_equal_one_by_one(rank: int) -> None:
    model = tiny_net()
    seeds, scales = [101, 102, 101, 103], [0.05, 0.05, -0.05, 0.2]
    per_member = 2
    x = tokens(len(seeds) * per_member)
    with torch.no_grad():
        with perturbed_batch(model, seeds, scales, rank=rank):
            batched = model(x).logits
        for i, (seed, scale) in enumerate(zip(seeds, scales, strict=True)):
            rows = slice(i * per_member, (i + 1) * per_member)
            with perturbed(model, seed, scale, mode="lowrank", rank=rank):
                single = model(x[rows]).logits
            torch.testing.assert_close(batched[rows], single, rtol=1e-5, atol=1e-5)
        base = model(x).logits
    assert not torch.allclose(batched, base, atol=1e-3), "the perturbation had no effect"


def test_batched_members_equal_one_by_one_with_kv_cache_decoding() -> None:
    model = tiny_net()
    seeds, scales = [7, 8], [0.1, -0.1]
    prompt = tokens(2, seq=6)
    with torch.no_grad():
        with perturbed_batch(model, seeds, scales, rank=2):
            both = model.generate(prompt, max_new_tokens=5, do_sample=False, pad_token_id=0)
        for i, (seed, scale) in enumerate(zip(seeds, scales, strict=True)):
            with perturbed(model, seed, scale, mode="lowrank", rank=2):
                one = model.generate(prompt[i:i + 1], max_new_tokens=5, do_sample=False, pad_token_id=0)
            assert torch.equal(both[i:i + 1], one)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weights_are_never_written(dtype: torch.dtype) -> None:
    model = tiny_net(dtype=dtype)
    before = snapshot(model)
    with torch.no_grad(), perturbed_batch(model, [1, 2, 3], [0.1, 0.1, -0.1], rank=2):
        for name, p in model.named_parameters():
            assert torch.equal(p, before[name])
        model(tokens(3))
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name])
    assert all(not m._forward_hooks for m in model.modules())


def test_hooks_are_removed_on_exception() -> None:
    model = tiny_net()
    with pytest.raises(RuntimeError, match="boom"), perturbed(model, 1, 0.1, mode="lowrank", rank=2):
        raise RuntimeError("boom")
    assert all(not m._forward_hooks for m in model.modules())
    with perturbed(model, 1, 0.1, mode="lowrank", rank=2):  # not left marked as perturbed
        pass


def test_only_linear_modules_are_perturbed_and_tied_heads_are_skipped() -> None:
    model = tiny_net(tie_word_embeddings=True)
    targets = linear_targets(model, select_parameters(model))
    names = {t.name for t in targets}
    assert "lm_head" not in names  # its weight is the input embedding: not a pure Linear weight
    assert {"model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"} <= names
    assert all(isinstance(t.module, nn.Linear) for t in targets)
    # q/k/v biases are selected by default and get dense noise
    q = next(t for t in targets if t.name == "model.layers.0.self_attn.q_proj")
    assert q.bias is not None and q.weight is not None
    # untied head: it is a Linear like any other
    untied = tiny_net(tie_word_embeddings=False)
    assert "lm_head" in {t.name for t in linear_targets(untied, select_parameters(untied))}


def test_selection_applies_in_lowrank_mode() -> None:
    model = tiny_net()
    x = tokens(1)
    with torch.no_grad():
        base = model(x).logits
        with perturbed(model, 1, 0.5, mode="lowrank", rank=2, params="model.layers.1.mlp.*"):
            hooked = [m for m in model.modules() if m._forward_hooks]
            assert len(hooked) == 3
            assert not torch.allclose(model(x).logits, base)
    with pytest.raises(PerturbationError, match="no selected nn.Linear"), \
            perturbed(model, 1, 0.1, mode="lowrank", rank=2, params="*norm*"):
        pass


def test_batch_must_split_into_members() -> None:
    model = tiny_net()
    with torch.no_grad(), perturbed_batch(model, [1, 2, 3], [0.1] * 3, rank=2), \
            pytest.raises(PerturbationError, match="cannot be split into 3"):
        model(tokens(4))


def test_perturbed_batch_arguments_are_validated() -> None:
    model = tiny_net()
    with pytest.raises(PerturbationError, match="lowrank"), perturbed_batch(model, [1], [0.1], mode="full"):
        pass
    with pytest.raises(PerturbationError, match="as many scales"), \
            perturbed_batch(model, [1, 2], [0.1], rank=1):
        pass
    with pytest.raises(PerturbationError, match="rank >= 1"), perturbed_batch(model, [1], [0.1]):
        pass


@pytest.mark.parametrize("members", [1, 3])
def test_delta_is_accumulated_into_the_linear_output_in_place(members: int) -> None:
    """Without autograd the hook adds the delta into the Linear's own output (no new output-sized tensor),
    and the result still equals the dense perturbed weights."""
    torch.manual_seed(0)
    layer = nn.Linear(48, 32)
    x = torch.randn(members * 2, 3, 48)
    seeds, scales = [5, 6, 7][:members], [0.3, -0.2, 0.1][:members]
    seen: dict[str, int] = {}
    layer.register_forward_hook(lambda m, a, out: seen.__setitem__("linear", out.data_ptr()))
    (w_sp, b_sp) = select_parameters(layer)
    with torch.inference_mode(), perturbed_batch(layer, seeds, scales, rank=4):
        layer.register_forward_hook(lambda m, a, out: seen.__setitem__("hooked", out.data_ptr()))
        got = layer(x)
    assert seen["hooked"] == seen["linear"] == got.data_ptr()
    for j, (seed, scale) in enumerate(zip(seeds, scales, strict=True)):
        w = layer.weight + scale * lowrank_delta(seed, w_sp.index, 32, 48, 4)
        b = layer.bias + scale * noise(seed, b_sp.index, 32)
        rows = slice(2 * j, 2 * j + 2)
        want = nn.functional.linear(x[rows], w, b).detach()
        torch.testing.assert_close(got[rows], want, rtol=1e-5, atol=1e-5)


def test_autograd_still_works_through_the_hook() -> None:
    layer = nn.Linear(16, 8)
    x = torch.randn(2, 16, requires_grad=True)
    with perturbed(layer, 3, 0.5, mode="lowrank", rank=2):
        layer(x).sum().backward()
    assert x.grad is not None and layer.weight.grad is not None


def test_zero_scale_installs_no_hook_and_changes_nothing() -> None:
    model = tiny_net()
    x = tokens(1)
    with torch.no_grad():
        base = model(x).logits
        with perturbed(model, 1, 0.0, mode="lowrank", rank=2):
            assert all(not m._forward_hooks for m in model.modules())
            assert torch.equal(model(x).logits, base)
        with perturbed_batch(model, [1, 2], [0.0, 0.1], rank=2):  # one live member: hooks are needed
            assert any(m._forward_hooks for m in model.modules())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_replica_sees_the_cpu_lowrank_noise() -> None:
    # docs/CONTRACTS.md: low-rank factors are drawn by the CPU generator and moved to the device
    a_cpu, b_cpu = lowrank_factors(11, 3, 64, 128, 4)
    a_gpu, b_gpu = lowrank_factors(11, 3, 64, 128, 4, device="cuda")
    assert a_gpu.is_cuda and torch.equal(a_gpu.cpu(), a_cpu) and torch.equal(b_gpu.cpu(), b_cpu)
    cpu, gpu = tiny_net(), tiny_net().cuda()
    x = tokens(2)
    with torch.no_grad():
        centre = cpu(x).logits
        with perturbed(cpu, 5, 0.05, mode="lowrank", rank=2):
            want = cpu(x).logits
        with perturbed(gpu, 5, 0.05, mode="lowrank", rank=2):
            got = gpu(x.cuda()).logits.cpu()
    assert not torch.allclose(want, centre, atol=1e-4)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
