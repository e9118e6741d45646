"""Reading the WebArena-style accessibility tree text of an observation, and fitting it into a token budget.

One node per line, tab-indented by depth: ``[<id>] <role> '<name>' <prop>: <value> ...``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

CLICKABLE_ROLES = frozenset({
    "link", "button", "checkbox", "radio", "menuitem", "menuitemcheckbox", "menuitemradio", "tab", "option",
    "switch", "treeitem", "combobox", "listbox", "gridcell", "columnheader", "summary", "img",
})
"""Roles that get a ``click [id]`` candidate (``img`` only when it has a name)."""
TYPEABLE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "textarea"})
"""Roles that get ``type [id] [text]`` candidates."""
TEXT_ROLES = frozenset({"StaticText", "heading", "cell", "gridcell", "paragraph", "listitem", "status"})
"""Roles whose names can be answers (``stop [answer]`` candidates)."""

_LINE = re.compile(
    r"^(?P<indent>[\t ]*)\[(?P<id>[^\]\s]+)\]\s+(?P<role>\S+)(?:\s+'(?P<name>.*)')?(?P<props>.*)$")
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
        """Whether ``click [id]`` makes sense on this node."""
        return self.role in CLICKABLE_ROLES and (self.role != "img" or bool(self.name))

    @property
    def typeable(self) -> bool:
        """Whether ``type [id] [text]`` makes sense on this node."""
        return self.role in TYPEABLE_ROLES and self.props.get("disabled") != "True"

    @property
    def focused(self) -> bool:
        """Whether the node has keyboard focus."""
        return self.props.get("focused") == "True"


def parse_axtree(text: str) -> list[AxNode]:
    """Parse the axtree text into nodes (lines that are not nodes are skipped)."""
    nodes: list[AxNode] = []
    for i, line in enumerate(text.splitlines()):
        match = _LINE.match(line)
        if match is None:
            continue
        indent = match["indent"]
        nodes.append(AxNode(
            line=i, id=match["id"], role=match["role"], name=(match["name"] or "").strip(),
            depth=indent.count("\t") + indent.count(" ") // 2,
            props=dict(_PROP.findall(match["props"] or ""))))
    return nodes


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
    element with ``context_lines`` around it; interactive elements and lines sharing words with the goal, each
    with one line of context; then everything else, earliest first. Kept lines stay in page order, and each
    run of omitted lines becomes one ``[... N lines omitted]`` marker line.
    """
    lines = text.splitlines()
    if not lines:
        return text, 0
    costs = list(count_tokens(lines))
    if sum(costs) + len(lines) <= budget:
        return text, 0
    nodes = {n.line: n for n in parse_axtree(text)}
    goal_words = _words(goal)
    priority = [4] * len(lines)

    def mark(center: int, radius: int, level: int) -> None:
        for j in range(max(0, center - radius), min(len(lines), center + radius + 1)):
            priority[j] = min(priority[j], level)

    for i in range(min(head_lines, len(lines))):
        priority[i] = 0
    for i, node in nodes.items():
        if node.focused:
            mark(i, context_lines, 1)
        elif node.clickable or node.typeable or goal_words & _words(node.name):
            mark(i, 0, 2)
            mark(i, 1, 3)
    marker_cost = int(count_tokens([f"[... {len(lines)} lines omitted]"])[0]) + 1
    keep = [False] * len(lines)
    spent = marker_cost  # nothing kept yet: one marker for the whole tree
    for i in sorted(range(len(lines)), key=lambda j: (priority[j], j)):
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


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]{3,}", text.lower()))
