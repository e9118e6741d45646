"""Judges for ``fuzzy_match`` and the N/A reason check.

WebArena asks GPT-4 (``llm_fuzzy_match`` / ``llm_ua_match`` in ``evaluation_harness/helper_functions.py``).
Here the judge is pluggable (:class:`Judge`): :class:`TransformersJudge` prompts any transformers causal LM
with WebArena's prompts (the local policy model included), and :class:`OfflineJudge` is a deterministic
fallback that needs no model and says so in every result (``details["judge"] == "offline-fallback"``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

FUZZY_SYSTEM = "You are a helpful assistant"


def fuzzy_prompt(pred: str, reference: str, question: str) -> str:
    """WebArena's ``llm_fuzzy_match`` user message."""
    return (
        "Help a teacher to grade the answer of a student given a question. Keep in mind that the student "
        "may use different phrasing or wording to answer the question. The goal is to evaluate whether the "
        "answer is semantically equivalent to the reference answer.\n"
        f"question: {question}\n"
        f"reference answer: {reference}\n"
        "all the string 'N/A' that you see is a special sequence that means 'not achievable'\n"
        f"student answer: {pred}\n"
        "Conclude the judgement by correct/incorrect/partially correct."
    )


def na_reason_prompt(pred: str, reference_reason: str, question: str) -> str:
    """WebArena's ``llm_ua_match`` user message."""
    return (
        f"task: {question}\n"
        f"actual unachievable reason: {reference_reason}\n"
        f"reported unachievable reason: {pred}\n"
        "The task described above is inherently unachievable due to the reason specified under 'actual "
        "unachievable reason'. An individual previously attempted this task and was unable to complete it. "
        "They provided a reason for their failure, which is listed under 'reported unachievable reason'. "
        "Your role is to review both the actual and reported reasons. Determine if the reported reason "
        "aligns with the actual reason, even if implicitly. If the stated reason is in line with the actual "
        "reason, respond with 'same'. Otherwise, respond with 'different'."
    )


def parse_fuzzy_verdict(response: str) -> float | None:
    """WebArena's parse: "partially correct" or "incorrect" -> 0, else "correct" -> 1; ``None`` if neither
    appears (WebArena asserts there)."""
    text = response.lower()
    if "partially correct" in text or "incorrect" in text:
        return 0.0
    if "correct" in text:
        return 1.0
    return None


def parse_na_verdict(response: str) -> float | None:
    """WebArena's parse: "different" -> 0, else "same" -> 1; ``None`` if neither appears."""
    text = response.lower()
    if "different" in text:
        return 0.0
    if "same" in text:
        return 1.0
    return None


@runtime_checkable
class Judge(Protocol):
    """Scores free-text answers in [0, 1]. ``name`` is recorded in evaluation details."""

    name: str

    def fuzzy_match(self, pred: str, reference: str, question: str) -> float:
        """Is ``pred`` semantically equivalent to ``reference`` as an answer to ``question``?"""
        ...

    def na_reason(self, pred: str, reference_reason: str, question: str) -> float:
        """Does the reported reason ``pred`` match why the task ``question`` is unachievable?"""
        ...


class TransformersJudge:
    """Any transformers causal LM as judge, prompted like WebArena's GPT-4 judge, decoded greedily.

    Built from a model that is already loaded (this package loads no model and never imports ``es_agent``):
    ``TransformersJudge(*es_agent.load_model("embedded"))``.

    An unparseable reply scores 0 (WebArena asserts instead); the last reply is kept in ``last_response``.
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_new_tokens: int = 16,
                 generate_kwargs: Mapping[str, Any] | None = None, name: str | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.generate_kwargs = dict(generate_kwargs or {})
        model_name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        self.name = name or f"transformers:{model_name}"
        self.last_response: str | None = None

    def complete(self, user_message: str) -> str:
        """The model's greedy reply to WebArena's two-message chat (system + user)."""
        import torch

        messages = [{"role": "system", "content": FUZZY_SYSTEM}, {"role": "user", "content": user_message}]
        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        inputs = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        device = getattr(self.model, "device", None)
        if device is not None:
            inputs = {k: v.to(device) for k, v in inputs.items()}
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = self.tokenizer.eos_token_id
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens, "do_sample": False, "pad_token_id": pad_id,
        }
        kwargs.update(self.generate_kwargs)
        with torch.no_grad():
            output = self.model.generate(**inputs, **kwargs)
        new_tokens = output[0, inputs["input_ids"].shape[1]:]
        self.last_response = self.tokenizer.decode(new_tokens, skip_special_tokens=True)
        return self.last_response

    def fuzzy_match(self, pred: str, reference: str, question: str) -> float:
        return parse_fuzzy_verdict(self.complete(fuzzy_prompt(pred, reference, question))) or 0.0

    def na_reason(self, pred: str, reference_reason: str, question: str) -> float:
        return parse_na_verdict(self.complete(na_reason_prompt(pred, reference_reason, question))) or 0.0


_WORD_RE = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_STOPWORDS = frozenset({
    "a", "an", "the", "of", "to", "in", "on", "for", "and", "or", "is", "are", "was", "were", "be", "been",
    "it", "its", "this", "that", "there", "no", "not", "n", "any", "by", "with", "at", "as", "from", "has",
    "have", "does", "do",
})


def _content_tokens(text: str) -> list[str]:
    return [t for t in _WORD_RE.findall(text.lower()) if t not in _STOPWORDS]


class OfflineJudge:
    """A deterministic, model-free FALLBACK judge: lexical similarity, not semantic judgement.

    ``fuzzy_match`` is 1 when the reference's content words all occur in the prediction, or when difflib's
    ratio of the normalised strings reaches ``threshold``; ``na_reason`` is 1 when at least ``na_threshold``
    of the reason's content words occur in the prediction. Results are reported with
    ``judge = "offline-fallback"``.
    """

    name = "offline-fallback"

    def __init__(self, threshold: float = 0.8, na_threshold: float = 0.5) -> None:
        if not (0.0 < threshold <= 1.0 and 0.0 < na_threshold <= 1.0):
            raise ValueError(f"thresholds must be in (0, 1], got {threshold!r}, {na_threshold!r}")
        self.threshold = threshold
        self.na_threshold = na_threshold

    @staticmethod
    def _recall(pred: str, reference: str) -> float:
        ref = _content_tokens(reference)
        if not ref:
            return 0.0
        have = set(_content_tokens(pred))
        return sum(t in have for t in ref) / len(ref)

    def fuzzy_match(self, pred: str, reference: str, question: str) -> float:
        norm_pred = " ".join(_WORD_RE.findall(pred.lower()))
        norm_ref = " ".join(_WORD_RE.findall(reference.lower()))
        if not norm_ref:
            return float(norm_pred == norm_ref)
        ratio = difflib.SequenceMatcher(None, norm_pred, norm_ref).ratio()
        return float(self._recall(pred, reference) == 1.0 or ratio >= self.threshold)

    def na_reason(self, pred: str, reference_reason: str, question: str) -> float:
        return float(self._recall(pred, reference_reason) >= self.na_threshold)
