"""The action grammar from the agent's side: normalising action text, extracting one action from a free-form
reply, and building the set of valid candidate actions of an observation for constrained decoding.

The environment owns the authoritative parser (``webarena_gym.actions``); this module only has to agree with
it on what a well-formed action looks like (CONTRACTS.md), and never imports it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from es_agent.axtree import RECORD_ROLES, TEXT_ROLES, AxNode, parse_axtree, strong_relevance

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

    max_type_texts: int = 8
    """Texts offered per typeable element (quoted entities of the goal first, names across commas, numbers,
    capitalised names, then phrases of its words)."""
    max_options: int = 8
    """Options offered per select (a typeable element with ``option`` children: their names, instead of goal
    phrases)."""
    max_answers: int = 24
    """``stop [answer]`` candidates (goal entities, then page texts near the goal's words, the other page
    texts, then ``N/A``)."""
    max_answer_chars: int = 60
    """Page texts longer than this are not offered as answers."""
    answer_window: int = 6
    """Page texts (and link names) up to this many after one naming a word of the goal are offered first."""
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
    """Short texts from the goal worth typing or answering: quoted entities, names across commas
    (:func:`comma_names`), capitalised names, numbers, maximal runs of content words, then their shorter
    sub-phrases (longest first); deduplicated, at most ``limit``."""
    out: list[str] = []

    def add(words: list[str] | str, strip: str = " .,;:?!") -> None:
        text = " ".join(words if isinstance(words, list) else words.split()).strip(strip)
        if text and text.lower() not in {o.lower() for o in out}:
            out.append(text)

    for match in _QUOTED.finditer(goal):  # as written (a sentence keeps its final stop), then without it
        add(next(g for g in match.groups() if g), strip=" ")
        add(next(g for g in match.groups() if g))
    for name in comma_names(goal):
        add(name)
    unquoted = _QUOTED.sub(" , ", goal)
    runs: list[list[tuple[int, str]]] = [[]]
    tokens = re.findall(r"[A-Za-z0-9][\w$%.\-/&+]*|[,;:?!()]", unquoted)
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
        elif start is not None and start == len(run) - 1 and any(c.isupper() for c in run[start][1][1:]):
            add(run[start][1])  # a lone CamelCase name at the run's end (``nickname GadgetGran``)
    for match in re.finditer(r"(?<![\w$.,-])(\d+(?:\.\d+)?)(?![\w%-])", unquoted):  # quantities, numbers
        add(match.group(1))
    for run in sorted(runs, key=len, reverse=True):
        add([w for _, w in run[:6]])
    for n in (3, 2, 1):
        for run in runs:
            for i in range(len(run) - n + 1):
                add([w for _, w in run[i:i + n]])
    return out[:limit]


_NAME_WORD = re.compile(r"[A-Za-z0-9][\w$%.\-/&+']*")


def comma_names(goal: str) -> list[str]:
    """Names in the goal that run across commas, as written (``Nexon Instant Print Camera, Kit Edition``,
    ``Velvetine Gentle Foaming Cleanser, 2 oz``): from a capitalised word (not the goal's first) through
    content words, and on across ``", "`` when a capitalised word or a number follows; quoted parts
    excluded."""
    text = _QUOTED.sub(lambda m: "\0" * len(m.group(0)), goal)
    words = list(_NAME_WORD.finditer(text))
    out: list[str] = []

    def content(i: int) -> bool:
        return i < len(words) and words[i].group(0).rstrip(".").lower() not in _STOPWORDS

    i = 0
    while i < len(words):
        first = words[i]
        if first.start() == 0 or not first.group(0)[:1].isupper() or not content(i):
            i += 1
            continue
        j, commas = i, 0
        while True:
            gap = text[words[j].end():words[j + 1].start()] if j + 1 < len(words) else ""
            if gap == " " and content(j + 1):
                j += 1
            elif gap == ", " and content(j + 1) and (words[j + 1].group(0)[:1].isupper()
                                                     or words[j + 1].group(0)[:1].isdigit()):
                j, commas = j + 1, commas + 1
            else:
                break
        if commas and j - i < 12:
            out.append(text[first.start():words[j].end()].rstrip("."))
        i = j + 1
    return out


def select_options(nodes: list[AxNode], index: int, limit: int) -> list[str]:
    """Names of the ``option`` nodes below ``nodes[index]`` (a select's choices), at most ``limit``."""
    out: list[str] = []
    for node in nodes[index + 1:]:
        if node.depth <= nodes[index].depth or len(out) >= limit:
            break
        if node.role == "option" and node.name and node.name not in out:
            out.append(node.name)
    return out


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

    for i, node in enumerate(nodes):
        if node.typeable:
            options = select_options(nodes, i, config.max_options)
            for text in options or texts:
                add(f"type [{node.id}] [{' '.join(text.replace('[', '(').replace(']', ')').split())}]")
        if node.clickable:
            add(f"click [{node.id}]")
    for action in config.extra_actions:
        add(action)
    if config.include_stop:
        for answer in answer_candidates(nodes, goal, config):
            add(f"stop [{answer}]")
    return out


def answer_candidates(nodes: list[AxNode], goal: str, config: CandidateConfig) -> list[str]:
    """``stop`` answers: quoted goal entities, goal names across commas, then short page texts and link
    names, ``N/A`` last. The page texts go in three groups, each in page order: first those in the record
    of a node most relevant to the goal (:func:`~es_agent.axtree.strong_relevance`; the subtree of a node of
    :data:`~es_agent.axtree.RECORD_ROLES`, else the node and the ``answer_window`` texts after it), the
    most relevant record first, so that the total of
    the asked-for order or the points of the asked-for post make the cut of ``max_answers``; then those up
    to ``answer_window`` after one that names a word of the goal; then the others."""
    out: list[str] = []
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(goal)]
    goal_words = {w for w in re.findall(r"[a-z0-9]{3,}", goal.lower()) if w not in _STOPWORDS}
    answerable = [k for k, n in enumerate(nodes) if (n.role in TEXT_ROLES or n.role == "link") and n.name]
    named = [nodes[k].name for k in answerable]
    near = {j for i, name in enumerate(named) if goal_words & set(re.findall(r"[a-z0-9]{3,}", name.lower()))
            for j in range(i, i + config.answer_window + 1)}
    record = dict.fromkeys(answerable, 0.0)  # node -> relevance of the most relevant record it is in
    for k, rel in enumerate(strong_relevance([n.name for n in nodes], goal)):
        if rel <= 0:
            continue
        if nodes[k].role in RECORD_ROLES:  # a post, a row, a list entry: its subtree
            end = next((m for m in range(k + 1, len(nodes)) if nodes[m].depth <= nodes[k].depth), len(nodes))
        else:  # the answer_window texts after it
            after = answerable[bisect_right(answerable, k) + config.answer_window:]
            end = after[0] if after else len(nodes)
        for m in range(k, end):
            if m in record:
                record[m] = max(record[m], rel)
    texts = [(i, k, t) for i, (k, t) in enumerate(zip(answerable, named, strict=True))
             if len(t) <= config.max_answer_chars]
    page = ([t for _, k, t in sorted(texts, key=lambda it: -record[it[1]]) if record[k] > 0]
            + [t for i, k, t in texts if i in near and record[k] == 0]
            + [t for i, k, t in texts if i not in near and record[k] == 0])
    for text in [*quoted, *comma_names(goal), *(part for t in page for part in (t, *answer_parts(t)))]:
        text = " ".join(text.replace("[", "(").replace("]", ")").split())
        if text and text not in out and len(out) < config.max_answers - 1:
            out.append(text)
    out.append("N/A")
    return out


_LEADING_QUANTITY = re.compile(r"^\s*(-?\$?\d[\d,]*(?:\.\d+)?)\s+[A-Za-z]")
_BY_NAME = re.compile(r"\bby\s+([A-Z][\w.'-]*(?:\s[A-Z][\w.'-]*){0,2})")
_LABELLED = re.compile(r"^[A-Z][\w .#/&-]{0,30}:\s+(\S.*)$")


def answer_parts(text: str) -> list[str]:
    """Shorter answers inside one page text: its leading quantity (``17`` of ``17 comments on ...``, ``3`` of
    ``3 items``), the name after ``by`` (``Katie`` of ``Review by Katie, posted on ...``) and the value
    after a label (``2023-07-06`` of ``Order Date: 2023-07-06``)."""
    out: list[str] = []
    for pattern in (_LEADING_QUANTITY, _BY_NAME, _LABELLED):
        match = pattern.search(text)
        if match and match.group(1).strip() != text.strip():
            out.append(match.group(1).strip())
    return out
