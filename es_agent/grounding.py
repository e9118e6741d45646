"""A lexical prior on an action's target: how much of the goal the target element's name shares.

Neither embedded model grounds a click by its token log-probabilities: teacher-forced on the 28 held-out
tier-1 click steps, SmolLM2-135M picks the reference element on 0 and the embedded Qwen on 0-2, under every
scoring (benchmarks/results/agreement_tier1.md), although the element is on the page and, on most of these
tasks, its name repeats words of the goal ("Open the product page of Orbis XXL Mouse Pad, Pink" -> the link
"Orbis XXL Mouse Pad, Pink"; "Upvote the post ..." -> the button "Upvote <title>"). Web agents built on small
models rank candidate elements with a separate, cheap ranker before the LM chooses (Mind2Web's MindAct);
:attr:`es_agent.policy.PolicyConfig.goal_prior` is the cheapest such ranker: ``goal_prior *
goal_overlap(goal, name)`` is added to the score of every ``click`` / ``hover`` / ``type`` candidate, and the
LM still decides between kinds, answers and unnamed targets.

:func:`goal_overlap` is the Jaccard similarity of the two texts' content words (lower-cased, stop words out,
each cut to its first :data:`STEM` characters, so "comments" meets "commented"; numbers kept whole).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from es_agent.axtree import parse_axtree

STEM = 5
"""Characters a word is cut to before comparison (a crude stemmer: "comments" and "commented" meet)."""
STOP_WORDS = frozenset((
    "a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "from", "with", "and", "or", "but",
    "is", "are", "was", "were", "be", "been", "do", "does", "did", "have", "has", "had", "i", "me",
    "my", "we", "our", "you", "your", "it", "its", "this", "that", "these", "those", "what",
    "which", "who", "whom", "whose", "how", "many", "much", "when", "where", "why", "there", "here",
    "all", "any", "some", "as", "into", "than", "then", "so", "if", "not", "no"))
"""Words that carry no content for matching a goal to an element name."""
_WORD = re.compile(r"[a-z0-9]+")
TARGETED = re.compile(r"^(click|hover|type) \[([^\]]+)\]")
"""A candidate that targets an element: its kind (group 1) and the element id (group 2)."""


def content_words(text: str) -> frozenset[str]:
    """The content words of ``text``: lower-cased alphanumeric runs of 2+ characters that are not stop
    words, each cut to :data:`STEM` characters (numbers kept whole)."""
    words = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in STOP_WORDS:
            continue
        words.add(word if word.isdigit() else word[:STEM])
    return frozenset(words)


def goal_overlap(goal: str, name: str) -> float:
    """Jaccard similarity in [0, 1] of the content words of ``goal`` and ``name`` (0 when either has none)."""
    return _jaccard(content_words(goal), content_words(name))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def target_overlaps(candidates: Sequence[str], axtree: str, goal: str) -> list[float]:
    """Per candidate, :func:`goal_overlap` of the goal and the name of the element a ``click`` / ``hover`` /
    ``type`` candidate targets in ``axtree``; 0 for other candidates and for targets without a name."""
    names = {node.id: node.name for node in parse_axtree(axtree) if node.id and node.name}
    goal_words = content_words(goal)
    out = []
    for cand in candidates:
        match = TARGETED.match(cand)
        name = names.get(match[2]) if match else None
        out.append(_jaccard(goal_words, content_words(name)) if name else 0.0)
    return out


def add_goal_prior(scores: Sequence[float], overlaps: Sequence[float], weight: float) -> list[float]:
    """``scores[i] + weight * overlaps[i]``: how the goal prior enters a step's scores, on the per-row and the
    batched path alike (a ``-inf`` score, a kind the two-stage scorings ruled out, stays ``-inf``)."""
    return [score + weight * overlap for score, overlap in zip(scores, overlaps, strict=True)]
