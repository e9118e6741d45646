"""The WebArena id-based action grammar: a parser into typed actions and an executor that runs them.

>>> parse_action("type [12] [wireless mouse] [1]")
TypeAction(element_id=12, text='wireless mouse', press_enter=True)

Importing this package does not import Playwright; :func:`execute_action` does, when first called.
"""

from __future__ import annotations

from webarena_gym.actions.execute import (
    DEFAULT_ACTION_TIMEOUT_S,
    TYPING_MODES,
    ActionError,
    ActionTimeoutError,
    execute_action,
)
from webarena_gym.actions.parse import (
    ACTION_NAMES,
    SPECIAL_KEY_MAPPINGS,
    Action,
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

__all__ = [
    "ACTION_NAMES",
    "DEFAULT_ACTION_TIMEOUT_S",
    "SPECIAL_KEY_MAPPINGS",
    "Action",
    "ActionError",
    "ActionParseError",
    "ActionTimeoutError",
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
    "TYPING_MODES",
    "TabFocusAction",
    "TypeAction",
    "execute_action",
    "parse_action",
]
