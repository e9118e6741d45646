"""Decoding primitives of the policy, written against the plain model forward (no ``generate``):

* :func:`prefill` runs a prompt into a KV cache, extending a cached shared prefix (:class:`PrefixKV`);
* :func:`decode` runs greedy steps for a batch of prefilled rows, a *chooser* picking each row's next tokens
  (free greedy: :class:`GreedyChooser`; grammar-constrained: :class:`TrieChooser`, which walks a token trie of
  the valid candidate actions and runs the model only where the trie branches);
* :func:`candidate_logprobs` gives every candidate continuation's token log-probabilities in ONE
  tree-attention forward over their token trie after the row's KV cache; :func:`combine_scores` turns them
  into scores (mean, sum, calibrated against a content-free prompt, two-stage: kind then argument), and
  :func:`score_candidates` does both for the prior-free scorings;
* :func:`prefill_batch` and :func:`candidate_logprobs_batch` / :func:`score_candidates_batch` do the same
  for K prompts of different lengths in ONE forward each (a :class:`BatchState`): the batched population
  of :mod:`es_agent.population`, where row ``k`` is population member ``k`` under
  :func:`es_agent.perturb.perturbed_batch`.

Everything expects to run under ``torch.inference_mode()``. Thread count is the caller's business (one
thread per worker process is fastest for small models on small CPUs: see DESIGN.md, Known pitfalls).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

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


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of a transformers model (``model.device``), typed."""
    device = model.device
    if not isinstance(device, torch.device):
        raise TypeError(f"{type(model).__name__}.device is not a torch.device: {device!r}")
    return device


def model_config(model: torch.nn.Module) -> Any:
    """The ``PretrainedConfig`` of a transformers model (``model.config``)."""
    return model.config


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
        return DynamicCache(config=model_config(model))
    return DynamicCache(ddp_cache_data=list(layers), config=model_config(model))


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
    rest = torch.tensor([ids[start:]], dtype=torch.long, device=model_device(model))
    mask = torch.ones(1, len(ids), dtype=torch.long, device=model_device(model))
    positions = torch.arange(start, len(ids), device=model_device(model)).unsqueeze(0)
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
        return rows[0].cache, torch.ones(1, rows[0].length, dtype=torch.long, device=model_device(model))
    longest = max(r.length for r in rows)
    per_row = [cache_layers(r.cache) for r in rows]
    layers = []
    for i in range(len(per_row[0])):
        pads = [(0, 0, longest - r.length, 0) for r in rows]
        keys = torch.cat([F.pad(p[i][0], pad) for p, pad in zip(per_row, pads, strict=True)])
        values = torch.cat([F.pad(p[i][1], pad) for p, pad in zip(per_row, pads, strict=True)])
        layers.append((keys, values))
    mask = torch.zeros(len(rows), longest, dtype=torch.long, device=model_device(model))
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
    positions = torch.tensor([r.length for r in rows], device=model_device(model))
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
        feed = torch.full((len(rows), k), pad_id, dtype=torch.long, device=model_device(model))
        step_mask = torch.zeros(len(rows), k, dtype=torch.long, device=model_device(model))
        for b in active:
            feed[b] = torch.tensor(pending[b][:k])
            step_mask[b] = 1
            outputs[b].extend(pending[b][:k])
            pending[b] = pending[b][k:]
        mask = torch.cat([mask, step_mask], dim=1)
        step_positions = positions.unsqueeze(1) + torch.arange(k, device=model_device(model))
        logits, cache = forward(model, feed, mask, step_positions, cache, last_only=True)
        positions = positions + k
    return outputs


def score_candidates(model: torch.nn.Module, row: RowState, candidates: Sequence[Sequence[int]],
                     scoring: str = "mean") -> list[float]:
    """Score of each candidate continuation after the row's prompt (``"mean"`` or ``"sum"`` of its token
    log-probabilities, see :func:`combine_scores`), in ONE forward of :func:`candidate_logprobs`."""
    if scoring not in ("mean", "sum"):
        raise ValueError(f"score_candidates combines 'mean' or 'sum' only (the others need a prior or the "
                         f"candidate texts: combine_scores), got {scoring!r}")
    return combine_scores(candidate_logprobs(model, row, candidates), scoring)


def candidate_logprobs(model: torch.nn.Module, row: RowState, candidates: Sequence[Sequence[int]]
                       ) -> list[list[float]]:
    """The token log-probabilities of each candidate continuation after the row's prompt, in ONE forward.

    The candidates' token trie is packed into one sequence after the prompt's KV cache (tree attention): each
    trie node attends to the prompt and to its own ancestors only, at the position its depth gives it. Only
    the inner nodes (those with children) go through the model: a leaf's log-probability comes from its
    parent's logits, and no node attends to a leaf. The cost is one forward over the trie's inner nodes
    (shared prefixes such as ``click [`` counted once), whatever the number of candidates; the scores equal
    those of scoring every candidate on its own. Returns one list of token log-probabilities per candidate.
    """
    tokens, parents, depths, paths = _flatten_trie(candidates)
    n, length = len(tokens), row.length
    device = model_device(model)
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
        mask = attention_mask_4d(model, allowed[None])
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
    return [node_logp[path].tolist() for path in paths]


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


def attention_mask_4d(model: torch.nn.Module, allowed: torch.Tensor) -> torch.Tensor:
    """The 4-D attention mask ``[B, 1, Q, K]`` the model's attention implementation takes for the boolean
    ``allowed`` ``[B, Q, K]`` (True: the query may attend to the key): boolean for sdpa, additive float for
    eager and others. A custom 4-D mask is used as given (no causal mask is added on top)."""
    if getattr(model.config, "_attn_implementation", "sdpa") == "sdpa":
        return allowed[:, None]
    dtype = next(model.parameters()).dtype
    mask = torch.zeros(allowed.shape[0], 1, *allowed.shape[1:], dtype=dtype, device=allowed.device)
    mask.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)
    return mask


# ------------------------------------------------------------------------------------------ batched rows

@dataclass
class BatchState:
    """K prompts run into the model in one batch (row ``k``: population member ``k``).

    Layout of every row's ``W`` cache columns: ``[common prefix][left padding][the row's own suffix]``. The
    first ``common`` columns hold the same tokens in every row, unpadded (the next step can keep them); the
    suffixes are right-aligned, so every row's last token is the last column. A token's position is its index
    in its own prompt (padding does not shift positions); padding columns are masked out of every attention.
    """

    cache: Any
    """A ``DynamicCache`` of batch size K and ``W`` columns."""
    valid: torch.Tensor
    """``[K, W]`` bool: the columns that hold real tokens."""
    ids: list[list[int]]
    """Each row's prompt tokens."""
    common: int
    """Columns ``[0, common)`` hold ``ids[k][:common]``, the same tokens in every row."""
    logits: torch.Tensor
    """``[K, vocab]`` fp32 next-token logits."""

    @property
    def lengths(self) -> list[int]:
        """Tokens per row (the position of each row's next token)."""
        return [len(ids) for ids in self.ids]

    def select(self, model: torch.nn.Module, rows: Sequence[int]) -> BatchState:
        """The state of a subset of rows, in the given order (members whose episodes ended drop out)."""
        index = torch.tensor(list(rows), dtype=torch.long, device=self.valid.device)
        layers = [(k.index_select(0, index), v.index_select(0, index)) for k, v in cache_layers(self.cache)]
        return BatchState(cache=new_cache(model, layers), valid=self.valid.index_select(0, index),
                          ids=[self.ids[r] for r in rows], common=self.common,
                          logits=self.logits.index_select(0, index))


def _common_prefix(rows: Sequence[Sequence[int]]) -> int:
    first, n = rows[0], min(len(r) for r in rows)
    for i in range(n):
        token = first[i]
        if any(r[i] != token for r in rows[1:]):
            return i
    return n


def prefill_batch(model: torch.nn.Module, prompts: Sequence[Sequence[int]],
                  previous: BatchState | None = None) -> BatchState:
    """Run K prompts of different lengths into one batched KV cache, in ONE forward.

    With ``previous`` (the same rows' state of the last step), the leading columns of its common prefix that
    every row's new prompt still starts with are kept and only the rest is computed: within an episode the
    system message, and whatever else stays constant, is computed once. Each row's logits equal those of
    :func:`prefill` on its prompt alone (up to float rounding: padding only adds masked-out columns).
    """
    rows = [list(p) for p in prompts]
    if not rows or any(not r for r in rows):
        lengths = [len(r) for r in rows]
        raise ValueError(f"prefill_batch needs K >= 1 non-empty prompts, got lengths {lengths}")
    k, device = len(rows), model_device(model)
    shortest = min(len(r) for r in rows)
    keep, layers = 0, None
    if previous is not None:
        if len(previous.ids) != k:
            raise ValueError(f"previous state has {len(previous.ids)} rows for {k} prompts (select() them)")
        keep = min(previous.common, shortest - 1,
                   *(_common_prefix([old, new]) for old, new in zip(previous.ids, rows, strict=True)))
        if keep > 0:  # views: the new cache's first update concatenates, previous stays unchanged
            layers = [(kk[:, :, :keep], vv[:, :, :keep]) for kk, vv in cache_layers(previous.cache)]
    common = max(keep, min(_common_prefix(rows), shortest - 1))  # every row keeps >= 1 suffix token
    width = max(len(r) for r in rows) - common  # the longest suffix
    fed = (common - keep) + width
    ids = torch.zeros(k, fed, dtype=torch.long)
    positions = torch.zeros(k, fed, dtype=torch.long)
    valid_new = torch.zeros(k, fed, dtype=torch.bool)
    shared = rows[0][keep:common]
    for b, row in enumerate(rows):
        suffix = row[common:]
        ids[b, :len(shared)] = torch.tensor(shared, dtype=torch.long)
        ids[b, fed - len(suffix):] = torch.tensor(suffix, dtype=torch.long)
        positions[b, :len(shared)] = torch.arange(keep, common)
        positions[b, fed - len(suffix):] = torch.arange(common, len(row))
        positions[b, len(shared):fed - len(suffix)] = common  # padding: masked out, any position will do
        valid_new[b, :len(shared)] = True
        valid_new[b, fed - len(suffix):] = True
    if previous is not None and keep > 0:
        valid_new = torch.cat([previous.valid[:, :keep].cpu(), valid_new], dim=1)
    valid = valid_new
    columns = torch.arange(keep + fed)
    queries = torch.arange(keep, keep + fed)
    causal = columns[None, :] <= queries[:, None]
    allowed = (causal[None] & valid[:, None, :]) | (columns[None, None, :] == queries[None, :, None])
    valid, ids, positions, allowed = (t.to(device) for t in (valid, ids, positions, allowed))
    logits, cache = forward(model, ids, attention_mask_4d(model, allowed), positions,
                            new_cache(model, layers), last_only=True)
    return BatchState(cache=cache, valid=valid, ids=rows, common=common, logits=logits)


def score_candidates_batch(model: torch.nn.Module, state: BatchState,
                           candidates: Sequence[Sequence[Sequence[int]]], scoring: str = "mean"
                           ) -> list[list[float]]:
    """Score (``"mean"`` or ``"sum"``, :func:`combine_scores`) of each row's candidates after its prompt, all
    rows in ONE forward of :func:`candidate_logprobs_batch`."""
    if scoring not in ("mean", "sum"):
        raise ValueError(f"score_candidates_batch combines 'mean' or 'sum' only, got {scoring!r}")
    return [combine_scores(logps, scoring) for logps in candidate_logprobs_batch(model, state, candidates)]


def candidate_logprobs_batch(model: torch.nn.Module, state: BatchState,
                             candidates: Sequence[Sequence[Sequence[int]]]) -> list[list[list[float]]]:
    """The token log-probabilities of each row's candidates after its prompt, all rows in ONE forward.

    Row ``k``'s candidate trie is packed after its prompt as in :func:`score_candidates` (tree attention over
    the trie's inner nodes); the rows' tries are padded to the largest (padding queries attend to themselves
    only and are never read). Each row's scores equal :func:`score_candidates` on that row alone, up to float
    rounding. The state's cache is left unchanged. Returns ``[row][candidate][token]``.
    """
    k = len(state.ids)
    if len(candidates) != k:
        raise ValueError(f"got candidate sets for {len(candidates)} rows, the state has {k}")
    device = model_device(model)
    tries = [_flatten_trie(c) for c in candidates]
    inner = [sorted({p for p in parents if p >= 0}) for _, parents, _, _ in tries]
    m = max(len(i) for i in inner)
    width = state.valid.shape[1]
    node_logp = [torch.empty(len(t[0])) for t in tries]
    first = torch.log_softmax(state.logits.float(), dim=-1).cpu()
    for b, (tokens, parents, _, _) in enumerate(tries):
        roots = [i for i in range(len(tokens)) if parents[i] < 0]
        node_logp[b][roots] = first[b, [tokens[i] for i in roots]]
    if m:
        ids = torch.zeros(k, m, dtype=torch.long)
        positions = torch.zeros(k, m, dtype=torch.long)
        allowed = torch.zeros(k, m, width + m, dtype=torch.bool)
        allowed[:, :, :width] = state.valid.cpu()[:, None, :]
        allowed[:, torch.arange(m), width + torch.arange(m)] = True  # every node (and padding) sees itself
        for b, ((tokens, parents, depths, _), nodes) in enumerate(zip(tries, inner, strict=True)):
            where = {node: r for r, node in enumerate(nodes)}
            length = len(state.ids[b])
            positions[b] = length
            for r, i in enumerate(nodes):
                ids[b, r] = tokens[i]
                positions[b, r] = length + depths[i]
                j = parents[i]
                while j >= 0:  # its ancestors (all inner nodes)
                    allowed[b, r, width + where[j]] = True
                    j = parents[j]
        cache = new_cache(model, cache_layers(state.cache))  # copied on first update: the state stays intact
        cache_name, keep_name = _forward_names(model)
        kwargs: dict[str, Any] = {cache_name: cache}
        if keep_name is not None:
            kwargs[keep_name] = 0  # every position
        out = model(input_ids=ids.to(device), attention_mask=attention_mask_4d(model, allowed.to(device)),
                    position_ids=positions.to(device), use_cache=True, **kwargs)
        for b, ((tokens, parents, _, _), nodes) in enumerate(zip(tries, inner, strict=True)):
            if not nodes:
                continue
            where = {node: r for r, node in enumerate(nodes)}
            logp = torch.log_softmax(out.logits[b, :len(nodes)].float(), dim=-1)
            children = [i for i in range(len(tokens)) if parents[i] >= 0]
            rows_ = torch.tensor([where[parents[i]] for i in children], device=device)
            cols = torch.tensor([tokens[i] for i in children], device=device)
            node_logp[b][children] = logp[rows_, cols].cpu()
    return [[logp[path].tolist() for path in paths]
            for logp, (_, _, _, paths) in zip(node_logp, tries, strict=True)]


# ------------------------------------------------------------------------------------- candidate scores

Scoring = Literal["mean", "sum", "calibrated", "calibrated_mean", "two_stage", "two_stage_calibrated"]
"""How constrained decoding ranks candidates by their token log-probabilities (:func:`combine_scores`)."""
SCORINGS: tuple[str, ...] = get_args(Scoring)
"""Every :data:`Scoring`, in a stable order."""
NEEDS_PRIOR = frozenset({"calibrated", "calibrated_mean", "two_stage_calibrated"})
"""The scorings that need each candidate's log-probabilities under a content-free prompt."""


def action_kind(action: str) -> str:
    """The verb of a candidate action (``click``, ``type``, ``stop``, ``scroll``, ``go_back``, ...)."""
    return action.split("[", 1)[0].strip().split(" ", 1)[0].lower()


def _sum(logps: Sequence[float]) -> float:
    return float(torch.tensor(list(logps), dtype=torch.float32).sum())


def combine_scores(token_logps: Sequence[Sequence[float]], scoring: str, *,
                   prior: Sequence[Sequence[float]] | None = None, kinds: Sequence[str] | None = None,
                   prior_weight: float = 1.0, kind_bias: Mapping[str, float] | None = None) -> list[float]:
    """Each candidate's score (the policy picks the highest; ties go to the first) from its token
    log-probabilities ``token_logps[i]`` (after the step's prompt) and, for the calibrated scorings,
    ``prior[i]`` (the same candidate after a content-free prompt):

    * ``mean``: mean token log-probability (the behaviour before issue #13; favours short, likely strings);
    * ``sum``: the sequence log-probability;
    * ``calibrated``: ``sum - prior_weight * prior_sum``, the pointwise mutual information of candidate and
      context (the remedy for surface-form competition in multiple-choice scoring);
    * ``calibrated_mean``: the same per token (``mean - prior_weight * prior_mean``);
    * ``two_stage``: first the action kind (``kinds[i]``, e.g. :func:`action_kind`) whose candidates hold the
      most probability (log-sum-exp of their sums), then the candidate of that kind with the highest sum;
      the other kinds score ``-inf``;
    * ``two_stage_calibrated``: the kind as in ``two_stage``, then the highest ``calibrated`` score in it.

    ``kind_bias`` adds a per-kind constant (``{"stop": -1.0}``: every ``stop`` candidate scores 1 lower; a
    kind it does not name gets 0): to every score, and for the two-stage scorings to the kind's log-mass
    (a log prior on the kind). It needs ``kinds``.

    ``mean`` and ``sum`` are computed in fp32 in token order, as the scorers always did.
    """
    if kind_bias and any(kind_bias.values()):
        if kinds is None or len(kinds) != len(token_logps):
            raise ValueError(f"kind_bias needs one kind per candidate ({len(token_logps)} candidates, got "
                             f"{None if kinds is None else len(kinds)})")
        if not scoring.startswith("two_stage"):
            plain = combine_scores(token_logps, scoring, prior=prior, kinds=kinds, prior_weight=prior_weight)
            return add_kind_bias(plain, kinds, kind_bias)
    n = len(token_logps)
    if any(not lp for lp in token_logps):
        raise ValueError("every candidate needs at least one token log-probability")
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {list(SCORINGS)}, got {scoring!r}")
    sums = [_sum(lp) for lp in token_logps]
    if scoring == "mean":
        return [s / len(lp) for s, lp in zip(sums, token_logps, strict=True)]
    if scoring == "sum":
        return sums
    calibrated: list[float] = []
    if scoring in NEEDS_PRIOR:
        if prior is None or len(prior) != n or any(not p for p in prior):
            raise ValueError(f"scoring {scoring!r} needs a non-empty prior per candidate "
                             f"({n} candidates, got {None if prior is None else len(prior)})")
        prior_sums = [_sum(p) for p in prior]
        if scoring == "calibrated_mean":
            return [s / len(lp) - prior_weight * ps / len(p)
                    for s, lp, ps, p in zip(sums, token_logps, prior_sums, prior, strict=True)]
        calibrated = [s - prior_weight * ps for s, ps in zip(sums, prior_sums, strict=True)]
        if scoring == "calibrated":
            return calibrated
    if kinds is None or len(kinds) != n:
        raise ValueError(f"scoring {scoring!r} needs one kind per candidate ({n} candidates, got "
                         f"{None if kinds is None else len(kinds)})")
    mass: dict[str, float] = {}
    for kind, s in zip(kinds, sums, strict=True):
        mass[kind] = float(torch.logaddexp(torch.tensor(mass[kind]), torch.tensor(s))) if kind in mass else s
    for kind in mass:
        mass[kind] += (kind_bias or {}).get(kind, 0.0)
    best_kind = max(mass, key=lambda k: mass[k])  # dicts keep first-seen order: ties go to the first kind
    inner = calibrated if scoring == "two_stage_calibrated" else sums
    return [score if kind == best_kind else float("-inf") for kind, score in zip(kinds, inner, strict=True)]


def add_kind_bias(scores: Sequence[float], kinds: Sequence[str],
                  kind_bias: Mapping[str, float]) -> list[float]:
    """``scores[i] + kind_bias[kinds[i]]`` (0 for a kind it does not name): how a kind bias enters an additive
    scoring, on the per-row and the batched path alike."""
    return [score + kind_bias.get(kind, 0.0) for score, kind in zip(scores, kinds, strict=True)]


def best_index(scores: Sequence[float]) -> int:
    """The index of the highest score (the first of equal ones), as the policy picks."""
    return max(range(len(scores)), key=scores.__getitem__)


def score_margin(scores: Sequence[float], best: int) -> float | None:
    """How far ``scores[best]`` is ahead of the best other score (``None`` with a single candidate)."""
    others = [s for i, s in enumerate(scores) if i != best]
    return float(scores[best]) - float(max(others)) if others else None
