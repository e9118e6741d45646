"""Lexical priors on a candidate action: how much of the goal its target shares, and whether its answer
has the shape the question asks for.

Neither embedded model grounds a click by its token log-probabilities: teacher-forced on the 28 held-out
tier-1 click steps, SmolLM2-135M picks the reference element on 0 and the embedded Qwen on 0-2, under every
scoring (benchmarks/results/agreement_tier1.md), although the element is on the page and, on most of these
tasks, its name repeats words of the goal ("Open the product page of Orbis XXL Mouse Pad, Pink" -> the link
"Orbis XXL Mouse Pad, Pink"; "Upvote the post ..." -> the button "Upvote <title>"). Web agents built on small
models rank candidate elements with a separate, cheap ranker before the LM chooses (Mind2Web's MindAct);
:attr:`es_agent.policy.PolicyConfig.goal_prior` is the cheapest such ranker: ``goal_prior *
goal_overlap(goal, name)`` is added to the score of every ``click`` / ``hover`` / ``type`` candidate, and the
LM still decides between kinds, answers and unnamed targets.

:func:`goal_overlap` is the Jaccard similarity of the two texts' content words
(:func:`es_agent.words.content_words`: lower-cased, stop words out, each cut to its first
:data:`~es_agent.words.STEM` characters, so "comments" meets "commented"; numbers kept whole).

The answer-type prior (:attr:`es_agent.policy.PolicyConfig.answer_prior`) is the expected-answer-type
filter of question answering (Li and Roth's question classes): a question (or a "show me the ..." request)
that asks for an email address, a phone number, a count, an amount of money or a date
(:func:`expected_answer_type`, by its question words) wants a ``stop`` answer of that shape
(:data:`ANSWER_SHAPES`), and ``answer_prior`` is added to the score of every ``stop`` candidate whose answer
has it (:func:`answer_type_matches`). Teacher-forced on tier 1, SmolLM2 ranks the right email or phone
number 2nd-8th among the page's texts, below a shipping line or a greeting; the prior lifts the answers of
the asked-for shape above the rest and the model still chooses among them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from es_agent.axtree import element_names
from es_agent.words import content_words, jaccard

TARGETED = re.compile(r"^(click|hover|type) \[([^\]]+)\]")
"""A candidate that targets an element: its kind (group 1) and the element id (group 2)."""


def goal_overlap(goal: str, name: str) -> float:
    """Jaccard similarity in [0, 1] of the content words of ``goal`` and ``name`` (0 when either has none)."""
    return jaccard(content_words(goal), content_words(name))


def target_overlaps(candidates: Sequence[str], axtree: str, goal: str) -> list[float]:
    """Per candidate, :func:`goal_overlap` of the goal and the name of the element a ``click`` / ``hover`` /
    ``type`` candidate targets in ``axtree``; 0 for other candidates and for targets without a name."""
    names = element_names(axtree)
    goal_words = content_words(goal)
    out = []
    for cand in candidates:
        match = TARGETED.match(cand)
        name = names.get(match[2]) if match else None
        out.append(jaccard(goal_words, content_words(name)) if name else 0.0)
    return out


ANSWER_SHAPES: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "phone": re.compile(r"(?:\+?\d{1,3}[\s.-]?)?\(?\d{3}\)?[\s.-]?\d{3}[\s.-]?\d{4}"),
    "count": re.compile(r"\d[\d,]*"),
    "money": re.compile(r"-?\$\s?\d[\d,]*(?:\.\d+)?|-?\d[\d,]*\.\d\d"),
    "date": re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4}|[A-Z][a-z]{2,8}\.? \d{1,2},? \d{4}"),
}
"""The whole-answer shape of each answer type (an answer has a type when the pattern matches all of it)."""
QUESTION_TYPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\be-?mail\b"), "email"),
    (re.compile(r"\b(?:tele)?phone\b"), "phone"),
    (re.compile(r"\bhow many\b|\bnumber of\b|\bcount\b"), "count"),
    (re.compile(r"\bhow much\b|\bprices?\b|\bcosts?\b|\btotal\b|\bpa(?:y|id)\b|\bspen[dt]\b|\brevenue\b"
                r"|\bamount\b"), "money"),
    (re.compile(r"\bwhen\b|\b(?:what|which) (?:date|day)\b"), "date"),
)
"""Question words -> expected answer type, the first that occurs in the lower-cased goal wins ("phone number"
is a phone, not a count; "how many products cost less than $10" a count, not money)."""
STOP_ANSWER = re.compile(r"^stop \[(.*)\]$", re.S)
"""A ``stop`` action in canonical form; group 1 is its answer."""
_QUESTION = re.compile(r"\?|^\s*(?:what|which|who|whom|whose|when|where|how)\b"
                       r"|,\s*(?:what|which|who|whom|whose|when|where|how)\b")
_REQUEST = re.compile(r"^\s*(?:show|tell|give|find|list)(?:\s+me)?(?:\s+the)?\s+((?:\S+\s+){0,2}\S+)")


def expected_answer_type(goal: str) -> str | None:
    """The answer type (a key of :data:`ANSWER_SHAPES`) the goal asks for, else ``None``: the question words
    of a question (a ``?`` or a wh-word), or the first three words of a request's object ("Show me the email
    address of ..."). Other imperatives ask for no answer ("Change the price of ... to $72.99", "Show me the
    products ... that cost under $10")."""
    lowered = goal.lower()
    if _QUESTION.search(lowered):
        focus = lowered
    elif (request := _REQUEST.match(lowered)) is not None:
        focus = request[1]
    else:
        return None
    return next((kind for pattern, kind in QUESTION_TYPES if pattern.search(focus)), None)


def answer_type_matches(candidates: Sequence[str], goal: str) -> list[float]:
    """Per candidate, 1.0 for a ``stop [answer]`` whose whole answer has the shape of the goal's
    :func:`expected_answer_type`, else 0.0 (all 0 when the goal asks for no known type)."""
    kind = expected_answer_type(goal)
    if kind is None:
        return [0.0] * len(candidates)
    shape = ANSWER_SHAPES[kind]
    out = []
    for cand in candidates:
        match = STOP_ANSWER.match(cand)
        out.append(1.0 if match and shape.fullmatch(match[1].strip()) else 0.0)
    return out


def add_goal_prior(scores: Sequence[float], overlaps: Sequence[float], weight: float) -> list[float]:
    """``scores[i] + weight * overlaps[i]``: how the goal prior (and, with :func:`answer_type_matches`, the
    answer-type prior) enters a step's scores, on the per-row and the batched path alike (a ``-inf`` score,
    a kind the two-stage scorings ruled out, stays ``-inf``)."""
    return [score + weight * overlap for score, overlap in zip(scores, overlaps, strict=True)]
