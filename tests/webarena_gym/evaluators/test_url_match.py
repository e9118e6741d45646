"""url_match: the matching rules (pure) and the evaluator on a real page served by a real HTTP server."""

from __future__ import annotations

import pytest

from webarena_gym.errors import EvaluatorError, SiteConfigError
from webarena_gym.evaluators import EvalContext, build_evaluator
from webarena_gym.evaluators.url_match import url_score
from webarena_gym.tasks import SiteURLs

BASE = "http://127.0.0.1:7770"


@pytest.mark.parametrize(("pred", "refs", "expected"), [
    (f"{BASE}/catalog/", [f"{BASE}/catalog"], 1.0),                                  # trailing slash
    (f"{BASE}/catalog/shoes", [f"{BASE}/catalog"], 1.0),                             # base is a substring
    (f"{BASE}/cat", [f"{BASE}/catalog"], 0.0),
    (f"{BASE}/search?q=red+shoes&page=2", [f"{BASE}/search?q=red%20shoes"], 1.0),    # parse_qs decodes
    (f"{BASE}/search?q=blue", [f"{BASE}/search?q=red"], 0.0),                        # query value differs
    (f"{BASE}/search", [f"{BASE}/search?q=red"], 0.0),                               # query key missing
    (f"{BASE}/f/a", [f"{BASE}/f/a", f"{BASE}/f/b"], 1.0),                            # |OR| alternatives
    (f"{BASE}/f/b", [f"{BASE}/f/a", f"{BASE}/f/b"], 1.0),
    # WebArena pools the query keys of all alternatives: each key needs one of the pooled values
    (f"{BASE}/s?q=a", [f"{BASE}/s?q=a", f"{BASE}/s?sort=new"], 0.0),
    (f"{BASE}/s?q=a&sort=new", [f"{BASE}/s?q=a", f"{BASE}/s?sort=new"], 1.0),
    ("http://other:1/catalog", [f"{BASE}/catalog"], 0.0),                            # host is part of base
])
def test_webarena_gold_in_pred(pred, refs, expected):
    assert url_score(pred, refs, None, "webarena") == expected
    assert url_score(pred, refs, "GOLD in PRED", "webarena") == expected


@pytest.mark.parametrize(("pred", "refs", "note", "expected"), [
    (f"{BASE}/catalog/", [f"{BASE}/catalog"], None, 1.0),               # default EXACT, one slash dropped
    (f"{BASE}/catalog/shoes", [f"{BASE}/catalog"], None, 0.0),          # EXACT: no prefix match
    (f"{BASE}/catalog/shoes", [f"{BASE}/catalog"], "GOLD in PRED", 1.0),  # substring of the full URL
    (f"{BASE}/search?page=2&q=red", [f"{BASE}/search?q=red"], "GOLD in PRED", 0.0),  # no query parsing
    ("http://localhost:7770/catalog", [f"{BASE}/catalog"], None, 1.0),  # localhost -> 127.0.0.1
    (f"{BASE}/f/b", [f"{BASE}/f/a", f"{BASE}/f/b"], None, 1.0),
])
def test_lite_rules(pred, refs, note, expected):
    assert url_score(pred, refs, note, "webarena_lite") == expected


ISSUES = "http://127.0.0.1:8023/a11yproject/a11yproject.com/-/issues"


@pytest.mark.parametrize(("pred", "ref", "webarena", "lite"), [
    # WebArena task 45: a "/" before the query stays part of the reference's base path
    (f"{ISSUES}?sort=created_asc&state=opened", f"{ISSUES}/?sort=created_asc&state=opened", 0.0, 0.0),
    (f"{ISSUES}/?sort=created_asc&state=opened", f"{ISSUES}?sort=created_asc&state=opened", 1.0, 0.0),
    (f"{ISSUES}/?sort=created_asc&state=opened", f"{ISSUES}/?sort=created_asc&state=opened", 1.0, 1.0),
    # only the end of the whole URL loses its slashes (WebArena: all of them, Lite: one)
    (ISSUES, f"{ISSUES}//", 1.0, 0.0),
    (f"{ISSUES}//", f"{ISSUES}/", 1.0, 1.0),
])
def test_trailing_slash_rules(pred, ref, webarena, lite):
    assert url_score(pred, [ref], "GOLD in PRED", "webarena") == webarena
    assert url_score(pred, [ref], "GOLD in PRED", "webarena_lite") == lite


def test_webarena_accepts_exact():
    assert url_score(f"{BASE}/a/", [f"{BASE}/a"], "EXACT", "webarena") == 1.0
    assert url_score(f"{BASE}/a/b", [f"{BASE}/a"], "EXACT", "webarena") == 0.0


def test_unknown_rule_raises():
    with pytest.raises(EvaluatorError, match="unknown url matching rule"):
        url_score(BASE, [BASE], "SOMETHING", "webarena")


def _url_task(factory, reference_url, url_note=None):
    block = {"eval_types": ["url_match"], "reference_url": reference_url}
    if url_note is not None:
        block["url_note"] = url_note
    return factory(block)


@pytest.mark.browser
def test_url_match_on_real_page(fake_sites, eval_page, task_factory):
    shop = fake_sites.shopping
    shop.page("/catalogsearch/result/", "<h1>results</h1>")
    eval_page.goto(f"{shop.url}/catalogsearch/result/?q=running+shoes&product_list_order=price")
    sites = fake_sites.urls
    task = _url_task(task_factory, "__SHOPPING__/catalogsearch/result/?q=running shoes")

    def run(rules):
        ctx = EvalContext(answer=None, page=eval_page, context=eval_page.context, sites=sites, rules=rules)
        return build_evaluator(task)(ctx)

    result = run("webarena")
    assert result.score == 1.0
    assert result.details["components"][0]["url"] == eval_page.url
    # WebArena-Lite's default rule is EXACT: the extra query parameter fails it
    assert run("webarena_lite").score == 0.0


@pytest.mark.browser
def test_url_match_or_alternatives_on_real_page(fake_sites, eval_page, task_factory):
    forum = fake_sites.reddit
    forum.page("/f/washingtondc", "<h1>dc</h1>")
    eval_page.goto(f"{forum.url}/f/washingtondc")
    task = _url_task(task_factory, "__REDDIT__/f/washington |OR| __REDDIT__/f/washingtondc", "GOLD in PRED")
    assert task.eval.reference_urls == ("__REDDIT__/f/washington", "__REDDIT__/f/washingtondc")
    for rules in ("webarena", "webarena_lite"):
        ctx = EvalContext(answer=None, page=eval_page, context=None, sites=fake_sites.urls, rules=rules)
        assert build_evaluator(task)(ctx).score == 1.0
    forum.page("/f/books", "<h1>books</h1>")
    eval_page.goto(f"{forum.url}/f/books")
    ctx = EvalContext(answer=None, page=eval_page, context=None, sites=fake_sites.urls)
    assert build_evaluator(task)(ctx).score == 0.0


def test_url_match_needs_page_and_site(task_factory):
    task = _url_task(task_factory, "__GITLAB__/a")
    with pytest.raises(EvaluatorError, match="needs the episode's page"):
        build_evaluator(task)(EvalContext(answer=None, page=None, context=None, sites=SiteURLs()))

    class FakePage:
        url = "http://127.0.0.1:1/a"

    with pytest.raises(SiteConfigError, match="__GITLAB__"):
        build_evaluator(task)(EvalContext(answer=None, page=FakePage(), context=None, sites=SiteURLs()))
