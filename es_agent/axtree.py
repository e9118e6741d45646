"""Reading the WebArena-style accessibility tree text of an observation, compacting it for the prompt, and
fitting it into a token budget.

One node per line, tab-indented by depth: ``[<id>] <role> '<name>' <prop>: <value> ...``; the name is written
as Python's ``repr`` writes it (``"It's"`` when it holds a single quote). The compact rendering
(:func:`compact_axtree`) also writes lines without an id (``<role> '<name>' ...``) for the nodes no candidate
action targets; :func:`parse_axtree` reads both.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from es_agent.errors import AxTreeError
from es_agent.words import relevance_words

CLICKABLE_ROLES = frozenset({
    "link", "button", "checkbox", "radio", "menuitem", "menuitemcheckbox", "menuitemradio", "tab", "option",
    "switch", "treeitem", "combobox", "listbox", "gridcell", "columnheader", "summary", "img",
})
"""Roles that get a ``click [id]`` candidate (``img`` only when it has a name)."""
TYPEABLE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "textarea"})
"""Roles that get ``type [id] [text]`` candidates."""
RECORD_ROLES = frozenset({"row", "article", "listitem"})
"""Roles of the records a page lists (a table row, a forum post, a list entry): a line relevant to the goal
keeps its whole record in a truncated prompt (:func:`truncate_axtree`), since a cell or a score means
nothing without the rest of its row or post."""
RELEVANT_SHARE = 0.5
"""The most share of the prompt's axtree budget the most relevant records take first in
:func:`truncate_axtree`; the rest go with the interactive elements, in page order."""
TEXT_ROLES = frozenset({"StaticText", "heading", "cell", "gridcell", "paragraph", "listitem", "status"})
"""Roles whose names can be answers (``stop [answer]`` candidates)."""

_QUOTED_NAME = r"'(?P<sq>(?:[^'\\]|\\.)*)'|\"(?P<dq>(?:[^\"\\]|\\.)*)\""
_LINE = re.compile(
    r"^(?P<indent>[\t ]*)\[(?P<id>[^\]\s]+)\]\s+(?P<role>\S+)"
    r"(?:\s+(?:(?:" + _QUOTED_NAME + r")(?=\s|$)|'(?P<name>.*)'))?(?P<props>.*)$")
_BARE_LINE = re.compile(
    r"^(?P<indent>[\t ]*)(?P<role>[A-Za-z]\w*)\s+(?:" + _QUOTED_NAME + r")(?P<props>(?:\s.*)?)$")
"""A compact-rendering line without an id: the role and a quoted name are required."""
_TEXT_LINE = re.compile(r"^(?P<indent>[\t ]*)(?:" + _QUOTED_NAME + r")(?P<props>)$")
"""A compact-rendering text line: only the quoted text (role ``StaticText``)."""
_PROP = re.compile(r"([\w-]+):\s*(\S+)")


@dataclass(frozen=True)
class AxNode:
    """One line of the accessibility tree."""

    line: int
    """Line number in the axtree text."""
    id: str
    """The element id (valid for the next action)."""
    role: str
    """ARIA role, e.g. ``link`` or ``StaticText``."""
    name: str
    """Accessible name (the quoted text), possibly empty."""
    depth: int
    """Indentation depth."""
    props: dict[str, str]
    """Trailing ``prop: value`` pairs, e.g. ``{"focused": "True"}``."""

    @property
    def clickable(self) -> bool:
        """Whether ``click [id]`` makes sense on this node (never for a line without an id)."""
        return bool(self.id) and self.role in CLICKABLE_ROLES and (self.role != "img" or bool(self.name))

    @property
    def typeable(self) -> bool:
        """Whether ``type [id] [text]`` makes sense on this node (never for a line without an id)."""
        return bool(self.id) and self.role in TYPEABLE_ROLES and self.props.get("disabled") != "True"

    @property
    def focused(self) -> bool:
        """Whether the node has keyboard focus."""
        return self.props.get("focused") == "True"


def parse_axtree(text: str) -> list[AxNode]:
    """Parse the axtree text into nodes (lines that are not nodes are skipped; a compact line without an id
    gets ``id=""``). Names are the text between the quotes, as written."""
    nodes: list[AxNode] = []
    for i, line in enumerate(text.splitlines()):
        node = _parse_line(i, line)
        if node is not None:
            nodes.append(node)
    return nodes


def element_names(text: str) -> dict[str, str]:
    """Element id -> accessible name of every node of the axtree text that has an id (the name may be
    empty)."""
    return {node.id: node.name for node in parse_axtree(text) if node.id}


def _parse_line(i: int, line: str) -> AxNode | None:
    match = _LINE.match(line)
    if match is None:
        match = _BARE_LINE.match(line) or _TEXT_LINE.match(line)
        if match is None or line.lstrip().startswith("["):
            return None
    groups = match.groupdict()
    name = next((groups[g] for g in ("sq", "dq", "name") if groups.get(g) is not None), "")
    indent = match["indent"]
    return AxNode(line=i, id=groups.get("id") or "", role=groups.get("role") or "StaticText",
                  name=name.strip(),
                  depth=indent.count("\t") + indent.count(" ") // 2,
                  props=dict(_PROP.findall(match["props"] or "")))


def _quoted_name(line: str, name: str) -> str:
    """The name as the line writes it (quotes and escapes kept), else ``repr(name)``."""
    match = _LINE.match(line) or _BARE_LINE.match(line) or _TEXT_LINE.match(line)
    if match is not None:
        for group in ("sq", "dq", "name"):
            if match.groupdict().get(group) is not None:
                return line[match.start(group) - 1:match.end(group) + 1]
    return repr(name)


NON_DECIDING_PROPS = frozenset({
    "hasPopup", "autocomplete", "live", "atomic", "relevant", "valuemin", "valuemax", "roledescription",
    "keyshortcuts", "orientation", "multiselectable", "modal", "busy", "describedby", "controls", "owns",
})
"""Properties the compact rendering leaves out (they never decide an action); ``False`` values of boolean
states (``selected: False``, ``pressed: false``, ``required: False``, ...) are left out too: a state that is
not written is false."""
DROPPED_ROLES = frozenset({"ListMarker", "LineBreak", "none", "presentation"})
"""Roles the compact rendering always leaves out (list bullets and numbers, line breaks)."""


def compact_axtree(text: str) -> str:
    """The compact rendering of an axtree text for the prompt: what the agent acts on, in fewer tokens.

    Keeps every node a candidate action can target with its id, role, name and deciding states (links,
    buttons, textboxes...: :attr:`AxNode.clickable`, :attr:`AxNode.typeable`), and every named text node
    (``StaticText``, headings, cells...: the answers) with its role and name but without its id (a
``StaticText`` is its quoted text alone). Leaves out:
    list markers, nameless nodes without states that nothing targets (``form ''``, ``main ''``, ``row ''``:
    their children move up a level), a ``StaticText`` that repeats its parent's name, and the properties of
    :data:`NON_DECIDING_PROPS` and false states. Lines that are not node lines (truncation markers) are
    kept as they are, in place. The candidate actions of the result are those of ``text``
    (:func:`es_agent.actions_space.build_candidates`).

    An empty (or blank) text gives ``""``; a non-blank text with no node line at all raises
    :class:`AxTreeError` (render it with ``PolicyConfig(observation="full")`` to pass it on as is).
    """
    if not text.strip():
        return ""
    out: list[str] = []
    stack: list[tuple[int, int, str]] = []  # (original depth, rendered depth, name) of the open ancestors
    nodes = 0
    for i, line in enumerate(text.splitlines()):
        node = _parse_line(i, line)
        if node is None:
            out.append(line)
            continue
        nodes += 1
        while stack and stack[-1][0] >= node.depth:
            stack.pop()
        parent_depth, parent_name = (stack[-1][1], stack[-1][2]) if stack else (-1, None)
        props = {k: v for k, v in node.props.items()
                 if k not in NON_DECIDING_PROPS and v.lower() != "false"}
        actionable = node.clickable or node.typeable
        drop = not actionable and (
            node.role in DROPPED_ROLES or (not node.name and not props)
            or (node.role == "StaticText" and parent_name is not None and node.name == parent_name))
        if drop:
            stack.append((node.depth, parent_depth, parent_name or ""))
            continue
        depth = parent_depth + 1
        stack.append((node.depth, depth, node.name))
        tail = "".join(f" {k}: {v}" for k, v in props.items())
        if actionable:
            head = f"[{node.id}] {node.role} "
        else:
            head = "" if node.role == "StaticText" and not tail else f"{node.role} "
        out.append("\t" * depth + f"{head}{_quoted_name(line, node.name)}{tail}")
    if nodes == 0:
        raise AxTreeError(f"the accessibility tree has no node line ('[id] role 'name' ...'); it starts "
                          f"{text[:120]!r} (use PolicyConfig(observation='full') to show such text as is)")
    return "\n".join(out)


def truncate_axtree(
    text: str,
    budget: int,
    count_tokens: Callable[[Sequence[str]], Sequence[int]],
    *,
    goal: str = "",
    head_lines: int = 8,
    context_lines: int = 2,
) -> tuple[str, int]:
    """Fit the axtree into ``budget`` tokens; returns ``(text, omitted_line_count)``.

    Keeps, in this order of priority until the budget is spent: the first ``head_lines`` lines; the focused
    element with ``context_lines`` around it; the lines most relevant to the goal (:func:`strong_relevance`),
    the most relevant first, each with its whole record (:data:`RECORD_ROLES`: a table row, a post), up to
    :data:`RELEVANT_SHARE` of the budget; the other lines that share a word with the goal and the
    interactive elements, in page order; one line of context around all of those; then everything else,
    earliest first. Kept lines stay in page order, and each run of omitted lines becomes one
    ``[... N lines omitted]`` marker line.

    Before the records (issue #13), every line sharing a word of 3+ characters with the goal had the
    priority of an interactive element, in page order: on an order-history page, the year that every row
    shows made every date relevant, and the asked-for order's total and the pagination were cut.
    """
    lines = text.splitlines()
    if not lines:
        return text, 0
    costs = list(count_tokens(lines))
    if sum(costs) + len(lines) <= budget:
        return text, 0
    nodes = {n.line: n for n in parse_axtree(text)}
    names = [nodes[i].name if i in nodes else line for i, line in enumerate(lines)]
    relevance, mass = _relevance(names, goal)
    strong = _strong(relevance, mass)
    level = [5] * len(lines)
    weight = [0.0] * len(lines)

    def mark(first: int, last: int, lvl: int, rel: float = 0.0) -> None:
        for j in range(max(0, first), min(len(lines), last + 1)):
            if (lvl, -rel) < (level[j], -weight[j]):
                level[j], weight[j] = lvl, rel

    for i in range(min(head_lines, len(lines))):
        mark(i, i, 0)
    records = _record_spans(lines, nodes)
    for i, node in nodes.items():
        if node.focused:
            mark(i - context_lines, i + context_lines, 1)
    for i in range(len(lines)):
        rel = relevance[i]
        if strong[i] > 0:
            first, last = records.get(i, (i, i))
            mark(first, last, 2, rel)
            mark(i - 1, i + 1, 4, rel)
        elif rel > 0 or (i in nodes and (nodes[i].clickable or nodes[i].typeable)):
            mark(i, i, 3, rel)
            mark(i - 1, i + 1, 4, rel)
    room = budget * RELEVANT_SHARE  # the most relevant records never crowd out the page's controls
    for i in sorted((j for j in range(len(lines)) if level[j] == 2), key=lambda j: (-weight[j], j)):
        room -= costs[i] + 1
        if room < 0:
            level[i] = 3
    marker_cost = int(count_tokens([f"[... {len(lines)} lines omitted]"])[0]) + 1
    keep = [False] * len(lines)
    spent = marker_cost  # nothing kept yet: one marker for the whole tree
    for i in sorted(range(len(lines)), key=lambda j: (level[j], -weight[j] if level[j] == 2 else 0.0, j)):
        left_gap = i > 0 and not keep[i - 1]
        right_gap = i + 1 < len(lines) and not keep[i + 1]
        markers = 1 if left_gap and right_gap else (-1 if not left_gap and not right_gap else 0)
        cost = costs[i] + 1 + markers * marker_cost
        if spent + cost > budget:
            continue
        keep[i] = True
        spent += cost
    out: list[str] = []
    omitted = run = 0
    for i, line in enumerate(lines):
        if keep[i]:
            if run:
                out.append(f"[... {run} lines omitted]")
                run = 0
            out.append(line)
        else:
            run += 1
            omitted += 1
    if run:
        out.append(f"[... {run} lines omitted]")
    return "\n".join(out), omitted


def goal_relevance(texts: Sequence[str], goal: str) -> list[float]:
    """Per text (a page line's name), how much it says about the goal: the sum, over the goal's
    :func:`~es_agent.words.relevance_words` that the text has, of their inverse frequency among ``texts``,
    ``log(N / texts with the word)``. A word every text has counts 0, so a year that every row of a table
    shows does not make every row relevant; 0 for every text when the goal has no words."""
    return _relevance(texts, goal)[0]


def strong_relevance(texts: Sequence[str], goal: str) -> list[float]:
    """:func:`goal_relevance` of the texts that carry at least half of the goal's weight on the page (the
    sum of the inverse frequencies of the goal's words that some text has), else 0: the date cell of the
    asked-for order, the title of the asked-for post. A goal that names nothing rare ("Show me the products
    of the ... category sorted by price") usually has no such text."""
    return _strong(*_relevance(texts, goal))


def _strong(scores: Sequence[float], mass: float) -> list[float]:
    return [score if score > 0 and score >= mass / 2 else 0.0 for score in scores]


def _relevance(texts: Sequence[str], goal: str) -> tuple[list[float], float]:
    goal_words = relevance_words(goal)
    if not goal_words:
        return [0.0] * len(texts), 0.0
    found = [relevance_words(text) & goal_words for text in texts]
    frequency = Counter(word for words in found for word in words)
    weight = {word: math.log(len(texts) / count) for word, count in frequency.items()}
    return [sum(weight[word] for word in words) for words in found], sum(weight.values())


def _record_spans(lines: Sequence[str], nodes: dict[int, AxNode]) -> dict[int, tuple[int, int]]:
    """Line -> ``(first, last)`` lines of the innermost record (a node of :data:`RECORD_ROLES`: its line and
    its subtree) it is part of, for the lines inside one."""
    spans: dict[int, tuple[int, int]] = {}
    open_records: list[tuple[int, int]] = []  # (depth, line) of the records the current line is inside
    for i in range(len(lines)):
        node = nodes.get(i)
        if node is None:
            continue
        while open_records and open_records[-1][0] >= node.depth:
            _, start = open_records.pop()
            for j in range(start, i):
                spans.setdefault(j, (start, i - 1))
        if node.role in RECORD_ROLES:
            open_records.append((node.depth, i))
    while open_records:
        _, start = open_records.pop()
        for j in range(start, len(lines)):
            spans.setdefault(j, (start, len(lines) - 1))
    return spans


