"""Goal relevance in the prompt truncation (es_agent.axtree.truncate_axtree, es_agent.words): dates read as
numbers, words every line has count for nothing, and a relevant table cell keeps its whole row."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from es_agent.actions_space import CandidateConfig, answer_candidates, build_candidates
from es_agent.axtree import compact_axtree, goal_relevance, parse_axtree, truncate_axtree
from es_agent.words import relevance_words

DATES = [("2023-12-14", "$169.99"), ("2023-11-02", "$38.90"), ("2023-10-24", "$12.95"),
         ("2023-09-16", "$323.88"), ("2023-09-06", "$91.93"), ("2023-08-30", "$50.99"),
         ("2023-08-23", "$9.00")]


def _orders_page() -> str:
    """An order-history page as the embedded shop writes it: one row per order, the date and the total in
    separate cells, the pagination after the table."""
    lines = ["[1] RootWebArea 'My Orders' focused: True", "\t[2] link 'One Stop Market'"]
    lines += [f"\t\t[{3 + i}] link 'Category {name}'" for i, name in enumerate("ABCDEFGH")]
    lines += ["\t[20] table 'Orders'", "\t\t[21] row ''", "\t\t\t[22] columnheader 'Date'",
              "\t\t\t[23] columnheader 'Order Total'"]
    for k, (date, total) in enumerate(DATES):
        base = 30 + 10 * k
        lines += [f"\t\t[{base}] row ''", f"\t\t\t[{base + 1}] cell '{date}'",
                  f"\t\t\t[{base + 2}] cell 'Emma'", f"\t\t\t[{base + 3}] cell '{total}'",
                  f"\t\t\t[{base + 4}] cell 'View Order {k}'",
                  f"\t\t\t\t[{base + 5}] link 'View Order {k}'"]
    lines += ["\t[200] navigation 'Pagination'", "\t\t[201] link 'Page 2'", "\t[202] link 'Contact Us'"]
    return "\n".join(lines)


def _count(lines: Sequence[str]) -> list[int]:
    return [len(line.split()) + 2 for line in lines]


def test_named_dates_meet_iso_dates_and_numbers_lose_leading_zeros() -> None:
    assert relevance_words("the order I placed on August 30, 2023") >= {"8", "30", "2023", "order", "place"}
    assert relevance_words("2023-08-30") == {"2023", "8", "30"}
    assert relevance_words("30 Aug. 2023") >= {"8", "30", "2023"}
    assert relevance_words("sales in October 2023") >= {"10", "2023"}
    assert "5" not in relevance_words("You may cancel it")  # a bare "may" is not a month
    assert relevance_words("a b 7") == {"7"}  # one-letter words out, one-digit numbers in


def test_a_word_every_line_has_counts_for_nothing() -> None:
    lines = ["cell '2023-08-30'", "cell '2023-09-06'", "cell '2023-10-24'", "link 'Contact'"]
    rel = goal_relevance(lines, "What did I pay on August 30, 2023?")
    assert rel[0] == pytest.approx(math.log(4 / 1) * 2 + math.log(4 / 3))  # 30 and 8 once, 2023 3 times
    assert rel[1] == rel[2] == pytest.approx(math.log(4 / 3)) and rel[3] == 0.0
    assert goal_relevance(lines, "the and of") == [0.0] * 4
    assert goal_relevance(["cell '2023'", "cell '2023'"], "in 2023") == [0.0, 0.0]


def test_the_row_of_the_asked_date_is_kept_whole_with_its_total() -> None:
    page = _orders_page()
    goal = "How much did I pay in total for the order I placed on August 30, 2023?"
    full = sum(_count(page.splitlines())) + len(page.splitlines())
    kept, omitted = truncate_axtree(page, full // 2, _count, goal=goal, head_lines=2)
    assert omitted > 0 and sum(_count(kept.splitlines())) + len(kept.splitlines()) <= full // 2
    for needle in ("[81] cell '2023-08-30'", "[82] cell 'Emma'", "[83] cell '$50.99'",
                   "[85] link 'View Order 5'"):
        assert needle in kept
    assert "stop [$50.99]" in build_candidates(kept, goal)
    assert "[33] cell '$169.99'" not in kept  # another row's total is not what the goal asks for
    # Without the goal nothing ranks the rows, and the budget goes to the page's first lines.
    plain, _ = truncate_axtree(page, full // 2, _count, head_lines=2)
    assert "[83] cell '$50.99'" not in plain and "[2] link 'One Stop Market'" in plain


def test_a_small_budget_keeps_the_most_relevant_row_first() -> None:
    page = _orders_page()
    goal = "What was the total of the order of August 23, 2023?"
    kept, _ = truncate_axtree(page, 80, _count, goal=goal, head_lines=1)
    assert "[93] cell '$9.00'" in kept and "[95] link 'View Order 6'" in kept
    assert "[83] cell '$50.99'" not in kept


def test_the_asked_for_posts_points_and_the_asked_for_orders_total_make_the_answer_cut() -> None:
    posts = []
    for k, title in enumerate(["What is the best sci-fi movie?", "Blade Runner 2049 holds up well",
                               "Official discussion: Blade Runner 2049", "Dune part two thoughts"]):
        base = 100 + 20 * k
        posts += [f"\t[{base}] article '{title}'", f"\t\t[{base + 1}] heading '{title}'",
                  f"\t\t\t[{base + 2}] link '{title}'", f"\t\t[{base + 3}] StaticText 'Submitted by '",
                  f"\t\t[{base + 4}] link 'user{k}'", f"\t\t[{base + 5}] StaticText ' on '",
                  f"\t\t[{base + 6}] StaticText '2023-10-0{k + 1}'", f"\t\t[{base + 7}] StaticText ' in '",
                  f"\t\t[{base + 8}] link 'f/movies'", f"\t\t[{base + 9}] StaticText '{5 * k + 3} points'"]
    page = "\n".join(["[1] RootWebArea 'Movies' focused: True", *posts])
    goal = 'How many points does the post "Official discussion: Blade Runner 2049" in f/movies have?'
    config = CandidateConfig(max_answers=12)
    answers = answer_candidates(parse_axtree(page), goal, config)
    assert "13" in answers and "13 points" in answers  # the asked-for post's, although two posts come first
    assert "3" not in answers  # the first post's points are past the cut
    goal = "How much did I pay in total for the order I placed on August 30, 2023?"
    assert "$50.99" in answer_candidates(parse_axtree(compact_axtree(_orders_page())), goal, config)
