"""Task evaluators: ``string_match``, ``url_match``, ``program_html``, composed by product as in WebArena.

>>> evaluator = build_evaluator(task)
>>> ctx = EvalContext(answer="42", page=page, context=context, sites=sites, judge=OfflineJudge())
>>> result = evaluator(ctx)

Importing this package is light: no browser, no model, no network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webarena_gym.errors import EvaluatorError, TaskConfigError
from webarena_gym.evaluators.base import EvalContext, EvalResult, EvalRules, Evaluator
from webarena_gym.evaluators.judge import Judge, OfflineJudge, TransformersJudge
from webarena_gym.evaluators.program_html import ProgramHtmlEvaluator
from webarena_gym.evaluators.string_match import StringMatchEvaluator
from webarena_gym.evaluators.url_match import UrlMatchEvaluator

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.tasks import TaskConfig


@dataclass
class ProductEvaluator:
    """Runs every component evaluator and multiplies their scores (WebArena's ``EvaluatorComb``)."""

    task_id: int
    components: list[Evaluator] = field(default_factory=list)

    def __call__(self, ctx: EvalContext) -> EvalResult:
        if ctx.rules not in ("webarena", "webarena_lite"):
            raise EvaluatorError(f"unknown rule set {ctx.rules!r}; expected 'webarena' or 'webarena_lite'")
        score = 1.0
        parts: list[dict[str, Any]] = []
        details: dict[str, Any] = {"task_id": self.task_id, "rules": ctx.rules, "components": parts}
        for component in self.components:
            result = component(ctx)
            score *= result.score
            parts.append({"score": result.score, **result.details})
            if "judge" in result.details:
                details["judge"] = result.details["judge"]
        details["score"] = score
        return EvalResult(score=score, details=details)


def build_evaluator(task: TaskConfig, *, settle_s: float = 0.0, nav_timeout_ms: float = 30_000,
                    helper_timeout_s: float = 30.0) -> ProductEvaluator:
    """The evaluator of ``task``: one component per entry of ``eval.eval_types``, scores multiplied.

    ``settle_s``, ``nav_timeout_ms`` and ``helper_timeout_s`` tune ``program_html`` navigation and helper
    calls (WebArena waits 3 s after each program_html navigation: pass ``settle_s=3`` for real deployments).
    Raises :class:`TaskConfigError` for an eval type or ``func:`` helper outside the whitelist.
    """
    components: list[Evaluator] = []
    for eval_type in task.eval.eval_types:
        if eval_type == "string_match":
            components.append(StringMatchEvaluator(task))
        elif eval_type == "url_match":
            components.append(UrlMatchEvaluator(task))
        elif eval_type == "program_html":
            _check_helpers(task)
            components.append(ProgramHtmlEvaluator(task, settle_s=settle_s, nav_timeout_ms=nav_timeout_ms,
                                                   helper_timeout_s=helper_timeout_s))
        else:
            raise TaskConfigError(f"unknown eval type {eval_type!r}", task_id=task.task_id,
                                  field="eval.eval_types")
    return ProductEvaluator(task.task_id, components)


def _check_helpers(task: TaskConfig) -> None:
    """Every ``func:`` in the task is a parsed, whitelisted call (load_tasks guarantees it when loading)."""
    from webarena_gym.evaluators.helpers import HELPERS

    for i, check in enumerate(task.eval.program_html):
        pairs = (("url", check.url, check.url_call), ("locator", check.locator, check.locator_call))
        for name, text, call in pairs:
            if text.startswith("func:") and (call is None or call.name not in HELPERS):
                raise TaskConfigError(f"func: helper {text!r} is not a parsed whitelisted call",
                                      task_id=task.task_id, field=f"eval.program_html[{i}].{name}")


def answer_accepted(task: TaskConfig, answer: str, sites: Any, judge: Judge | None = None,
                    rules: EvalRules = "webarena") -> bool:
    """Whether ``stop [answer]`` satisfies ``task``'s answer: its ``string_match`` evaluator scores it 1
    (``judge``: for ``fuzzy_match``, default :class:`OfflineJudge`), or the task is not scored by its answer
    (then any answer is). No page is needed: only the answer is checked, not the page state."""
    if "string_match" not in task.eval.eval_types:
        return True
    ctx = EvalContext(answer=answer, page=None, context=None, sites=sites, judge=judge or OfflineJudge(),
                      rules=rules, intent=task.intent)
    return StringMatchEvaluator(task)(ctx).score >= 1.0


__all__ = [
    "EvalContext",
    "EvalResult",
    "EvalRules",
    "Evaluator",
    "Judge",
    "OfflineJudge",
    "ProductEvaluator",
    "ProgramHtmlEvaluator",
    "StringMatchEvaluator",
    "TransformersJudge",
    "UrlMatchEvaluator",
    "answer_accepted",
    "build_evaluator",
]
