"""Word sets for matching a goal to page text: content words (the lexical priors of
:mod:`es_agent.grounding`, the trajectory memory) and relevance words with dates read as numbers (the
prompt truncation of :func:`es_agent.axtree.truncate_axtree`).

A leaf module: :mod:`es_agent.axtree` and :mod:`es_agent.grounding` both read it.
"""

from __future__ import annotations

import re

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
MONTHS: dict[str, int] = {name: number for number, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
    ("october", "oct"), ("november", "nov"), ("december", "dec")), start=1) for name in names}
"""Month names and abbreviations -> month number."""
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_NAMED_DATE = re.compile(
    rf"\b(?:(?P<m1>{_MONTH})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"  # August 30, 2023
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?P<m2>{_MONTH})\.?,?\s+\d{{4}}"      # 30 August 2023
    rf"|(?P<m3>{_MONTH})\.?,?\s+\d{{4}})\b")                               # August 2023
"""A date that names its month next to a year (a bare "may" or "march" is not a month)."""


def content_words(text: str) -> frozenset[str]:
    """The content words of ``text``: lower-cased alphanumeric runs of 2+ characters that are not stop
    words, each cut to :data:`STEM` characters (numbers kept whole)."""
    words = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in STOP_WORDS:
            continue
        words.add(word if word.isdigit() else word[:STEM])
    return frozenset(words)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """``|a & b| / |a | b|``, 0 when either set is empty."""
    return len(a & b) / len(a | b) if a and b else 0.0


def relevance_words(text: str) -> frozenset[str]:
    """The words by which a page line is relevant to a goal: :func:`content_words`, except that every
    number counts (one digit too, leading zeros dropped: ``2023-08-30`` gives 2023, 8 and 30) and a named
    month next to a year also counts as its number, so "August 30, 2023" meets "2023-08-30"."""
    lowered = text.lower()
    words = set()
    for word in _WORD.findall(lowered):
        if word.isdigit():
            words.add(str(int(word)))
        elif len(word) >= 2 and word not in STOP_WORDS:
            words.add(word[:STEM])
    for match in _NAMED_DATE.finditer(lowered):
        words.add(str(MONTHS[match["m1"] or match["m2"] or match["m3"]]))
    return frozenset(words)
