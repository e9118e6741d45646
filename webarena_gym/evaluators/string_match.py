"""``string_match``: the agent's final answer against ``eval.reference_answers``.

Follows WebArena's ``StringEvaluator`` (``evaluation_harness/evaluators.py``). Where WebArena-Lite
(VisualAgentBench ``VAB-WebArena-Lite/new/evaluators.py``) differs, ``EvalContext.rules`` selects the
behaviour:

- ``clean_answer``: ``"webarena"`` strips whitespace, then one pair of surrounding quotes, and lowercases;
  ``"webarena_lite"`` does the same without the whitespace strip.
- ``must_include`` single-token rule: ``"webarena"`` matches the reference against the answer's word tokens
  only when the reference list has ONE item and the cleaned reference is ONE CHARACTER (WebArena tests
  ``len(clean_ref) == 1``, e.g. "0"); ``"webarena_lite"`` does so whenever the reference is a single word
  token ("yjlou", "2"), and also matches the pieces of any answer token that contains "/" ("primer/design"
  gives "design"); otherwise both test substrings. Word tokens are nltk's ``word_tokenize``, as in both.
- `` |OR| `` inside a ``must_include`` item: literal text under ``"webarena"``; alternatives (any suffices)
  under ``"webarena_lite"``.
- ``fuzzy_match`` list: ``"webarena"`` asks the judge once per reference and multiplies; ``"webarena_lite"``
  asks once with the references joined by ``", "``.

Shared: ``exact_match`` compares cleaned strings; ``fuzzy_match: "N/A"`` scores 1 for an exact ``N/A`` answer
and otherwise asks the judge whether the answer's reason matches ``eval.string_note`` (``llm_ua_match``); that
score *replaces* the running product, as in WebArena. Approaches apply in file order.

Deviations from both: an episode without ``stop`` is scored with answer ``""`` (WebArena appends an empty stop
action); an empty answer against a non-empty fuzzy reference scores 0 without a judge call (as WebArena's
later code does); ``word_tokenize`` runs on the whole answer (``preserve_line=True``: nltk's punkt sentence
splitter needs downloaded data), so a period that ends a sentence inside the answer stays on its token
("2. Then" gives "2.", where the official code's punkt split may give "2", ".").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webarena_gym.errors import EvaluatorError, TaskConfigError
from webarena_gym.evaluators.base import EvalContext, EvalResult, EvalRules

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.evaluators.judge import Judge
    from webarena_gym.tasks import ReferenceAnswers, TaskConfig

OR_SEP = " |OR| "


def word_tokenize(text: str) -> list[str]:
    """nltk's ``word_tokenize`` of ``text`` as one line (no sentence split, so no data download)."""
    from nltk.tokenize import word_tokenize as nltk_word_tokenize  # imported on first use: nltk is slow

    return nltk_word_tokenize(text, preserve_line=True)


def answer_tokens(text: str, rules: EvalRules) -> list[str]:
    """The tokens a single-token reference is looked up in: word tokens, plus (WebArena-Lite) the pieces of
    every token that contains "/"."""
    tokens = word_tokenize(text)
    if rules == "webarena_lite":
        tokens += [piece for token in tokens if "/" in token for piece in token.split("/")]
    return tokens


def clean_answer(answer: str, rules: EvalRules = "webarena") -> str:
    """Strip (WebArena only) whitespace, one pair of surrounding quotes, and lowercase."""
    if rules == "webarena":
        answer = answer.strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "'\"":
        answer = answer[1:-1]
    elif answer in ("'", '"'):  # WebArena's startswith/endswith on a lone quote gives ""
        answer = ""
    return answer.lower()


def exact_match(ref: str, pred: str, rules: EvalRules = "webarena") -> float:
    """1.0 when the cleaned strings are equal."""
    return float(clean_answer(pred, rules) == clean_answer(ref, rules))


def must_include(ref: str, pred: str, *, tokenize: bool, rules: EvalRules = "webarena") -> float:
    """1.0 when the cleaned ``ref`` occurs in the cleaned ``pred``, as a whole token when the single-token
    rule applies (``tokenize`` is WebArena's "the list has one item" flag; ignored under the Lite rules)."""
    clean_ref = clean_answer(ref, rules)
    clean_pred = clean_answer(pred, rules)
    if rules == "webarena":
        single = tokenize and len(clean_ref) == 1 and len(word_tokenize(clean_ref)) == 1
    else:
        single = len(word_tokenize(clean_ref)) == 1
    if single:
        return float(clean_ref in answer_tokens(clean_pred, rules))
    return float(clean_ref in clean_pred)


def require_judge(ctx: EvalContext, task_id: int, what: str) -> Judge:
    """The context's judge, or an :class:`EvaluatorError` saying which task needs one for what."""
    if ctx.judge is None:
        raise EvaluatorError(f"task {task_id}: {what} needs a judge (EvalContext.judge); pass a "
                             "TransformersJudge, or OfflineJudge for a labelled lexical fallback")
    return ctx.judge


def judge_fuzzy(ctx: EvalContext, task_id: int, refs: tuple[str, ...], pred: str, question: str,
                details: dict[str, Any]) -> float:
    """fuzzy_match of ``pred`` against ``refs`` by the rule set (product per item, or one joined call)."""
    to_judge = list(refs) if ctx.rules == "webarena" else [", ".join(refs)]
    score = 1.0
    for ref in to_judge:
        if not pred:
            item = float(not ref)
        else:
            judge = require_judge(ctx, task_id, "fuzzy_match")
            details["judge"] = judge.name
            item = float(judge.fuzzy_match(pred, ref, question))
        details.setdefault("fuzzy_match", []).append({"reference": ref, "score": item})
        score *= item
    return score


@dataclass
class StringMatchEvaluator:
    """Scores the final answer against the task's reference answers."""

    task: TaskConfig

    def __post_init__(self) -> None:
        if self.task.eval.reference_answers is None:
            raise TaskConfigError("string_match without reference_answers", task_id=self.task.task_id)

    def __call__(self, ctx: EvalContext) -> EvalResult:
        answers: ReferenceAnswers = self.task.eval.reference_answers  # type: ignore[assignment]
        rules = ctx.rules
        resolve = ctx.sites.resolve
        pred = clean_answer(ctx.answer or "", rules)
        question = ctx.intent or self.task.intent
        details: dict[str, Any] = {"eval_type": "string_match", "rules": rules, "pred": pred}
        score = 1.0
        for approach in answers.order:
            if approach == "exact_match" and answers.exact_match is not None:
                item = exact_match(resolve(answers.exact_match), pred, rules)
                details["exact_match"] = item
                score *= item
            elif approach == "must_include" and answers.must_include is not None:
                items = []
                for value in answers.must_include:
                    alternatives = [value] if rules == "webarena" else value.split(OR_SEP)
                    item = float(any(
                        must_include(resolve(alt), pred, tokenize=len(answers.must_include) == 1, rules=rules)
                        for alt in alternatives
                    ))
                    items.append({"reference": value, "score": item})
                    score *= item
                details["must_include"] = items
            elif approach == "fuzzy_match" and answers.fuzzy_na:
                score *= exact_match("N/A", pred, rules)
                details["na_exact"] = score
                if score != 1:
                    judge = require_judge(ctx, self.task.task_id, "the N/A reason check")
                    details["judge"] = judge.name
                    reason = self.task.eval.string_note or ""
                    score = float(judge.na_reason(pred, reason, question))
                    details["na_reason"] = score
            elif approach == "fuzzy_match" and answers.fuzzy_match is not None:
                refs = tuple(resolve(r) for r in answers.fuzzy_match)
                score *= judge_fuzzy(ctx, self.task.task_id, refs, pred, question, details)
        return EvalResult(score=score, details=details)
