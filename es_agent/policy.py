"""The LLM web-agent policy: prompt genome + observation + history -> one action string per step.

Decoding is greedy, so fitness depends on the parameters and not on sampling luck. Two modes:

* ``constrained`` (default): the valid candidate actions of the observation (:mod:`es_agent.actions_space`)
  are the only possible replies; the model picks one, by ranking every candidate by mean token log-probability
  (``score``: one tree-attention forward over the candidates' token trie after the prompt's KV cache) or by
  greedy decoding constrained to that trie (``greedy``: cheaper, but worse choices, since element ids are
  then picked digit by digit). Every step yields a valid action.
* ``free``: bounded greedy generation and extraction of one action; a reply with no action is passed on as is
  (the env reports it in ``last_action_error``) and counted in ``stats["parse_failures"]``.

The KV cache of the genome's system message (identical across the steps of an episode and across envs) is
computed once and reused until :meth:`LLMPolicy.reset` (weights may change between episodes). Call under any
``torch.set_num_threads`` you like: one thread per worker is fastest for small models on small CPUs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from es_agent.actions_space import CandidateConfig, build_candidates, extract_action
from es_agent.axtree import truncate_axtree
from es_agent.decoding import (
    GreedyChooser,
    PrefixKV,
    RowState,
    TokenTrie,
    TrieChooser,
    decode,
    prefill,
    score_candidates,
)
from es_agent.prompts import (
    HistoryEntry,
    PromptGenome,
    format_history,
    observation_values,
    render_observation,
)


@dataclass(frozen=True)
class PolicyConfig:
    """How the policy renders prompts and decodes actions."""

    decoding: Literal["constrained", "free"] = "constrained"
    """``constrained`` (choose among valid candidate actions; best for small models) or ``free``."""
    constrained_method: Literal["score", "greedy"] = "score"
    """``score``: the candidate with the best mean token log-probability (all candidates scored in one
    tree-attention forward); ``greedy``: greedy decoding constrained to the candidates' token trie (cheaper
    on huge candidate sets, but each token is a local decision: element ids are picked digit by digit)."""
    max_new_tokens: int = 64
    """Bound on generated tokens in free mode."""
    max_prompt_tokens: int = 1024
    """Bound on prompt tokens; the accessibility tree is truncated to fit."""
    min_axtree_tokens: int = 128
    """The axtree keeps at least this many tokens even when the rest of the prompt is long."""
    axtree_head_lines: int = 8
    """Lines at the top of the axtree always kept when it is truncated."""
    history_len: int = 5
    """Previous actions shown in the prompt (the last k)."""
    candidates: CandidateConfig = field(default_factory=CandidateConfig)
    """Which candidate actions constrained decoding offers."""
    prefix_cache: bool = True
    """Reuse the KV cache of the system message across steps and envs (until :meth:`LLMPolicy.reset`)."""
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=lambda: {"enable_thinking": False})
    """Extra variables for the tokenizer's chat template (Qwen3's ``enable_thinking``; ignored by others)."""

    def __post_init__(self) -> None:
        if self.decoding not in ("constrained", "free"):
            raise ValueError(f"decoding must be 'constrained' or 'free', got {self.decoding!r}")
        if self.constrained_method not in ("score", "greedy"):
            raise ValueError(
                f"constrained_method must be 'score' or 'greedy', got {self.constrained_method!r}")
        if self.max_new_tokens < 1 or self.max_prompt_tokens < 64:
            raise ValueError("max_new_tokens >= 1 and max_prompt_tokens >= 64 are required")


@dataclass
class _Prompt:
    ids: list[int]
    text: str
    axtree: str
    omitted_lines: int


class LLMPolicy:
    """A transformers causal LM acting in a text web environment through a prompt genome.

    Histories are kept per slot: :meth:`act` uses slot 0, :meth:`act_batch` slot ``i`` for observation ``i``
    (one slot per environment). ``stats`` accumulates counters; ``last_info[slot]`` describes the last step.
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any, genome: PromptGenome,
                 config: PolicyConfig | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.genome = genome
        self.config = config or PolicyConfig()
        self.stats: dict[str, float] = {}
        self.last_info: dict[int, dict[str, Any]] = {}
        self._histories: dict[int, list[HistoryEntry]] = {}
        self._prefixes: dict[str, PrefixKV] = {}
        self._end_ids = self._end_token_ids()
        self.reset_stats()

    # ------------------------------------------------------------------ public API
    def reset(self, slot: int | None = None) -> None:
        """Start new episodes: clear the history of ``slot`` (all when ``None``) and the cached prefix KV."""
        if slot is None:
            self._histories.clear()
            self.last_info.clear()
        else:
            self._histories.pop(slot, None)
            self.last_info.pop(slot, None)
        self._prefixes.clear()

    def reset_stats(self) -> None:
        """Zero the counters in ``stats``."""
        self.stats = {"acts": 0, "parse_failures": 0, "prompt_tokens": 0, "truncated_observations": 0,
                      "candidates": 0, "generated_tokens": 0, "seconds": 0.0}

    def act(self, obs: Mapping[str, Any]) -> str:
        """The next action for one observation (history slot 0)."""
        return self.act_batch([obs])[0]

    def act_batch(self, observations: Sequence[Mapping[str, Any]]) -> list[str]:
        """The next action for each observation, observation ``i`` continuing the episode of slot ``i``."""
        started = time.perf_counter()
        for slot, obs in enumerate(observations):
            history = self._histories.setdefault(slot, [])
            error = str(obs.get("last_action_error") or "")
            if history and error and not history[-1].error:
                history[-1] = HistoryEntry(history[-1].action, error)
        with torch.inference_mode():
            prompts = [self._build_prompt(obs, slot) for slot, obs in enumerate(observations)]
            prefix = self._prefix_kv()
            rows = [prefill(self.model, p.ids, prefix) for p in prompts]
            if self.config.decoding == "free":
                actions, infos = self._act_free(rows)
            else:
                actions, infos = self._act_constrained(rows, prompts, observations)
        elapsed = time.perf_counter() - started
        for slot, (action, info, prompt) in enumerate(zip(actions, infos, prompts, strict=True)):
            self._histories[slot].append(HistoryEntry(action))
            info.update(prompt_tokens=len(prompt.ids), omitted_axtree_lines=prompt.omitted_lines,
                        seconds=elapsed / len(observations))
            self.last_info[slot] = info
            self.stats["acts"] += 1
            self.stats["prompt_tokens"] += len(prompt.ids)
            self.stats["truncated_observations"] += prompt.omitted_lines > 0
            self.stats["parse_failures"] += bool(info.get("parse_failed"))
            self.stats["candidates"] += info.get("candidates", 0)
        self.stats["seconds"] += elapsed
        return actions

    def render(self, obs: Mapping[str, Any], slot: int = 0) -> str:
        """The prompt text the next :meth:`act` on ``slot`` would see (for inspection)."""
        return self._build_prompt(obs, slot).text

    def candidates(self, obs: Mapping[str, Any]) -> list[str]:
        """The candidate actions constrained decoding would offer for ``obs``."""
        return build_candidates(self._build_prompt(obs, 0).axtree, str(obs.get("goal", "")),
                                self.config.candidates)

    # ------------------------------------------------------------------ prompts
    def _chat(self, messages: list[dict[str, str]], generation: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation,
            **dict(self.config.chat_template_kwargs))

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _system_prefix(self) -> str:
        return self._chat([{"role": "system", "content": self.genome.system_text()}], generation=False)

    def _build_prompt(self, obs: Mapping[str, Any], slot: int) -> _Prompt:
        history = format_history(self._histories.get(slot, []), self.config.history_len)
        template = self.genome.pools.observation_template
        constrained = self.config.decoding == "constrained"
        reply_prefix = self.genome.action_format.action_prefix if constrained else ""

        def full_text(axtree: str) -> str:
            user = render_observation(template, observation_values(obs, axtree, history))
            messages = [{"role": "system", "content": self.genome.system_text()},
                        {"role": "user", "content": user}]
            return self._chat(messages, generation=True) + reply_prefix

        raw_axtree = str(obs.get("axtree", ""))
        budget = max(self.config.min_axtree_tokens,
                     self.config.max_prompt_tokens - len(self._encode(full_text(""))))
        prefix = self._system_prefix()
        for _ in range(3):  # lines are counted one by one: joined, they can tokenize a little longer
            axtree, omitted = truncate_axtree(
                raw_axtree, budget, self._count_tokens, goal=str(obs.get("goal", "")),
                head_lines=self.config.axtree_head_lines)
            text = full_text(axtree)
            if self.config.prefix_cache and text.startswith(prefix):
                ids = self._encode(prefix) + self._encode(text[len(prefix):])
            else:
                ids = self._encode(text)
            excess = len(ids) - self.config.max_prompt_tokens
            if excess <= 0 or budget <= self.config.min_axtree_tokens:
                break
            budget = max(self.config.min_axtree_tokens, budget - excess)
        return _Prompt(ids=ids, text=text, axtree=axtree, omitted_lines=omitted)

    def _count_tokens(self, lines: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer(list(lines), add_special_tokens=False)["input_ids"]]

    def _prefix_kv(self) -> PrefixKV | None:
        if not self.config.prefix_cache:
            return None
        key = self.genome.system_text()
        if key not in self._prefixes:
            ids = self._encode(self._system_prefix())
            if not ids:
                return None
            self._prefixes.clear()
            self._prefixes[key] = PrefixKV(ids=tuple(ids), state=prefill(self.model, ids))
        return self._prefixes[key]

    def _end_token_ids(self) -> list[int]:
        ends = {self.tokenizer.eos_token_id}
        im_end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(im_end, int) and im_end != self.tokenizer.unk_token_id:
            ends.add(im_end)
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        ends.update(eos if isinstance(eos, list) else [eos])
        return sorted(e for e in ends if isinstance(e, int))

    @property
    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self._end_ids[0])

    # ------------------------------------------------------------------ decoding
    def _act_free(self, rows: list[RowState]) -> tuple[list[str], list[dict[str, Any]]]:
        chooser = GreedyChooser(len(rows), self._end_ids, self.config.max_new_tokens)
        outputs = decode(self.model, rows, chooser, pad_id=self._pad_id, max_steps=self.config.max_new_tokens)
        actions, infos = [], []
        style = self.genome.action_format.style
        for tokens in outputs:
            self.stats["generated_tokens"] += len(tokens)
            kept = [t for t in tokens if t not in self._end_ids]
            raw = self.tokenizer.decode(kept, skip_special_tokens=True)
            action = extract_action(raw, style)
            failed = action is None
            actions.append(raw.strip() if failed else action)
            infos.append({"mode": "free", "raw": raw, "parse_failed": failed,
                          "generated_tokens": len(tokens)})
        return actions, infos

    def _act_constrained(self, rows: list[RowState], prompts: list[_Prompt],
                         observations: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
        fmt = self.genome.action_format
        per_row = [build_candidates(p.axtree, str(o.get("goal", "")), self.config.candidates)
                   for p, o in zip(prompts, observations, strict=True)]
        if any(not c for c in per_row):
            raise ValueError("no candidate actions: enable extra_actions or stop answers in CandidateConfig")
        encoded = []
        for cands in per_row:
            texts = [c + fmt.action_suffix for c in cands]
            ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
            encoded.append([list(seq) + ([] if fmt.action_suffix else [self._end_ids[0]]) for seq in ids])
        if self.config.constrained_method == "greedy":
            tries = [TokenTrie(seqs) for seqs in encoded]
            chooser = TrieChooser(tries)
            outputs = decode(self.model, rows, chooser, pad_id=self._pad_id,
                             max_steps=max(len(s) for seqs in encoded for s in seqs) + 1)
            picks = [int(c) if c is not None else 0 for c in chooser.chosen]
            extra = [{"generated_tokens": len(out)} for out in outputs]
        else:
            picks, extra = [], []
            for row, seqs in zip(rows, encoded, strict=True):
                scores = score_candidates(self.model, row, seqs)
                best = max(range(len(scores)), key=scores.__getitem__)
                picks.append(best)
                extra.append({"score": scores[best]})
        actions = [cands[i] for cands, i in zip(per_row, picks, strict=True)]
        infos = [{"mode": f"constrained/{self.config.constrained_method}", "parse_failed": False,
                  "candidates": len(cands), **e} for cands, e in zip(per_row, extra, strict=True)]
        return actions, infos
