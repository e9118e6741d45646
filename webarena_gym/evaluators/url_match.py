"""``url_match``: the URL of the page the episode ended on against ``eval.reference_url``.

``reference_url`` may list alternatives joined by `` |OR| ``; placeholders are resolved with
``EvalContext.sites``. The rule (``url_note``) and its default differ between the rule sets:

``"webarena"`` (WebArena ``URLEvaluator``): default rule ``"GOLD in PRED"``. Each whole URL loses its
trailing slashes, and nothing else does: a "/" before ``?query`` stays, so the base of ``.../issues/?q=x`` is
``.../issues/``, not a substring of ``.../issues``. The base (``netloc + path``) of some reference must be a
substring of the page's base, and for every query key of the references (pooled over all alternatives, as
WebArena does) one of its reference values must be among the page's values for that key (``parse_qs``, so
percent-decoded). ``"EXACT"`` (unknown to WebArena, which raises) is accepted as an exact comparison of the
cleaned URLs.

``"webarena_lite"`` (VisualAgentBench ``URLExactEvaluator``): ``localhost`` is rewritten to ``127.0.0.1`` and
one trailing slash dropped; default rule ``"EXACT"`` (the page URL equals one of the references); ``"GOLD in
PRED"`` means some whole reference URL is a substring of the page URL.
"""

from __future__ import annotations

import collections
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from webarena_gym.errors import EvaluatorError, TaskConfigError
from webarena_gym.evaluators.base import EvalContext, EvalResult, EvalRules

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.tasks import TaskConfig


def _clean(url: str, rules: EvalRules) -> str:
    if rules == "webarena":
        return url.rstrip("/")
    url = url.replace("localhost", "127.0.0.1")
    return url[:-1] if url.endswith("/") else url


def _parse(url: str) -> tuple[str, dict[str, list[str]]]:
    """WebArena's base (``netloc + path``, kept as it is: only the whole URL lost its trailing slashes) and
    query of an already cleaned URL."""
    parsed = urllib.parse.urlparse(url)
    return parsed.netloc + parsed.path, urllib.parse.parse_qs(parsed.query)


def url_score(pred_url: str, ref_urls: list[str], url_note: str | None, rules: EvalRules) -> float:
    """The url_match score of ``pred_url`` against resolved reference URLs under ``rules``."""
    pred = _clean(pred_url, rules)
    refs = [_clean(u, rules) for u in ref_urls]
    rule = url_note or ("GOLD in PRED" if rules == "webarena" else "EXACT")
    if rule == "EXACT":
        return float(pred in refs)
    if rule != "GOLD in PRED":
        raise EvaluatorError(f"unknown url matching rule {rule!r}")
    if rules == "webarena_lite":
        return float(any(ref in pred for ref in refs))
    pred_base, pred_query = _parse(pred)
    ref_queries: dict[str, set[str]] = collections.defaultdict(set)
    bases = []
    for ref in refs:
        base, query = _parse(ref)
        bases.append(base)
        for key, values in query.items():
            ref_queries[key].update(values)
    base_score = float(any(base in pred_base for base in bases))
    query_score = 1.0
    for key, wanted in ref_queries.items():
        query_score *= float(any(v in pred_query.get(key, []) for v in wanted))
    return base_score * query_score


@dataclass
class UrlMatchEvaluator:
    """Scores the final page URL against the task's reference URL(s)."""

    task: TaskConfig

    def __post_init__(self) -> None:
        if not self.task.eval.reference_urls:
            raise TaskConfigError("url_match without reference_url", task_id=self.task.task_id)

    def __call__(self, ctx: EvalContext) -> EvalResult:
        if ctx.page is None:
            raise EvaluatorError(f"task {self.task.task_id}: url_match needs the episode's page")
        refs = [ctx.sites.resolve(u) for u in self.task.eval.reference_urls]
        pred = ctx.page.url
        score = url_score(pred, refs, self.task.eval.url_note, ctx.rules)
        return EvalResult(score=score, details={
            "eval_type": "url_match", "rules": ctx.rules, "url": pred, "reference_urls": refs,
            "url_note": self.task.eval.url_note, "score": score,
        })
