"""Decoding primitives of the policy, written against the plain model forward (no ``generate``):

* :func:`prefill` runs a prompt into a KV cache, extending a cached shared prefix (:class:`PrefixKV`);
* :func:`decode` runs greedy steps for a batch of prefilled rows, a *chooser* picking each row's next tokens
  (free greedy: :class:`GreedyChooser`; grammar-constrained: :class:`TrieChooser`, which walks a token trie of
  the valid candidate actions and runs the model only where the trie branches);
* :func:`score_candidates` ranks candidate continuations by mean token log-probability, in batched forwards
  over the row's KV cache expanded to the candidates.

Everything expects to run under ``torch.inference_mode()``. Thread count is the caller's business (one
thread per worker process is fastest for small models on small CPUs: see DESIGN.md, Known pitfalls).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F


@dataclass
class RowState:
    """One prompt run into the model: its KV cache (batch 1), its length and the next-token logits."""

    cache: Any
    """A transformers ``DynamicCache`` holding ``length`` positions."""
    length: int
    """Number of tokens in the cache (the position of the next token)."""
    logits: torch.Tensor
    """Next-token logits, shape ``[vocab]``."""


@dataclass
class PrefixKV:
    """The KV cache of a token prefix shared by many prompts (the genome's system message)."""

    ids: tuple[int, ...]
    """The prefix tokens."""
    state: RowState
    """The prefix run into the model."""


def _forward_names(model: torch.nn.Module) -> tuple[str, str | None]:
    params = inspect.signature(model.forward).parameters
    cache = "cache" if "cache" in params else "past_key_values"
    keep = "logits_to_keep" if "logits_to_keep" in params else (
        "num_logits_to_keep" if "num_logits_to_keep" in params else None)
    return cache, keep


def forward(model: torch.nn.Module, ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
            cache: Any, *, last_only: bool) -> tuple[torch.Tensor, Any]:
    """One forward of ``ids`` ``[B, T]`` after ``cache``; returns logits (``[B, V]`` if ``last_only`` else
    ``[B, T, V]``) and the extended cache."""
    cache_name, keep_name = _forward_names(model)
    kwargs: dict[str, Any] = {cache_name: cache}
    if last_only and keep_name is not None:
        kwargs[keep_name] = 1
    out = model(input_ids=ids, attention_mask=attention_mask, position_ids=positions, use_cache=True,
                **kwargs)
    logits = out.logits.float()
    return (logits[:, -1] if last_only else logits), cache  # the cache object is extended in place


def new_cache(model: torch.nn.Module, layers: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None
              ) -> Any:
    """A ``DynamicCache`` for ``model``, optionally filled with per-layer ``(keys, values)``."""
    from transformers import DynamicCache

    if not layers:
        return DynamicCache(config=model.config)
    return DynamicCache(ddp_cache_data=list(layers), config=model.config)


def cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer ``(keys, values)`` tensors of a ``DynamicCache``."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return [(k, v) for k, v in zip(cache.key_cache, cache.value_cache, strict=True)]  # older transformers


def prefill(model: torch.nn.Module, ids: Sequence[int], prefix: PrefixKV | None = None) -> RowState:
    """Run a prompt into a fresh KV cache; when it starts with ``prefix.ids`` only the rest is computed."""
    ids = list(ids)
    start, layers, logits = 0, None, None
    if prefix is not None and len(ids) > len(prefix.ids) and tuple(ids[: len(prefix.ids)]) == prefix.ids:
        start = len(prefix.ids)
        layers = cache_layers(prefix.state.cache)  # copied by the new cache's first update, not changed
    cache = new_cache(model, layers)
    rest = torch.tensor([ids[start:]], dtype=torch.long, device=model.device)
    mask = torch.ones(1, len(ids), dtype=torch.long, device=model.device)
    positions = torch.arange(start, len(ids), device=model.device).unsqueeze(0)
    logits, cache = forward(model, rest, mask, positions, cache, last_only=True)
    return RowState(cache=cache, length=len(ids), logits=logits[0])


class Chooser(Protocol):
    """Picks a row's next tokens from its next-token logits."""

    def __call__(self, row: int, logits: torch.Tensor) -> tuple[list[int], bool]:
        """Return ``(tokens, finished)``: the tokens to append (at least one) and whether the row ends after
        them."""
        ...


class GreedyChooser:
    """Free greedy decoding: argmax, until an end token or ``max_new_tokens``."""

    def __init__(self, rows: int, end_ids: Sequence[int], max_new_tokens: int) -> None:
        self.end_ids = set(end_ids)
        self.max_new_tokens = max_new_tokens
        self.counts = [0] * rows

    def __call__(self, row: int, logits: torch.Tensor) -> tuple[list[int], bool]:
        token = int(torch.argmax(logits))
        self.counts[row] += 1
        return [token], token in self.end_ids or self.counts[row] >= self.max_new_tokens


class TokenTrie:
    """Trie of candidate token sequences; each sequence must end with an end marker so none is a prefix of
    another. A leaf maps ``None`` to the candidate index."""

    def __init__(self, sequences: Sequence[Sequence[int]]) -> None:
        if not sequences:
            raise ValueError("a token trie needs at least one candidate")
        self.root: dict[Any, Any] = {}
        for index, seq in enumerate(sequences):
            node = self.root
            for token in seq:
                node = node.setdefault(int(token), {})
            node.setdefault(None, index)

    def branch_points(self) -> int:
        """Number of nodes with more than one option (model calls an average path needs is far fewer)."""
        stack, count = [self.root], 0
        while stack:
            node = stack.pop()
            count += len(node) > 1
            stack.extend(child for key, child in node.items() if key is not None)
        return count


class TrieChooser:
    """Grammar-constrained greedy decoding: at each branching trie node the allowed token with the highest
    logit; forced tokens (a single option) are appended without consulting the model."""

    def __init__(self, tries: Sequence[TokenTrie]) -> None:
        self.nodes = [trie.root for trie in tries]
        self.chosen: list[int | None] = [None] * len(tries)

    def __call__(self, row: int, logits: torch.Tensor) -> tuple[list[int], bool]:
        node = self.nodes[row]
        options = [key for key in node if key is not None]
        if len(options) > 1:
            scores = logits[torch.tensor(options, device=logits.device)]
            token = options[int(torch.argmax(scores))]
        else:
            token = options[0]
        tokens = [token]
        node = node[token]
        while None not in node and len(node) == 1:
            token = next(iter(node))
            tokens.append(token)
            node = node[token]
        self.nodes[row] = node
        finished = None in node
        if finished:
            self.chosen[row] = node[None]
        return tokens, finished


def stack_rows(model: torch.nn.Module, rows: Sequence[RowState]) -> tuple[Any, torch.Tensor]:
    """One batched cache from per-row caches, left-padded to the longest; returns ``(cache, mask)``."""
    if len(rows) == 1:
        return rows[0].cache, torch.ones(1, rows[0].length, dtype=torch.long, device=model.device)
    longest = max(r.length for r in rows)
    per_row = [cache_layers(r.cache) for r in rows]
    layers = []
    for i in range(len(per_row[0])):
        pads = [(0, 0, longest - r.length, 0) for r in rows]
        keys = torch.cat([F.pad(p[i][0], pad) for p, pad in zip(per_row, pads, strict=True)])
        values = torch.cat([F.pad(p[i][1], pad) for p, pad in zip(per_row, pads, strict=True)])
        layers.append((keys, values))
    mask = torch.zeros(len(rows), longest, dtype=torch.long, device=model.device)
    for b, r in enumerate(rows):
        mask[b, longest - r.length:] = 1
    return new_cache(model, layers), mask


def decode(model: torch.nn.Module, rows: Sequence[RowState], choose: Chooser, *, pad_id: int,
           max_steps: int = 512) -> list[list[int]]:
    """Greedy decoding of prefilled rows with a chooser; returns the generated tokens per row.

    Rows advance together; a step feeds each unfinished row as many of its pending tokens as every unfinished
    row has (forced trie tokens go in one forward), and the model is not run once every row has finished.
    """
    cache, mask = stack_rows(model, rows)
    positions = torch.tensor([r.length for r in rows], device=model.device)
    logits = torch.stack([r.logits for r in rows])
    outputs: list[list[int]] = [[] for _ in rows]
    pending: list[list[int]] = [[] for _ in rows]
    done = [False] * len(rows)
    for _ in range(max_steps):
        for b in range(len(rows)):
            if not done[b] and not pending[b]:
                tokens, finished = choose(b, logits[b])
                if finished:
                    outputs[b].extend(tokens)
                    done[b] = True
                else:
                    pending[b] = tokens
        active = [b for b in range(len(rows)) if not done[b]]
        if not active:
            break
        k = min(len(pending[b]) for b in active)
        feed = torch.full((len(rows), k), pad_id, dtype=torch.long, device=model.device)
        step_mask = torch.zeros(len(rows), k, dtype=torch.long, device=model.device)
        for b in active:
            feed[b] = torch.tensor(pending[b][:k])
            step_mask[b] = 1
            outputs[b].extend(pending[b][:k])
            pending[b] = pending[b][k:]
        mask = torch.cat([mask, step_mask], dim=1)
        step_positions = positions.unsqueeze(1) + torch.arange(k, device=model.device)
        logits, cache = forward(model, feed, mask, step_positions, cache, last_only=True)
        positions = positions + k
    return outputs


def score_candidates(model: torch.nn.Module, row: RowState, candidates: Sequence[Sequence[int]]
                     ) -> list[float]:
    """Mean token log-probability of each candidate continuation after the row's prompt, in ONE forward.

    The candidates' token trie is packed into one sequence after the prompt's KV cache (tree attention): each
    trie node attends to the prompt and to its own ancestors only, at the position its depth gives it. Only
    the inner nodes (those with children) go through the model: a leaf's log-probability comes from its
    parent's logits, and no node attends to a leaf. The cost is one forward over the trie's inner nodes
    (shared prefixes such as ``click [`` counted once), whatever the number of candidates; the scores equal
    those of scoring every candidate on its own.
    """
    tokens, parents, depths, paths = _flatten_trie(candidates)
    n, length = len(tokens), row.length
    device = model.device
    inner = sorted({p for p in parents if p >= 0})
    where = {node: r for r, node in enumerate(inner)}
    node_logp = torch.empty(n)
    first = torch.log_softmax(row.logits.float(), dim=-1)
    roots = [i for i in range(n) if parents[i] < 0]
    node_logp[roots] = first[[tokens[i] for i in roots]].cpu()
    if inner:
        m = len(inner)
        allowed = torch.zeros(m, length + m, dtype=torch.bool, device=device)
        allowed[:, :length] = True
        for r, i in enumerate(inner):
            j = i
            while j >= 0:  # the node itself and its ancestors (all inner nodes)
                allowed[r, length + where[j]] = True
                j = parents[j]
        if getattr(model.config, "_attn_implementation", "sdpa") == "sdpa":
            mask = allowed[None, None]
        else:  # eager and others take an additive float mask
            dtype = next(model.parameters()).dtype
            mask = torch.zeros(1, 1, m, length + m, dtype=dtype, device=device)
            mask.masked_fill_(~allowed[None, None], torch.finfo(dtype).min)
        # DynamicCache copies the tensors it is given (its first update concatenates), so the row's cache
        # is left intact without cloning it here
        cache = new_cache(model, cache_layers(row.cache))
        ids = torch.tensor([[tokens[i] for i in inner]], dtype=torch.long, device=device)
        positions = torch.tensor([[length + depths[i] for i in inner]], device=device)
        cache_name, keep_name = _forward_names(model)
        kwargs: dict[str, Any] = {cache_name: cache}
        if keep_name is not None:
            kwargs[keep_name] = 0  # every position
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **kwargs)
        logp = torch.log_softmax(out.logits[0].float(), dim=-1)
        children = [i for i in range(n) if parents[i] >= 0]
        rows_ = torch.tensor([where[parents[i]] for i in children], device=device)
        cols = torch.tensor([tokens[i] for i in children], device=device)
        node_logp[children] = logp[rows_, cols].cpu()
    return [float(node_logp[path].sum()) / len(path) for path in paths]


def _flatten_trie(candidates: Sequence[Sequence[int]]
                  ) -> tuple[list[int], list[int], list[int], list[list[int]]]:
    """Trie nodes of the candidates: token, parent node (-1 for the root's children), depth, and each
    candidate's path of node indices."""
    tokens: list[int] = []
    parents: list[int] = []
    depths: list[int] = []
    children: dict[tuple[int, int], int] = {}
    paths: list[list[int]] = []
    for seq in candidates:
        if not seq:
            raise ValueError("candidate token sequences must not be empty")
        node, path = -1, []
        for depth, token in enumerate(seq):
            key = (node, int(token))
            if key not in children:
                children[key] = len(tokens)
                tokens.append(int(token))
                parents.append(node)
                depths.append(depth)
            node = children[key]
            path.append(node)
        paths.append(path)
    return tokens, parents, depths, paths
