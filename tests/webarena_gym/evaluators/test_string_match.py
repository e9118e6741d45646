"""string_match under both rule sets (no browser needed: string matching looks only at the answer)."""

from __future__ import annotations

import pytest

from webarena_gym.errors import EvaluatorError
from webarena_gym.evaluators import EvalContext, OfflineJudge, build_evaluator
from webarena_gym.evaluators.string_match import clean_answer, must_include, word_tokenize
from webarena_gym.tasks import SiteURLs

SITES = SiteURLs(shopping="http://127.0.0.1:7770", gitlab="http://127.0.0.1:8023")


def score(task, answer, rules="webarena", judge=None):
    ctx = EvalContext(answer=answer, page=None, context=None, sites=SITES, judge=judge, rules=rules)
    return build_evaluator(task)(ctx)


def string_task(factory, answers, **eval_fields):
    return factory({"eval_types": ["string_match"], "reference_answers": answers, **eval_fields})


@pytest.mark.parametrize(("text", "tokens"), [
    ("0", ["0"]),
    ("there are 10 items.", ["there", "are", "10", "items", "."]),
    ("$25.99, 1,000 units", ["$", "25.99", ",", "1,000", "units"]),
    ("n/a: e-mail a@b.com (yes)", ["n/a", ":", "e-mail", "a", "@", "b.com", "(", "yes", ")"]),
    ("yjlou's", ["yjlou", "'s"]),
    ("i cannot, it isn't", ["i", "can", "not", ",", "it", "is", "n't"]),
    ("**2**... 2—3 it is 2'", ["*", "*", "2", "*", "*", "...", "2", "—", "3", "it", "is", "2", "'"]),
])
def test_word_tokenize_follows_treebank_splits(text, tokens):
    assert word_tokenize(text) == tokens


@pytest.mark.parametrize("text", ["I found that '2' is the answer", "“6”", "a11yproject.com, primer/design",
                                  'he said "2" -- then... 3 * 4'])
def test_word_tokenize_is_nltks_without_sentence_split(text):
    """The official evaluators call nltk's word_tokenize; here it runs on the whole line (no punkt data)."""
    import nltk

    assert word_tokenize(text) == nltk.word_tokenize(text, preserve_line=True)


# (references, answer, score under "webarena", score under "webarena_lite")
TOKEN_CASES = [
    (["2"], "I found that '2' is the answer", 1.0, 1.0),   # WebArena task 12: quotes split off
    (["6"], "“6”", 1.0, 1.0),                              # task 11: curly quotes split off
    (["yjlou"], "yjlou's", 1.0, 1.0),                      # possessive 's (a substring under WebArena)
    (["is"], "It isn't", 1.0, 1.0),                        # n't
    (["can"], "I cannot", 1.0, 1.0),                       # cannot = can + not
    (["2"], "pages 2—3", 1.0, 1.0),                        # a dash between numbers
    (["2"], "**2**", 1.0, 1.0),                            # markdown bold
    (["2"], "2...", 1.0, 1.0),                             # an ellipsis
    (["2"], "it is 2'", 1.0, 1.0),                         # a trailing quote
    (["2"], "12 items", 0.0, 0.0),                         # still a whole token, not a substring
    (["design"], "designer", 1.0, 0.0),                    # WebArena: substring (not one character)
]

# WebArena-Lite also matches the pieces of any answer token that contains "/"; WebArena does not.
SLASH_CASES = [
    (["a11yproject.com", "design"], "a11yproject.com, Primer/design", 1.0, 1.0),  # Lite task 43
    (["design"], "Primer/design", 1.0, 1.0),               # WebArena: a substring anyway
    (["2"], "1/2", 0.0, 1.0),                              # WebArena: one-character token rule, no split
    (["2"], "1/23", 0.0, 0.0),
]


@pytest.mark.parametrize("rules", ["webarena", "webarena_lite"])
@pytest.mark.parametrize(("refs", "answer", "webarena", "lite"), TOKEN_CASES + SLASH_CASES)
def test_must_include_token_rules(task_factory, rules, refs, answer, webarena, lite):
    task = string_task(task_factory, {"must_include": refs})
    assert score(task, answer, rules=rules).score == (webarena if rules == "webarena" else lite)


def test_clean_answer_rules():
    assert clean_answer("  'Hello World' ") == "hello world"
    assert clean_answer('"X"') == "x"
    assert clean_answer("'") == ""
    # WebArena-Lite does not strip whitespace, so surrounding spaces keep the quotes too
    assert clean_answer("  'Hello' ", "webarena_lite") == "  'hello' "
    assert clean_answer("'Hello'", "webarena_lite") == "hello"


def test_exact_match_both_rules(task_factory):
    task = string_task(task_factory, {"exact_match": "Hello World"})
    assert score(task, "  'hello world' ").score == 1.0
    assert score(task, "hello world!").score == 0.0
    assert score(task, "  'hello world' ", rules="webarena_lite").score == 0.0
    assert score(task, "'Hello World'", rules="webarena_lite").score == 1.0


def test_must_include_single_character_rule_webarena(task_factory):
    """WebArena tokenises only a one-item list whose reference is one character: "0" must be a whole token."""
    task = string_task(task_factory, {"must_include": ["0"]})
    assert score(task, "There are 0 orders.").score == 1.0
    assert score(task, "There are 10 orders").score == 0.0
    # multi-character single word: plain substring under WebArena, whole token under WebArena-Lite
    task = string_task(task_factory, {"must_include": ["yjlou"]})
    assert score(task, "the user is yjlou123").score == 1.0
    assert score(task, "the user is yjlou123", rules="webarena_lite").score == 0.0
    assert score(task, "the user is yjlou.", rules="webarena_lite").score == 1.0


def test_must_include_multi_item_list(task_factory):
    task = string_task(task_factory, {"must_include": ["0", "5"]})
    # WebArena: several items -> no tokenisation -> substrings of "10" and "15" count
    assert score(task, "10 and 15").score == 1.0
    assert score(task, "10 and 15", rules="webarena_lite").score == 0.0
    assert score(task, "0 and 5", rules="webarena_lite").score == 1.0
    assert score(task, "0 and 6").score == 0.0


def test_must_include_or_alternatives_only_under_lite(task_factory):
    task = string_task(task_factory, {"must_include": ["Pittsburgh |OR| PGH", "airport"]})
    assert score(task, "PGH airport", rules="webarena_lite").score == 1.0
    assert score(task, "pittsburgh international airport", rules="webarena_lite").score == 1.0
    assert score(task, "PGH airport").score == 0.0  # WebArena treats ' |OR| ' literally
    assert score(task, "pittsburgh |or| pgh airport").score == 1.0


def test_must_include_plain_string_quirk(task_factory):
    task = string_task(task_factory, {"must_include": "yjlou"})
    assert task.eval.reference_answers.must_include == ("yjlou",)
    assert score(task, "It is yjlou").score == 1.0


def test_must_include_helper_flags():
    assert must_include("0", "a 0 b", tokenize=True) == 1.0
    assert must_include("0", "a 10 b", tokenize=False) == 1.0
    assert must_include("0", "a 10 b", tokenize=True) == 0.0


def test_fuzzy_match_webarena_calls_judge_per_reference(task_factory, stub_judge):
    task = string_task(task_factory, {"fuzzy_match": ["red shoes", "size 9"]})
    stub_judge.fuzzy = lambda pred, ref, q: 0.0 if ref == "size 9" else 1.0
    result = score(task, "Red shoes", judge=stub_judge)
    assert result.score == 0.0
    assert [c[2] for c in stub_judge.calls] == ["red shoes", "size 9"]
    assert stub_judge.calls[0][1] == "red shoes"  # the cleaned answer
    assert stub_judge.calls[0][3] == "What is the answer?"
    assert result.details["judge"] == "stub"


def test_fuzzy_match_lite_joins_references(task_factory, stub_judge):
    task = string_task(task_factory, {"fuzzy_match": ["red shoes", "size 9"]})
    result = score(task, "red shoes in size 9", rules="webarena_lite", judge=stub_judge)
    assert result.score == 1.0
    assert [c[2] for c in stub_judge.calls] == ["red shoes, size 9"]


def test_fuzzy_match_empty_answer_needs_no_judge(task_factory):
    task = string_task(task_factory, {"fuzzy_match": ["red shoes"]})
    assert score(task, None).score == 0.0
    assert score(task, "").score == 0.0


def test_fuzzy_match_without_judge_raises(task_factory):
    task = string_task(task_factory, {"fuzzy_match": ["red shoes"]})
    with pytest.raises(EvaluatorError, match="task 1: fuzzy_match needs a judge"):
        score(task, "red shoes")


@pytest.mark.parametrize("rules", ["webarena", "webarena_lite"])
def test_na_convention(task_factory, stub_judge, rules):
    task = string_task(task_factory, {"fuzzy_match": "N/A"}, string_note="There is no review about price")
    assert task.eval.reference_answers.fuzzy_na
    # an exact N/A needs no judge
    assert score(task, "N/A", rules=rules).score == 1.0
    assert score(task, "'n/a'", rules=rules).score == 1.0
    # otherwise the reason is judged against string_note
    stub_judge.na = lambda pred, reason, q: 1.0 if "review" in pred else 0.0
    ok = score(task, "N/A: the product has no reviews about its price", rules=rules, judge=stub_judge)
    assert ok.score == 1.0 and ok.details["judge"] == "stub"
    assert stub_judge.calls[-1][:3] == ("na", "n/a: the product has no reviews about its price",
                                        "There is no review about price")
    assert score(task, "The price is $5", rules=rules, judge=stub_judge).score == 0.0
    with pytest.raises(EvaluatorError, match="N/A reason"):
        score(task, "The price is $5", rules=rules)


def test_na_list_form_goes_to_fuzzy_match(task_factory, stub_judge):
    """``fuzzy_match: ["N/A"]`` (a list) is an ordinary fuzzy reference, as in WebArena."""
    task = string_task(task_factory, {"fuzzy_match": ["N/A"]})
    assert not task.eval.reference_answers.fuzzy_na
    score(task, "not possible", judge=stub_judge)
    assert stub_judge.calls == [("fuzzy", "not possible", "N/A", "What is the answer?")]


def test_exact_na(task_factory):
    task = string_task(task_factory, {"exact_match": "N/A"})
    assert score(task, "N/A").score == 1.0
    assert score(task, "N/A, because nothing matches").score == 0.0


def test_approaches_multiply(task_factory, stub_judge):
    task = string_task(task_factory, {"must_include": ["42"], "fuzzy_match": ["forty-two"]})
    stub_judge.fuzzy = lambda *a: 0.0
    assert score(task, "42", judge=stub_judge).score == 0.0
    stub_judge.fuzzy = lambda *a: 1.0
    assert score(task, "42", judge=stub_judge).score == 1.0
    assert score(task, "41", judge=stub_judge).score == 0.0


def test_placeholders_in_references_are_resolved(task_factory):
    task = string_task(task_factory, {"must_include": ["__GITLAB__/byteblaze"]})
    assert score(task, "see http://127.0.0.1:8023/byteblaze/repo").score == 1.0


def test_offline_judge_is_reported(task_factory):
    task = string_task(task_factory, {"fuzzy_match": ["Pittsburgh International Airport"]})
    result = score(task, "It is the Pittsburgh International Airport.", judge=OfflineJudge())
    assert result.score == 1.0
    assert result.details["judge"] == "offline-fallback"
    assert result.details["components"][0]["judge"] == "offline-fallback"


def test_unknown_rule_set_raises(task_factory):
    task = string_task(task_factory, {"exact_match": "x"})
    with pytest.raises(EvaluatorError, match="unknown rule set"):
        score(task, "x", rules="visualwebarena")
