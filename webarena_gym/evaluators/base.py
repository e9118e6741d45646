"""The evaluator contract shared by every eval type.

An evaluator scores one finished episode. It receives an :class:`EvalContext` (the agent's final answer, the
live Playwright page and context at the end of the episode, the site URLs, the judge and the rule set) and
returns an :class:`EvalResult` with a score in [0, 1] and a JSON-serialisable ``details`` dict explaining it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from playwright.sync_api import BrowserContext, Page

    from webarena_gym.evaluators.judge import Judge
    from webarena_gym.tasks import SiteURLs

EvalRules = Literal["webarena", "webarena_lite"]
"""Which evaluator rules apply where WebArena and WebArena-Lite (VisualAgentBench) differ."""


@dataclass
class EvalContext:
    """Everything an evaluator may look at when an episode ends."""

    answer: str | None
    """The text of the final ``stop [answer]`` action, or ``None`` when the episode ended without one."""
    page: Page | None
    """The active page at the end of the episode (``None`` only in offline unit tests of string matching)."""
    context: BrowserContext | None
    """The browser context of the episode (for helpers that open extra pages)."""
    sites: SiteURLs
    """Base URLs of the sites, to resolve placeholders and reach helper endpoints."""
    judge: Judge | None = None
    """Judge for ``fuzzy_match`` and the N/A reason check; required only by tasks that need one."""
    rules: EvalRules = "webarena"
    """Rule set where WebArena and WebArena-Lite differ."""
    intent: str = ""
    """The task intent (the judge sees it)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form extras (e.g. the action history) for custom evaluators."""
    accounts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Site accounts for the ``func:`` helpers, in WebArena's ``ACCOUNTS`` shape, e.g.
    ``{"shopping_site_admin": {"username": ..., "password": ...}}``; missing ones use WebArena's defaults."""


@dataclass
class EvalResult:
    """A score in [0, 1] and a JSON-serialisable explanation."""

    score: float
    details: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Evaluator(Protocol):
    """Scores one finished episode."""

    def __call__(self, ctx: EvalContext) -> EvalResult: ...
