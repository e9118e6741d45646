"""``program_html``: check page contents after the episode, WebArena's ``HTMLContentEvaluator``.

For each check, in order, on the episode's page: navigate to ``url`` (``"last"`` = stay where the episode
ended; a ``func:`` URL is computed by a whitelisted helper, e.g. ``reddit_get_post_url('__last_url__')``);
select content with ``locator`` (``""`` = ``page.content()``; a JS expression is evaluated *inside the page*
as ``() => <locator>``, after the optional ``prep_actions``; a ``func:`` locator runs a helper); then test
``required_contents``. Scores multiply. JS from task files only ever runs in the browser page; nothing is
eval'd in Python.

Rule differences (``EvalContext.rules``):

- ``"webarena"``: the selected text is ``html.unescape``d; ``must_include`` is a plain substring test
  (WebArena passes ``tokenize=False`` here); ``required_contents.fuzzy_match`` does not exist in WebArena and
  is judged like string_match's fuzzy_match (one judge call per item, product).
- ``"webarena_lite"``: no ``html.unescape``; ``must_include`` uses string_match's Lite rule (a single-word
  reference must be a word token of the text or a piece of one that contains "/": ``Costco/Waterfront``
  includes "Costco"); ``fuzzy_match`` items are joined with ``", "`` into one judge call.
- both: `` |OR| `` alternatives in ``must_include`` items; a JS locator that throws in the page selects
  ``""`` (the page is wrong: the agent's fault); ``prep_actions`` stop at the first that throws, silently.

Deviations: WebArena sleeps 3 s after each navigation; here the navigation waits for ``load`` and then
``settle_s`` (default 0; use ~3 for real WebArena deployments whose pages render client-side). A navigation
failure, a closed page or a failing helper raises :class:`EvaluatorError` instead of scoring 0. When several
``required_contents`` kinds are given all are checked (WebArena checks only the first of exact/must_include).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webarena_gym.errors import EvaluatorError, TaskConfigError
from webarena_gym.evaluators.base import EvalContext, EvalResult
from webarena_gym.evaluators.helpers import HelperEnv, run_helper
from webarena_gym.evaluators.string_match import OR_SEP, exact_match, judge_fuzzy, must_include

if TYPE_CHECKING:  # pragma: no cover
    from playwright.sync_api import Page

    from webarena_gym.tasks import ProgramHtmlCheck, TaskConfig

_CLOSED_MARKERS = ("has been closed", "Target closed", "Browser closed", "Connection closed")


def _is_browser_failure(page: Page, exc: Exception) -> bool:
    return page.is_closed() or any(marker in str(exc) for marker in _CLOSED_MARKERS)


@dataclass
class ProgramHtmlEvaluator:
    """Scores page contents against the task's ``program_html`` checks."""

    task: TaskConfig
    settle_s: float = 0.0
    """Extra wait after each navigation (WebArena sleeps 3 s)."""
    nav_timeout_ms: float = 30_000
    helper_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.task.eval.program_html:
            raise TaskConfigError("program_html without checks", task_id=self.task.task_id)

    def _helper_env(self, ctx: EvalContext) -> HelperEnv:
        return HelperEnv(page=ctx.page, sites=ctx.sites, accounts=ctx.accounts,
                         timeout_s=self.helper_timeout_s)

    def _navigate(self, page: Page, check: ProgramHtmlCheck, ctx: EvalContext) -> str:
        if check.url_call is not None:
            target = run_helper(check.url_call, self._helper_env(ctx))
        elif check.url == "last":
            return page.url
        else:
            target = ctx.sites.resolve(check.url)
        from playwright.sync_api import Error as PlaywrightError

        try:
            page.goto(target, timeout=self.nav_timeout_ms, wait_until="load")
            if self.settle_s > 0:
                page.wait_for_timeout(self.settle_s * 1000)
        except PlaywrightError as exc:
            raise EvaluatorError(
                f"task {self.task.task_id}: cannot open {target!r} for program_html: {exc}"
            ) from exc
        return target

    def _select(self, page: Page, check: ProgramHtmlCheck, ctx: EvalContext) -> str:
        if check.locator_call is not None:
            return str(run_helper(check.locator_call, self._helper_env(ctx)))
        if not check.locator.strip():
            return page.content()
        from playwright.sync_api import Error as PlaywrightError

        for prep in check.prep_actions:
            try:
                page.evaluate(f"() => {ctx.sites.resolve(prep)}")
            except PlaywrightError as exc:
                if _is_browser_failure(page, exc):
                    raise EvaluatorError(
                        f"task {self.task.task_id}: browser failed in prep_actions: {exc}"
                    ) from exc
                break
        try:
            return str(page.evaluate(f"() => {ctx.sites.resolve(check.locator)}"))
        except PlaywrightError as exc:
            if _is_browser_failure(page, exc):
                raise EvaluatorError(
                    f"task {self.task.task_id}: browser failed in the locator: {exc}"
                ) from exc
            return ""

    def __call__(self, ctx: EvalContext) -> EvalResult:
        page = ctx.page
        if page is None:
            raise EvaluatorError(f"task {self.task.task_id}: program_html needs the episode's page")
        rules = ctx.rules
        resolve = ctx.sites.resolve
        question = ctx.intent or self.task.intent
        score = 1.0
        reports: list[dict[str, Any]] = []
        details: dict[str, Any] = {"eval_type": "program_html", "rules": rules, "checks": reports}
        for check in self.task.eval.program_html:
            url = self._navigate(page, check, ctx)
            selected = self._select(page, check, ctx)
            if rules == "webarena":
                selected = html.unescape(selected)
            report: dict[str, Any] = {"url": url, "locator": check.locator, "selected": selected[:500]}
            item = 1.0
            required = check.required_contents
            if required.exact_match is not None:
                report["exact_match"] = exact_match(resolve(required.exact_match), selected, rules)
                item *= report["exact_match"]
            if required.must_include is not None:
                scores = []
                for value in required.must_include:
                    alternatives = [resolve(alt) for alt in value.split(OR_SEP)]
                    scores.append(float(any(must_include(alt, selected, tokenize=False, rules=rules)
                                            for alt in alternatives)))
                report["must_include"] = scores
                for s in scores:
                    item *= s
            if required.fuzzy_match is not None:
                refs = tuple(resolve(r) for r in required.fuzzy_match)
                item *= judge_fuzzy(ctx, self.task.task_id, refs, selected, question, report)
                if "judge" in report:
                    details["judge"] = report["judge"]
            report["score"] = item
            reports.append(report)
            score *= item
        details["score"] = score
        return EvalResult(score=score, details=details)
