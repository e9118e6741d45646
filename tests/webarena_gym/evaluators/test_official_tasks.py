"""The scoring rules on the official task files: their real TaskConfigs through build_evaluator.

The cases are the ones where an earlier version scored differently from the official evaluators (WebArena
``f62e0b9``, VisualAgentBench WebArena-Lite ``9055fc2``); each is checked under both rule sets.
"""

from __future__ import annotations

import pytest

from webarena_gym.evaluators import EvalContext, build_evaluator
from webarena_gym.tasks import SiteURLs, TaskConfig, load_tasks

RULES = ("webarena", "webarena_lite")


@pytest.fixture(scope="module")
def webarena_tasks(shared_webarena_dir) -> dict[int, TaskConfig]:
    return {t.task_id: t for t in load_tasks(shared_webarena_dir / "test.raw.json")}


@pytest.fixture(scope="module")
def lite_tasks(shared_webarena_dir) -> dict[int, TaskConfig]:
    return {t.task_id: t for t in load_tasks(shared_webarena_dir / "test_webarena_lite.raw.json")}


def _score(task: TaskConfig, rules: str, *, answer: str | None = None, page=None,
           sites: SiteURLs | None = None) -> float:
    ctx = EvalContext(answer=answer, page=page, context=None if page is None else page.context,
                      sites=sites or SiteURLs(), rules=rules)  # type: ignore[arg-type]
    return build_evaluator(task)(ctx).score


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize(("task_id", "answer", "expected"), [
    (12, "I found that '2' is the answer", 1.0),   # must_include ["2"]
    (12, "I found 12 of them", 0.0),
    (11, "“6”", 1.0),                              # must_include ["6"]
    (11, "16", 0.0),
])
def test_webarena_single_token_answers(webarena_tasks, rules, task_id, answer, expected):
    assert _score(webarena_tasks[task_id], rules, answer=answer) == expected


@pytest.mark.parametrize(("task_id", "answer", "webarena", "lite"), [
    (81, "yjlou's", 1.0, 1.0),                             # must_include "yjlou" (a plain string)
    (81, "yjlou123", 1.0, 0.0),
    (43, "a11yproject.com, Primer/design", 1.0, 1.0),      # must_include ["a11yproject.com", "design"]
    (43, "a11yproject.com, Primer/designs", 1.0, 0.0),
])
def test_lite_token_and_slash_answers(lite_tasks, task_id, answer, webarena, lite):
    task = lite_tasks[task_id]
    assert _score(task, "webarena", answer=answer) == webarena
    assert _score(task, "webarena_lite", answer=answer) == lite


@pytest.mark.browser
@pytest.mark.parametrize(("query_path", "webarena", "lite"), [
    ("-/issues?sort=created_asc&state=opened", 0.0, 0.0),    # the reference has ".../issues/?sort=..."
    ("-/issues/?sort=created_asc&state=opened", 1.0, 1.0),
    ("-/issues/?state=opened&sort=created_asc", 1.0, 0.0),   # WebArena compares query values, Lite text
])
def test_webarena_task_45_trailing_slash(webarena_tasks, fake_sites, eval_page, query_path, webarena, lite):
    gitlab = fake_sites.gitlab
    project = "/a11yproject/a11yproject.com/"
    for path in (project + "-/issues", project + "-/issues/"):
        gitlab.page(path, "<h1>issues</h1>")
    eval_page.goto(gitlab.url + project + query_path)
    task = webarena_tasks[45]
    assert _score(task, "webarena", page=eval_page, sites=fake_sites.urls) == webarena
    assert _score(task, "webarena_lite", page=eval_page, sites=fake_sites.urls) == lite


@pytest.mark.browser
@pytest.mark.parametrize(("text", "webarena", "lite"), [
    ("Costco/Waterfront Drive West", 1.0, 1.0),
    ("Costcos/Waterfront Drive West", 1.0, 0.0),
    ("Costco, Waterfront Drive", 0.0, 0.0),
])
def test_webarena_task_372_program_html(webarena_tasks, fake_sites, eval_page, text, webarena, lite):
    """Task 372's locator reads ``#sidebar_content`` on the last page (must_include
    ``["Costco", "Waterfront Drive West"]``)."""
    shop = fake_sites.shopping
    shop.page("/directions", f"<div id='sidebar_content'>{text}</div>")
    eval_page.goto(shop.url + "/directions")
    task = webarena_tasks[372]
    assert _score(task, "webarena", page=eval_page, sites=fake_sites.urls) == webarena
    assert _score(task, "webarena_lite", page=eval_page, sites=fake_sites.urls) == lite
