"""The action grammar from the agent's side: normalising action text, extracting one action from a free-form
reply, and building the set of valid candidate actions of an observation for constrained decoding.

The environment owns the authoritative parser (``webarena_gym.actions``); this module only has to agree with
it on what a well-formed action looks like (CONTRACTS.md), and never imports it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from es_agent.axtree import TEXT_ROLES, AxNode, parse_axtree

_ID = r"\[\s*([^\]\s]+)\s*\]"
_GRAMMAR: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = tuple(
    (re.compile(pattern, re.I | re.S), build) for pattern, build in (
        (rf"^(click|hover)\s*{_ID}$", lambda m: f"{m[1].lower()} [{m[2]}]"),
        (rf"^type\s*{_ID}\s*\[(.*)\]\s*\[\s*(?:press_enter_after\s*=\s*)?([01])\s*\]$",
         lambda m: f"type [{m[1]}] [{m[2]}] [{m[3]}]"),
        (rf"^type\s*{_ID}\s*\[(.*)\]$", lambda m: f"type [{m[1]}] [{m[2]}]"),
        (r"^press\s*\[(.+)\]$", lambda m: f"press [{m[1].strip()}]"),
        (r"^scroll\s*\[\s*(?:direction\s*=\s*)?(up|down)\s*\]$", lambda m: f"scroll [{m[1].lower()}]"),
        (r"^(new_tab|close_tab|go_back|go_forward)(?:\s*\[\s*\])?$", lambda m: m[1].lower()),
        (r"^tab_focus\s*\[\s*(\d+)\s*\]$", lambda m: f"tab_focus [{m[1]}]"),
        (r"^goto\s*\[\s*(\S+?)\s*\]$", lambda m: f"goto [{m[1]}]"),
        (r"^stop\s*\[(.*)\]$", lambda m: f"stop [{m[1].strip()}]"),
        (r"^stop$", lambda m: "stop []"),
    ))
_ACTION_IN_LINE = re.compile(
    r"\b(?:(?:click|hover|type|press|scroll|tab_focus|goto|stop)(?:\s*\[[^\]\n]*\]){1,3}"
    r"|new_tab|close_tab|go_back|go_forward)", re.I)
_SUMMARY = re.compile(r"in summary,?\s*the next action i will perform is", re.I)
_FENCE = re.compile(r"```(?:[a-zA-Z]+\n)?(.*?)(?:```|$)", re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_LABEL = re.compile(r"^\s*(?:next\s+)?action\s*:\s*(.+)$", re.I | re.M)
_BULLET = re.compile(r"^\s*(?:[-*>]|\d+[.)])\s*")


def normalize_action(text: str) -> str | None:
    """The canonical form of one well-formed action (verb lower-cased, spacing normalised), else ``None``."""
    candidate = _BULLET.sub("", text.strip()).strip().strip("`\"'").strip().rstrip(".;,").strip()
    for pattern, build in _GRAMMAR:
        match = pattern.match(candidate)
        if match is not None:
            return build(match)
    return None


def extract_action(text: str, style: str = "direct") -> str | None:
    """Extract one action from a free-form model reply, or ``None`` when there is none.

    Looks, in order: after WebArena's "In summary, the next action I will perform is" phrase; in an
    ``Action:`` line; in code fences and inline backticks (last first); then in plain lines (the first
    action-looking line for the ``direct`` style, the last one otherwise).
    """
    summary = list(_SUMMARY.finditer(text))
    if summary:
        tail = text[summary[-1].end():]
        first_line = tail.strip().splitlines()[:1]
        found = _first_action(_code_spans(tail)) or _first_action(first_line)
        if found:
            return found
    found = _first_action(reversed(_LABEL.findall(text)))
    if found:
        return found
    found = _first_action(reversed(_code_spans(text)))
    if found:
        return found
    lines = [line for line in text.splitlines() if line.strip()]
    if style != "direct":
        lines.reverse()
    return _first_action(lines)


def _code_spans(text: str) -> list[str]:
    spans = [m.group(1) for m in _FENCE.finditer(text) if m.group(1).strip()]
    spans += _INLINE.findall(_FENCE.sub("", text))
    return spans


def _first_action(texts: Iterable[str]) -> str | None:
    for text in texts:
        for line in text.splitlines() or [text]:
            action = normalize_action(line)
            for match in [] if action else _ACTION_IN_LINE.finditer(line):
                action = normalize_action(match.group(0))
                if action is not None:
                    break
            if action is not None:
                return action
    return None


@dataclass(frozen=True)
class CandidateConfig:
    """Which candidate actions constrained decoding offers the model."""

    max_type_texts: int = 6
    """Texts offered per typeable element (quoted entities of the goal first, then phrases of its words)."""
    max_answers: int = 24
    """``stop [answer]`` candidates (goal entities, then page texts in page order, then ``N/A``)."""
    max_answer_chars: int = 60
    """Page texts longer than this are not offered as answers."""
    extra_actions: tuple[str, ...] = ("scroll [down]", "go_back")
    """Actions offered on every page."""
    include_stop: bool = True
    """Whether ``stop [answer]`` candidates are offered at all."""


_STOPWORDS = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "but", "is",
    "are", "was", "were", "be", "been", "being", "do", "does", "did", "have", "has", "had", "i", "me", "my",
    "we", "our", "you", "your", "it", "its", "this", "that", "these", "those", "there", "what", "which",
    "who", "whom", "whose", "when", "where", "why", "how", "many", "much", "tell", "show", "give", "find",
    "search", "list", "get", "please", "can", "could", "would", "should", "will", "shall", "all", "any",
    "some", "each", "about", "into", "than", "then", "so", "as", "if", "not", "no", "yes", "one", "ones",
    "their", "them", "they", "he", "she", "his", "her", "also", "just", "only", "both",
})
_QUOTED = re.compile(r"\"([^\"]{1,80})\"|'([^']{1,80})'|\u201c([^\u201d]{1,80})\u201d")
_WORD = re.compile(r"[A-Za-z0-9][\w$%.\-/&+]*")


def goal_phrases(goal: str, limit: int) -> list[str]:
    """Short texts from the goal worth typing or answering: quoted entities, capitalised names, maximal runs
    of content words, then their shorter sub-phrases (longest first); deduplicated, at most ``limit``."""
    out: list[str] = []

    def add(words: list[str] | str) -> None:
        text = " ".join(words if isinstance(words, list) else words.split()).strip(" .,;:?!")
        if text and text.lower() not in {o.lower() for o in out}:
            out.append(text)

    for match in _QUOTED.finditer(goal):
        add(next(g for g in match.groups() if g))
    runs: list[list[tuple[int, str]]] = [[]]
    tokens = re.findall(r"[A-Za-z0-9][\w$%.\-/&+]*|[,;:?!()]", _QUOTED.sub(" , ", goal))
    for position, token in enumerate(tokens):
        if token.lower() in _STOPWORDS or not _WORD.fullmatch(token):
            runs.append([])
        else:
            runs[-1].append((position, token.rstrip(".")))
    runs = [run for run in runs if run]
    for run in runs:  # a name: from its first capitalised word (not the goal's first word) to the run's end
        start = next((i for i, (pos, w) in enumerate(run) if pos > 0 and w[:1].isupper()), None)
        if start is not None and len(run) - start > 1:
            add([w for _, w in run[start:start + 6]])
    for run in sorted(runs, key=len, reverse=True):
        add([w for _, w in run[:6]])
    for n in (3, 2, 1):
        for run in runs:
            for i in range(len(run) - n + 1):
                add([w for _, w in run[i:i + n]])
    return out[:limit]


def build_candidates(axtree: str, goal: str, config: CandidateConfig | None = None) -> list[str]:
    """The valid candidate actions of an observation, deduplicated, in a stable order: clicks and types in
    page order, the extra actions, then ``stop`` answers."""
    config = config or CandidateConfig()
    nodes = parse_axtree(axtree)
    texts = goal_phrases(goal, config.max_type_texts)
    out: list[str] = []
    seen: set[str] = set()

    def add(action: str) -> None:
        if action not in seen:
            seen.add(action)
            out.append(action)

    for node in nodes:
        if node.typeable:
            for text in texts:
                add(f"type [{node.id}] [{text}]")
        if node.clickable:
            add(f"click [{node.id}]")
    for action in config.extra_actions:
        add(action)
    if config.include_stop:
        for answer in answer_candidates(nodes, goal, config):
            add(f"stop [{answer}]")
    return out


def answer_candidates(nodes: list[AxNode], goal: str, config: CandidateConfig) -> list[str]:
    """``stop`` answers: quoted goal entities, page texts (short, in page order), ``N/A`` last."""
    out: list[str] = []
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(goal)]
    page = [n.name for n in nodes if n.role in TEXT_ROLES and 0 < len(n.name) <= config.max_answer_chars]
    for text in [*quoted, *page]:
        text = " ".join(text.replace("[", "(").replace("]", ")").split())
        if text and text not in out and len(out) < config.max_answers - 1:
            out.append(text)
    out.append("N/A")
    return out
