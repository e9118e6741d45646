"""Flattening of CDP accessibility nodes into WebArena's text, the printable text space, and truncation."""

from __future__ import annotations

from typing import Any

from webarena_gym.observation import (
    ElementIds,
    PrintableText,
    format_axtree,
    format_tabs,
    printable_charset,
    to_printable,
    truncate,
)


def node(node_id: int, role: str, name: str | None = "", *, children: tuple[int, ...] = (),
         backend: Any = "same", ignored: bool = False, props: dict[str, Any] | None = None,
         role_type: str = "role") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "nodeId": str(node_id), "ignored": ignored, "role": {"type": role_type, "value": role},
        "childIds": [str(c) for c in children],
        "properties": [{"name": k, "value": {"type": "x", "value": v}} for k, v in (props or {}).items()],
    }
    if name is not None:
        entry["name"] = {"type": "computedString", "value": name}
    if backend == "same":
        entry["backendDOMNodeId"] = node_id * 10
    elif backend is not None:
        entry["backendDOMNodeId"] = backend
    return entry


PAGE = [
    node(1, "RootWebArea", "Shop", children=(2, 9), props={"focused": True}),
    node(2, "none", None, children=(3,), ignored=True),
    node(3, "generic", "", children=(4, 6, 7, 8, 11, 13)),
    node(4, "link", "Customers", children=(5,), props={"url": "http://x/c", "focusable": True}),
    node(5, "StaticText", "Customers", role_type="internalRole"),
    node(6, "textbox", "Email", props={"required": True, "editable": "plaintext", "invalid": "false"}),
    node(7, "paragraph", "", children=(10,)),
    node(8, "LineBreak", "\n"),
    node(9, "heading", "It's café 東京 😀", props={"level": 2}),
    node(10, "StaticText", "Hello", role_type="internalRole", children=(12,)),
    node(12, "InlineTextBox", "Hello", backend=None, role_type="internalRole"),
    node(11, "StaticText", "", role_type="internalRole"),
    node(13, "listitem", "", props={"level": 1}),
]


def test_webarena_format_prunes_and_indents() -> None:
    tree = format_axtree(PAGE, ElementIds())
    assert tree.text.splitlines() == [
        "[1] RootWebArea 'Shop' focused: True",
        "\t[2] link 'Customers'",
        "\t[3] textbox 'Email' required: True",
        "\t[4] StaticText 'Hello'",
        "\t[5] heading \"It's café 東京 😀\"",
    ]
    # ids map to the backendDOMNodeIds of the shown nodes only
    assert tree.id_map == {1: 10, 2: 40, 3: 60, 4: 100, 5: 90}
    assert not tree.truncated


def test_ids_are_stable_per_node_and_new_for_new_nodes() -> None:
    ids = ElementIds()
    first = format_axtree(PAGE, ids)
    extra = node(14, "button", "Save")
    changed = [*PAGE[:2], node(3, "generic", "", children=(14, 4, 6)), *PAGE[3:], extra]
    second = format_axtree(changed, ids)
    assert second.text.splitlines()[1] == "\t[6] button 'Save'"
    assert second.id_map[2] == first.id_map[2]  # the link kept its id
    # another document of the same tab: fresh ids even though Chromium's backend ids repeat
    third = format_axtree(PAGE, ids, document_key=1)
    assert min(third.id_map) > max(second.id_map)


def test_ids_do_not_depend_on_backend_numbers() -> None:
    renumbered = [dict(n, backendDOMNodeId=n["backendDOMNodeId"] + 7) if "backendDOMNodeId" in n else n
                  for n in PAGE]
    assert format_axtree(PAGE, ElementIds()).text == format_axtree(renumbered, ElementIds()).text


def test_static_text_repeating_a_recent_line_is_dropped() -> None:
    nodes = [
        node(1, "RootWebArea", "T", children=(2, 4)),
        node(2, "button", "Add to cart", children=(3,)),
        node(3, "StaticText", "Add to cart", role_type="internalRole"),
        node(4, "StaticText", "Price", role_type="internalRole"),
    ]
    assert format_axtree(nodes, ElementIds()).text.splitlines() == [
        "[1] RootWebArea 'T'", "\t[2] button 'Add to cart'", "\t[3] StaticText 'Price'"]


def test_viewport_filter_keeps_root_and_visible_nodes() -> None:
    tree = format_axtree(PAGE, ElementIds(), visible={40})
    assert tree.text.splitlines() == ["[1] RootWebArea 'Shop' focused: True", "\t[2] link 'Customers'"]


def test_truncation_is_bounded_and_marked() -> None:
    nodes = [node(1, "RootWebArea", "Big", children=tuple(range(2, 2002)))]
    nodes += [node(i, "link", f"Link number {i}") for i in range(2, 2002)]
    tree = format_axtree(nodes, ElementIds(), max_chars=1000)
    assert len(tree.text) <= 1000
    assert tree.truncated
    assert tree.text.splitlines()[-1].startswith("[... accessibility tree truncated:")
    shown = {int(line.strip()[1:].split("]")[0]) for line in tree.text.splitlines()[:-1]}
    assert set(tree.id_map) == shown


def test_empty_and_cyclic_input() -> None:
    assert format_axtree([], ElementIds()).text == ""
    cyclic = [node(1, "RootWebArea", "A", children=(2,)), node(2, "button", "B", children=(1,))]
    assert format_axtree(cyclic, ElementIds()).text == "[1] RootWebArea 'A'\n\t[2] button 'B'"


def test_tabs_text() -> None:
    assert format_tabs(["Home", "Cart\x07"], 1) == "Tab 0: Home\nTab 1 (current): Cart"


def test_printable_text_space_covers_page_text() -> None:
    space = PrintableText(100)
    assert "Café 東京 😀 ‘q’ – naïve\n\tend" in space
    assert "bell\x07" not in space
    assert "x" * 101 not in space
    assert "" in space
    assert len(space.character_set) == len(printable_charset()) > 140_000
    assert "printable" in repr(space) and len(repr(space)) < 200
    assert space == PrintableText(100)
    space.seed(0)
    sample = space.sample()
    assert sample in space


def test_to_printable_and_truncate() -> None:
    assert to_printable("a\x00b\u200bc\rd") == "abc d"
    assert to_printable("line\nnext", keep="\n") == "line\nnext"
    assert truncate("abcdef", 4, marker="..") == "ab.."
    assert truncate("abc", 4) == "abc"
