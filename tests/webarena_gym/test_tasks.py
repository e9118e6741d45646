"""Task loading: the two real WebArena task files, malformed entries, site URLs and placeholders."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from webarena_gym.errors import SiteConfigError, TaskConfigError
from webarena_gym.evaluators import ProductEvaluator, build_evaluator
from webarena_gym.tasks import SiteURLs, TaskConfig, load_tasks

FULL, LITE = "test.raw.json", "test_webarena_lite.raw.json"


@pytest.fixture(scope="module")
def full_tasks(shared_webarena_dir):
    return load_tasks(shared_webarena_dir / FULL)


@pytest.fixture(scope="module")
def lite_tasks(shared_webarena_dir):
    return load_tasks(str(shared_webarena_dir / LITE))


def _helper_counts(tasks: list[TaskConfig], *, per_task: bool = False) -> Counter:
    """(field, helper) -> number of program_html checks using it (or of tasks, with ``per_task``)."""
    counts: Counter = Counter()
    for task in tasks:
        uses = [(where, call.name) for check in task.eval.program_html
                for where, call in (("url", check.url_call), ("locator", check.locator_call))
                if call is not None]
        counts.update(set(uses) if per_task else uses)
    return counts


def test_real_files_load_completely(full_tasks, lite_tasks):
    assert len(full_tasks) == 812 and len(lite_tasks) == 165
    assert [t.task_id for t in full_tasks] == list(range(812))
    assert [t.task_id for t in lite_tasks] == list(range(165))
    assert all(isinstance(t, TaskConfig) for t in full_tasks + lite_tasks)


@pytest.mark.parametrize(("name", "expected"), [
    (FULL, {("string_match",): 325, ("program_html",): 282, ("url_match", "program_html"): 129,
            ("url_match",): 66, ("string_match", "url_match"): 10}),
    (LITE, {("string_match",): 78, ("program_html",): 48, ("url_match", "program_html"): 19,
            ("url_match",): 18, ("string_match", "url_match"): 2}),
])
def test_eval_type_counts(shared_webarena_dir, name, expected):
    tasks = load_tasks(shared_webarena_dir / name)
    assert Counter(t.eval.eval_types for t in tasks) == expected


def test_helper_counts_match_readme(full_tasks, lite_tasks):
    """The README counts helper occurrences (program_html checks); per task they are fewer."""
    assert _helper_counts(full_tasks) == {
        ("url", "shopping_get_latest_order_url"): 10, ("url", "reddit_get_post_url"): 65,
        ("locator", "gitlab_get_project_memeber_role"): 12,
        ("locator", "shopping_get_sku_latest_review_rating"): 5,
        ("locator", "shopping_get_sku_latest_review_author"): 5,
    }
    assert _helper_counts(lite_tasks) == {
        ("url", "shopping_get_latest_order_url"): 3, ("url", "reddit_get_post_url"): 11,
        ("locator", "gitlab_get_project_memeber_role"): 3,
    }
    per_task = _helper_counts(full_tasks, per_task=True)
    assert per_task[("url", "reddit_get_post_url")] == 55
    assert per_task[("locator", "gitlab_get_project_memeber_role")] == 9


def test_judge_counts(full_tasks, lite_tasks):
    assert sum(t.eval.needs_judge for t in lite_tasks) == 40          # as the README says
    assert sum(t.eval.needs_judge for t in full_tasks) == 118         # 82 fuzzy lists + 36 "N/A"
    assert sum(bool(t.eval.reference_answers and t.eval.reference_answers.fuzzy_na) for t in full_tasks) == 36


def test_lite_quirks_are_normalised(lite_tasks, full_tasks):
    by_id = {t.task_id: t for t in lite_tasks}
    assert all(t.old_task_id is not None for t in lite_tasks)
    assert all(t.old_task_id is None for t in full_tasks)
    # must_include as a plain string
    plain = [t for t in lite_tasks if isinstance(t.raw["eval"]["reference_answers"] or {}, dict)
             and isinstance((t.raw["eval"]["reference_answers"] or {}).get("must_include"), str)]
    assert len(plain) == 1 and plain[0].eval.reference_answers.must_include == ("yjlou",)
    # fuzzy_match "N/A" as a string, with its reason
    na = [t for t in lite_tasks if t.eval.reference_answers and t.eval.reference_answers.fuzzy_na]
    assert len(na) == 1 and na[0].eval.reference_answers.fuzzy_match == ("N/A",) and na[0].eval.string_note
    # program_html with fuzzy_match in required_contents
    assert sum(any(c.required_contents.fuzzy_match for c in t.eval.program_html) for t in lite_tasks) == 4
    # |AND| in start_url, |OR| in reference_url and in must_include items
    multi = [t for t in lite_tasks if len(t.start_urls) > 1]
    assert len(multi) == 1 and len(multi[0].start_urls) == 3
    assert all(" |AND| " not in u and u.startswith("__SHOPPING__/") for u in multi[0].start_urls)
    assert sum(len(t.eval.reference_urls) > 1 for t in lite_tasks) == 1
    assert sum(len(t.eval.reference_urls) > 1 for t in full_tasks) == 7
    assert sum(len(t.start_urls) > 1 for t in full_tasks) == 5
    # raw keeps the entry exactly as read
    assert by_id[81].raw["eval"]["reference_answers"]["must_include"] in ("yjlou", ["yjlou"])


def test_extras_and_optional_fields(full_tasks):
    by_id = {t.task_id: t for t in full_tasks}
    assert by_id[723].extras == {"string_note": "FTorrez81 has no submissions in subreddit iphone13"}
    assert by_id[197].eval.extras == {"annotation_note": "219.4+210+166.4+93.4+89"}
    prep = [t for t in full_tasks if any(c.prep_actions for c in t.eval.program_html)]
    assert len(prep) == 5
    assert sum(t.eval.url_note == "GOLD in PRED" for t in full_tasks) == 196
    assert all(t.extras == {} for t in full_tasks if t.task_id != 723)


def test_build_evaluator_for_every_real_task(full_tasks, lite_tasks):
    for task in full_tasks + lite_tasks:
        evaluator = build_evaluator(task)
        assert isinstance(evaluator, ProductEvaluator)
        assert len(evaluator.components) == len(task.eval.eval_types)


def test_every_placeholder_resolves(full_tasks, lite_tasks):
    sites = SiteURLs(shopping="http://s:1", shopping_admin="http://a:2/admin", reddit="http://r:3",
                     gitlab="http://g:4", map="http://m:5")
    for task in full_tasks + lite_tasks:
        for url in task.resolved_start_urls(sites) + [sites.resolve(u) for u in task.eval.reference_urls]:
            assert "__" not in url.split("?")[0] or "__last_url__" in url, url


def test_single_entry_file_and_extras(tmp_path, shared_webarena_dir):
    entry = json.loads((shared_webarena_dir / LITE).read_text())[0]
    entry = {**entry, "reference_solution": [{"action": "click [3]"}], "split": "train"}
    path = tmp_path / "0.json"
    path.write_text(json.dumps(entry))
    (task,) = load_tasks(path)
    assert task.extras == {"reference_solution": [{"action": "click [3]"}], "split": "train"}
    assert task.raw == entry


def test_named_source_hook(monkeypatch, shared_webarena_dir):
    from webarena_gym import tasks as tasks_module

    entries = json.loads((shared_webarena_dir / LITE).read_text())[:3]
    seen = []
    resolvers = tasks_module._SOURCE_RESOLVERS
    monkeypatch.setitem(resolvers, "embedded", lambda split: seen.append(split) or entries)
    assert [t.task_id for t in load_tasks("embedded:train")] == [0, 1, 2]
    assert len(load_tasks("embedded")) == 3 and seen == ["train", None]
    monkeypatch.setattr(tasks_module, "_SOURCE_RESOLVERS", {})
    tasks_module.register_task_source("mine", lambda split: entries[:1])
    assert [t.task_id for t in load_tasks("mine:test")] == [0]
    with pytest.raises(ValueError, match="identifier"):
        tasks_module.register_task_source("a:b", lambda split: [])


# ------------------------------------------------------------------------------------------- malformed

GOOD = {
    "sites": ["gitlab"], "task_id": 5, "require_login": True, "storage_state": "./.auth/gitlab_state.json",
    "start_url": "__GITLAB__", "geolocation": None, "intent_template": "t", "instantiation_dict": {},
    "intent": "Which repo?", "require_reset": False, "intent_template_id": 1,
    "eval": {"eval_types": ["string_match", "program_html"], "reference_answers": {"exact_match": "a11y"},
             "reference_url": "", "program_html": [{"url": "last", "locator": "",
                                                    "required_contents": {"must_include": ["x"]}}]},
}


def _mutated(path: str, value):
    entry = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    target = entry
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is KeyError:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return entry


MALFORMED = [
    ("intent", KeyError, "intent", "missing required field"),
    ("intent", "  ", "intent", "must not be empty"),
    ("task_id", "5", "task_id", "expected int"),
    ("eval", KeyError, "eval", "missing required field"),
    ("eval.eval_types", ["string_match", "page_image_query"], "eval.eval_types", "unknown eval type"),
    ("eval.eval_types", [], "eval.eval_types", "non-empty list"),
    ("eval.reference_answers", ["a11y"], "eval.reference_answers", "expected an object"),
    ("eval.reference_answers", None, "eval.reference_answers", "string_match needs reference_answers"),
    ("eval.reference_answers.must_include", [1, 2], "eval.reference_answers.must_include", "list of strings"),
    ("eval.reference_answers.one_of", ["x"], "eval.reference_answers.one_of", "unknown approach"),
    ("eval.reference_answers.exact_match", 3, "eval.reference_answers.exact_match", "expected str"),
    ("eval.reference_answers", {"must_include": []}, "eval.reference_answers.must_include", "non-empty list"),
    ("eval.reference_answers", {"exact_match": None}, "eval.reference_answers", "expected an object"),
    ("eval.program_html.0.url", "func:os.system('rm -rf /')", "eval.program_html[0].url", "plain call"),
    ("eval.program_html.0.locator", "func:shopping_get_everything()", "eval.program_html[0].locator",
     "not in the whitelist"),
    ("eval.program_html.0.locator", "lambda:document.title", "eval.program_html[0].locator", "JS expression"),
    ("eval.program_html.0.required_contents", {"must_exclude": ["x"]},
     "eval.program_html[0].required_contents", "expected an object"),
    ("eval.program_html.0.required_contents.required_values", ["> 3"],
     "eval.program_html[0].required_contents.required_values", "unknown requirement"),
    ("eval.program_html", [], "eval.program_html", "at least one check"),
    ("eval.url_note", "FUZZY", "eval.url_note", "unknown matching rule"),
    ("start_url", "__GITLAB__ |AND| __GITHUB__/x", "start_url", "unknown site placeholder"),
    ("require_login", "yes", "require_login", "expected bool"),
    ("sites", "gitlab", "sites", "expected list"),
]


@pytest.mark.parametrize(("path", "value", "field", "message"), MALFORMED)
def test_malformed_entry_raises_one_typed_error(tmp_path, path, value, field, message):
    bad = _mutated(path, value)
    file = tmp_path / "tasks.json"
    file.write_text(json.dumps([GOOD | {"task_id": 4}, bad]))
    with pytest.raises(TaskConfigError, match=message) as info:
        load_tasks(file)
    err = info.value
    assert err.field == field and err.path == str(file)
    assert err.task_id == bad.get("task_id")
    assert f"field {field!r}" in str(err) and str(file) in str(err)


def test_url_match_needs_reference_and_na_needs_reason():
    entry = _mutated("eval.eval_types", ["url_match"])
    with pytest.raises(TaskConfigError, match="url_match needs a reference_url") as info:
        load_tasks([entry])
    assert info.value.field == "eval.reference_url" and info.value.path is None
    entry = _mutated("eval.reference_answers", {"fuzzy_match": "N/A"})
    with pytest.raises(TaskConfigError, match="string_note"):
        load_tasks([entry])
    entry["eval"]["string_note"] = "no such repo"
    assert load_tasks([entry])[0].eval.reference_answers.fuzzy_na


def test_file_level_errors(tmp_path):
    with pytest.raises(TaskConfigError, match="duplicate task id"):
        load_tasks([GOOD, GOOD])
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("[{")
    with pytest.raises(TaskConfigError, match="cannot read the task file as JSON") as info:
        load_tasks(bad_json)
    assert info.value.path == str(bad_json)
    scalar = tmp_path / "scalar.json"
    scalar.write_text("3")
    with pytest.raises(TaskConfigError, match="expected a JSON list"):
        load_tasks(scalar)
    with pytest.raises(TaskConfigError, match="task file not found"):
        load_tasks(tmp_path / "missing.json")
    with pytest.raises(TaskConfigError, match="entry 0: expected a task object"):
        load_tasks([["not", "a", "dict"]])
    with pytest.raises(TaskConfigError, match="unknown task source 'nosuchsource'"):
        load_tasks("nosuchsource")


# ----------------------------------------------------------------------------------------------- sites


def test_site_urls_from_env_plain_and_prefixed():
    env = {"SHOPPING": "http://127.0.0.1:7770/", "WA_GITLAB": "http://127.0.0.1:8023", "REDDIT": "",
           "WA_MAP": "https://map.example:443", "MAP": "http://ignored:1", "UNRELATED": "x"}
    sites = SiteURLs.from_env(env)
    assert sites.shopping == "http://127.0.0.1:7770"           # trailing slash dropped
    assert sites.gitlab == "http://127.0.0.1:8023"             # WA_ form
    assert sites.map == "https://map.example:443"              # WA_ wins over the plain name
    assert sites.reddit is None and sites.wikipedia is None    # empty value = unset
    assert sites.origins() == frozenset({"http://127.0.0.1:7770", "http://127.0.0.1:8023",
                                         "https://map.example:443"})
    assert SiteURLs.from_env({}) == SiteURLs()


def test_site_urls_validation():
    with pytest.raises(SiteConfigError, match="WA_SHOPPING.*'127.0.0.1:7770'"):
        SiteURLs.from_env({"WA_SHOPPING": "127.0.0.1:7770"})
    with pytest.raises(SiteConfigError, match="'gitlab'.*ftp://x"):
        SiteURLs(gitlab="ftp://x")
    with pytest.raises(SiteConfigError, match="unknown site name"):
        SiteURLs().with_overrides({"github": "http://x:1"})
    sites = SiteURLs(shopping="http://a:1").with_overrides({"reddit": "http://r:2/", "shopping": None})
    assert sites.as_dict() == {"reddit": "http://r:2"}
    with pytest.raises(SiteConfigError):
        SiteURLs().with_overrides({"reddit": "not a url"})


def test_resolve_placeholders():
    sites = SiteURLs(shopping="http://s:1", shopping_admin="http://s:1/admin")
    assert sites.resolve("__SHOPPING_ADMIN__/sales |OR| __SHOPPING__/x") == "http://s:1/admin/sales |OR| http://s:1/x"
    assert sites.resolve("no placeholders, __init__ kept") == "no placeholders, __init__ kept"
    with pytest.raises(SiteConfigError, match="__GITLAB__.*'gitlab'.*GITLAB or WA_GITLAB"):
        sites.resolve("__GITLAB__/byteblaze")
    task = load_tasks([_mutated("start_url", "__GITLAB__/a |AND| __GITLAB__/b")])[0]
    assert task.start_urls == ("__GITLAB__/a", "__GITLAB__/b")
    assert task.resolved_start_urls(SiteURLs(gitlab="http://g:9")) == ["http://g:9/a", "http://g:9/b"]
    with pytest.raises(SiteConfigError, match="__GITLAB__"):
        task.resolved_start_urls(sites)
