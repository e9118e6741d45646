"""Seeded stochastic action choice for training rollouts (``PolicyConfig.temperature``, issue #13).

Greedy constrained decoding makes an episode's outcome a function of the task and the centre: in the 6-hour
grid the candidates of a generation tied on every reward in 96 % of tier-2 generations
(benchmarks/results/reward_ties.md), so ES got no signal. Sampling the action from ``softmax(scores / T)``
gives a candidate an *expected* reward that moves smoothly with its weights, instead of a step function.

The sample is a Gumbel-max draw, ``argmax_i(scores_i + T * g_i)`` (the argmax of ``scores / T + g``), whose
noise ``g_i`` is a pure function of the episode's sampling seed, the step number and the candidate's *text*.
Every member of a population runs a task with the same episode seed (:func:`es_agent.worker.episode_seed`), so
the members see the same noise on the same candidates (common random numbers): two members' rewards differ
only where their weights move a choice, not by sampling luck, and an antithetic pair still measures the slope
along its noise direction. The noise does not depend on the candidates' order or on which other candidates a
page offers.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from es_agent.noise import derive_seed

_UNIT = 2.0 ** -53


def _text_word(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def gumbel_noise(seed: int, step: int, candidate: str) -> float:
    """The standard Gumbel noise of ``candidate`` at step ``step`` of the episode sampled with ``seed``."""
    bits = derive_seed(int(seed), int(step), _text_word(candidate)) >> 11  # 53 uniform bits
    u = (bits + 0.5) * _UNIT  # in (0, 1), never 0 or 1
    return -math.log(-math.log(u))


def sampled_scores(scores: Sequence[float], candidates: Sequence[str], temperature: float, seed: int,
                   step: int) -> list[float]:
    """``scores_i + temperature * g_i``: their argmax is a draw from ``softmax(scores / temperature)``, and
    their differences stay in the scores' units (the margin the confidence tie-break reads)."""
    if not temperature > 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if len(scores) != len(candidates):
        raise ValueError(f"{len(scores)} scores for {len(candidates)} candidates")
    return [float(s) + temperature * gumbel_noise(seed, step, c)
            for s, c in zip(scores, candidates, strict=True)]
