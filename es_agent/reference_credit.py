"""Reference credit: a dense, step-level fitness term from the training tasks' reference solutions.

A terminal reward credits a whole episode, so a candidate gets a signal only where its weights or prompts
change an episode's outcome. In the learning grid they rarely do: at tiers 2 and 3 every candidate's reward
tied in 92-96 % of the generations (``benchmarks/results/reward_ties.md``), although a sigma-0.01 perturbation
changes 14 % of the teacher-forced picks (``benchmarks/results/margin_split.md``): choices move, outcomes do
not. This is the seed's open question, credit assignment against horizon, and this module is the step-level
alternative to measure against the trajectory-level reward.

For a task with a reference solution, the reference trajectory is replayed teacher-forced (the policy sees the
page each reference action was taken on, with the earlier reference actions as its history, as in
:mod:`es_agent.agreement`), and each step's credit is

    soft(best final score of a candidate equivalent to the reference - best final score of any other)

with ``soft(m) = m / (scale + |m|)`` in (-1, 1): above 0 where the policy would take the reference action,
below where it would not, and it moves continuously with the weights and the prompt genome. A step whose
candidates include no equivalent of the reference scores -1 (no scoring can take it there: a genome whose
prompt cut drops the reference's element is worse on it), one whose every candidate is equivalent +1. The
final scores are those constrained ``score`` decoding ranks by (scoring, priors), so the credit measures the
choice the policy makes. A task's credit is the mean over its reference steps.

The observations do not depend on the policy, so a worker records each (task, reset seed) once through its env
(``env.unwrapped.reference_trajectory``) and then every candidate costs one scoring forward per reference step
and no browser. Equivalence is :func:`es_agent.agreement.equivalent`'s, with the env's own answer check
(``env.unwrapped.answer_accepted``) for ``stop`` answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from es_agent.agreement import AnswerCheck, ReferenceStep, equivalent

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.policy import LLMPolicy


def soft_margin(margin: float, scale: float) -> float:
    """``margin / (scale + |margin|)``: in (-1, 1), never saturating in float64 (``scale > 0``)."""
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    if not math.isfinite(margin):
        raise ValueError(f"a finite margin is needed, got {margin!r}")
    return margin / (scale + abs(margin))


def step_credit(candidates: Sequence[str], final: Sequence[float], step: ReferenceStep,
                answer_ok: AnswerCheck, scale: float) -> float:
    """The credit of one reference step (module docstring) from the policy's candidates and final scores."""
    if len(candidates) != len(final) or not candidates:
        raise ValueError(f"{len(candidates)} candidate(s) and {len(final)} score(s): one score per "
                         f"candidate, and at least one candidate, are needed")
    right = [equivalent(c, step, answer_ok) for c in candidates]
    best_right = max((s for s, ok in zip(final, right, strict=True) if ok), default=None)
    best_other = max((s for s, ok in zip(final, right, strict=True) if not ok), default=None)
    if best_right is None:
        return -1.0
    if best_other is None:
        return 1.0
    return soft_margin(best_right - best_other, scale)


def trajectory_credit(policy: LLMPolicy, steps: Sequence[ReferenceStep], answer_ok: AnswerCheck,
                      scale: float) -> float:
    """The mean :func:`step_credit` over one task's reference steps, the policy teacher-forced on slot 0 (its
    history and KV cache are cleared before and after; the steps reuse each other's prompt prefix)."""
    if not steps:
        raise ValueError("a reference trajectory with no step has no credit")
    policy.reset()
    credits = []
    try:
        for step in steps:
            policy.set_history(0, step.history)
            scored, final = policy.ranked_step(step.obs, 0)
            credits.append(step_credit(scored.candidates, final, step, answer_ok, scale))
    finally:
        policy.reset()
    return sum(credits) / len(credits)
