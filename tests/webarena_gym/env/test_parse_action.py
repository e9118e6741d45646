"""The action parser: WebArena's id-based grammar, its tolerances, its errors, and a property-based fuzz."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webarena_gym.actions import (
    ACTION_NAMES,
    ActionParseError,
    ClickAction,
    CloseTabAction,
    GoBackAction,
    GoForwardAction,
    GotoAction,
    HoverAction,
    NewTabAction,
    PressAction,
    ScrollAction,
    StopAction,
    TabFocusAction,
    TypeAction,
    parse_action,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("click [12]", ClickAction(12)),
    ("hover [7]", HoverAction(7)),
    ("type [3] [wireless mouse] [1]", TypeAction(3, "wireless mouse", True)),
    ("type [3] [wireless mouse] [0]", TypeAction(3, "wireless mouse", False)),
    ("type [3] [wireless mouse]", TypeAction(3, "wireless mouse", True)),  # Enter by default, as WebArena
    ("press [Control+a]", PressAction("Control+a")),
    ("press [enter]", PressAction("Enter")),  # WebArena's key-name mapping
    ("press [meta+a]", PressAction("Meta+a")),
    ("scroll [down]", ScrollAction("down")),
    ("scroll [UP]", ScrollAction("up")),
    ("scroll down", ScrollAction("down")),  # WebArena's regex makes the brackets optional
    ("new_tab", NewTabAction()),
    ("tab_focus [2]", TabFocusAction(2)),
    ("page_focus [1]", TabFocusAction(1)),  # WebArena's action history spelling
    ("close_tab", CloseTabAction()),
    ("goto [http://127.0.0.1:7770/sales]", GotoAction("http://127.0.0.1:7770/sales")),
    ("go_back", GoBackAction()),
    ("go_forward", GoForwardAction()),
    ("stop [$25.99]", StopAction("$25.99")),
    ("stop []", StopAction("")),
    ("stop", StopAction("")),
    ("stop [N/A]", StopAction("N/A")),
    ("stop [the [bracketed] answer]", StopAction("the [bracketed] answer")),
])
def test_every_action_of_the_grammar_parses(text: str, expected: object) -> None:
    assert parse_action(text) == expected


@pytest.mark.parametrize("text", [
    "  click [12]  \n",
    "```click [12]```",
    "```\nclick [12]\n```",
    "`click [12]`",
    "click [12] where [12] is link 'Products'",
    "CLICK [12]",
    "click[12]",
    "click [ 12 ]",
])
def test_tolerated_variants(text: str) -> None:
    assert parse_action(text) == ClickAction(12)


def test_type_text_runs_to_the_last_bracket() -> None:
    assert parse_action("type [5] [a [b] c] [0]") == TypeAction(5, "a [b] c", False)
    assert parse_action("type [5] [line one\nline two] [1]") == TypeAction(5, "line one\nline two", True)
    assert parse_action("type [5] [] [1]") == TypeAction(5, "", True)


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "empty action"),
    ("   ", "empty action"),
    ("[12]", "no action name"),
    ("jump [3]", "unknown action 'jump'"),
    ("click", "click needs an element id"),
    ("click [abc]", "click needs an element id"),
    ("hover []", "hover needs an element id"),
    ("type [3]", "type needs the text"),
    ("type [x] [hi]", "type needs an element id"),
    ("tab_focus [first]", "tab_focus needs a tab index"),
    ("scroll [left]", "scroll needs [up] or [down]"),
    ("goto []", "goto needs a non-empty argument"),
    ("press", "press needs a non-empty argument"),
    ("click [" + "9" * 40 + "]", "too long"),
    ("In summary, the next action I will perform is ```click [12]```", "unknown action 'in'"),
])
def test_errors_name_the_problem(text: str, fragment: str) -> None:
    with pytest.raises(ActionParseError, match=None) as info:
        parse_action(text)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


def test_non_string_input_is_a_parse_error() -> None:
    with pytest.raises(ActionParseError, match="must be a string"):
        parse_action(42)  # type: ignore[arg-type]


def test_long_text_is_shortened_in_the_error() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action("x" * 10_000)
    assert len(str(info.value)) < 500


# --- property-based ----------------------------------------------------------------------------------------

_any_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
_bracket_soup = st.lists(st.sampled_from([*"[]` \n\t01235abcxyz", "click", "type", "stop", "press", "goto",
                                          "scroll", "up", "tab_focus"]), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_any_text, _bracket_soup, st.builds(lambda name, rest: name + rest,
                                                       st.sampled_from(ACTION_NAMES), _any_text)))
def test_parser_only_ever_raises_action_parse_error(text: str) -> None:
    try:
        action = parse_action(text)
    except ActionParseError:
        return
    assert action.name in ACTION_NAMES
    assert parse_action(str(action)) == action  # whatever parses prints back to itself


_element_id = st.integers(min_value=0, max_value=10**9)
_free_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r"), max_size=80)
_arg = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Zs", "Cc")), min_size=1,
               max_size=60)
_keys = st.lists(st.sampled_from(["Control", "Shift", "Alt", "Meta", "a", "Z", "1", "Enter", "Tab",
                                  "ArrowDown", "PageUp", "F5", "Backspace", "Delete"]),
                 min_size=1, max_size=3)

_actions = st.one_of(
    st.builds(ClickAction, _element_id),
    st.builds(HoverAction, _element_id),
    st.builds(TypeAction, _element_id, _free_text, st.booleans()),
    st.builds(PressAction, _keys.map("+".join)),
    st.builds(ScrollAction, st.sampled_from(["up", "down"])),
    st.just(NewTabAction()),
    st.builds(TabFocusAction, st.integers(min_value=0, max_value=50)),
    st.just(CloseTabAction()),
    st.builds(GotoAction, _arg.filter(lambda s: s.strip() == s)),
    st.just(GoBackAction()),
    st.just(GoForwardAction()),
    st.builds(StopAction, _free_text),
)


@settings(max_examples=400, deadline=None)
@given(_actions)
def test_valid_actions_round_trip(action: object) -> None:
    assert parse_action(str(action)) == action


@settings(max_examples=100, deadline=None)
@given(_actions, st.sampled_from(["", "  ", "\n"]), st.sampled_from(["```", "`"]))
def test_valid_actions_round_trip_with_whitespace_and_backticks(action: object, pad: str, fence: str) -> None:
    assert parse_action(f"{pad}{fence}{action}{fence}{pad}") == action
