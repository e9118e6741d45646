"""Chromium through Playwright's sync API: one browser per env, launched lazily, one context per episode.

:class:`BrowserSession` owns the browser, the episode's context and its tabs. Every tab gets a CDP session
(for the accessibility tree and node geometry) that also tracks main-frame loading, so an action that starts a
navigation is followed by a wait for that navigation to finish instead of a fixed sleep.

The :class:`~webarena_gym.safety.OriginPolicy` holds at three levels: Chromium is launched with
:meth:`~webarena_gym.safety.OriginPolicy.chromium_args` (no host resolves and no connection goes anywhere
outside the allowed origins: redirect hops and Chromium's own services included); a context route aborts
the first hop of every other request (a refused navigation then leaves the tab where it was); and every
request the policy refuses is recorded, so that :meth:`BrowserSession.contain_blocked` can report it and take
a tab that ended up on a refused URL back to where it was.

A crashed browser is never hidden: calls on a dead browser raise :class:`~webarena_gym.errors.BrowserError`,
and :meth:`BrowserSession.new_episode` relaunches it within a bounded number of attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from webarena_gym.errors import BrowserError, SiteConfigError
from webarena_gym.safety import Origin, OriginPolicy

if TYPE_CHECKING:  # pragma: no cover
    from playwright.sync_api import (
        Browser,
        BrowserContext,
        CDPSession,
        Geolocation,
        Page,
        Playwright,
        Request,
        Route,
    )

__all__ = [
    "DEFAULT_CHROMIUM_ARGS", "BrowserConfig", "BrowserSession", "Tab", "cdp_send", "cdp_send_with_titles",
    "find_chromium", "pause", "shared_playwright",
    "page_titles", "resolve_storage_state",
]

log = logging.getLogger(__name__)

DEFAULT_CHROMIUM_ARGS: tuple[str, ...] = (
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage", "--disable-domain-reliability",
    "--disable-client-side-phishing-detection", "--no-pings", "--dns-prefetch-disable",
)
"""Flags for headless Chromium in containers and offline machines. The origin policy's network flags
(:meth:`~webarena_gym.safety.OriginPolicy.chromium_args`) come after them, then ``extra_args``."""

_COMMITTED_KEPT = 20

INSTALL_HINT = ("install Chromium (Debian: `apt-get install chromium`; or `playwright install chromium`) "
                "or point the WEBARENA_CHROMIUM environment variable at a Chromium executable")


@dataclass(frozen=True)
class BrowserConfig:
    """How the browser is launched and how long it may take."""

    headless: bool = True
    """Run without a window."""
    viewport_width: int = 1280
    """Viewport width in CSS pixels (WebArena: 1280)."""
    viewport_height: int = 720
    """Viewport height in CSS pixels (WebArena: 720)."""
    action_timeout_ms: int = 5_000
    """Limit for one page operation (click, type, evaluate)."""
    navigation_timeout_ms: int = 30_000
    """Limit for a navigation (goto, back, a click that loads a page) to finish loading."""
    executable_path: str | None = None
    """Chromium to launch; ``None`` finds one (see :func:`find_chromium`)."""
    args: tuple[str, ...] = DEFAULT_CHROMIUM_ARGS
    """Command-line flags always passed to Chromium."""
    extra_args: tuple[str, ...] = ()
    """More flags, appended to ``args`` and to the origin policy's network flags (of two flags of one name,
    Chromium takes the later: ``--proxy-server=...`` here replaces the policy's proxy that leads nowhere)."""
    launch_attempts: int = 2
    """How many times a launch (or relaunch after a crash) is tried before :class:`BrowserError`."""

    def __post_init__(self) -> None:
        for name in ("viewport_width", "viewport_height", "action_timeout_ms", "navigation_timeout_ms",
                     "launch_attempts"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"BrowserConfig.{name} must be a positive integer, got {value!r}")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "extra_args", tuple(self.extra_args))

    @classmethod
    def from_value(cls, value: BrowserConfig | Mapping[str, Any] | None) -> BrowserConfig:
        """A config from ``None`` (defaults), a mapping of field names, or a config (returned as is)."""
        if value is None:
            return cls()
        if isinstance(value, BrowserConfig):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"browser must be a BrowserConfig, a dict or None, got {type(value).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown BrowserConfig fields {unknown}; expected some of {sorted(known)}")
        return cls(**value)


def find_chromium(explicit: str | None = None, playwright: Playwright | None = None) -> str:
    """The Chromium executable to launch.

    Order: ``explicit``; the ``WEBARENA_CHROMIUM`` environment variable; a Playwright-managed Chromium if one
    is installed; ``chromium`` or ``chromium-browser`` on ``PATH``. Raises :class:`BrowserError` when none
    exists.
    """
    candidates = (("executable_path", explicit), ("WEBARENA_CHROMIUM", os.environ.get("WEBARENA_CHROMIUM")))
    for source, path in candidates:
        if path:
            if not Path(path).is_file():
                raise BrowserError(f"{source} points at {path!r}, which is not a file; {INSTALL_HINT}")
            return path
    if playwright is not None:
        managed = playwright.chromium.executable_path
        if managed and Path(managed).is_file():
            return managed
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise BrowserError(f"no Chromium found; {INSTALL_HINT}")


class _Driver:
    """The Playwright driver of the current thread, shared by reference count.

    Playwright's sync API allows one running instance per thread, so every session of a thread shares it; it
    stops when the last session releases it.
    """

    _local = threading.local()

    @classmethod
    def acquire(cls) -> Playwright:
        from playwright.sync_api import sync_playwright

        if getattr(cls._local, "count", 0) == 0:
            cls._local.playwright = sync_playwright().start()
            cls._local.count = 0
        cls._local.count += 1
        return cls._local.playwright

    @classmethod
    def release(cls) -> None:
        count = getattr(cls._local, "count", 0)
        if count <= 0:
            return
        cls._local.count = count - 1
        if cls._local.count == 0:
            playwright, cls._local.playwright = cls._local.playwright, None
            _quietly(playwright.stop)


@contextlib.contextmanager
def shared_playwright() -> Iterator[Playwright]:
    """The current thread's Playwright driver, shared with every :class:`BrowserSession` of the thread.

    Playwright's sync API refuses a second running instance in one thread, so code that drives its own
    browser beside an env (tests, evaluator helpers, scripts) must borrow this one instead of calling
    ``sync_playwright()`` itself.
    """
    playwright = _Driver.acquire()
    try:
        yield playwright
    finally:
        _Driver.release()


def cdp_send(cdp: CDPSession, method: str, params: Mapping[str, Any] | None = None, *,
             timeout_ms: float | None = None) -> dict[str, Any]:
    """``cdp.send(method, params)``, minus the sync wrapper's walk over the result.

    Playwright's sync ``CDPSession.send`` maps every object of the reply back to API objects, which costs
    ~100 ms of Python CPU for the 1 MB accessibility tree of a 2,000-node page (4x the JSON decoding itself).
    CDP replies hold plain JSON only, so the impl-level call is used when the installed Playwright has it;
    otherwise the public call.
    """
    impl, sync = getattr(cdp, "_impl_obj", None), getattr(cdp, "_sync", None)
    if impl is not None and sync is not None:
        try:
            return sync(impl.send(method, dict(params or {}), timeout_ms))
        except TypeError as exc:  # a Playwright whose impl signature differs: use the public API
            if "argument" not in str(exc):
                raise
    return cdp.send(method, dict(params or {}), timeout=timeout_ms)


def cdp_send_with_titles(cdp: CDPSession, calls: Sequence[tuple[str, Mapping[str, Any]]],
                         pages: Sequence[Page], *, timeout_ms: float | None = None,
                         ) -> tuple[list[dict[str, Any]], list[str]]:
    """The replies of several CDP calls on ``cdp`` and the titles of ``pages`` (as :func:`page_titles`), all
    sent at once: one overlapped round trip instead of one per call and per tab.

    A failed CDP call raises its Playwright error (after every call has finished); a title that cannot be
    read is empty. Without the impl-level API (see :func:`cdp_send`), the calls are made one by one.
    """
    from playwright.sync_api import Error as PlaywrightError

    impl, sync = getattr(cdp, "_impl_obj", None), getattr(cdp, "_sync", None)
    page_impls: list[Any] = [getattr(page, "_impl_obj", None) for page in pages]
    if impl is None or sync is None or any(p is None for p in page_impls):
        return [cdp_send(cdp, m, params, timeout_ms=timeout_ms) for m, params in calls], page_titles(pages)

    async def together() -> list[Any]:
        sends = [impl.send(method, dict(params), timeout_ms) for method, params in calls]
        return await asyncio.gather(*sends, *(p.title() for p in page_impls), return_exceptions=True)

    results = sync(together())
    replies, titles = results[:len(calls)], results[len(calls):]
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply
    for title in titles:
        if isinstance(title, BaseException) and not isinstance(title, PlaywrightError):
            raise title
    return list(replies), [t if isinstance(t, str) else "" for t in titles]


async def _local_pause(seconds: float) -> None:
    await asyncio.sleep(seconds)


def pause(page: Page, seconds: float) -> None:
    """Let Playwright deliver events for ``seconds`` without a call into its driver (``wait_for_timeout``
    is a round trip through the driver, whose CPU a polling loop takes from a page that is loading); the
    public ``wait_for_timeout`` where the impl-level API is missing."""
    sync = getattr(page, "_sync", None)
    if sync is None:
        page.wait_for_timeout(seconds * 1000)
        return
    sync(_local_pause(seconds))


def _quietly(fn: Any, *args: Any) -> None:
    """Call ``fn`` for cleanup, logging instead of raising (the thing it cleans may already be gone)."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        fn(*args)
    except (PlaywrightError, OSError, RuntimeError) as exc:
        log.debug("cleanup call %s failed: %s", getattr(fn, "__name__", fn), exc)


@dataclass
class Tab:
    """One open page and the CDP session that observes it."""

    page: Page
    cdp: CDPSession
    key: int
    """Episode-unique number of the tab (for element ids)."""
    main_frame_id: str
    document: int = 0
    """Counts main-frame documents committed in this tab."""
    loading: bool = False
    """Whether the main frame is loading (CDP ``frameStartedLoading`` .. ``frameStoppedLoading``)."""
    crashed: bool = False
    """Whether the tab's renderer crashed (Playwright's ``crash`` event)."""
    window_opens: int = 0
    """Counts ``window.open``/``target=_blank`` requests made by this tab (CDP ``Page.windowOpen``)."""
    committed: list[str] = field(default_factory=list)
    """The last URLs committed in the main frame, oldest first (error pages left out)."""
    shown_url: str = ""
    """The URL of the main frame's current document (an error page's: the URL it failed to load), from the
    frame tree when the tab was attached, then from each ``frameNavigated``."""

    def on_window_open(self, params: Mapping[str, Any]) -> None:
        self.window_opens += 1

    def on_crash(self, page: Page) -> None:
        self.crashed = True

    def on_started(self, params: Mapping[str, Any]) -> None:
        if params.get("frameId") == self.main_frame_id:
            self.loading = True

    def on_stopped(self, params: Mapping[str, Any]) -> None:
        if params.get("frameId") == self.main_frame_id:
            self.loading = False

    def on_navigated(self, params: Mapping[str, Any]) -> None:
        frame = params.get("frame") or {}
        if not frame.get("parentId"):
            self.main_frame_id = frame.get("id", self.main_frame_id)
            self.document += 1
            self.shown_url = str(frame.get("unreachableUrl") or frame.get("url", ""))
            if not frame.get("unreachableUrl"):
                self.committed = [*self.committed[-(_COMMITTED_KEPT - 1):], str(frame.get("url", ""))]


@dataclass
class BlockedRequest:
    """A request the origin policy stopped."""

    url: str
    navigation: bool
    page: Page | None = field(default=None, repr=False)
    """The tab whose main frame the request would have navigated (``None``: a sub-frame or a resource)."""


class BrowserSession:
    """One Chromium (launched lazily) and the current episode's context and tabs."""

    def __init__(self, config: BrowserConfig, policy: OriginPolicy) -> None:
        self.config = config
        self.policy = policy
        self.relaunches = 0
        """How many times a crashed browser was relaunched."""
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._launched_for: frozenset[Origin] = frozenset()
        """The origins the running browser's network flags allow."""
        self._probe: CDPSession | None = None
        self._context: BrowserContext | None = None
        self._tabs: dict[int, Tab] = {}
        self._tab_counter = 0
        self._current: Page | None = None
        self.blocked: list[BlockedRequest] = []
        """Requests blocked since the last :meth:`take_blocked`."""

    # ----- browser lifecycle -------------------------------------------------------------------------------
    @property
    def context(self) -> BrowserContext:
        if self._context is None:
            raise BrowserError("no episode is open: call reset() first")
        return self._context

    def browser_alive(self) -> bool:
        """Whether the browser process still answers (one cheap CDP round trip, which also lets Playwright
        deliver a pending disconnect event that ``is_connected`` alone would not see yet)."""
        from playwright.sync_api import Error as PlaywrightError

        if self._browser is None or self._probe is None or not self._browser.is_connected():
            return False
        try:
            cdp_send(self._probe, "Browser.getVersion", timeout_ms=self.config.action_timeout_ms)
        except PlaywrightError:
            return False
        return self._browser.is_connected()

    def _launch(self) -> None:
        from playwright.sync_api import Error as PlaywrightError

        last_error: Exception | None = None
        for attempt in range(self.config.launch_attempts):
            if self._playwright is None:
                self._playwright = _Driver.acquire()
            try:
                path = find_chromium(self.config.executable_path, self._playwright)
                self._browser = self._playwright.chromium.launch(
                    executable_path=path, headless=self.config.headless,
                    args=[*self.config.args, *self.policy.chromium_args(), *self.config.extra_args],
                    timeout=60_000,
                )
                self._launched_for = self.policy.origins
                self._probe = self._browser.new_browser_cdp_session()
                return
            except BrowserError:
                raise
            except PlaywrightError as exc:
                last_error = exc
                log.warning("Chromium launch attempt %d failed: %s", attempt + 1, exc)
                self._playwright = None  # the driver itself may be broken: get a fresh one
                _Driver.release()
        raise BrowserError(f"could not launch Chromium after {self.config.launch_attempts} attempts: "
                           f"{last_error}") from last_error

    def ensure_browser(self) -> bool:
        """Launch the browser if none runs (relaunch if it crashed, or if the origin policy changed since its
        launch: its network flags allow only the origins of then). Returns whether it launched one."""
        if self._browser is not None and self.browser_alive() and self._launched_for != self.policy.origins:
            log.info("the allowed origins changed; relaunching the browser with network flags for them")
            self._drop_context()
            _quietly(self._browser.close)
            self._browser = self._probe = None
        if self.browser_alive():
            return False
        if self._browser is not None:
            log.warning("the browser is gone (crashed or killed); relaunching it")
            self.relaunches += 1
            self._drop_context()
            _quietly(self._browser.close)
            self._browser = self._probe = None
        self._launch()
        return True

    def check_alive(self, *, probe: bool = True) -> None:
        """Raise :class:`BrowserError` if the browser or the current tab has crashed.

        ``probe=False`` skips the round trip of :meth:`browser_alive` and trusts what Playwright and the crash
        events already told (a browser that died unnoticed then fails the next call, whose error handling
        checks with the probe): for the check before every action."""
        connected = self._browser is not None and self._probe is not None and self._browser.is_connected()
        if not (self.browser_alive() if probe else connected):
            raise BrowserError("the browser process is gone (crashed or killed); call reset() to relaunch it")
        current = self._current
        tab = self._tabs.get(id(current)) if current is not None else None
        if current is not None and tab is not None and tab.crashed:
            raise BrowserError(f"the page {current.url!r} crashed; call reset() to start a new episode")

    def new_episode(self, *, storage_state: Path | None = None,
                    geolocation: Mapping[str, float] | None = None) -> None:
        """Close the previous episode's context and open a fresh one (relaunching a crashed browser)."""
        from playwright.sync_api import Error as PlaywrightError

        self.end_episode()
        for attempt in range(self.config.launch_attempts):
            self.ensure_browser()
            assert self._browser is not None
            try:
                self._context = self._browser.new_context(
                    viewport={"width": self.config.viewport_width, "height": self.config.viewport_height},
                    device_scale_factor=1, storage_state=str(storage_state) if storage_state else None,
                    # the task's own keys, as given (Playwright checks them)
                    geolocation=cast("Geolocation", dict(geolocation)) if geolocation else None,
                    accept_downloads=False,
                    service_workers="block",
                )
                break
            except PlaywrightError as exc:
                if self.browser_alive() or attempt + 1 == self.config.launch_attempts:
                    raise BrowserError(f"could not open a browser context: {exc}") from exc
        context = self.context
        context.set_default_timeout(self.config.action_timeout_ms)
        context.set_default_navigation_timeout(self.config.navigation_timeout_ms)
        context.on("request", self._record_refused)
        context.route(self.policy.blocked_url_pattern(), self._block)
        context.route_web_socket(self.policy.blocked_url_pattern(websocket=True), lambda ws: ws.close())

    def end_episode(self) -> None:
        """Close the current context, if any."""
        if self._context is not None:
            _quietly(self._context.close)
        self._drop_context()

    def _drop_context(self) -> None:
        self._context = None
        self._tabs.clear()
        self._current = None
        self.blocked.clear()

    def close(self) -> None:
        """Close everything; safe to call more than once."""
        self.end_episode()
        if self._browser is not None:
            _quietly(self._browser.close)
            self._browser = self._probe = None
        if self._playwright is not None:
            self._playwright = None
            _Driver.release()

    # ----- request blocking --------------------------------------------------------------------------------
    def _block(self, route: Route) -> None:
        """Abort the first hop of a refused request (recorded by :meth:`_record_refused`)."""
        request = route.request
        if self.policy.allows_request(request.url):
            route.fallback()
            return
        # "aborted" cancels a navigation without an error page: the tab stays where it was.
        route.abort("aborted" if request.is_navigation_request() else "blockedbyclient")

    def _record_refused(self, request: Request) -> None:
        """Record a request the policy refuses: a first hop (which the route aborts) or a redirect hop (which
        no route sees, and which the network flags send nowhere)."""
        from playwright.sync_api import Error as PlaywrightError

        if self.policy.allows_request(request.url):
            return
        navigation = request.is_navigation_request()
        page = None
        if navigation:
            try:
                frame = request.frame
            except PlaywrightError:  # a service worker's request has no frame
                frame = None
            page = frame.page if frame is not None and frame.parent_frame is None else None
        self.blocked.append(BlockedRequest(request.url, navigation, page))

    def take_blocked(self) -> list[BlockedRequest]:
        """The requests blocked since the last call."""
        blocked, self.blocked = self.blocked, []
        return blocked

    def contain_blocked(self) -> list[str]:
        """After an action: the navigations refused since the last :meth:`take_blocked`, with every tab that
        shows a URL the policy refuses (the error page of a refused redirect hop, say) taken back.

        When nothing was refused, a tab whose document is known to be allowed (:meth:`_shows_allowed`) costs
        no round trip; any other tab's history is read. A tab goes back to its last history entry on an
        allowed origin; a tab with none is closed when other tabs remain (a popup that only ever held the
        refused URL), else it gets ``about:blank``. Returns the refused URLs, first seen first (empty when
        nothing was refused).
        """
        from playwright.sync_api import Error as PlaywrightError

        blocked = [b for b in self.take_blocked() if b.navigation]
        targets = {id(b.page) for b in blocked if b.page is not None}
        urls = [b.url for b in blocked]
        for page in self.pages:
            if not blocked and self._shows_allowed(page):
                continue  # nothing was refused and its document is on an allowed origin: no history needed
            try:
                urls.extend(self._contain(page, id(page) in targets))
            except PlaywrightError as exc:
                self.check_alive()  # a dead browser is an error; a tab that closed meanwhile is not
                log.debug("taking tab %s back failed: %s", page.url, exc)
                if not page.is_closed():
                    _quietly(page.goto, "about:blank")
        return list(dict.fromkeys(urls))

    def _contain(self, page: Page, target: bool) -> list[str]:
        """Take ``page`` back if it shows a refused URL (returned); ``target``: a refused navigation was
        headed for its main frame."""
        if page.is_closed():
            return []
        if target:
            self.settle(page)  # the error page of a refused hop may still be committing
        entries, index = self._history(page)
        shown = entries[index]["url"] if entries else page.url
        if not self.policy.allows_page(shown):
            self._take_back(page, entries[:index])
            return [shown]
        if target and page.url == "about:blank" and len(self.pages) > 1:
            self._close_tab(page)  # a popup whose only navigation was refused
        return []

    def _shows_allowed(self, page: Page) -> bool:
        """Whether the tab's document is known, without a round trip, to be on an allowed origin: the tab is
        tracked and both Playwright's URL and the last committed document (:attr:`Tab.shown_url`) are
        allowed. Otherwise :meth:`_contain` reads the tab's history."""
        tracked = self._tabs.get(id(page))
        return (tracked is not None and tracked.page is page and not page.is_closed()
                and self.policy.allows_page(page.url) and self.policy.allows_page(tracked.shown_url))

    def _history(self, page: Page) -> tuple[list[dict[str, Any]], int]:
        """The tab's history entries and the index of the current one."""
        history = cdp_send(self.tab(page).cdp, "Page.getNavigationHistory",
                           timeout_ms=self.config.action_timeout_ms)
        return list(history.get("entries", [])), int(history.get("currentIndex", 0))

    def _take_back(self, page: Page, earlier: list[dict[str, Any]]) -> None:
        """Leave a refused URL: back to the last earlier allowed entry, else load the last allowed page the
        tab showed, else close the tab (or blank it when it is the only one)."""
        back = [e for e in earlier if e["url"] != "about:blank" and self.policy.allows_page(e["url"])]
        if back:
            cdp_send(self.tab(page).cdp, "Page.navigateToHistoryEntry", {"entryId": back[-1]["id"]},
                     timeout_ms=self.config.action_timeout_ms)
            self.settle(page)
            return
        seen = [u for u in self.tab(page).committed if u != "about:blank" and self.policy.allows_page(u)]
        if seen:  # the refused URL replaced the entry (location.replace): load the last allowed page again
            page.goto(seen[-1], wait_until="load")
            self.settle(page)
        elif len(self.pages) > 1:
            self._close_tab(page)
        else:
            page.goto("about:blank")

    def _close_tab(self, page: Page) -> None:
        opener = page.opener()
        page.close()
        pages = self.pages
        if self._current is page or self._current is None or self._current.is_closed():
            self.set_current(opener if opener is not None and not opener.is_closed() else pages[-1])

    # ----- tabs --------------------------------------------------------------------------------------------
    @property
    def pages(self) -> list[Page]:
        """Open tabs in opening order (WebArena's tab indices)."""
        return list(self.context.pages)

    @property
    def page(self) -> Page:
        """The current tab."""
        if self._current is None or self._current.is_closed():
            pages = self.pages
            self._current = pages[-1] if pages else self.context.new_page()
        return self._current

    def set_current(self, page: Page) -> None:
        """Make ``page`` the current tab and bring it to the front."""
        if page is not self._current:
            self._current = page
            page.bring_to_front()

    def new_tab(self) -> Page:
        """Open a blank tab and make it current."""
        page = self.context.new_page()
        self.tab(page)
        self._current = page
        return page

    def tab(self, page: Page) -> Tab:
        """The tracking state of ``page``, attached on first use."""
        tab = self._tabs.get(id(page))
        if tab is None or tab.page is not page:
            cdp = self.context.new_cdp_session(page)
            frame = cdp_send(cdp, "Page.getFrameTree")["frameTree"]["frame"]
            self._tab_counter += 1
            tab = Tab(page, cdp, self._tab_counter, frame["id"],
                      shown_url=str(frame.get("unreachableUrl") or frame.get("url", "")))
            cdp.on("Page.frameStartedLoading", tab.on_started)
            cdp.on("Page.frameStoppedLoading", tab.on_stopped)
            cdp.on("Page.frameNavigated", tab.on_navigated)
            cdp.on("Page.windowOpen", tab.on_window_open)
            cdp_send(cdp, "Page.enable")
            page.on("crash", tab.on_crash)
            self._tabs[id(page)] = tab
        return tab

    def open(self, url: str) -> Page:
        """Open ``url`` in a new tab (start URLs); the tab becomes current. Raises
        :class:`~webarena_gym.errors.SiteConfigError` when the site redirects the tab outside the allowed
        origins."""
        from playwright.sync_api import Error as PlaywrightError

        page = self.new_tab()
        self.take_blocked()
        try:
            page.goto(url, wait_until="load")
        except PlaywrightError:
            refused = [b.url for b in self.blocked if b.navigation and b.page is page]
            if not refused:
                raise
            self.contain_blocked()
            raise SiteConfigError(f"start URL {url!r} led to {refused[0]!r}, outside the allowed origins "
                                  f"({self.policy.describe()})") from None
        self.settle(page)
        return page

    # ----- waiting -----------------------------------------------------------------------------------------
    def settle(self, page: Page, *, timeout_ms: float | None = None) -> None:
        """Wait until a navigation started by the last action (if any) has finished loading.

        One round trip through the page's event loop makes sure the CDP loading events of anything the action
        started have arrived; then, while the main frame is loading, wait (bounded by the navigation timeout,
        or by ``timeout_ms`` when given: what is left of an action's budget).
        """
        from playwright.sync_api import Error as PlaywrightError

        if page.is_closed():
            return
        limit_ms = self.config.navigation_timeout_ms if timeout_ms is None else timeout_ms
        tab = self.tab(page)
        try:
            cdp_send(tab.cdp, "Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 0))",
                                                   "awaitPromise": True},
                     timeout_ms=min(self.config.action_timeout_ms, limit_ms))
        except PlaywrightError as exc:  # the document went away mid-call: a navigation committed
            log.debug("settle barrier interrupted: %s", exc)
        deadline = time.monotonic() + limit_ms / 1000
        while tab.loading and time.monotonic() < deadline and not page.is_closed():
            pause(page, 0.01)

    def wait_for_new_page(self, known: set[int], page: Page, *,
                          timeout_ms: float | None = None) -> Page | None:
        """A tab opened since ``known`` (ids of pages) was taken, waiting for it while ``page`` is still
        polled; ``None`` if none appears within the action timeout (or ``timeout_ms``)."""
        limit_ms = self.config.action_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + limit_ms / 1000
        while True:
            fresh = [p for p in self.pages if id(p) not in known]
            if fresh:
                return fresh[-1]
            if time.monotonic() >= deadline or page.is_closed():
                return None
            pause(page, 0.01)

    def screenshot(self) -> bytes:
        """PNG of the current tab's viewport."""
        return self.page.screenshot(type="png")


def resolve_storage_state(path: str, auth_dir: str | Path | None) -> Path:
    """Where a task's ``storage_state`` file is: under ``auth_dir`` by file name, else as written."""
    written = Path(path)
    candidate = Path(auth_dir) / written.name if auth_dir is not None else written
    if not candidate.is_file():
        where = f"in auth_dir {str(auth_dir)!r}" if auth_dir is not None else "in the working directory"
        raise SiteConfigError(
            f"storage state {path!r} not found {where} (looked for {str(candidate)!r}); log in to the site "
            "and save the state with context.storage_state(path=...) as WebArena's auto_login.py does, or "
            "pass auth_dir"
        )
    return candidate


def page_titles(pages: Sequence[Page]) -> list[str]:
    """Titles of the tabs (empty for a tab whose title cannot be read right now), one round trip each (see
    :func:`cdp_send_with_titles` for them all at once)."""
    from playwright.sync_api import Error as PlaywrightError

    titles = []
    for page in pages:
        try:
            titles.append(page.title())
        except PlaywrightError:
            titles.append("")
    return titles
