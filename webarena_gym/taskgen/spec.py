"""Building blocks of the task templates: templates and instances, reference-solution steps, eval blocks.

A :class:`Template` is one WebArena intent template (``intent_template`` with ``{{name}}`` slots) plus a
function that lists every instance the seeded world supports, each with its instantiation values, its eval
block (reference answers computed from :class:`~webarena_gym.sites.data.SiteData`) and its scripted reference
solution. Solution steps name their target elements by accessibility role and name (see
:mod:`webarena_gym.reference`), never by element id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.sites.data import SiteData

Step = dict[str, Any]
"""One reference-solution step, e.g. ``{"action": "click", "target": {"role": "link", "name": "Orders"}}``."""

EVAL_KINDS = ("string_match", "url_match", "program_html", "string_match (N/A)")
"""Eval kinds of the templates (for summaries): the N/A kind is string_match with ``fuzzy_match: "N/A"``."""


# ------------------------------------------------------------------------------------------- solution steps


def target(role: str, name: str, nth: int = 0) -> dict[str, Any]:
    """An element named by role and accessible name; ``nth`` picks among equal matches (0 = first)."""
    found: dict[str, Any] = {"role": role, "name": name}
    if nth:
        found["nth"] = nth
    return found


def click(role: str, name: str, nth: int = 0) -> Step:
    """Click the element."""
    return {"action": "click", "target": target(role, name, nth)}


def type_(role: str, name: str, text: str, *, enter: bool = False, nth: int = 0) -> Step:
    """Type ``text`` into the element (a ``<select>`` gets the option of that label); Enter if ``enter``."""
    return {"action": "type", "target": target(role, name, nth), "text": text, "enter": enter}


def select(name: str, option: str) -> Step:
    """Choose ``option`` in the combobox (``<select>``) named ``name``."""
    return type_("combobox", name, option)


def tab_focus(index: int) -> Step:
    """Switch to tab ``index``."""
    return {"action": "tab_focus", "index": index}


def goto(url: str) -> Step:
    """Open a URL (placeholders allowed); only where a person would type it."""
    return {"action": "goto", "url": url}


def stop(answer: str = "") -> Step:
    """End the episode with ``answer``."""
    return {"action": "stop", "answer": answer}


# ------------------------------------------------------------------------------------------------ eval blocks


def _eval(
    types: Sequence[str],
    *,
    answers: dict[str, Any] | None = None,
    url: str = "",
    checks: Sequence[dict[str, Any]] = (),
    note: str = "",
    raw: str = "",
) -> dict[str, Any]:
    block: dict[str, Any] = {
        "eval_types": list(types),
        "reference_answers": answers,
        "reference_url": url,
        "program_html": list(checks),
    }
    if "url_match" in types:
        block["url_note"] = "GOLD in PRED"
    block["string_note"] = note
    block["reference_answer_raw_annotation"] = raw
    return block


def exact_answer(answer: str) -> dict[str, Any]:
    """string_match: the answer must equal ``answer`` (case-insensitive, surrounding quotes ignored)."""
    return _eval(["string_match"], answers={"exact_match": answer}, raw=answer)


def must_include_answer(*items: str, raw: str | None = None) -> dict[str, Any]:
    """string_match: the answer must contain every item."""
    return _eval(["string_match"], answers={"must_include": list(items)}, raw=raw or ", ".join(items))


def na_answer(note: str) -> dict[str, Any]:
    """string_match for an unachievable task: ``N/A`` (or, with a judge, a reason matching ``note``)."""
    return _eval(["string_match"], answers={"fuzzy_match": "N/A"}, note=note, raw="N/A")


def url_answer(*urls: str) -> dict[str, Any]:
    """url_match (``GOLD in PRED``) against one or more reference URLs (alternatives)."""
    return _eval(["url_match"], url=" |OR| ".join(urls))


def html_check(
    url: str, locator: str, *, exact: str | None = None, must: Sequence[str] | None = None
) -> dict[str, Any]:
    """One program_html check: open ``url``, select with ``locator``, require ``exact`` / ``must``."""
    required: dict[str, Any] = {}
    if exact is not None:
        required["exact_match"] = exact
    if must is not None:
        required["must_include"] = list(must)
    if not required:
        raise ValueError("a program_html check needs exact or must")
    return {"url": url, "locator": locator, "required_contents": required}


def html_answer(*checks: dict[str, Any]) -> dict[str, Any]:
    """program_html with the given checks (all must pass)."""
    return _eval(["program_html"], checks=checks)


# ------------------------------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class Instance:
    """One instantiation of a template: slot values, the eval block and the reference solution."""

    values: Mapping[str, Any]
    eval: dict[str, Any]
    solution: tuple[Step, ...]

    def __post_init__(self) -> None:
        if not self.solution or self.solution[-1].get("action") != "stop":
            raise ValueError(f"a reference solution must end with a stop step, got {self.solution!r:.200}")


InstanceFn = Callable[["SiteData"], list[Instance]]


@dataclass(frozen=True)
class Template:
    """A WebArena intent template over the embedded world."""

    template_id: int
    """``intent_template_id`` of its tasks (unique; 100s shop, 200s admin, 300s forum, 400s cross-site,
    500s unachievable)."""
    slug: str
    """Short name for tables and logs."""
    sites: tuple[str, ...]
    """WebArena site keys the tasks use."""
    intent_template: str
    """The intent with ``{{name}}`` slots."""
    start_url: str
    """Start URL(s), with placeholders; `` |AND| `` opens several tabs."""
    kind: str
    """One of :data:`EVAL_KINDS`."""
    instances: InstanceFn = field(repr=False, compare=False)
    """Every instance the seeded world supports, in a deterministic order."""
    unseen: bool = False
    """Template held out of training: all its tasks go to ``test_unseen``."""
    state_changing: bool = False
    """Solving a task changes site state (WebArena's ``require_reset``)."""

    def __post_init__(self) -> None:
        if self.kind not in EVAL_KINDS:
            raise ValueError(f"template {self.slug}: kind must be one of {EVAL_KINDS}, got {self.kind!r}")

    def intent(self, values: Mapping[str, Any]) -> str:
        """The intent of an instance: each ``{{name}}`` replaced by its value, as WebArena does."""
        text = self.intent_template
        for key, value in values.items():
            text = text.replace("{{" + key + "}}", str(value))
        if "{{" in text:
            raise ValueError(f"template {self.slug}: unfilled slot in {text!r}")
        return text


class TemplateSet:
    """The templates of one module, registered with the :meth:`add` decorator."""

    def __init__(self) -> None:
        self.templates: list[Template] = []

    def add(
        self,
        template_id: int,
        slug: str,
        *,
        sites: Sequence[str],
        intent: str,
        start_url: str,
        kind: str,
        unseen: bool = False,
        state_changing: bool = False,
    ) -> Callable[[InstanceFn], InstanceFn]:
        """Register the decorated instance function as a :class:`Template`."""

        def register(fn: InstanceFn) -> InstanceFn:
            self.templates.append(
                Template(template_id, slug, tuple(sites), intent, start_url, kind, fn, unseen, state_changing)
            )
            return fn

        return register
