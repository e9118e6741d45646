"""What the agent sees: the accessibility tree flattened WebArena-style, the open tabs, and the text space.

One CDP call (``Accessibility.getFullAXTree``) per observation, no per-node bounding boxes (WebArena's
per-node ``getBoundingClientRect`` makes steps take seconds). Optional viewport filtering adds one batched
``DOMSnapshot.captureSnapshot`` call.

Format (WebArena's ``parse_accessibility_tree`` + ``clean_accesibility_tree``)::

    [1] RootWebArea 'Shop' focused: True
    \t[4] link 'Customers'
    \t[7] textbox 'Email' required: True
    \t[9] StaticText 'Hello'

Names are written with Python's ``repr`` (as WebArena does), which also makes them printable. Nodes that are
ignored, have no DOM node, or are empty containers (generic, paragraph, list, ...) are pruned and their
children move up; a ``StaticText`` whose text already appears in one of the three previous lines is dropped.

Element ids are small integers given in tree order the first time a node is shown in the episode, keyed by
(tab, document, backendDOMNodeId): stable while the node exists, never reused for another node, and the same
for the same episode replayed (Chromium's backendDOMNodeIds are assigned lazily and differ between otherwise
identical runs, which would make observations non-deterministic).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gymnasium.spaces import Text

if TYPE_CHECKING:  # pragma: no cover
    from playwright.sync_api import CDPSession

__all__ = [
    "IGNORED_PROPERTIES",
    "AXTree",
    "ElementIds",
    "PrintableText",
    "SNAPSHOT_CALL",
    "fetch_axtree",
    "format_axtree",
    "format_tabs",
    "printable_charset",
    "to_printable",
    "truncate",
    "visible_in_snapshot",
]

IGNORED_PROPERTIES = frozenset(
    {"focusable", "editable", "readonly", "level", "settable", "multiline", "invalid", "url"}
)
"""Properties left out of the tree text: WebArena's list, plus ``url`` (newer Chromium reports it on every
link and the document; WebArena's observations, recorded with an older Chromium, do not have it)."""

_EMPTY_PRUNED_ROLES = frozenset({
    "generic", "img", "list", "strong", "paragraph", "banner", "navigation", "Section", "LabelText",
    "Legend", "listitem", "LineBreak", "none",
})
_DEDUP_WINDOW = 3


@functools.cache
def printable_charset() -> frozenset[str]:
    """Every character ``str.isprintable`` accepts, plus tab and newline (about 145k characters)."""
    chars = [chr(c) for c in range(0x110000) if chr(c).isprintable()]
    return frozenset([*chars, "\t", "\n"])


@functools.cache
def _text_tables() -> tuple[frozenset[str], tuple[str, ...], dict[str, Any], str]:
    import numpy as np

    charset = printable_charset()
    char_list = tuple(sorted(charset))
    index = {c: np.int32(i) for i, c in enumerate(char_list)}
    return charset, char_list, index, "".join(char_list)


class PrintableText(Text):
    """A :class:`gymnasium.spaces.Text` over :func:`printable_charset`: all printable Unicode plus
    tab/newline.

    Behaves exactly like ``Text(max_length, min_length=..., charset=printable_charset())`` but shares one copy
    of the character tables per process (a plain ``Text`` would build ~20 MB of tables per field) and prints a
    short ``repr``.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset="\n", seed=seed)
        self._char_set, self._char_list, self._char_index, self._char_str = _text_tables()

    def __repr__(self) -> str:
        return (f"PrintableText({self.min_length}, {self.max_length}, "
                f"charset=<{len(self._char_set)} printable unicode characters>)")


def to_printable(text: str, *, keep: str = "") -> str:
    """Replace characters outside :func:`printable_charset` (whitespace controls become spaces, others go)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else (" " if c.isspace() else "") for c in text)


def truncate(text: str, max_chars: int, marker: str = "[... truncated]") -> str:
    """Cut ``text`` to at most ``max_chars`` characters, ending with ``marker`` when something was cut."""
    if len(text) <= max_chars:
        return text
    return text[: max(0, max_chars - len(marker))] + marker[:max_chars]


class ElementIds:
    """Element ids of one episode, handed out in tree order the first time a node is shown."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, int, int], int] = {}

    def id_for(self, tab_key: int, document_key: int, backend_id: int) -> int:
        """The id of a DOM node; the same key always gets the same id."""
        key = (tab_key, document_key, backend_id)
        element_id = self._ids.get(key)
        if element_id is None:
            element_id = self._ids[key] = len(self._ids) + 1
        return element_id


@dataclass
class AXTree:
    """One flattened accessibility tree."""

    text: str
    """The tree text, at most ``max_chars`` characters (a marker line says when it was cut)."""
    id_map: dict[int, int] = field(default_factory=dict)
    """Element id shown in ``text`` -> backendDOMNodeId, for the action executor."""
    truncated: bool = False


def _node_body(node: Mapping[str, Any]) -> str | None:
    """The WebArena line of one AX node without its id and indentation, or ``None`` when it is pruned."""
    name_field = node.get("name")
    role_field = node.get("role")
    if node.get("ignored") or not isinstance(name_field, Mapping) or not isinstance(role_field, Mapping):
        return None
    role = str(role_field.get("value", ""))
    name = str(name_field.get("value", ""))
    properties = []
    for prop in node.get("properties") or ():
        value = prop.get("value")
        if prop.get("name") in IGNORED_PROPERTIES or not isinstance(value, Mapping) or "value" not in value:
            continue
        properties.append(f"{prop['name']}: {to_printable(str(value['value']))}")
    if not name.strip() and (role in _EMPTY_PRUNED_ROLES if not properties else role == "listitem"):
        return None
    body = f"{role} {name!r}"
    return body + " " + " ".join(properties) if properties else body


def format_axtree(
    nodes: Sequence[Mapping[str, Any]],
    ids: ElementIds,
    *,
    tab_key: int = 0,
    document_key: int = 0,
    max_chars: int = 60_000,
    visible: set[int] | None = None,
) -> AXTree:
    """Flatten the node list of ``Accessibility.getFullAXTree`` into WebArena's text format.

    ``visible`` (backendDOMNodeIds) keeps only those nodes (and the root), for viewport filtering.
    """
    if not nodes:
        return AXTree("")
    by_id: dict[str, Mapping[str, Any]] = {}
    for node in nodes:
        by_id.setdefault(str(node.get("nodeId")), node)
    lines: list[str] = []
    line_ids: list[int] = []
    id_map: dict[int, int] = {}
    root = nodes[0]
    stack: list[tuple[Mapping[str, Any], int]] = [(root, 0)]
    seen: set[str] = set()
    while stack:
        node, depth = stack.pop()
        node_key = str(node.get("nodeId"))
        if node_key in seen:
            continue
        seen.add(node_key)
        backend_id = node.get("backendDOMNodeId")
        body = None
        if isinstance(backend_id, int) and (visible is None or backend_id in visible or node is root):
            body = _node_body(node)
            if body is not None and body.startswith("StaticText "):
                text = repr(str(node["name"].get("value", "")))[1:-1]
                if not text or any(text in prev for prev in lines[-_DEDUP_WINDOW:]):
                    body = None
            if body is not None:
                element_id = ids.id_for(tab_key, document_key, backend_id)
                lines.append("\t" * depth + f"[{element_id}] {body}")
                line_ids.append(element_id)
                id_map[element_id] = backend_id
        child_depth = depth + 1 if body is not None else depth
        children = [by_id[c] for c in node.get("childIds") or () if c in by_id]
        stack.extend((child, child_depth) for child in reversed(children))
    return _bounded(lines, line_ids, id_map, max_chars)


def _bounded(lines: list[str], line_ids: list[int], id_map: dict[int, int], max_chars: int) -> AXTree:
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return AXTree(text, id_map)
    marker_room = 80
    used = 0
    kept = 0
    for line in lines:
        if used + len(line) + 1 > max_chars - marker_room:
            break
        used += len(line) + 1
        kept += 1
    marker = f"[... accessibility tree truncated: {len(lines) - kept} more lines]"
    text = truncate("\n".join([*lines[:kept], marker]), max_chars)
    shown = set(line_ids[:kept])
    return AXTree(text, {k: v for k, v in id_map.items() if k in shown}, truncated=True)


SNAPSHOT_CALL: tuple[str, dict[str, Any]] = ("DOMSnapshot.captureSnapshot", {"computedStyles": []})
"""The CDP call (method, params) whose reply :func:`visible_in_snapshot` reads."""


def visible_backend_ids(cdp: CDPSession, viewport: tuple[int, int]) -> set[int]:
    """backendDOMNodeIds of the main document whose layout box overlaps the viewport (one snapshot call)."""
    from webarena_gym.browser import cdp_send

    return visible_in_snapshot(cdp_send(cdp, *SNAPSHOT_CALL), viewport)


def visible_in_snapshot(snapshot: Mapping[str, Any], viewport: tuple[int, int]) -> set[int]:
    """backendDOMNodeIds of the main document whose layout box overlaps the viewport, from the reply of
    :data:`SNAPSHOT_CALL`."""
    document = snapshot["documents"][0]
    backend_ids = document["nodes"]["backendNodeId"]
    layout = document["layout"]
    left, top = document.get("scrollOffsetX", 0.0), document.get("scrollOffsetY", 0.0)
    right, bottom = left + viewport[0], top + viewport[1]
    visible: set[int] = set()
    for node_index, (x, y, w, h) in zip(layout["nodeIndex"], layout["bounds"], strict=False):
        if w > 0 and h > 0 and x < right and x + w > left and y < bottom and y + h > top:
            visible.add(backend_ids[node_index])
    return visible


def fetch_axtree(
    cdp: CDPSession,
    ids: ElementIds,
    *,
    tab_key: int,
    document_key: int,
    max_chars: int,
    viewport: tuple[int, int] | None = None,
) -> AXTree:
    """Fetch and flatten the accessibility tree of the page behind ``cdp``.

    ``viewport`` (width, height) turns on viewport filtering.
    """
    from webarena_gym.browser import cdp_send

    nodes = cdp_send(cdp, "Accessibility.getFullAXTree")["nodes"]
    visible = visible_backend_ids(cdp, viewport) if viewport is not None else None
    return format_axtree(nodes, ids, tab_key=tab_key, document_key=document_key, max_chars=max_chars,
                         visible=visible)


def format_tabs(titles: Iterable[str], current: int) -> str:
    """WebArena's tab list, one tab per line: ``Tab 0 (current): <title>``."""
    lines = []
    for index, title in enumerate(titles):
        mark = " (current)" if index == current else ""
        lines.append(f"Tab {index}{mark}: {to_printable(title)}")
    return "\n".join(lines)
