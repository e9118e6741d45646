"""The LLM web-agent policy: prompt genome + observation + history -> one action string per step.

Decoding is greedy, so fitness depends on the parameters and not on sampling luck (training rollouts may
sample instead, with seeded noise shared by the whole population: ``PolicyConfig.temperature``). Two modes:

* ``constrained`` (default): the valid candidate actions of the observation (:mod:`es_agent.actions_space`)
  are the only possible replies; the model picks one, by ranking every candidate by a score of its token
  log-probabilities (``score``: one tree-attention forward over the candidates' token trie after the
  prompt's KV cache; ``PolicyConfig.scoring`` says how the log-probabilities combine, see
  :func:`es_agent.decoding.combine_scores`) or by greedy decoding constrained to that trie (``greedy``:
  cheaper, but worse choices, since element ids are then picked digit by digit). Every step yields a valid
  action. The calibrated scorings subtract each candidate's log-probability after a *content-free* prompt
  (the same genome and template, every observation field ``N/A``, no history): prefilled once per genome and
  weights, and each candidate's prior computed once (cached by its tokens until the weights change).
* ``free``: bounded greedy generation and extraction of one action; a reply with no action is passed on as is
  (the env reports it in ``last_action_error``) and counted in ``stats["parse_failures"]``.

Prompts. The accessibility tree is shown in its compact rendering (:func:`es_agent.axtree.compact_axtree`;
``observation="full"`` shows the env's text as is), after truncation to the token budget as the full text
(so the page content and the candidate actions are those of the full rendering, in fewer tokens).

Caching. With ``prefix_cache="lcp"`` (default) each slot keeps the KV cache of its last prompt and a step
prefills only what follows the longest common token prefix with it (:mod:`es_agent.prefix_cache`); the pools'
observation template puts what is constant in an episode (the objective, then the history) before the page,
so that is everything but the new history line and the page. ``"system"`` caches the genome's system message
only (the behaviour before issue #10), ``"off"`` nothing. Caches are dropped by :meth:`LLMPolicy.reset` and
whenever the weights change (a fingerprint checked on every lookup). Call under any ``torch.set_num_threads``
you like: one thread per worker is fastest for small models on small CPUs.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from es_agent.actions_space import CandidateConfig, build_candidates, extract_action
from es_agent.axtree import compact_axtree, parse_axtree, truncate_axtree
from es_agent.decoding import (
    NEEDS_PRIOR,
    SCORINGS,
    GreedyChooser,
    PrefixKV,
    RowState,
    Scoring,
    TokenTrie,
    TrieChooser,
    action_kind,
    best_index,
    candidate_logprobs,
    combine_scores,
    decode,
    prefill,
    score_margin,
)
from es_agent.grounding import TARGETED, add_goal_prior, answer_type_matches, target_overlaps
from es_agent.memory import TrajectoryMemory, load_memory
from es_agent.prefix_cache import PromptKVCache, weights_fingerprint
from es_agent.prompts import (
    HistoryEntry,
    PromptGenome,
    format_history,
    observation_values,
    render_observation,
)
from es_agent.sampling import sampled_scores


@dataclass(frozen=True)
class PolicyConfig:
    """How the policy renders prompts and decodes actions."""

    decoding: Literal["constrained", "free"] = "constrained"
    """``constrained`` (choose among valid candidate actions; best for small models) or ``free``."""
    constrained_method: Literal["score", "greedy"] = "score"
    """``score``: the candidate with the best mean token log-probability (all candidates scored in one
    tree-attention forward); ``greedy``: greedy decoding constrained to the candidates' token trie (cheaper
    on huge candidate sets, but each token is a local decision: element ids are picked digit by digit)."""
    name_targets: bool = False
    """Score ``click`` / ``hover`` / ``type`` candidates with their target's role and name after the id
    (``click [12] link 'Sunpeak Beef Jerky'``; the action taken stays ``click [12]``), so the model scores
    text it can copy from the goal instead of a bare element number (issue #13: with bare ids neither
    embedded model picks the right link on tier-1 click steps, even when the action kind is given)."""
    scoring: Scoring = "mean"
    """How ``score`` ranks the candidates by their token log-probabilities
    (:func:`es_agent.decoding.combine_scores`): ``mean`` (the behaviour before issue #13), ``sum``,
    ``calibrated`` / ``calibrated_mean`` (minus the log-probability after a content-free prompt),
    ``two_stage`` / ``two_stage_calibrated`` (the action kind with the most probability, then its best
    argument). benchmarks/results/agreement.md compares them by step agreement with reference solutions."""
    prior_weight: float = 1.0
    """Weight of the content-free log-probability the calibrated scorings subtract (1: full PMI)."""
    kind_bias: Mapping[str, float] = field(default_factory=dict)
    """A constant added to the score of every candidate of an action kind (``{"stop": 0.5}``; a kind not named
    gets 0; for the two-stage scorings, to the kind's log-mass): a prior on the action kind. Small agents have
    a kind bias of their own that decides most steps (SmolLM2-135M answers at almost every step, the embedded
    Qwen clicks): ``python -m benchmarks.bench_agreement --fit-kind-bias`` fits it on a training split by
    step agreement and reports it held out."""
    goal_prior: float = 0.0
    """Weight of the lexical prior on an action's target (:mod:`es_agent.grounding`): ``goal_prior *
    goal_overlap(goal, element name)`` is added to the score of every ``click`` / ``hover`` / ``type``
    candidate (``constrained_method="score"``; 0: off, the behaviour before). Neither embedded model grounds
    a click by its log-probabilities alone (0 of 28 held-out tier-1 clicks); ``python -m
    benchmarks.bench_agreement --fit-goal-prior`` fits the weight on a training split."""
    answer_prior: float = 0.0
    """Weight of the answer-type prior (:func:`es_agent.grounding.answer_type_matches`): added to the score of
    every ``stop`` candidate whose answer has the shape the goal's question asks for (an email, a phone
    number, a count, money, a date; ``constrained_method="score"``; 0: off). ``python -m
    benchmarks.bench_agreement --fit-goal-prior --fit-answer-prior`` fits it with the goal prior."""
    memory_prior: float = 0.0
    """Weight of the trajectory-memory prior (:mod:`es_agent.memory`): with a memory given to the policy
    (:attr:`LLMPolicy.memory`), ``memory_prior x similarity x match`` is added to every candidate that does
    what the nearest solved episode did at the same step (the same kind on an element of the same name, or
    ``stop``); ``constrained_method="score"``; 0: off. ``python -m benchmarks.bench_agreement
    --fit-memory-prior`` measures it teacher-forced."""
    memory_file: str = ""
    """A trajectory memory JSON file (:meth:`es_agent.memory.TrajectoryMemory.to_dict`'s form; a relative
    path is read from the working directory) the policy uses when it is given no ``memory``: how a run's
    workers get it (``agent.policy.memory_file``). Empty: none."""
    temperature: float = 0.0
    """Training rollouts sample their actions from ``softmax(final scores / temperature)`` (constrained
    ``score`` decoding; 0: greedy, the behaviour before). Sampling happens only in episodes given a sampling
    seed (:meth:`LLMPolicy.set_sample_seed`: the training rows of :class:`es_agent.worker.Replica`, seeded
    with the episode's reset seed, so every member of a population draws the same noise on the same
    candidates, :mod:`es_agent.sampling`); held-out scoring, centre evaluations and reflection stay greedy.
    In the units of the final scores, priors included. Issue #13: greedy choices tied every candidate's
    reward in 96 % of the 6-hour grid's tier-2 generations; sampling at T = 1-4 did not make them differ
    either (benchmarks/results/sampling_probe_*.md, README "Does it learn?")."""
    max_new_tokens: int = 64
    """Bound on generated tokens in free mode."""
    max_prompt_tokens: int = 1536
    """Bound on prompt tokens; the accessibility tree is truncated to fit. 1536 (1024 before issue #13):
    candidates come only from the kept lines, and on the 836 held-out and tier-1 reference steps 1024 tokens
    left 123 click/type targets and most table answers out (reachable 66.5 %), 1536 leaves 17 (85.6 %, with
    :func:`~es_agent.actions_space.answer_parts` 87.9 %) for about 1.4x the time per step."""
    min_axtree_tokens: int = 128
    """The axtree keeps at least this many tokens even when the rest of the prompt is long."""
    axtree_head_lines: int = 8
    """Lines at the top of the axtree always kept when it is truncated."""
    history_len: int = 5
    """Previous actions shown in the prompt (the last k)."""
    candidates: CandidateConfig = field(default_factory=CandidateConfig)
    """Which candidate actions constrained decoding offers."""
    observation: Literal["compact", "full"] = "compact"
    """How the prompt shows the accessibility tree: ``compact`` (:func:`es_agent.axtree.compact_axtree`:
    actionable nodes with their ids, text nodes without ids, no wrappers, list markers or non-deciding
    properties; about 0.7x the tokens of the same lines, same candidate actions) or ``full`` (the env's
    text as is, the behaviour before issue #10). Either way it is first truncated as the full text."""
    prefix_cache: Literal["lcp", "system", "off"] | bool = "lcp"
    """KV-cache reuse: ``lcp`` (each slot's last prompt, reused through the longest common token prefix),
    ``system`` (the genome's system message only, the behaviour before issue #10) or ``off``; ``True``
    means ``lcp`` and ``False`` ``off``. Dropped on :meth:`LLMPolicy.reset` and when the weights change."""
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=lambda: {"enable_thinking": False})
    """Extra variables for the tokenizer's chat template (Qwen3's ``enable_thinking``; ignored by others)."""

    def __post_init__(self) -> None:
        if self.decoding not in ("constrained", "free"):
            raise ValueError(f"decoding must be 'constrained' or 'free', got {self.decoding!r}")
        if self.constrained_method not in ("score", "greedy"):
            raise ValueError(
                f"constrained_method must be 'score' or 'greedy', got {self.constrained_method!r}")
        if self.scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {list(SCORINGS)}, got {self.scoring!r}")
        if not 0.0 <= self.prior_weight <= 2.0:
            raise ValueError(f"prior_weight must be in [0, 2], got {self.prior_weight!r}")
        for kind, bias in dict(self.kind_bias).items():
            if not isinstance(kind, str) or not re.fullmatch(r"[a-z_]+", kind):
                raise ValueError(f"kind_bias keys are action kinds such as 'stop' or 'click', got {kind!r}")
            if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not math.isfinite(bias):
                raise ValueError(f"kind_bias[{kind!r}] must be a finite number, got {bias!r}")
        if not isinstance(self.memory_file, str):
            raise ValueError(f"memory_file must be a path string, got {self.memory_file!r}")
        for name in ("goal_prior", "answer_prior", "memory_prior"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
            if value and self.constrained_method != "score":
                raise ValueError(f"{name} needs constrained_method='score' (greedy decoding has no scores "
                                 "to add it to)")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if self.temperature and (self.decoding != "constrained" or self.constrained_method != "score"):
            raise ValueError("temperature > 0 needs decoding='constrained' and constrained_method='score' "
                             "(it samples among the scored candidates)")
        if self.max_new_tokens < 1 or self.max_prompt_tokens < 64:
            raise ValueError("max_new_tokens >= 1 and max_prompt_tokens >= 64 are required")
        if self.observation not in ("compact", "full"):
            raise ValueError(f"observation must be 'compact' or 'full', got {self.observation!r}")
        if self.prefix_cache not in ("lcp", "system", "off", True, False):
            raise ValueError(
                f"prefix_cache must be 'lcp', 'system', 'off' (or a bool), got {self.prefix_cache!r}")

    @property
    def cache_mode(self) -> Literal["lcp", "system", "off"]:
        """``prefix_cache`` with the booleans resolved."""
        if self.prefix_cache is True:
            return "lcp"
        if self.prefix_cache is False:
            return "off"
        return self.prefix_cache


@dataclass
class StepScores:
    """What ``score`` decoding sees at one step: the candidates and their token log-probabilities."""

    candidates: list[str]
    """The candidate actions, in :func:`~es_agent.actions_space.build_candidates` order."""
    kinds: list[str]
    """Each candidate's action kind (:func:`es_agent.decoding.action_kind`)."""
    token_logps: list[list[float]]
    """Each candidate's token log-probabilities after the step's prompt (its end marker included)."""
    prior: list[list[float]] | None
    """The same after the content-free prompt (``None`` when not computed)."""

    def scores(self, scoring: str, prior_weight: float = 1.0,
               kind_bias: Mapping[str, float] | None = None) -> list[float]:
        """The candidates' scores under ``scoring`` (:func:`es_agent.decoding.combine_scores`)."""
        return combine_scores(self.token_logps, scoring, prior=self.prior, kinds=self.kinds,
                              prior_weight=prior_weight, kind_bias=kind_bias)

    def choice(self, scoring: str, prior_weight: float = 1.0,
               kind_bias: Mapping[str, float] | None = None) -> str:
        """The candidate the policy picks under ``scoring``."""
        return self.candidates[best_index(self.scores(scoring, prior_weight, kind_bias))]


def scored_texts(cands: Sequence[str], axtree: str) -> list[str]:
    """The candidates as :attr:`PolicyConfig.name_targets` scores them: a ``click`` / ``hover`` / ``type``
    on an element of ``axtree`` gets the element's role and quoted name after its id (``click [12] link
    'Sunpeak Beef Jerky'``, ``type [7] searchbox 'Search' [text]``); other candidates, and targets without a
    name, stay as they are."""
    named = {n.id: f"{n.role} '{n.name}'" for n in parse_axtree(axtree) if n.id and n.name}
    out = []
    for cand in cands:
        match = TARGETED.match(cand)
        label = named.get(match[2]) if match else None
        out.append(cand if match is None or label is None
                   else f"{cand[:match.end()]} {label}{cand[match.end():]}")
    return out


@dataclass
class _Prompt:
    ids: list[int]
    """The prompt tokens."""
    text: str
    """The prompt text."""
    axtree: str
    """The accessibility tree as the prompt shows it (truncated, compact or full): candidates come from it."""
    omitted_lines: int
    """Lines of the env's tree left out by truncation."""


class LLMPolicy:
    """A transformers causal LM acting in a text web environment through a prompt genome.

    Histories are kept per slot: :meth:`act` uses slot 0, :meth:`act_batch` slot ``i`` for observation ``i``
    (one slot per environment). ``stats`` accumulates counters; ``last_info[slot]`` describes the last step.
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any, genome: PromptGenome,
                 config: PolicyConfig | None = None, memory: TrajectoryMemory | None = None) -> None:
        self.model = model
        if memory is None and config is not None and config.memory_file:
            memory = load_memory(config.memory_file)
        self.memory = memory
        """The solved episodes :attr:`PolicyConfig.memory_prior` retrieves from (``None``: no prior)."""
        self.tokenizer = tokenizer
        self.genome = genome
        self.config = config or PolicyConfig()
        self.stats: dict[str, float] = {}
        self.last_info: dict[int, dict[str, Any]] = {}
        self._histories: dict[int, list[HistoryEntry]] = {}
        self._prefixes: dict[str, PrefixKV] = {}
        self._kv = PromptKVCache(model)
        self._prefix_fingerprint: Any = None
        self._priors: dict[tuple[int, ...], list[float]] = {}
        self._prior_row: RowState | None = None
        self._prior_key: Any = None
        self._end_ids = self._end_token_ids()
        self._sample_seed: int | None = None
        self.reset_stats()

    # ------------------------------------------------------------------ public API
    def reset(self, slot: int | None = None) -> None:
        """Start new episodes: clear the history of ``slot`` (all when ``None``) and every cached KV (of all
        slots: weights may change between episodes)."""
        if slot is None:
            self._histories.clear()
            self.last_info.clear()
        else:
            self._histories.pop(slot, None)
            self.last_info.pop(slot, None)
        self._prefixes.clear()
        self._kv.clear()

    def set_sample_seed(self, seed: int | None) -> None:
        """Sample the next episodes' actions with ``seed`` (at :attr:`PolicyConfig.temperature`; ``None``:
        greedy again). The draw at a step depends only on the seed, the step number and the candidate's
        text (:func:`es_agent.sampling.gumbel_noise`), so the slots of :meth:`act_batch` share it."""
        self._sample_seed = None if seed is None else int(seed)

    def reset_stats(self) -> None:
        """Zero the counters in ``stats`` (``prefilled_tokens``: prompt tokens run through the model, the
        rest came from the KV cache)."""
        self.stats = {"acts": 0, "parse_failures": 0, "prompt_tokens": 0, "prefilled_tokens": 0,
                      "truncated_observations": 0, "candidates": 0, "generated_tokens": 0, "seconds": 0.0}

    @property
    def sampling(self) -> bool:
        """Whether actions are sampled now (a sampling seed is set and the temperature is above 0)."""
        return self._sample_seed is not None and self.config.temperature > 0

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
            rows, prefilled = [], []
            for slot, p in enumerate(prompts):
                row, cached = self._prefill(slot, p.ids)
                rows.append(row)
                prefilled.append(len(p.ids) - cached)
            if self.config.decoding == "free":
                actions, infos = self._act_free(rows)
            else:
                actions, infos = self._act_constrained(rows, prompts, observations)
        elapsed = time.perf_counter() - started
        for slot, (action, info, prompt) in enumerate(zip(actions, infos, prompts, strict=True)):
            self._histories[slot].append(HistoryEntry(action))
            info.update(prompt_tokens=len(prompt.ids), prefilled_tokens=prefilled[slot],
                        omitted_axtree_lines=prompt.omitted_lines, seconds=elapsed / len(observations))
            self.last_info[slot] = info
            self.stats["acts"] += 1
            self.stats["prompt_tokens"] += len(prompt.ids)
            self.stats["prefilled_tokens"] += prefilled[slot]
            self.stats["truncated_observations"] += prompt.omitted_lines > 0
            self.stats["parse_failures"] += bool(info.get("parse_failed"))
            self.stats["candidates"] += info.get("candidates", 0)
        self.stats["seconds"] += elapsed
        return actions

    def set_history(self, slot: int, actions: Sequence[str]) -> None:
        """Replace the action history of ``slot`` (teacher forcing: the step agreement diagnostic shows the
        policy a reference trajectory's earlier actions)."""
        self._histories[slot] = [HistoryEntry(str(a)) for a in actions]

    def score_step(self, obs: Mapping[str, Any], slot: int = 0, *, with_prior: bool = True) -> StepScores:
        """The candidates of the next step on ``slot`` and their token log-probabilities (and their priors
        after the content-free prompt when ``with_prior``), without acting: the history is left as it is.
        Every :data:`~es_agent.decoding.Scoring` follows from the result (:meth:`StepScores.choice`)."""
        return self._score_step(obs, slot, with_prior)[0]

    def ranked_step(self, obs: Mapping[str, Any], slot: int = 0) -> tuple[StepScores, list[float]]:
        """:meth:`score_step` and the final score of every candidate, the numbers constrained ``score``
        decoding picks the best of (the configured scoring, prior weight and kind bias, plus the lexical
        priors), without acting."""
        step, prompt = self._score_step(obs, slot, self.config.scoring in NEEDS_PRIOR)
        return step, self._final_scores(step, prompt.axtree, str(obs.get("goal", "")),
                                        len(self._histories.get(slot, ())))

    def _score_step(self, obs: Mapping[str, Any], slot: int, with_prior: bool) -> tuple[StepScores, _Prompt]:
        with torch.inference_mode():
            prompt = self._build_prompt(obs, slot)
            row, _ = self._prefill(slot, prompt.ids)
            cands = self._candidates_of(prompt, obs)
            encoded = self._encode_candidates(cands, prompt.axtree)
            logps = candidate_logprobs(self.model, row, encoded)
            prior = self._candidate_priors(encoded) if with_prior else None
        return StepScores(cands, [action_kind(c) for c in cands], logps, prior), prompt

    def _final_scores(self, step: StepScores, axtree: str, goal: str, step_index: int) -> list[float]:
        """The scores ``score`` decoding ranks ``step``'s candidates by (``step_index``: actions taken so far
        in the episode, where the memory prior reads the retrieved exemplar)."""
        return self._with_lexical_priors(step.scores(self.config.scoring, self.config.prior_weight,
                                                     self.config.kind_bias), step.candidates, axtree, goal,
                                         step_index)

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
            if self.config.observation == "compact":
                axtree = compact_axtree(axtree)
            text = full_text(axtree)
            if self.config.cache_mode == "system" and text.startswith(prefix):
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

    def _prefill(self, slot: int, ids: list[int]) -> tuple[RowState, int]:
        """Prefill ``ids`` for ``slot`` with the configured cache; returns the row and the tokens reused."""
        mode = self.config.cache_mode
        if mode == "lcp":
            prefix = self._kv.lookup(slot, ids)
            row = prefill(self.model, ids, prefix)
            self._kv.store(slot, ids, row)
            return row, 0 if prefix is None else len(prefix.ids)
        prefix = self._prefix_kv() if mode == "system" else None
        if prefix is None or len(ids) <= len(prefix.ids) or tuple(ids[:len(prefix.ids)]) != prefix.ids:
            return prefill(self.model, ids), 0
        return prefill(self.model, ids, prefix), len(prefix.ids)

    def _prefix_kv(self) -> PrefixKV | None:
        """The system message's KV (``prefix_cache="system"``), recomputed when the weights changed."""
        if self.config.cache_mode != "system":
            return None
        key = self.genome.system_text()
        fingerprint = weights_fingerprint(self.model)
        if fingerprint != self._prefix_fingerprint:
            self._prefixes.clear()
            self._prefix_fingerprint = fingerprint
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

    def _content_free_ids(self) -> list[int]:
        """The content-free prompt: the genome and template with every observation field ``N/A``."""
        values = observation_values({"goal": "N/A", "url": "N/A", "tabs": "N/A"}, "N/A", "None")
        user = render_observation(self.genome.pools.observation_template, values)
        messages = [{"role": "system", "content": self.genome.system_text()},
                    {"role": "user", "content": user}]
        reply_prefix = self.genome.action_format.action_prefix
        return self._encode(self._chat(messages, generation=True) + reply_prefix)

    def _candidate_priors(self, encoded: Sequence[Sequence[int]]) -> list[list[float]]:
        """Each candidate's token log-probabilities after the content-free prompt; the prompt is prefilled
        once and each candidate scored once while the genome and the weights stay the same."""
        key = (self.genome.system_text(), self.genome.pools.observation_template,
               self.genome.action_format.action_prefix, weights_fingerprint(self.model))
        if key != self._prior_key or self._prior_row is None:
            self._priors.clear()
            self._prior_row = prefill(self.model, self._content_free_ids())
            self._prior_key = key
        missing = list(dict.fromkeys(tuple(seq) for seq in encoded if tuple(seq) not in self._priors))
        if missing:
            for seq, logps in zip(missing, candidate_logprobs(self.model, self._prior_row, missing),
                                  strict=True):
                self._priors[seq] = logps
        return [self._priors[tuple(seq)] for seq in encoded]

    def _candidates_of(self, prompt: _Prompt, obs: Mapping[str, Any]) -> list[str]:
        cands = build_candidates(prompt.axtree, str(obs.get("goal", "")), self.config.candidates)
        if not cands:
            raise ValueError("no candidate actions: enable extra_actions or stop answers in CandidateConfig")
        return cands

    def _encode_candidates(self, cands: Sequence[str], axtree: str) -> list[list[int]]:
        """Candidate token sequences: the text (with its target named, :attr:`PolicyConfig.name_targets`)
        and the action format's suffix, or an end token."""
        fmt = self.genome.action_format
        texts = scored_texts(cands, axtree) if self.config.name_targets else list(cands)
        ids = self.tokenizer([c + fmt.action_suffix for c in texts], add_special_tokens=False)["input_ids"]
        return [list(seq) + ([] if fmt.action_suffix else [self._end_ids[0]]) for seq in ids]

    def _with_lexical_priors(self, scores: Sequence[float], cands: Sequence[str], axtree: str,
                             goal: str, step_index: int) -> list[float]:
        """``scores`` plus the goal prior, the answer-type prior and the memory prior
        (:attr:`PolicyConfig.goal_prior`, :attr:`PolicyConfig.answer_prior`,
        :attr:`PolicyConfig.memory_prior`; each unchanged when 0), on the per-row and the batched path."""
        out = list(scores)
        if self.config.goal_prior:
            out = add_goal_prior(out, target_overlaps(cands, axtree, goal), self.config.goal_prior)
        if self.config.answer_prior:
            out = add_goal_prior(out, answer_type_matches(cands, goal), self.config.answer_prior)
        if self.config.memory_prior and self.memory is not None and len(self.memory):
            bonus = self.memory.bonuses(self.memory.retrieve(goal), step_index, cands, axtree, goal)
            out = add_goal_prior(out, bonus, self.config.memory_prior)
        return out

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
            actions.append(action if action is not None else raw.strip())
            infos.append({"mode": "free", "raw": raw, "parse_failed": failed,
                          "generated_tokens": len(tokens)})
        return actions, infos

    def _act_constrained(self, rows: list[RowState], prompts: list[_Prompt],
                         observations: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
        per_row = [self._candidates_of(p, o) for p, o in zip(prompts, observations, strict=True)]
        encoded = [self._encode_candidates(cands, prompt.axtree)
                   for cands, prompt in zip(per_row, prompts, strict=True)]
        if self.config.constrained_method == "greedy":
            tries = [TokenTrie(seqs) for seqs in encoded]
            chooser = TrieChooser(tries)
            outputs = decode(self.model, rows, chooser, pad_id=self._pad_id,
                             max_steps=max(len(s) for seqs in encoded for s in seqs) + 1)
            picks = [int(c) if c is not None else 0 for c in chooser.chosen]
            extra: list[dict[str, Any]] = [{"generated_tokens": len(out)} for out in outputs]
        else:
            picks, extra = [], []
            scoring = self.config.scoring
            for slot, (row, seqs, cands, prompt, obs) in enumerate(zip(rows, encoded, per_row, prompts,
                                                                       observations, strict=True)):
                logps = candidate_logprobs(self.model, row, seqs)
                prior = self._candidate_priors(seqs) if scoring in NEEDS_PRIOR else None
                step = StepScores(cands, [action_kind(c) for c in cands], logps, prior)
                step_index = len(self._histories.get(slot, ()))
                scores = self._final_scores(step, prompt.axtree, str(obs.get("goal", "")), step_index)
                info: dict[str, Any] = {}
                seed = self._sample_seed if self.sampling else None
                if seed is not None:
                    info["greedy"] = cands[best_index(scores)]
                    scores = sampled_scores(scores, cands, self.config.temperature, seed, step_index)
                best = best_index(scores)
                picks.append(best)
                extra.append({"score": scores[best], "margin": score_margin(scores, best), **info})
        actions = [cands[i] for cands, i in zip(per_row, picks, strict=True)]
        infos = [{"mode": f"constrained/{self.config.constrained_method}", "parse_failed": False,
                  "candidates": len(cands), **e} for cands, e in zip(per_row, extra, strict=True)]
        return actions, infos
