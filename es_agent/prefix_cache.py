"""Reuse of the KV cache of a slot's previous prompt: the longest common token prefix is not prefilled again.

Every step of an episode starts with the same tokens (the system message, the objective, the older history),
so the policy keeps, per history slot, the prompt tokens of its last step with their KV cache and prefills
only what follows the longest common prefix with the new prompt (a lookup also searches the other slots:
envs of a batch share the system message). Keys and values are sliced, never changed: a cache handed out is
a fresh ``DynamicCache`` over views of the stored tensors, which copies them on its first update.

Weights. A stored KV cache is valid only for the weights it was computed with. :meth:`PromptKVCache.clear`
drops everything (``LLMPolicy.reset`` calls it), and every lookup compares a fingerprint of the model's state
(:func:`weights_fingerprint`: each parameter's identity, storage, dtype, device and in-place version counter,
plus the ids of the forward hooks installed, which is how low-rank perturbations act) with the one recorded
when the entries were stored, and drops them on any difference. So weights changed in place (``perturbed``,
``apply_update``, ``load_state_dict``), moved or cast, or perturbed through hooks never meet a stale cache.
(Writes through ``tensor.data``, which bypass the version counter, are not seen: call ``reset``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from es_agent.decoding import PrefixKV, RowState, cache_layers, new_cache


def weights_fingerprint(model: torch.nn.Module) -> tuple[Any, ...]:
    """A cheap value that changes whenever the model's forward may compute something else: per parameter its
    ``id``, ``data_ptr``, dtype, device and ``_version`` (bumped by every in-place write), and the handle ids
    of all forward (pre-)hooks, module-level and global (handle ids are never reused)."""
    from torch.nn.modules import module as module_mod

    params = tuple((id(p), p.data_ptr(), p.dtype, p.device, p._version) for p in model.parameters())
    hooks = tuple(tuple(m._forward_hooks) + tuple(m._forward_pre_hooks) for m in model.modules()
                  if m._forward_hooks or m._forward_pre_hooks)
    global_hooks = (tuple(getattr(module_mod, "_global_forward_hooks", {})),
                    tuple(getattr(module_mod, "_global_forward_pre_hooks", {})))
    return params, hooks, global_hooks


@dataclass
class _Entry:
    ids: tuple[int, ...]
    cache: Any


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PromptKVCache:
    """Per-slot KV caches of the last prompt, reused through their longest common prefix with a new one.

    ``stats`` counts ``lookups``, ``reused_tokens`` (not prefilled again) and ``invalidations`` (entries
    dropped because the weights fingerprint changed).
    """

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self._entries: dict[int, _Entry] = {}
        self._fingerprint: tuple[Any, ...] | None = None
        self.stats = {"lookups": 0, "reused_tokens": 0, "invalidations": 0}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every entry (weights may change)."""
        self._entries.clear()
        self._fingerprint = None

    def _check_weights(self) -> None:
        if not self._entries:
            return
        if weights_fingerprint(self.model) != self._fingerprint:
            self.stats["invalidations"] += 1
            self.clear()

    def lookup(self, slot: int, ids: Sequence[int]) -> PrefixKV | None:
        """The longest cached prefix of ``ids`` (own slot first, then the others), at most ``len(ids) - 1``
        tokens (the last token is always run, for its logits); ``None`` when nothing useful is cached."""
        self.stats["lookups"] += 1
        self._check_weights()
        order = [slot, *(s for s in self._entries if s != slot)]
        best, best_len = None, 0
        for s in order:
            entry = self._entries.get(s)
            if entry is None:
                continue
            n = min(common_prefix(entry.ids, ids), len(ids) - 1)
            if n > best_len:
                best, best_len = entry, n
        if best is None:
            return None
        layers = [(k[:, :, :best_len], v[:, :, :best_len]) for k, v in cache_layers(best.cache)]
        state = RowState(cache=new_cache(self.model, layers), length=best_len, logits=torch.empty(0))
        self.stats["reused_tokens"] += best_len
        return PrefixKV(ids=tuple(ids[:best_len]), state=state)

    def store(self, slot: int, ids: Sequence[int], row: RowState) -> None:
        """Remember ``row`` (the prefill of ``ids``) as slot ``slot``'s last prompt. Keeps a reference to the
        row's cache: positions decoding appends later are past ``len(ids)`` and never reused."""
        if not self._entries:
            self._fingerprint = weights_fingerprint(self.model)
        else:
            self._check_weights()
            if not self._entries:
                self._fingerprint = weights_fingerprint(self.model)
        self._entries[slot] = _Entry(tuple(ids), row.cache)
