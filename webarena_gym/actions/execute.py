"""Runs parsed actions in the browser, the way WebArena's ``execute_action`` does.

Element ids are resolved through the last observation's id map to a backendDOMNodeId, then acted on through
CDP: ``DOM.scrollIntoViewIfNeeded`` + ``DOM.getContentQuads`` give the element's centre, where the mouse
clicks or hovers (as WebArena clicks at the centre of the element's box); an element without a box gets a
JavaScript ``click()``. ``type`` clicks the field, clears it (select all + Backspace, as WebArena-Lite does),
types the text and presses Enter when asked. A ``<select>`` gets the option whose text matches. After every
action the session waits for any navigation the action started; a tab opened by the action becomes the current
tab.

Every action has a time budget (``timeout_s``, checked between typed chunks and pressed keys, and passed to
Playwright as the ``timeout=`` of navigations and waits): an action that runs past it is cut off there, the
current tab's loading is stopped, and :class:`ActionTimeoutError` says so; the page stays as far as the action
got.

``type`` has two typing modes (:data:`TYPING_MODES`): ``"keys"`` types key by key, as WebArena does (a
keydown/keypress/input/keyup per character: what pages that listen to key events, such as search boxes with
suggestions, need), checked against the budget every few keys; ``"fill"`` enters the whole text at once the
way Playwright's ``fill`` does (the field's content selected, then one ``Input.insertText``, which fires
``beforeinput``/``input`` as a paste would), one round trip whatever the length. Both click the field,
select its content and delete it with Backspace first (so the new text lands in new DOM text nodes in both
modes, and the next observation's element ids agree), and both press a real Enter key when asked (so a
form's implicit submission and Enter key handlers run in both; a newline in the text is an Enter too).

Agent mistakes raise :class:`ActionError` (the env turns it into ``last_action_error``); a dead browser raises
:class:`~webarena_gym.errors.BrowserError` (checked after every failure, so a dead browser is never
mistaken for an agent mistake). The page scripts here are fixed strings: action text only ever travels
as a call argument, never as code.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from webarena_gym.actions.parse import (
    Action,
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
)
from webarena_gym.browser import cdp_send
from webarena_gym.errors import ActionError, ActionTimeoutError, BrowserError

if TYPE_CHECKING:  # pragma: no cover
    from playwright.sync_api import CDPSession, Page

    from webarena_gym.browser import BrowserSession

__all__ = ["DEFAULT_ACTION_TIMEOUT_S", "TYPING_MODES", "ActionError", "ActionTimeoutError", "Deadline",
           "check_typing", "execute_action"]

log = logging.getLogger(__name__)

DEFAULT_ACTION_TIMEOUT_S = 30.0
"""The time budget of one action unless the env is given another."""
TYPING_MODES = ("keys", "fill")
"""How ``type`` enters its text: ``"keys"`` key by key (WebArena), ``"fill"`` all at once (Playwright's
``fill``)."""
_TYPE_CHUNK = 8
"""Characters typed between two deadline checks (about 30 ms of typing)."""
_LABEL_CHARS = 200
_KEYED_NAMES = {"\n": "Enter", "\r": "Enter"}
"""Characters that Playwright's ``keyboard.type`` presses as keys (its layout's aliases of Enter; a tab is
inserted as text): ``"fill"`` presses them too, so both modes leave the same page."""
_KEYED_CHARS = re.compile("([\n\r])")


class Deadline:
    """The time budget of one action, on the monotonic clock."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.end = time.monotonic() + timeout_s

    def expired(self) -> bool:
        """Whether the budget is spent."""
        return time.monotonic() >= self.end

    def ms(self, cap_ms: float) -> float:
        """A Playwright ``timeout=`` in ms: what is left of the budget, at most ``cap_ms``, at least 1
        (Playwright reads 0 as no limit at all)."""
        return max(1.0, min(float(cap_ms), (self.end - time.monotonic()) * 1000))

    def error(self, action: Action) -> ActionTimeoutError:
        """The error of an action cut off at this deadline."""
        return ActionTimeoutError(f"{_label(action)}: the action exceeded its {self.timeout_s:g} s timeout "
                                  "and was cut off there (the page is as far as the action got)")

    def check(self, action: Action) -> None:
        """Raise :meth:`error` when the budget is spent."""
        if self.expired():
            raise self.error(action)


def check_typing(typing: object) -> str:
    """``typing`` if it is one of :data:`TYPING_MODES`, else :class:`ValueError` naming the value."""
    if not isinstance(typing, str) or typing not in TYPING_MODES:
        raise ValueError(f"typing must be one of {list(TYPING_MODES)}, got {typing!r}")
    return typing


def _label(action: Action) -> str:
    """The action as written in messages, shortened (a 4,000-character ``type`` would hide the reason)."""
    text = str(action)
    return text if len(text) <= _LABEL_CHARS else f"{text[:_LABEL_CHARS]}... ({len(text)} chars)"


# The element to type into for a target node: its element (text nodes), the control of a <label>, or the
# <input>/<textarea> whose inner editor (user-agent shadow DOM) holds the node.
_EDIT_TARGET = """function editTarget(node) {
  let el = node.nodeType === 1 ? node : node.parentElement;
  const root = el && el.getRootNode();
  if (root && root.host && ['INPUT', 'TEXTAREA'].includes(root.host.tagName)) el = root.host;
  if (el && el.tagName === 'LABEL' && el.control) el = el.control;
  return el;
}"""

_EDITABLE_KIND = """function () {
  const el = (""" + _EDIT_TARGET + """)(this);
  if (!el) return {kind: 'none', what: 'a text node'};
  const tag = el.tagName.toLowerCase();
  const what = '<' + tag + (el.type ? ' type=' + el.type : '') + '>';
  if (el.disabled) return {kind: 'disabled', what};
  if (tag === 'select') return {kind: 'select', what};
  if (el.isContentEditable) return {kind: 'text', what};
  if (tag === 'textarea') return {kind: el.readOnly ? 'readonly' : 'text', what};
  if (tag === 'input') {
    const noText = ['button', 'submit', 'reset', 'checkbox', 'radio', 'image', 'file', 'hidden', 'range',
                    'color'];
    if (noText.includes((el.type || 'text').toLowerCase())) return {kind: 'none', what};
    return {kind: el.readOnly ? 'readonly' : 'text', what};
  }
  return {kind: 'none', what};
}"""

_FOCUS = """function () {
  const el = (""" + _EDIT_TARGET + """)(this);
  const active = document.activeElement;
  if (el && !(active === el || el.contains(active))) el.focus();
}"""

_SELECT_OPTION = """function (wanted) {
  const el = (""" + _EDIT_TARGET + """)(this);
  const norm = (s) => (s || '').replace(/\\s+/g, ' ').trim().toLowerCase();
  const options = Array.from(el.options);
  const target = norm(wanted);
  const hit = options.find((o) => norm(o.label) === target || norm(o.value) === target)
    || options.find((o) => norm(o.label).startsWith(target));
  if (!hit) return options.map((o) => o.label);
  el.value = hit.value;
  el.dispatchEvent(new Event('input', {bubbles: true}));
  el.dispatchEvent(new Event('change', {bubbles: true}));
  return null;
}"""

_JS_CLICK = """function () {
  const el = this.nodeType === 1 ? this : this.parentElement;
  if (!el) return false;
  if (el.tagName === 'OPTION' && el.parentElement) {
    const select = el.closest('select');
    if (select) {
      select.value = el.value;
      select.dispatchEvent(new Event('input', {bubbles: true}));
      select.dispatchEvent(new Event('change', {bubbles: true}));
      return true;
    }
  }
  el.click();
  return true;
}"""

_NODE_STATE = """function () {
  return {connected: this.isConnected, option: this.nodeType === 1 && this.tagName === 'OPTION'};
}"""

_SCROLL = """(direction) => {
  const el = document.scrollingElement || document.body;
  el.scrollTop = el.scrollTop + direction * window.innerHeight;
}"""


def execute_action(action: Action, session: BrowserSession, id_map: Mapping[int, int], *,
                   timeout_s: float = DEFAULT_ACTION_TIMEOUT_S, typing: str = "keys") -> None:
    """Run ``action`` on the session's current tab; ``id_map`` maps the last observation's ids to DOM nodes;
    ``typing`` is how ``type`` enters text (one of :data:`TYPING_MODES`).

    Raises :class:`ActionError` for agent mistakes (:class:`ActionTimeoutError` when the action ran past
    ``timeout_s`` seconds and was cut off) and :class:`BrowserError` when the browser is gone. ``stop`` is the
    env's business and is refused here.
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    if isinstance(action, StopAction):
        raise ValueError("stop ends the episode; the env handles it, not the executor")
    check_typing(typing)
    deadline = Deadline(timeout_s)
    session.check_alive(probe=False)  # a browser that died unnoticed fails the action (probed then)
    try:
        before = {id(p) for p in session.pages}
        opener = session.tab(session.page)
    except PlaywrightError as exc:  # the browser died since the check (e.g. of the user's Ctrl-C)
        session.check_alive()
        raise BrowserError(f"the browser failed before {_label(action)} ran: {_short(exc)}") from exc
    window_opens = opener.window_opens
    session.take_blocked()
    try:
        _dispatch(action, session, id_map, deadline, typing)
        _settle(session, session.page, deadline, action)
        if opener.window_opens > window_opens:
            _follow_new_tab(session, before, opener.page, deadline, action)
    except PlaywrightError as exc:
        session.check_alive()
        if deadline.expired() or isinstance(exc, PlaywrightTimeoutError):
            _stop_loading(session)
        if deadline.expired():
            raise deadline.error(action) from exc
        _raise_if_blocked(session, action, exc)  # e.g. a goto whose redirect hop was refused
        raise ActionError(f"{_label(action)} failed: {_short(exc)}") from exc
    except ActionError as exc:
        session.check_alive()  # an element lookup may have failed because the browser died
        if isinstance(exc, ActionTimeoutError):
            _stop_loading(session)
        else:
            _raise_if_blocked(session, action, exc)
        if not str(exc).startswith(_label(action)):
            raise ActionError(f"{_label(action)}: {exc}") from exc
        raise
    _raise_if_blocked(session, action)


def _settle(session: BrowserSession, page: Page, deadline: Deadline, action: Action) -> None:
    """Wait for a navigation the action started, within the action's budget."""
    session.settle(page, timeout_ms=deadline.ms(session.config.navigation_timeout_ms))
    if deadline.expired() and not page.is_closed() and session.tab(page).loading:
        raise deadline.error(action)


def _stop_loading(session: BrowserSession) -> None:
    """Stop whatever the current tab still loads after a cut action, so it holds up nothing that follows."""
    from playwright.sync_api import Error as PlaywrightError

    page = session.page
    if page.is_closed():
        return
    try:
        cdp_send(session.tab(page).cdp, "Page.stopLoading", timeout_ms=session.config.action_timeout_ms)
    except PlaywrightError as exc:
        session.check_alive()  # a dead browser is an error; a tab that went away meanwhile is not
        log.debug("Page.stopLoading after a cut action failed: %s", exc)


def _short(exc: Exception) -> str:
    """The first line of a Playwright error, without its call log."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _dispatch(action: Action, session: BrowserSession, id_map: Mapping[int, int], deadline: Deadline,
              typing: str) -> None:
    page = session.page
    if isinstance(action, ClickAction):
        _click(session, page, _backend_id(action.element_id, id_map, action))
    elif isinstance(action, HoverAction):
        backend_id = _backend_id(action.element_id, id_map, action)
        _live_object(session.tab(page).cdp, backend_id)
        point = _centre(session, page, backend_id)
        if point is None:
            raise ActionError(f"{_label(action)}: element [{action.element_id}] has no visible box to hover "
                              "over")
        page.mouse.move(*point)
    elif isinstance(action, TypeAction):
        _type(session, page, action, _backend_id(action.element_id, id_map, action), deadline, typing)
    elif isinstance(action, PressAction):
        keys = action.key_comb
        if "Meta" in keys and "Mac" not in page.evaluate("navigator.platform"):
            keys = keys.replace("Meta", "Control")
        _press(page, keys, deadline, action)
    elif isinstance(action, ScrollAction):
        page.evaluate(_SCROLL, 1 if action.direction == "down" else -1)
    elif isinstance(action, NewTabAction):
        session.new_tab()
    elif isinstance(action, TabFocusAction):
        pages = session.pages
        if not 0 <= action.index < len(pages):
            raise ActionError(f"{_label(action)}: there is no tab {action.index}; open tabs are "
                              f"0..{len(pages) - 1}")
        session.set_current(pages[action.index])
    elif isinstance(action, CloseTabAction):
        page.close()
        pages = session.pages
        if pages:
            session.set_current(pages[-1])
        else:
            session.new_tab()
    elif isinstance(action, GotoAction):
        _goto(session, page, action, deadline)
    elif isinstance(action, GoBackAction):
        page.go_back(wait_until="load", timeout=deadline.ms(session.config.navigation_timeout_ms))
    elif isinstance(action, GoForwardAction):
        page.go_forward(wait_until="load", timeout=deadline.ms(session.config.navigation_timeout_ms))
    else:  # pragma: no cover - the parser only makes the types above
        raise ActionError(f"unsupported action {action!r}")


def _backend_id(element_id: int, id_map: Mapping[int, int], action: Action) -> int:
    backend_id = id_map.get(element_id)
    if backend_id is None:
        raise ActionError(f"{_label(action)}: there is no element [{element_id}] in the current observation "
                          "(use an id shown in the accessibility tree)")
    return backend_id


def _object_id(cdp: CDPSession, backend_id: int) -> str:
    from playwright.sync_api import Error as PlaywrightError

    try:
        return cdp_send(cdp, "DOM.resolveNode", {"backendNodeId": backend_id})["object"]["objectId"]
    except PlaywrightError as exc:
        raise ActionError("the element is no longer on the page") from exc


def _call(cdp: CDPSession, object_id: str, function: str, *args: Any) -> Any:
    result = cdp_send(cdp, "Runtime.callFunctionOn", {
        "objectId": object_id, "functionDeclaration": function, "returnByValue": True,
        "arguments": [{"value": a} for a in args],
    })
    if "exceptionDetails" in result:
        raise ActionError(f"the page raised an error: {result['exceptionDetails'].get('text', '')}")
    return result.get("result", {}).get("value")


def _centre(session: BrowserSession, page: Page, backend_id: int) -> tuple[float, float] | None:
    """The centre of the element's visible box after scrolling it into view, or ``None`` if it has none."""
    from playwright.sync_api import Error as PlaywrightError

    cdp = session.tab(page).cdp
    try:
        cdp_send(cdp, "DOM.scrollIntoViewIfNeeded", {"backendNodeId": backend_id})
        quads = cdp_send(cdp, "DOM.getContentQuads", {"backendNodeId": backend_id})["quads"]
    except PlaywrightError as exc:
        if "No node" in str(exc) or "not found" in str(exc).lower():
            raise ActionError("the element is no longer on the page") from exc
        return None
    width, height = session.config.viewport_width, session.config.viewport_height
    for quad in quads:
        xs, ys = quad[0::2], quad[1::2]
        left, right = max(min(xs), 0.0), min(max(xs), float(width))
        top, bottom = max(min(ys), 0.0), min(max(ys), float(height))
        if right - left >= 1 and bottom - top >= 1:
            return (left + right) / 2, (top + bottom) / 2
    return None


def _live_object(cdp: CDPSession, backend_id: int) -> tuple[str, dict[str, Any]]:
    """The element's remote object id and state; :class:`ActionError` when it left the page."""
    object_id = _object_id(cdp, backend_id)
    state = _call(cdp, object_id, _NODE_STATE) or {}
    if not state.get("connected"):
        raise ActionError("the element is no longer on the page")
    return object_id, state


def _click(session: BrowserSession, page: Page, backend_id: int) -> None:
    cdp = session.tab(page).cdp
    object_id, state = _live_object(cdp, backend_id)
    point = None if state.get("option") else _centre(session, page, backend_id)
    if point is None:
        _call(cdp, object_id, _JS_CLICK)
    else:
        page.mouse.click(*point)


def _type(session: BrowserSession, page: Page, action: TypeAction, backend_id: int,
          deadline: Deadline, typing: str) -> None:
    cdp = session.tab(page).cdp
    object_id, _ = _live_object(cdp, backend_id)
    info = _call(cdp, object_id, _EDITABLE_KIND) or {}
    kind, what = info.get("kind"), info.get("what", "element")
    if kind in ("none", "disabled", "readonly"):
        reason = {"none": "is not a text field", "disabled": "is disabled", "readonly": "is read-only"}[kind]
        raise ActionError(f"{_label(action)}: element [{action.element_id}] ({what}) {reason}; type needs an "
                          "editable textbox, searchbox, combobox or text area")
    if kind == "select":
        options = _call(cdp, object_id, _SELECT_OPTION, action.text)
        if options is not None:
            shown = ", ".join(repr(o) for o in options[:20])
            raise ActionError(f"{_label(action)}: element [{action.element_id}] ({what}) has no option "
                              f"{action.text!r}; its options are {shown}")
        return
    point = _centre(session, page, backend_id)
    if point is not None:
        page.mouse.click(*point)
    _call(cdp, object_id, _FOCUS)
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")  # in both modes: the text then goes into fresh text nodes (same ids)
    if typing == "fill":  # as Playwright's fill: one insertion of the text
        for piece in _KEYED_CHARS.split(action.text):  # a newline is an Enter key, as in "keys" mode
            deadline.check(action)
            if piece in _KEYED_NAMES:
                page.keyboard.press(_KEYED_NAMES[piece])
            elif piece:
                page.keyboard.insert_text(piece)
    else:
        for start in range(0, len(action.text), _TYPE_CHUNK):  # key by key, as WebArena; checked per chunk
            deadline.check(action)
            page.keyboard.type(action.text[start:start + _TYPE_CHUNK])
    if action.press_enter:
        deadline.check(action)
        page.keyboard.press("Enter")


def _split_keys(key_comb: str) -> list[str]:
    """The keys of a combination as Playwright's ``keyboard.press`` splits them (``Shift++`` is Shift, +)."""
    keys, building = [], ""
    for char in key_comb:
        if char == "+" and building:
            keys.append(building)
            building = ""
        else:
            building += char
    keys.append(building)
    return keys


def _press(page: Page, key_comb: str, deadline: Deadline, action: Action) -> None:
    """``keyboard.press`` of a combination, one key at a time within the budget: every key goes down in
    order, then the keys held are released in reverse order (also when the action is cut off)."""
    held: list[str] = []
    try:
        for key in _split_keys(key_comb):
            deadline.check(action)
            page.keyboard.down(key)
            if key not in held:
                held.append(key)
    finally:
        for key in reversed(held):
            page.keyboard.up(key)


def _goto(session: BrowserSession, page: Page, action: GotoAction, deadline: Deadline) -> None:
    from playwright.sync_api import Error as PlaywrightError

    url = action.url
    if not urlsplit(url).scheme and not url.startswith("//") and page.url.startswith("http"):
        url = urljoin(page.url, url)
    refusal = session.policy.navigation_refusal(url)
    if refusal is not None:
        raise ActionError(f"{_label(action)}: {refusal}")
    try:
        page.goto(url, wait_until="load", timeout=deadline.ms(session.config.navigation_timeout_ms))
    except PlaywrightError as exc:
        session.check_alive()
        if deadline.expired():
            raise deadline.error(action) from exc
        raise ActionError(f"{_label(action)}: {_short(exc)}") from exc


def _follow_new_tab(session: BrowserSession, before: set[int], opener: Page, deadline: Deadline,
                    action: Action) -> None:
    """Make the tab the action opened (e.g. a ``target=_blank`` link) current, as WebArena does."""
    page = session.wait_for_new_page(before, opener, timeout_ms=deadline.ms(session.config.action_timeout_ms))
    if page is not None:
        session.set_current(page)
        page.wait_for_load_state("load", timeout=deadline.ms(session.config.navigation_timeout_ms))
        _settle(session, page, deadline, action)


def _raise_if_blocked(session: BrowserSession, action: Action, cause: Exception | None = None) -> None:
    """Report the navigations the origin policy refused during the action, once every tab that ended up on a
    refused URL has been taken back (:meth:`BrowserSession.contain_blocked`)."""
    urls = session.contain_blocked()
    if urls:
        shown = ", ".join(repr(u) for u in urls[:3])
        raise ActionError(f"{_label(action)}: navigation to {shown} was blocked: only the sites "
                          f"{session.policy.describe()} may be opened") from cause
