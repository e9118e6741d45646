"""Prompt pools that grow during a run: reflective mutation, recombination of skill lines, deletion.

Every ``prompts.mutate_every`` generations :class:`PromptEvolver` may

* **reflect**: a model (by default the policy model itself, at the current centre) reads summaries of the
  centre's failed trajectories on the generation's hardest tasks and the slot's most probable variant, and
  writes a new variant;
* **recombine**: take the bullet lines of two skill variants (drawn by probability) into a new one (a pure
  text operation);
* **delete**: when a pool is full, drop its least probable variant before adding (never one a named baseline
  uses, nor the most probable one).

A new variant enters with ``new_variant_mass`` via ``CoEvolutionDistribution.with_added_variant``; the pools
reach the workers with the weight updates (``AgentProblem.set_prompt_pools``). Model output is accepted only
when it passes :func:`check_variant_text` (tiny models mostly write junk, which is then dropped). Every random
choice comes from a generator seeded by ``(seed, generation)``, so the pools are a function of the seeds, the
centre and the pools before; the update log records each change as a :class:`PoolChange` for replay.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from cotrain.config import PromptsConfig

if TYPE_CHECKING:  # pragma: no cover
    from cotrain.distribution import CoEvolutionDistribution
    from es_agent.problem import AgentProblem
    from es_agent.prompts import PromptPools
    from es_agent.rollout import EpisodeResult
    from es_agent.worker import Replica

RECOMBINE_SLOT = "skills"
"""The slot whose variants recombination mixes (its texts are a header and bullet lines)."""
_SEED_TAG = 0x70726F6D  # "prom": separates this module's streams from the distribution's
_SPECIAL = re.compile(r"<\|[^|>\n]{0,40}\|>|</?s>|\[/?INST\]")
_PLACEHOLDER = re.compile(r"\{(axtree|url|tabs|goal|history|error)\}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_FENCE = re.compile(r"^```[a-zA-Z]*\n?|\n?```$")


@dataclass(frozen=True)
class PoolChange:
    """One change to the prompt pools (an update-log entry, replayed on resume)."""

    op: Literal["add", "remove"]
    """``add`` appends ``variant`` to ``slot``; ``remove`` deletes variant ``index`` (``variant_id``)."""
    slot: str
    """The slot changed."""
    kind: str
    """Why: ``reflect``, ``recombine`` or ``prune``."""
    variant_id: str
    """Id of the variant added or removed."""
    index: int
    """Position of the variant in its pool (after an add, before a remove)."""
    variant: Mapping[str, Any] | None = None
    """The added variant's JSON form (``PromptVariant.to_dict``)."""
    mass: float | None = None
    """Probability mass the added variant entered with."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out: dict[str, Any] = {"op": self.op, "slot": self.slot, "kind": self.kind,
                               "variant_id": self.variant_id, "index": self.index}
        if self.variant is not None:
            out.update(variant=dict(self.variant), mass=self.mass)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PoolChange:
        """Inverse of :meth:`to_dict`."""
        return cls(**dict(data))


@dataclass(frozen=True)
class FailureReport:
    """What a generation tells the evolver: its tasks and how often candidates solved each."""

    generation: int
    """1-based generation number."""
    task_success: Mapping[Any, float] = field(default_factory=dict)
    """Task id -> fraction of candidates that solved it."""
    env_seed: int = 0
    """The generation's env seed (the centre's trajectories are replayed with it)."""

    def hardest(self, k: int) -> list[Any]:
        """Up to ``k`` unsolved-by-some tasks, least solved first (ties in batch order)."""
        order = sorted(enumerate(self.task_success.items()), key=lambda x: (x[1][1], x[0]))
        return [task for _, (task, rate) in order if rate < 1.0][:k]


class TextWriter(Protocol):
    """Writes a reply to chat messages (greedy, deterministic)."""

    def __call__(self, messages: list[dict[str, str]]) -> str: ...


TrajectorySource = Callable[[Sequence[Any], Sequence[int], int], list[tuple[str, "EpisodeResult"]]]
"""``(task_ids, prompt_ids, env_seed) -> [(goal, EpisodeResult)]`` of the centre on those tasks."""


# ------------------------------------------------------------------------------------------ text ops


def check_variant_text(text: str, *, min_chars: int, max_chars: int,
                       existing: Sequence[str] = ()) -> str | None:
    """Why ``text`` is not an acceptable prompt variant, or ``None`` when it is."""
    if not text.strip():
        return "empty"
    if len(text) < min_chars:
        return f"shorter than {min_chars} characters"
    if len(text) > max_chars:
        return f"longer than {max_chars} characters"
    if _SPECIAL.search(text):
        return "contains chat-template special tokens"
    if _PLACEHOLDER.search(text):
        return "contains observation-template placeholders"
    if _CONTROL.search(text):
        return "contains control characters"
    letters = sum(c.isalpha() for c in text)
    if letters < 0.5 * len(text.replace(" ", "").replace("\n", "")):
        return "mostly not words"
    norm = " ".join(text.split()).lower()
    if any(norm == " ".join(e.split()).lower() for e in existing):
        return "duplicates an existing variant"
    return None


def clean_model_text(raw: str) -> str:
    """A model reply as variant text: stripped of code fences, surrounding quotes and trailing blank lines."""
    text = _FENCE.sub("", raw.strip()).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def recombine_lines(first: str, second: str, rng: np.random.Generator) -> str:
    """A child of two skill texts: the first's header lines, then a random subset (at least one from each
    parent when both have some) of the union of their bullet lines, in parent order, without duplicates."""
    def split(text: str) -> tuple[list[str], list[str]]:
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        bullets = [line for line in lines if line.lstrip().startswith(("-", "*"))]
        return [line for line in lines if line not in bullets], bullets

    head, bullets_a = split(first)
    _, bullets_b = split(second)
    picks_a = [b for b in bullets_a if rng.random() < 0.5]
    picks_b = [b for b in bullets_b if rng.random() < 0.5]
    if bullets_a and not picks_a:
        picks_a = [bullets_a[int(rng.integers(len(bullets_a)))]]
    if bullets_b and not picks_b:
        picks_b = [bullets_b[int(rng.integers(len(bullets_b)))]]
    body: list[str] = []
    for line in [*picks_a, *picks_b]:
        if line not in body:
            body.append(line)
    return "\n".join([*head, *body])


def summarize_episode(goal: str, result: EpisodeResult, *, max_steps: int = 8, max_chars: int = 900) -> str:
    """A short text of one trajectory: goal, outcome and the actions with their errors."""
    lines = [f"Objective: {goal}", f"Outcome: reward {result.reward:g} after {result.steps} action(s)"
             + (" (cut off)" if result.truncated else "")]
    for step in result.trajectory[:max_steps]:
        error = f"  -> error: {step.error[:120]}" if step.error else ""
        lines.append(f"{step.step + 1}. {step.action[:120]} (on {step.url[:80]}){error}")
    if len(result.trajectory) > max_steps:
        lines.append(f"... {len(result.trajectory) - max_steps} more action(s)")
    return "\n".join(lines)[:max_chars]


def reflection_messages(slot: str, current: str, summaries: Sequence[str]) -> list[dict[str, str]]:
    """Chat messages asking for an improved variant of ``slot`` after the failed trajectories."""
    what = {"system": "system prompt", "skills": "list of useful skills"}.get(slot, f"{slot} text")
    failures = "\n\n".join(f"Failed attempt {i + 1}:\n{s}" for i, s in enumerate(summaries))
    user = (f"A web agent follows this {what}:\n---\n{current.strip() or '(empty)'}\n---\n\n{failures}\n\n"
            f"Rewrite the {what} so that the agent avoids these mistakes. Keep it short and general; do not "
            "mention these specific tasks. Reply with the new text only.")
    return [{"role": "system", "content": "You improve the instructions of a web browsing agent."},
            {"role": "user", "content": user}]


def apply_pool_changes(pools: PromptPools, changes: Sequence[PoolChange | Mapping[str, Any]]) -> PromptPools:
    """Replay logged changes on ``pools`` (resume, export)."""
    from es_agent.prompts import PromptVariant

    for change in changes:
        c = change if isinstance(change, PoolChange) else PoolChange.from_dict(change)
        if c.op == "add":
            v = dict(c.variant or {})
            pools = pools.with_variant(c.slot, PromptVariant(**v))
        else:
            pools = pools.without_variant(c.slot, c.variant_id)
    return pools


# ------------------------------------------------------------------------------------------ model side


class ModelTextWriter:
    """Greedy chat replies from a causal LM (built on first use by ``load``: ``() -> (model, tokenizer)``)."""

    def __init__(self, load: Callable[[], tuple[Any, Any]], max_new_tokens: int = 128,
                 max_prompt_tokens: int = 1536) -> None:
        self._load = load
        self.max_new_tokens = int(max_new_tokens)
        self.max_prompt_tokens = int(max_prompt_tokens)

    def __call__(self, messages: list[dict[str, str]]) -> str:
        import torch

        model, tokenizer = self._load()
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        ids = ids[:, -self.max_prompt_tokens:].to(next(model.parameters()).device)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=self.max_new_tokens,
                                 do_sample=False, pad_token_id=pad)
        return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


class ReplicaTrajectories:
    """Centre trajectories for reflection, from the problem's own replica (in process) or, with Ray workers, a
    driver replica caught up with the update log (built on first use)."""

    def __init__(self, problem: AgentProblem) -> None:
        self.problem = problem
        self._replica: Replica | None = None

    def replica(self) -> Replica:
        """A replica at the current centre and pools."""
        p = self.problem
        if p.num_actors == 0:
            return p.local_replica
        from es_agent.worker import replica_at

        self._replica = replica_at(self._replica, p.agent, p.env_spec, p.pools, p.update_log, p.log_end)
        return self._replica

    def model_and_tokenizer(self) -> tuple[Any, Any]:
        """The policy model at the centre (for :class:`ModelTextWriter`)."""
        rep = self.replica()
        return rep.model, rep.tokenizer

    def __call__(self, task_ids: Sequence[Any], prompt_ids: Sequence[int], env_seed: int,
                 ) -> list[tuple[str, EpisodeResult]]:
        return self.replica().centre_trajectories(task_ids, prompt_ids, env_seed)

    def close(self) -> None:
        """Release the driver replica (if one was built)."""
        if self._replica is not None:
            self._replica.close()
            self._replica = None


# ------------------------------------------------------------------------------------------ the evolver


class PromptEvolver:
    """Grows and prunes the prompt pools between generations (see the module docstring)."""

    def __init__(self, config: PromptsConfig, *, seed: int, writer: TextWriter | None = None,
                 trajectories: TrajectorySource | None = None) -> None:
        self.config = config
        self.seed = int(seed)
        self.writer = writer
        self.trajectories = trajectories
        self.rejected: list[str] = []
        """Why recent candidate texts were rejected (for logs and tests)."""

    def rng(self, generation: int) -> np.random.Generator:
        """The generator of ``generation``'s choices."""
        return np.random.default_rng(np.random.SeedSequence([self.seed, int(generation), _SEED_TAG]))

    def step(self, distribution: CoEvolutionDistribution, pools: PromptPools, report: FailureReport,
             ) -> tuple[CoEvolutionDistribution, PromptPools, list[PoolChange]]:
        """The distribution and pools after this generation's changes, and the changes."""
        cfg = self.config
        if not cfg.mutation or report.generation % cfg.mutate_every:
            return distribution, pools, []
        rng = self.rng(report.generation)
        u_reflect, u_recombine = float(rng.random()), float(rng.random())
        state = _State(distribution, pools, [])
        if u_reflect < cfg.reflect_rate and self.writer is not None and self.trajectories is not None:
            self._reflect(state, report, rng)
        if u_recombine < cfg.recombine_rate and RECOMBINE_SLOT in state.pools.slots:
            self._recombine(state, report.generation, rng)
        return state.dist, state.pools, state.changes

    def _reflect(self, state: _State, report: FailureReport, rng: np.random.Generator) -> None:
        slots = [s for s in self.config.mutable_slots if s in state.pools.slots]
        tasks = report.hardest(self.config.reflect_tasks)
        if not slots or not tasks:
            return
        slot = slots[int(rng.integers(len(slots)))]
        best = state.dist.most_probable_prompt_ids()
        assert self.trajectories is not None and self.writer is not None
        episodes = [(g, r) for g, r in self.trajectories(tasks, best, report.env_seed) if r.reward < 1.0]
        if not episodes:
            return
        current = state.pools.slots[slot][best[state.pools.slot_names.index(slot)]].text
        raw = self.writer(reflection_messages(slot, current, [summarize_episode(g, r) for g, r in episodes]))
        self._add(state, slot, clean_model_text(raw), "reflect", report.generation)

    def _recombine(self, state: _State, generation: int, rng: np.random.Generator) -> None:
        variants = state.pools.slots[RECOMBINE_SLOT]
        probs = state.dist.prompt_probs[state.pools.slot_names.index(RECOMBINE_SLOT)].numpy()
        parents = [i for i, v in enumerate(variants) if any(
            line.lstrip().startswith(("-", "*")) for line in v.text.splitlines())]
        if len(parents) < 2:
            return
        weights = probs[parents] / probs[parents].sum()
        a, b = (int(i) for i in rng.choice(parents, size=2, replace=False, p=weights))
        child = recombine_lines(variants[a].text, variants[b].text, rng)
        self._add(state, RECOMBINE_SLOT, child, "recombine", generation)

    def _add(self, state: _State, slot: str, text: str, kind: str, generation: int) -> None:
        from es_agent.prompts import PromptVariant

        cfg = self.config
        existing = [v.text for v in state.pools.slots[slot]]
        reason = check_variant_text(text, min_chars=cfg.min_variant_chars, max_chars=cfg.max_variant_chars,
                                    existing=existing)
        if reason is not None:
            self.rejected.append(f"generation {generation} {kind} {slot}: {reason}")
            return
        slot_index = state.pools.slot_names.index(slot)
        if len(state.pools.slots[slot]) >= cfg.max_pool_size and not self._prune(state, slot, slot_index):
            self.rejected.append(f"generation {generation} {kind} {slot}: pool full, every variant protected")
            return
        ids = {v.id for v in state.pools.slots[slot]}
        vid = base = f"{kind}_g{generation:04d}"
        suffix = 1
        while vid in ids:
            suffix += 1
            vid = f"{base}_{suffix}"
        variant = PromptVariant(id=vid, text=text)
        state.pools = state.pools.with_variant(slot, variant)
        state.dist = state.dist.with_added_variant(slot_index, cfg.new_variant_mass)
        state.changes.append(PoolChange("add", slot, kind, vid, len(state.pools.slots[slot]) - 1,
                                        variant.to_dict(), cfg.new_variant_mass))

    def _prune(self, state: _State, slot: str, slot_index: int) -> bool:
        variants = state.pools.slots[slot]
        protected = {choice.get(slot) for choice in state.pools.baselines.values()}
        probs = state.dist.prompt_probs[slot_index].tolist()
        best = state.dist.most_probable_prompt_ids()[slot_index]
        candidates = [i for i, v in enumerate(variants) if v.id not in protected and i != best]
        if not candidates:
            return False
        victim = min(candidates, key=lambda i: (probs[i], -i))  # least probable; the newest among ties
        state.changes.append(PoolChange("remove", slot, "prune", variants[victim].id, victim))
        state.pools = state.pools.without_variant(slot, victim)
        state.dist = state.dist.with_removed_variant(slot_index, victim)
        return True


@dataclass
class _State:
    dist: CoEvolutionDistribution
    pools: PromptPools
    changes: list[PoolChange]
