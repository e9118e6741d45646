"""EGGROLL-style low-rank perturbations of ``nn.Linear`` weights, applied inside the forward pass.

Noise. For a Linear weight ``W`` (out x in) with tensor index ``i``, the noise under ``seed`` is
``eps = A @ B.T / sqrt(r)``, where ``noise(seed, i, (out + in) * r)`` holds ``A`` (out x r) first, then ``B``
(in x r). Its entries have unit variance, like full-rank noise. A selected Linear bias gets dense noise
``noise(seed, index_of_bias, out)``.

Forward. ``y = x W^T + b + scale * (x B) A^T / sqrt(r) (+ scale * eps_b)``, added by a forward hook; weights
are never written. With ``K`` members the batch dimension is split into ``K`` equal groups and each group gets
its own delta through ``torch.bmm``, so ``K`` members cost one forward plus ``K`` thin matmuls per Linear,
accumulated into the Linear's output in place (at scale 0 no hook is installed).

Scope. Only ``nn.Linear`` modules (and subclasses) called through their ``forward`` are perturbed. Other
selected parameters (norms, embeddings, convolutions) are left alone in this mode, and so is a Linear weight
tied to a non-Linear module (an output head tied to the input embedding): perturbing it in the head's forward
but not in the embedding lookup would make the update inconsistent with what was evaluated.

Memory. The factors of all members are generated once on entry and kept in the weight dtype:
``K * r * sum(out + in)`` elements over the perturbed Linears.

Determinism. :func:`apply_lowrank_update` forms ``sum_k c_k A_k B_k^T / sqrt(r)`` with one matmul per block of
rows; BLAS results can depend on the thread count, so replicas that must agree bit for bit should run the same
torch build with the same number of threads (one per worker, as the design has it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from es_agent.noise import CHUNK_SIZE, PerturbationError, add_noise_, noise

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.perturb import SelectedParam


@dataclass(frozen=True, eq=False)
class LinearTarget:
    """A Linear module perturbed in low-rank mode: its selected weight and/or bias."""

    name: str
    module: nn.Linear
    weight: SelectedParam | None
    bias: SelectedParam | None


def linear_targets(model: nn.Module, selected: Sequence[SelectedParam]) -> list[LinearTarget]:
    """The ``nn.Linear`` modules of ``model`` whose weight or bias is selected (weights tied to a non-Linear
    module excluded). Raises if there is none."""
    by_id = {id(sp.param): sp for sp in selected}
    non_linear = {id(p) for m in model.modules() if not isinstance(m, nn.Linear)
                  for p in m.parameters(recurse=False)}
    targets = []
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        weight = None if id(module.weight) in non_linear else by_id.get(id(module.weight))
        bias = None if module.bias is None or id(module.bias) in non_linear else by_id.get(id(module.bias))
        if weight is not None or bias is not None:
            targets.append(LinearTarget(name, module, weight, bias))
    if not targets:
        raise PerturbationError(f"low-rank mode found no selected nn.Linear weight or bias in "
                                f"{type(model).__name__} (selected: {[sp.name for sp in selected][:5]}...)")
    return targets


def lowrank_factors(seed: int, index: int, out_features: int, in_features: int, rank: int,
                    device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """The fp32 factors ``A`` (out x r) and ``B`` (in x r) of the low-rank noise of tensor ``index``.

    Always drawn by the CPU generator and then moved to ``device``: the factors are small (``(out + in) * r``
    elements), so a CUDA replica and a CPU replica (a resume, ``esopt export``, a checksum check) see the same
    noise bit for bit, and a log written on a GPU replays on a CPU."""
    flat = noise(seed, index, (out_features + in_features) * rank, "cpu").to(device)
    split = out_features * rank
    return flat[:split].view(out_features, rank), flat[split:].view(in_features, rank)


def lowrank_delta(seed: int, index: int, out_features: int, in_features: int, rank: int,
                  device: torch.device | str = "cpu") -> torch.Tensor:
    """The dense fp32 noise ``A @ B.T / sqrt(r)`` of one Linear weight (for references and small layers)."""
    a, b = lowrank_factors(seed, index, out_features, in_features, rank, device)
    return (a @ b.T) / math.sqrt(rank)


HookFn = Callable[[nn.Module, tuple[Any, ...], torch.Tensor], torch.Tensor]


def _make_hook(target: LinearTarget, seeds: Sequence[int], scales: Sequence[float], rank: int
               ) -> HookFn | None:
    """The forward hook adding the members' deltas to ``target``'s output (``None`` when every scale is 0).

    The factors are stored once in the weight dtype and in the layouts the matmuls read (``B``: in x r,
    ``A^T``: r x out, scale folded in), and the delta is accumulated into the Linear's output in place
    (``addmm_`` for one member, ``baddbmm_`` for several) unless autograd records the forward: no new
    output-sized tensor and no extra pass over it, which is most of the hook's cost (the rank-r matmuls
    themselves are ~1 % of the Linear's FLOPs)."""
    module, k = target.module, len(seeds)
    out_f, in_f = module.out_features, module.in_features
    dtype, device = module.weight.dtype, module.weight.device
    if not any(scales):
        return None
    b_all = a_t = bias_all = None
    if target.weight is not None:
        a_t = torch.empty(k, rank, out_f, dtype=dtype, device=device)
        b_all = torch.empty(k, in_f, rank, dtype=dtype, device=device)
        for j, (seed, scale) in enumerate(zip(seeds, scales, strict=True)):
            a, b = lowrank_factors(seed, target.weight.index, out_f, in_f, rank, device)
            a_t[j].copy_(a.mul_(scale / math.sqrt(rank)).T)
            b_all[j].copy_(b)
    if target.bias is not None:
        bias_all = torch.stack([noise(seed, target.bias.index, out_f, device).mul_(scale)
                                for seed, scale in zip(seeds, scales, strict=True)]).to(dtype)
        bias_all = bias_all[:, None, :]
    b_one = a_one = None
    if k == 1 and b_all is not None and a_t is not None:
        b_one, a_one = b_all[0], a_t[0]

    def hook(mod: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor:
        x = args[0]
        if k > 1 and (x.ndim < 2 or x.shape[0] % k):
            raise PerturbationError(f"{target.name}: input of shape {tuple(x.shape)} cannot be split into "
                                    f"{k} population groups along its first (batch) dimension")
        in_place = not (torch.is_grad_enabled() and output.requires_grad) and output.is_contiguous()
        out = output if in_place else output.clone(memory_format=torch.contiguous_format)
        dt = out.dtype  # the weight dtype, unless autocast changed it
        if b_one is not None and a_one is not None:  # one member: plain 2-D matmuls
            out.view(-1, out_f).addmm_(torch.mm(x.reshape(-1, in_f).to(dt), b_one.to(dt)), a_one.to(dt))
        elif b_all is not None and a_t is not None:
            xs = x.reshape(k, -1, in_f).to(dt)
            out.view(k, -1, out_f).baddbmm_(torch.bmm(xs, b_all.to(dt)), a_t.to(dt))
        if bias_all is not None:
            out.view(k, -1, out_f).add_(bias_all.to(dt))
        return out

    return hook


@contextmanager
def lowrank_hooks(targets: Sequence[LinearTarget], seeds: Sequence[int], scales: Sequence[float],
                  rank: int) -> Iterator[None]:
    """Install the low-rank noise of ``len(seeds)`` members on ``targets`` for the duration of the block."""
    handles = []
    try:
        with torch.no_grad():
            hooks = [(t.module, _make_hook(t, seeds, scales, rank)) for t in targets]
        for module, hook in hooks:
            if hook is not None:  # all scales 0: nothing to add
                handles.append(module.register_forward_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _update_weight(sp: SelectedParam, pairs: Sequence[tuple[int, float]], rank: int) -> None:
    w = sp.param.detach()
    out_f, in_f = w.shape
    k = len(pairs)
    a_cat = torch.empty(out_f, k * rank, dtype=torch.float32, device=w.device)
    b_cat = torch.empty(in_f, k * rank, dtype=torch.float32, device=w.device)
    for j, (seed, coeff) in enumerate(pairs):
        a, b = lowrank_factors(seed, sp.index, out_f, in_f, rank, w.device)
        a_cat[:, j * rank:(j + 1) * rank] = a.mul_(coeff / math.sqrt(rank))
        b_cat[:, j * rank:(j + 1) * rank] = b
    rows = max(1, CHUNK_SIZE // in_f)
    acc_buf = torch.empty(min(rows, out_f) * in_f, dtype=torch.float32, device=w.device)
    for r0 in range(0, out_f, rows):
        r1 = min(r0 + rows, out_f)
        acc = acc_buf[:(r1 - r0) * in_f].view(r1 - r0, in_f)
        torch.mm(a_cat[r0:r1], b_cat.T, out=acc)
        if w.dtype in (torch.float32, torch.float64):
            w[r0:r1].add_(acc)
        else:
            acc.add_(w[r0:r1])
            w[r0:r1].copy_(acc)


def apply_lowrank_update(targets: Sequence[LinearTarget], pairs: Sequence[tuple[int, float]],
                         rank: int) -> list[SelectedParam]:
    """``W += sum_k c_k A_k B_k^T / sqrt(r)`` for each target weight (and dense noise for selected biases),
    accumulated in fp32 by blocks of rows of at most one chunk. Returns the parameters changed."""
    done: set[int] = set()
    changed: list[SelectedParam] = []
    with torch.no_grad():
        for t in targets:
            for sp in (t.weight, t.bias):
                if sp is None or id(sp.param) in done:
                    continue
                done.add(id(sp.param))
                if sp is t.weight:
                    _update_weight(sp, pairs, rank)
                else:
                    add_noise_(sp.param.detach().view(-1), sp.index, pairs)
                changed.append(sp)
    return changed
