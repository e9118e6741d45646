"""WebArena task configurations: site URLs, typed task entries and the loader.

The task format is WebArena's JSON, unchanged. :func:`load_tasks` reads the official ``test.raw.json``
(812 tasks) and WebArena-Lite's ``test_webarena_lite.raw.json`` (165) as they are, normalising their quirks
into typed objects (the entry as read stays in ``TaskConfig.raw``):

- ``must_include`` / ``fuzzy_match`` given as a plain string become a one-item tuple; ``fuzzy_match: "N/A"``
  (WebArena's unachievable-task convention) sets ``ReferenceAnswers.fuzzy_na``;
- ``start_url`` is split on `` |AND| `` and ``reference_url`` on `` |OR| ``; ``must_include`` items keep their
  `` |OR| `` (whether it means alternatives depends on the evaluator rule set);
- ``func:`` URLs and locators are parsed into whitelisted ``HelperCall``s (``evaluators/helpers.py``);
- unknown fields go to ``extras`` (top level and inside ``eval``).

A malformed entry raises one :class:`TaskConfigError` naming the file, the task id and the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from webarena_gym.errors import SiteConfigError, TaskConfigError
from webarena_gym.evaluators.helpers import HelperCall, HelperCallError, parse_helper_call

SITE_NAMES = ("shopping", "shopping_admin", "reddit", "gitlab", "map", "wikipedia", "homepage")
PLACEHOLDERS: dict[str, str] = {f"__{name.upper()}__": name for name in SITE_NAMES}
"""``__SHOPPING__`` -> ``"shopping"`` etc."""
EVAL_TYPES = frozenset({"string_match", "url_match", "program_html"})
URL_NOTES = frozenset({"GOLD in PRED", "EXACT"})
_PLACEHOLDER_RE = re.compile(r"__[A-Z][A-Z0-9_]*__")


# ---------------------------------------------------------------------------------------------------- sites


def _check_site_url(name: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SiteConfigError(f"site {name!r}: expected an http(s) URL ('http://host:port'), got {value!r}")
    return value.rstrip("/")


@dataclass(frozen=True)
class SiteURLs:
    """Base URLs of the WebArena sites, without trailing slash; ``None`` = not configured."""

    shopping: str | None = None
    shopping_admin: str | None = None
    reddit: str | None = None
    gitlab: str | None = None
    map: str | None = None
    wikipedia: str | None = None
    homepage: str | None = None

    def __post_init__(self) -> None:
        for name in SITE_NAMES:
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _check_site_url(name, value))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> SiteURLs:
        """Read ``SHOPPING``, ``SHOPPING_ADMIN``, ... (WebArena) or ``WA_SHOPPING``, ... (BrowserGym); when
        both are set the ``WA_`` form wins (the plain names, e.g. ``MAP``, are generic enough to collide)."""
        values: dict[str, str] = {}
        for name in SITE_NAMES:
            for var in (f"WA_{name.upper()}", name.upper()):
                value = environ.get(var, "").strip()
                if value:
                    try:
                        values[name] = _check_site_url(name, value)
                    except SiteConfigError as exc:
                        raise SiteConfigError(f"environment variable {var}: {exc}") from None
                    break
        return cls(**values)

    def with_overrides(self, sites: Mapping[str, str | None]) -> SiteURLs:
        """A copy with some sites replaced; keys are ``"shopping"``, ``"shopping_admin"``, ... ."""
        unknown = sorted(set(sites) - set(SITE_NAMES))
        if unknown:
            raise SiteConfigError(f"unknown site name(s) {unknown}; expected some of {list(SITE_NAMES)}")
        return replace(self, **dict(sites))

    def resolve(self, text: str) -> str:
        """Replace every ``__SHOPPING__``-style placeholder; :class:`SiteConfigError` if its site is unset."""
        if "__" not in text:
            return text
        for placeholder in sorted(PLACEHOLDERS, key=len, reverse=True):
            if placeholder in text:
                name = PLACEHOLDERS[placeholder]
                url = getattr(self, name)
                if url is None:
                    raise SiteConfigError(
                        f"{placeholder} is used but site {name!r} is not configured "
                        f"(set {name.upper()} or WA_{name.upper()}, or pass sites={{{name!r}: ...}})"
                    )
                text = text.replace(placeholder, url)
        return text

    def origins(self) -> frozenset[str]:
        """Web origins (``scheme://host[:port]``, default ports omitted, as browsers do) of the sites."""
        out = set()
        for name in SITE_NAMES:
            value = getattr(self, name)
            if value is not None:
                parts = urlsplit(value)
                out.add(f"{parts.scheme}://{parts.netloc.lower()}")
        return frozenset(out)

    def as_dict(self) -> dict[str, str]:
        """The configured sites as ``{name: url}``."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


# ------------------------------------------------------------------------------------------------- task types


@dataclass(frozen=True)
class ReferenceAnswers:
    """``eval.reference_answers`` of a ``string_match`` task."""

    exact_match: str | None = None
    must_include: tuple[str, ...] | None = None
    """Items may contain `` |OR| `` (alternatives under the WebArena-Lite rules)."""
    fuzzy_match: tuple[str, ...] | None = None
    fuzzy_na: bool = False
    """``fuzzy_match`` was the bare string ``"N/A"``: exact N/A, else the judged reason vs ``string_note``."""
    order: tuple[str, ...] = ()
    """The approaches in file order (WebArena applies them in this order)."""


@dataclass(frozen=True)
class RequiredContents:
    """``required_contents`` of one ``program_html`` check."""

    exact_match: str | None = None
    must_include: tuple[str, ...] | None = None
    fuzzy_match: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ProgramHtmlCheck:
    """One ``program_html`` entry: where to look, what to select, what must be there."""

    url: str
    """``"last"`` (the page as the episode left it), a URL with placeholders, or a ``func:`` call."""
    locator: str
    """``""`` (page content), a JS expression (``document.``.., ``[...document.``..), or a ``func:`` call."""
    required_contents: RequiredContents
    url_call: HelperCall | None = None
    locator_call: HelperCall | None = None
    prep_actions: tuple[str, ...] = ()
    """JS statements run before a JS locator (WebArena, 10 tasks of the 812)."""
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EvalSpec:
    """The ``eval`` block of a task."""

    eval_types: tuple[str, ...]
    reference_answers: ReferenceAnswers | None = None
    reference_url: str | None = None
    """As written (``None`` for null or empty)."""
    reference_urls: tuple[str, ...] = ()
    """``reference_url`` split on `` |OR| ``, placeholders not resolved."""
    url_note: str | None = None
    program_html: tuple[ProgramHtmlCheck, ...] = ()
    string_note: str | None = None
    reference_answer_raw_annotation: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def needs_judge(self) -> bool:
        """Whether scoring may call an LLM judge (fuzzy_match, required fuzzy_match, the N/A reason)."""
        ra = self.reference_answers
        string = "string_match" in self.eval_types and ra is not None and ra.fuzzy_match is not None
        html = "program_html" in self.eval_types and any(
            c.required_contents.fuzzy_match is not None for c in self.program_html
        )
        return string or html


@dataclass(frozen=True)
class TaskConfig:
    """One WebArena task entry, all fields typed, quirks normalised."""

    task_id: int
    sites: tuple[str, ...]
    require_login: bool
    storage_state: str | None
    start_urls: tuple[str, ...]
    """``start_url`` split on `` |AND| ``; placeholders NOT yet resolved."""
    geolocation: dict[str, Any] | None
    intent_template: str
    instantiation_dict: dict[str, Any]
    intent: str
    require_reset: bool
    eval: EvalSpec
    intent_template_id: int | None = None
    old_task_id: int | None = None
    """WebArena-Lite: the id of the same task in the 812-task file."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Unknown top-level fields as read (e.g. ``reference_solution``, ``split``)."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The entry exactly as read."""

    def resolved_start_urls(self, sites: SiteURLs) -> list[str]:
        """The start URLs with placeholders resolved (:class:`SiteConfigError` if a site is unset)."""
        return [sites.resolve(url) for url in self.start_urls]


# ---------------------------------------------------------------------------------------------------- parsing


class _Entry:
    """Field access for one raw entry that raises :class:`TaskConfigError` naming file, task and field."""

    def __init__(self, raw: Mapping[str, Any], path: str | None, task_id: object) -> None:
        self.raw, self.path, self.task_id = raw, path, task_id

    def error(self, field_name: str, message: str) -> TaskConfigError:
        return TaskConfigError(message, task_id=self.task_id, field=field_name, path=self.path)

    def get(self, data: Mapping[str, Any], key: str, prefix: str, types: tuple[type, ...],
            *, required: bool = False, default: Any = None) -> Any:
        name = f"{prefix}{key}"
        if key not in data:
            if required:
                raise self.error(name, "missing required field")
            return default
        value = data[key]
        if value is None and not required:
            return default
        if isinstance(value, bool) and bool not in types:
            ok = False
        else:
            ok = isinstance(value, types)
        if not ok:
            expected = " or ".join(t.__name__ for t in types)
            raise self.error(name, f"expected {expected}, got {type(value).__name__} {value!r:.80}")
        return value

    def str_list(self, value: Any, name: str) -> tuple[str, ...]:
        """A list of strings, or a plain string (the WebArena-Lite quirk) as a one-item tuple."""
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise self.error(name, f"expected a non-empty list of strings (or one string), got {value!r:.80}")
        return tuple(value)

    def opt_str_list(self, data: Mapping[str, Any], key: str, prefix: str) -> tuple[str, ...] | None:
        """``data[key]`` as a tuple of strings, ``None`` when absent or null."""
        value = data.get(key)
        return None if value is None else self.str_list(value, f"{prefix}.{key}")

    def placeholders(self, text: str, name: str) -> None:
        unknown = sorted(set(_PLACEHOLDER_RE.findall(text)) - set(PLACEHOLDERS))
        if unknown:
            raise self.error(name, f"unknown site placeholder(s) {unknown}; expected {sorted(PLACEHOLDERS)}")

    def helper(self, text: str, name: str) -> HelperCall:
        try:
            return parse_helper_call(text)
        except HelperCallError as exc:
            raise self.error(name, str(exc)) from None


_TOP_FIELDS = {"task_id", "sites", "require_login", "storage_state", "start_url", "geolocation",
               "intent_template", "instantiation_dict", "intent", "require_reset", "eval",
               "intent_template_id", "old_task_id"}
_EVAL_FIELDS = {"eval_types", "reference_answers", "reference_url", "url_note", "program_html", "string_note",
                "reference_answer_raw_annotation"}
_ANSWER_KEYS = ("exact_match", "must_include", "fuzzy_match")
_CHECK_FIELDS = {"url", "locator", "required_contents", "prep_actions"}


def _parse_answers(e: _Entry, value: Any, name: str) -> ReferenceAnswers:
    if not isinstance(value, dict) or not any(v is not None for v in value.values()):
        raise e.error(name, f"expected an object with some of {list(_ANSWER_KEYS)}, got {value!r:.80}")
    unknown = sorted(set(value) - set(_ANSWER_KEYS))
    if unknown:
        raise e.error(f"{name}.{unknown[0]}", f"unknown approach; expected one of {list(_ANSWER_KEYS)}")
    exact = e.get(value, "exact_match", f"{name}.", (str,))
    must = e.opt_str_list(value, "must_include", name)
    fuzzy_na = value.get("fuzzy_match") == "N/A"
    fuzzy = e.opt_str_list(value, "fuzzy_match", name)
    return ReferenceAnswers(exact_match=exact, must_include=must, fuzzy_match=fuzzy, fuzzy_na=fuzzy_na,
                            order=tuple(k for k in value if value[k] is not None))


def _parse_check(e: _Entry, value: Any, name: str) -> ProgramHtmlCheck:
    if not isinstance(value, dict):
        raise e.error(name, f"expected an object, got {value!r:.80}")
    url = e.get(value, "url", f"{name}.", (str,), required=True)
    locator = e.get(value, "locator", f"{name}.", (str,), default="")
    url_call = locator_call = None
    if url.startswith("func:"):
        url_call = e.helper(url, f"{name}.url")
    elif url != "last":
        e.placeholders(url, f"{name}.url")
    if locator.startswith("func:"):
        locator_call = e.helper(locator, f"{name}.locator")
    elif locator.strip() and not locator.startswith(("document.", "[...document.")):
        raise e.error(f"{name}.locator", "expected '', a JS expression starting 'document.' or "
                                         f"'[...document.', or a func: call, got {locator!r:.80}")
    rc_name = f"{name}.required_contents"
    rc = value.get("required_contents")
    if not isinstance(rc, dict) or not any(rc.get(k) is not None for k in _ANSWER_KEYS):
        raise e.error(rc_name, f"expected an object with some of {list(_ANSWER_KEYS)}, got {rc!r:.80}")
    unknown = sorted(set(rc) - set(_ANSWER_KEYS))
    if unknown:
        raise e.error(f"{rc_name}.{unknown[0]}", f"unknown requirement; expected one of {list(_ANSWER_KEYS)}")
    required = RequiredContents(
        exact_match=e.get(rc, "exact_match", f"{rc_name}.", (str,)),
        must_include=e.opt_str_list(rc, "must_include", rc_name),
        fuzzy_match=e.opt_str_list(rc, "fuzzy_match", rc_name),
    )
    prep = value.get("prep_actions") or []
    prep_actions = e.str_list(prep, f"{name}.prep_actions") if prep else ()
    extras = {k: v for k, v in value.items() if k not in _CHECK_FIELDS}
    return ProgramHtmlCheck(url=url, locator=locator, required_contents=required, url_call=url_call,
                            locator_call=locator_call, prep_actions=prep_actions, extras=extras)


def _parse_eval(e: _Entry, value: Any) -> EvalSpec:
    if not isinstance(value, dict):
        raise e.error("eval", f"expected an object, got {value!r:.80}")
    types = e.get(value, "eval_types", "eval.", (list,), required=True)
    if not types or not all(isinstance(t, str) for t in types):
        raise e.error("eval.eval_types", f"expected a non-empty list of strings, got {types!r}")
    unknown = [t for t in types if t not in EVAL_TYPES]
    if unknown:
        raise e.error("eval.eval_types", f"unknown eval type {unknown[0]!r}; expected {sorted(EVAL_TYPES)}")
    answers = None
    if value.get("reference_answers") is not None:
        answers = _parse_answers(e, value["reference_answers"], "eval.reference_answers")
    if "string_match" in types and answers is None:
        raise e.error("eval.reference_answers", "string_match needs reference_answers")
    ref_url = e.get(value, "reference_url", "eval.", (str,)) or None
    ref_urls: tuple[str, ...] = ()
    if ref_url is not None:
        ref_urls = tuple(u.strip() for u in ref_url.split(" |OR| "))
        e.placeholders(ref_url, "eval.reference_url")
    if "url_match" in types and not ref_urls:
        raise e.error("eval.reference_url", "url_match needs a reference_url")
    url_note = e.get(value, "url_note", "eval.", (str,))
    if url_note is not None and url_note not in URL_NOTES:
        raise e.error("eval.url_note", f"unknown matching rule {url_note!r}; expected {sorted(URL_NOTES)}")
    checks_raw = e.get(value, "program_html", "eval.", (list,), default=[])
    checks = tuple(_parse_check(e, c, f"eval.program_html[{i}]") for i, c in enumerate(checks_raw))
    if "program_html" in types and not checks:
        raise e.error("eval.program_html", "program_html needs at least one check")
    string_note = e.get(value, "string_note", "eval.", (str,))
    if answers is not None and answers.fuzzy_na and "string_match" in types and not string_note:
        raise e.error("eval.string_note", "fuzzy_match 'N/A' needs a string_note (the unachievable reason)")
    return EvalSpec(
        eval_types=tuple(types), reference_answers=answers, reference_url=ref_url, reference_urls=ref_urls,
        url_note=url_note, program_html=checks, string_note=string_note,
        reference_answer_raw_annotation=e.get(value, "reference_answer_raw_annotation", "eval.", (str,)),
        extras={k: v for k, v in value.items() if k not in _EVAL_FIELDS},
    )


def parse_task(raw: Mapping[str, Any], *, path: str | None = None) -> TaskConfig:
    """Parse one WebArena task entry; :class:`TaskConfigError` names ``path``, the task and the field."""
    if not isinstance(raw, Mapping):
        raise TaskConfigError(f"expected a task object, got {type(raw).__name__}", path=path)
    e = _Entry(raw, path, raw.get("task_id"))
    task_id = e.get(raw, "task_id", "", (int,), required=True)
    intent = e.get(raw, "intent", "", (str,), required=True)
    if not intent.strip():
        raise e.error("intent", "must not be empty")
    start_url = e.get(raw, "start_url", "", (str,), required=True)
    e.placeholders(start_url, "start_url")
    sites = e.get(raw, "sites", "", (list,), required=True)
    if not all(isinstance(s, str) for s in sites):
        raise e.error("sites", f"expected a list of strings, got {sites!r}")
    return TaskConfig(
        task_id=task_id,
        sites=tuple(sites),
        require_login=e.get(raw, "require_login", "", (bool,), default=False),
        storage_state=e.get(raw, "storage_state", "", (str,)),
        start_urls=tuple(u.strip() for u in start_url.split(" |AND| ")),
        geolocation=e.get(raw, "geolocation", "", (dict,)),
        intent_template=e.get(raw, "intent_template", "", (str,), default=""),
        instantiation_dict=dict(e.get(raw, "instantiation_dict", "", (dict,), default={})),
        intent=intent,
        require_reset=e.get(raw, "require_reset", "", (bool,), default=False),
        eval=_parse_eval(e, e.get(raw, "eval", "", (dict,), required=True)),
        intent_template_id=e.get(raw, "intent_template_id", "", (int,)),
        old_task_id=e.get(raw, "old_task_id", "", (int,)),
        extras={k: v for k, v in raw.items() if k not in _TOP_FIELDS},
        raw=dict(raw),
    )


# ---------------------------------------------------------------------------------------------------- loading

SourceResolver = Callable[[str | None], list[Any]]
_SOURCE_RESOLVERS: dict[str, SourceResolver] = {}
"""Named task sources (``"embedded"``, ``"embedded:train"``): scheme -> fn(split or None) -> entries. The
embedded task set registers itself here."""


def register_task_source(name: str, resolver: SourceResolver) -> None:
    """Make ``load_tasks(name)`` and ``load_tasks(f"{name}:{split}")`` call ``resolver(split or None)``,
    which returns WebArena-format entries (dicts)."""
    if not name.isidentifier():
        raise ValueError(f"task source name must be an identifier, got {name!r}")
    _SOURCE_RESOLVERS[name] = resolver


def _resolve_source(source: str | Path) -> tuple[list[Any], str]:
    """Turn a path or a named source into ``(entries, label)``; the label names the source in errors."""
    text = str(source)
    scheme, _, split = text.partition(":")
    if scheme == "embedded" and scheme not in _SOURCE_RESOLVERS and not isinstance(source, Path):
        import webarena_gym.embedded  # noqa: F401 - registers the bundled task set on first use
    if not isinstance(source, Path) and scheme in _SOURCE_RESOLVERS:
        return list(_SOURCE_RESOLVERS[scheme](split or None)), text
    path = Path(source)
    if not path.is_file():
        if isinstance(source, str) and "/" not in text and "\\" not in text and not text.endswith(".json"):
            raise TaskConfigError(
                f"unknown task source {text!r}: not a file, and not a named source "
                f"(known: {sorted(_SOURCE_RESOLVERS) or 'none registered'})", path=text)
        raise TaskConfigError("task file not found", path=text)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TaskConfigError(f"cannot read the task file as JSON: {exc}", path=text) from exc
    if isinstance(data, dict):  # WebArena's per-task config_files/<id>.json hold a single entry
        data = [data]
    if not isinstance(data, list):
        raise TaskConfigError(f"expected a JSON list of task entries, got {type(data).__name__}", path=text)
    return data, text


def load_tasks(source: str | Path | Sequence[Mapping[str, Any]]) -> list[TaskConfig]:
    """Load WebArena task entries from a JSON file (a list of entries, or one entry), a named source, or a
    list of dicts. Raises :class:`TaskConfigError` for the first malformed entry or a duplicate task id."""
    if isinstance(source, (str, Path)):
        entries, label = _resolve_source(source)
    else:
        entries, label = list(source), None
    tasks: list[TaskConfig] = []
    seen: set[int] = set()
    for index, raw in enumerate(entries):
        if not isinstance(raw, Mapping):
            raise TaskConfigError(f"entry {index}: expected a task object, got {type(raw).__name__}",
                                  path=label)
        task = parse_task(raw, path=label)
        if task.task_id in seen:
            raise TaskConfigError("duplicate task id", task_id=task.task_id, field="task_id", path=label)
        seen.add(task.task_id)
        tasks.append(task)
    return tasks
