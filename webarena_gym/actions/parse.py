"""Parser of WebArena's id-based action grammar into typed action objects.

The grammar (``browser_env/actions.py:create_id_based_action`` in WebArena)::

    click [id]          type [id] [text] [0|1]     hover [id]        press [key_comb]
    scroll [up|down]    new_tab                    tab_focus [index] close_tab
    goto [url]          go_back                    go_forward        stop [answer]

Like WebArena, the parser tolerates surrounding whitespace and trailing text after an action, ``type`` presses
Enter unless its last bracket is ``[0]``, and the text of ``type``/``stop``/``goto``/``press`` runs from the
first ``[`` after the action name to the *last* ``]`` (so answers may contain brackets). An action wrapped in
one pair of backticks (```` ```click [12]``` ```` or `` `click [12]` ``) is accepted; finding the action
inside free prose is the policy's job. Action names are case-insensitive. Nothing here evaluates any part of
the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from webarena_gym.errors import ActionParseError

__all__ = [
    "ACTION_NAMES",
    "SPECIAL_KEY_MAPPINGS",
    "Action",
    "ActionParseError",
    "ClickAction",
    "CloseTabAction",
    "GoBackAction",
    "GoForwardAction",
    "GotoAction",
    "HoverAction",
    "NewTabAction",
    "PressAction",
    "ScrollAction",
    "StopAction",
    "TabFocusAction",
    "TypeAction",
    "parse_action",
]


# WebArena's key-name normalisation (browser_env/constants.py), applied to each ``+``-separated key.
SPECIAL_KEY_MAPPINGS: dict[str, str] = {
    "backquote": "Backquote", "minus": "Minus", "equal": "Equal", "backslash": "Backslash",
    "backspace": "Backspace", "meta": "Meta", "tab": "Tab", "delete": "Delete", "escape": "Escape",
    "arrowdown": "ArrowDown", "end": "End", "enter": "Enter", "home": "Home", "insert": "Insert",
    "pagedown": "PageDown", "pageup": "PageUp", "arrowright": "ArrowRight", "arrowup": "ArrowUp",
    **{f"f{i}": f"F{i}" for i in range(1, 13)},
}


@dataclass(frozen=True)
class ClickAction:
    """``click [id]``: click the centre of the element."""

    element_id: int
    name: ClassVar[str] = "click"

    def __str__(self) -> str:
        return f"click [{self.element_id}]"


@dataclass(frozen=True)
class TypeAction:
    """``type [id] [text] [0|1]``: clear the field, type the text, then press Enter if ``press_enter``."""

    element_id: int
    text: str
    press_enter: bool = True
    name: ClassVar[str] = "type"

    def __str__(self) -> str:
        return f"type [{self.element_id}] [{self.text}] [{int(self.press_enter)}]"


@dataclass(frozen=True)
class HoverAction:
    """``hover [id]``: move the mouse over the centre of the element."""

    element_id: int
    name: ClassVar[str] = "hover"

    def __str__(self) -> str:
        return f"hover [{self.element_id}]"


@dataclass(frozen=True)
class PressAction:
    """``press [key_comb]``: press a key combination (Playwright key names, e.g. ``Control+a``)."""

    key_comb: str
    name: ClassVar[str] = "press"

    def __str__(self) -> str:
        return f"press [{self.key_comb}]"


@dataclass(frozen=True)
class ScrollAction:
    """``scroll [up|down]``: scroll the page by one viewport height."""

    direction: Literal["up", "down"]
    name: ClassVar[str] = "scroll"

    def __str__(self) -> str:
        return f"scroll [{self.direction}]"


@dataclass(frozen=True)
class NewTabAction:
    """``new_tab``: open a blank tab and make it current."""

    name: ClassVar[str] = "new_tab"

    def __str__(self) -> str:
        return "new_tab"


@dataclass(frozen=True)
class TabFocusAction:
    """``tab_focus [index]``: make the tab with this 0-based index current."""

    index: int
    name: ClassVar[str] = "tab_focus"

    def __str__(self) -> str:
        return f"tab_focus [{self.index}]"


@dataclass(frozen=True)
class CloseTabAction:
    """``close_tab``: close the current tab (the last remaining tab is replaced by a blank one)."""

    name: ClassVar[str] = "close_tab"

    def __str__(self) -> str:
        return "close_tab"


@dataclass(frozen=True)
class GotoAction:
    """``goto [url]``: navigate the current tab (only to the allowed site origins)."""

    url: str
    name: ClassVar[str] = "goto"

    def __str__(self) -> str:
        return f"goto [{self.url}]"


@dataclass(frozen=True)
class GoBackAction:
    """``go_back``: the browser's back button."""

    name: ClassVar[str] = "go_back"

    def __str__(self) -> str:
        return "go_back"


@dataclass(frozen=True)
class GoForwardAction:
    """``go_forward``: the browser's forward button."""

    name: ClassVar[str] = "go_forward"

    def __str__(self) -> str:
        return "go_forward"


@dataclass(frozen=True)
class StopAction:
    """``stop [answer]``: end the episode with this answer (may be empty)."""

    answer: str = ""
    name: ClassVar[str] = "stop"

    def __str__(self) -> str:
        return f"stop [{self.answer}]"


Action = (
    ClickAction | TypeAction | HoverAction | PressAction | ScrollAction | NewTabAction | TabFocusAction
    | CloseTabAction | GotoAction | GoBackAction | GoForwardAction | StopAction
)
"""Any parsed action."""

ACTION_NAMES: tuple[str, ...] = (
    "click", "type", "hover", "press", "scroll", "new_tab", "tab_focus", "close_tab", "goto", "go_back",
    "go_forward", "stop",
)

_NAME = re.compile(r"[A-Za-z_]+")
_ID_ARG = re.compile(r"\s*\[\s*([0-9]+)\s*\]")
_MAX_ID_DIGITS = 12
_GREEDY_ARG = re.compile(r"\s*\[(.*)\]", re.DOTALL)
_ENTER_FLAG = re.compile(r"(.*)\]\s*\[\s*([01])\s*", re.DOTALL)
_SCROLL_ARG = re.compile(r"\s*\[?\s*(up|down)\b\s*\]?", re.IGNORECASE)
_NO_ARG_ACTIONS: dict[str, Action] = {
    "new_tab": NewTabAction(), "close_tab": CloseTabAction(), "go_back": GoBackAction(),
    "go_forward": GoForwardAction(),
}
_QUOTE_LIMIT = 120


def _quote(text: str) -> str:
    """``repr`` of the text, shortened for error messages."""
    if len(text) > _QUOTE_LIMIT:
        return repr(text[:_QUOTE_LIMIT]) + f"... ({len(text)} chars)"
    return repr(text)


def _unwrap_backticks(text: str) -> str:
    for fence in ("```", "`"):
        if len(text) >= 2 * len(fence) and text.startswith(fence) and text.endswith(fence):
            return text[len(fence):-len(fence)].strip()
    return text


def _to_int(digits: str, text: str) -> int:
    if len(digits) > _MAX_ID_DIGITS:
        raise ActionParseError(f"number {digits[:20]}... is too long to be an element id or tab index "
                               f"in {_quote(text)}")
    return int(digits)


def _map_keys(key_comb: str) -> str:
    return "+".join(SPECIAL_KEY_MAPPINGS.get(key.lower(), key) for key in key_comb.split("+"))


def parse_action(text: str) -> Action:
    """Parse one action string of the WebArena id-based grammar.

    Raises :class:`ActionParseError` (a ``ValueError``) naming the problem when the text is not a valid
    action.
    """
    if not isinstance(text, str):
        raise ActionParseError(f"an action must be a string, got {type(text).__name__}")
    source = _unwrap_backticks(text.strip())
    match = _NAME.match(source)
    if match is None:
        what = "empty action" if not source else "no action name at the start"
        raise ActionParseError(f"{what} in {_quote(text)}; expected one of {', '.join(ACTION_NAMES)}")
    name = match.group(0).lower()
    rest = source[match.end():]
    if name == "page_focus":  # WebArena's action2str spells tab_focus this way in its action history
        name = "tab_focus"
    if name in _NO_ARG_ACTIONS:
        return _NO_ARG_ACTIONS[name]
    if name in ("click", "hover", "tab_focus"):
        arg = _ID_ARG.match(rest)
        if arg is None:
            what = "a tab index" if name == "tab_focus" else "an element id"
            raise ActionParseError(f"{name} needs {what} in brackets, e.g. '{name} [3]'; got {_quote(text)}")
        number = _to_int(arg.group(1), text)
        if name == "click":
            return ClickAction(number)
        return HoverAction(number) if name == "hover" else TabFocusAction(number)
    if name == "type":
        return _parse_type(rest, text)
    if name == "scroll":
        arg = _SCROLL_ARG.match(rest)
        if arg is None:
            raise ActionParseError(f"scroll needs [up] or [down]; got {_quote(text)}")
        return ScrollAction(arg.group(1).lower())  # type: ignore[arg-type]
    if name == "stop":
        arg = _GREEDY_ARG.match(rest)
        return StopAction(arg.group(1) if arg else "")
    if name in ("press", "goto"):
        arg = _GREEDY_ARG.match(rest)
        value = arg.group(1).strip() if arg else ""
        if not value:
            example = "press [Enter]" if name == "press" else "goto [http://host/path]"
            raise ActionParseError(f"{name} needs a non-empty argument in brackets, e.g. '{example}'; "
                                   f"got {_quote(text)}")
        return PressAction(_map_keys(value)) if name == "press" else GotoAction(value)
    raise ActionParseError(f"unknown action {_quote(name)} in {_quote(text)}; "
                           f"expected one of {', '.join(ACTION_NAMES)}")


def _parse_type(rest: str, text: str) -> TypeAction:
    id_arg = _ID_ARG.match(rest)
    if id_arg is None:
        raise ActionParseError("type needs an element id in brackets, e.g. 'type [3] [hello] [1]'; "
                               f"got {_quote(text)}")
    text_arg = _GREEDY_ARG.match(rest, id_arg.end())
    if text_arg is None:
        raise ActionParseError(f"type needs the text in brackets after the id, e.g. 'type [3] [hello] [1]'; "
                               f"got {_quote(text)}")
    inner = text_arg.group(1)
    flag = _ENTER_FLAG.fullmatch(inner)
    if flag is not None:
        return TypeAction(_to_int(id_arg.group(1), text), flag.group(1), flag.group(2) == "1")
    return TypeAction(_to_int(id_arg.group(1), text), inner, True)
