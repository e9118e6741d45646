"""The horizon ladder: task tiers graded by reference-solution length, made from the bundled templates.

A tier task is an instance of one of the bundled templates (same intent, same eval block, answers computed
from the same seeded world) that starts deeper in the site, on the page the first ``skip`` steps of the
template's reference solution lead to, as WebArena's tasks often do (a product page, an order page, a forum
listing). Its reference solution is the rest of the template's solution, replayed from that start. The tiers:

- tier 1: 1-2 steps (the answer or the target is on the start page: ``stop [answer]``, or one action then
  ``stop``);
- tier 2: 3-4 steps;
- tier 3: 5 or more.

Each tier has its own ``train`` / ``test`` / ``test_unseen`` splits (``tier1_train``, ``tier1_test``,
``tier1_test_unseen``, ...). A variant of a template held out of training in the bundled set (``unseen``) is
held out at every tier, so no split of any tier trains on a template that a ``test_unseen`` split holds. A
tier task never reuses an instance (slot values) of the bundled files or of another tier, so no held-out task
shares its intent with any training task. Variant ``tier * 1000 + base id`` is the tier's template id
(``intent_template_id``; ``1102`` is template 102 at tier 1) and ``base_template_id`` names the template.
Task ids are ``tier * 10000 + n``, apart from the bundled ids (0-156).

Tier 1 also has **fresh** held-out splits, ``tier1_fresh_test`` and ``tier1_fresh_test_unseen``: up to
:data:`FRESH_TASKS_PER_VARIANT` more instances of every tier-1 variant, sampled after every tier took its own
(so the splits above are unchanged by them), ids ``tier * 10000 + 5000 + n``. They are for measuring a trained
agent on more held-out tasks than its run was scored on, never for training or for choosing anything.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus

from webarena_gym.taskgen.admin import month_span
from webarena_gym.taskgen.build import (
    DEFAULT_TASK_SEED,
    SPLITS,
    all_templates,
    bundled_positions,
    storage_state_name,
)
from webarena_gym.taskgen.world import (
    ADMIN,
    CUSTOMER_EMAIL,
    FORUM,
    FORUM_USER,
    SHOP,
    subcategories,
    unique_products,
)

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.sites.data import SiteData
    from webarena_gym.taskgen.spec import Instance, Template

TIERS = (1, 2, 3)
"""The tiers of the ladder, shortest first."""
TIER_STEPS: dict[int, tuple[int, int | None]] = {1: (1, 2), 2: (3, 4), 3: (5, None)}
"""Reference-solution length (steps, the final ``stop`` counted) of each tier: ``(min, max)``, None = open."""
TASK_ID_BASE = 10000
"""Tier ``t``'s task ids are ``t * TASK_ID_BASE + n`` (the bundled ids are 0-156)."""
TASKS_PER_VARIANT = 6
"""Instances sampled per variant of a training template (about a third go to the tier's ``test``)."""
TASKS_PER_UNSEEN_VARIANT = 5
"""Instances sampled per variant of a held-out template (all to the tier's ``test_unseen``)."""
MIN_TASKS_PER_VARIANT = 3
"""Fewer free instances than this is an error (the variant list asks for more than the world holds)."""
FRESH_TIERS = (1,)
"""Tiers with fresh held-out splits."""
FRESH_TASKS_PER_VARIANT = 8
"""Fresh held-out instances per variant of those tiers, at most (fewer where the world has fewer left)."""
FRESH_ID_OFFSET = 5000
"""A fresh task's id is ``tier * TASK_ID_BASE + FRESH_ID_OFFSET + n``."""


def tier_split(tier: int, split: str) -> str:
    """The name of a tier's split: ``tier_split(1, "test") == "tier1_test"``."""
    if tier not in TIERS or split not in SPLITS:
        raise ValueError(f"no tier split for tier {tier!r}, split {split!r}; tiers {TIERS}, splits {SPLITS}")
    return f"tier{tier}_{split}"


TIER_SPLITS = tuple(tier_split(t, s) for t in TIERS for s in SPLITS)
"""Every tier split: ``tier1_train``, ``tier1_test``, ``tier1_test_unseen``, ``tier2_train``..."""


def fresh_split(tier: int, split: str) -> str:
    """The name of a tier's fresh held-out split: ``fresh_split(1, "test") == "tier1_fresh_test"``."""
    if tier not in FRESH_TIERS or split not in SPLITS[1:]:
        raise ValueError(f"no fresh split for tier {tier!r}, split {split!r}; tiers {FRESH_TIERS}, splits "
                         f"{SPLITS[1:]}")
    return f"tier{tier}_fresh_{split}"


FRESH_SPLITS = tuple(fresh_split(t, s) for t in FRESH_TIERS for s in SPLITS[1:])
"""Every fresh held-out split: ``tier1_fresh_test``, ``tier1_fresh_test_unseen``."""


def in_tier(tier: int, steps: int) -> bool:
    """Whether a reference solution of ``steps`` steps belongs to ``tier``."""
    low, high = TIER_STEPS[tier]
    return steps >= low and (high is None or steps <= high)


class Lookup:
    """Pages of the seeded world by the names the instances carry (product name, order number, post title)."""

    def __init__(self, data: SiteData) -> None:
        self.data = data

    @cached_property
    def products(self) -> dict[str, dict[str, Any]]:
        """Products with a unique name, by name."""
        return {p["name"]: p for p in unique_products(self.data)}

    @cached_property
    def categories(self) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """(top category, subcategory) by subcategory name."""
        pairs = subcategories(self.data)
        names = [sub["name"] for _, sub in pairs]
        if len(set(names)) != len(names):
            raise ValueError("two subcategories share a name: a category start page would be ambiguous")
        return {sub["name"]: (top, sub) for top, sub in pairs}

    @cached_property
    def shop_orders(self) -> dict[str, dict[str, Any]]:
        """The customer's orders by order number."""
        return {o["increment_id"]: o for o in self.data.orders(customer_email=CUSTOMER_EMAIL)}

    @cached_property
    def admin_orders(self) -> dict[str, dict[str, Any]]:
        """Every order by order number."""
        return {o["increment_id"]: o for o in self.data.orders()}

    def post(self, forum: str, title: str) -> dict[str, Any]:
        """The post of ``forum`` with ``title`` (the templates only use titles unique in their forum)."""
        found = [p for p in self.data.posts(forum, sort="new") if p["title"] == title]
        if len(found) != 1:
            raise ValueError(f"{len(found)} posts titled {title!r} in f/{forum}")
        return found[0]

    def own_post(self, title: str) -> dict[str, Any]:
        """The forum account's post with ``title``."""
        found = [p for p in self.data.posts(username=FORUM_USER, sort="new") if p["title"] == title]
        if len(found) != 1:
            raise ValueError(f"{len(found)} posts of {FORUM_USER} titled {title!r}")
        return found[0]


StartFn = Callable[[Lookup, "Instance"], str]
"""The start URL (with placeholders) of a variant's instance."""


def _product_page(look: Lookup, inst: Instance) -> str:
    return f"{SHOP}/{look.products[inst.values['product']]['url_key']}.html"


def _search_results(look: Lookup, inst: Instance) -> str:
    return f"{SHOP}/catalogsearch/result/?q={quote_plus(inst.values['product'])}"


def _subcategory_page(look: Lookup, inst: Instance) -> str:
    return f"{SHOP}/{look.categories[inst.values['category']][1]['url_path']}.html"


def _top_category_page(look: Lookup, inst: Instance) -> str:
    return f"{SHOP}/{look.categories[inst.values['category']][0]['url_path']}.html"


def _shop_order_page(look: Lookup, inst: Instance) -> str:
    return f"{SHOP}/sales/order/view/order_id/{look.shop_orders[inst.values['order']]['id']}/"


def _admin_order_page(look: Lookup, inst: Instance) -> str:
    return f"{ADMIN}/sales/order/view/order_id/{look.admin_orders[inst.values['order']]['id']}/"


def _admin_product_page(look: Lookup, inst: Instance) -> str:
    return f"{ADMIN}/catalog/product/edit/id/{look.products[inst.values['product']]['id']}/"


def _admin_review_page(look: Lookup, inst: Instance) -> str:
    names = [s["target"]["name"] for s in inst.solution if s.get("action") == "click"]
    review = next(int(m.group(1)) for n in names if (m := re.fullmatch(r"Edit review (\d+)", n)))
    return f"{ADMIN}/review/product/edit/id/{review}/"


def _report(path: str) -> StartFn:
    """An admin report already shown for the instance's month (``values["month"]``, e.g. ``March 2023``)."""

    def start(look: Lookup, inst: Instance) -> str:
        moment = datetime.strptime(str(inst.values["month"]), "%B %Y")
        _, first, last = month_span(f"{moment:%Y-%m}")
        return f"{ADMIN}/reports/report_sales/{path}/?from={first}&to={last}&period=month&show=1"

    return start


def _forum_page(look: Lookup, inst: Instance) -> str:
    return f"{FORUM}/f/{inst.values['forum']}"


def _post_page(look: Lookup, inst: Instance) -> str:
    post = look.post(inst.values["forum"], inst.values["title"])
    return f"{FORUM}/f/{post['forum_name']}/{post['id']}"


def _own_post_page(look: Lookup, inst: Instance) -> str:
    post = look.own_post(inst.values["old"])
    return f"{FORUM}/f/{post['forum_name']}/{post['id']}"


def _fixed(url: str) -> StartFn:
    def start(look: Lookup, inst: Instance) -> str:
        return url

    return start


def _forum_sorted(sort: str) -> StartFn:
    def start(look: Lookup, inst: Instance) -> str:
        return f"{FORUM}/f/{inst.values['forum']}?sort={sort}"

    return start


@dataclass(frozen=True)
class Variant:
    """One bundled template at one tier: its tasks start where the first ``skip`` solution steps lead."""

    base_id: int
    """``intent_template_id`` of the bundled template."""
    tier: int
    """Tier of the variant (every instance's remaining solution must have that tier's length)."""
    skip: int
    """Leading steps of the template's reference solution that the start page replaces."""
    start: StartFn
    """The start URL of an instance (the page those ``skip`` steps lead to)."""
    count: int | None = None
    """Instances sampled (default :data:`TASKS_PER_VARIANT` or :data:`TASKS_PER_UNSEEN_VARIANT`)."""

    @property
    def template_id(self) -> int:
        """The variant's ``intent_template_id``: ``tier * 1000 + base_id``."""
        return self.tier * 1000 + self.base_id


VARIANTS: tuple[Variant, ...] = (
    # ---- tier 1: the answer or the target is on the start page
    Variant(102, 1, 2, _product_page),  # latest review author, on the product page: stop [nickname]
    Variant(103, 1, 1, _search_results),  # open the product page, from the search results
    Variant(107, 1, 2, _product_page),  # add to the wish list, on the product page
    Variant(112, 1, -1, _shop_order_page),  # products of an order, on the order page
    Variant(113, 1, 2, _subcategory_page),  # count under $10: the price filter, on the category page
    Variant(105, 1, 2, _subcategory_page),  # (unseen) a price range, on the category page
    Variant(114, 1, 1, _fixed(f"{SHOP}/sales/order/history/")),  # (unseen) order total, on the history
    Variant(201, 1, 4, _report("bestsellers")),  # best seller of a month, on that month's report
    Variant(204, 1, 3, _admin_order_page),  # customer email, on the admin order page
    Variant(205, 1, 4, _report("sales")),  # (unseen) sales total of a month, on that month's report
    Variant(206, 1, 1, _fixed(f"{ADMIN}/customer/index/")),  # customer phone, on the customer grid
    Variant(207, 1, 4, _admin_order_page),  # cancel an order, on its page
    Variant(301, 1, 2, _forum_page),  # top post title: sort by Top, on the forum page
    Variant(302, 1, 2, _forum_page),  # most comments: sort by Most commented, on the forum page
    Variant(303, 1, 2, _forum_page),  # a sort order, on the forum page
    Variant(305, 1, 3, _forum_sorted("new")),  # a post's score, on the listing that shows it
    Variant(308, 1, 3, _forum_sorted("new")),  # upvote a post, on the listing that shows it
    Variant(304, 1, 3, _forum_sorted("top")),  # (unseen) top author's biography: open their profile
    # ---- tier 2: 3-4 steps
    Variant(101, 2, 2, _subcategory_page),  # cheapest: sort by price, on the category page
    Variant(104, 2, 2, _subcategory_page),  # sort by price (and direction), on the category page
    Variant(106, 2, 2, _product_page),  # add a quantity to the cart, on the product page
    Variant(110, 2, 2, _fixed(f"{SHOP}/customer/account/edit/")),  # rename, on the account form
    Variant(105, 2, 1, _top_category_page),  # (unseen) a price range, from the top category page
    Variant(203, 2, 1, _fixed(f"{ADMIN}/sales/order/")),  # a customer's orders, on the order grid
    Variant(204, 2, 1, _fixed(f"{ADMIN}/sales/order/")),  # customer email, from the order grid
    Variant(208, 2, 4, _admin_order_page),  # status and comment, on the order page
    Variant(209, 2, 3, _admin_product_page),  # change a price, on the product's edit page
    Variant(210, 2, 3, _admin_product_page),  # disable a product, on its edit page
    Variant(205, 2, 1, _fixed(f"{ADMIN}/reports/report_sales/sales/")),  # (unseen) sales total, report
    Variant(211, 2, 5, _admin_review_page),  # (unseen) approve a review, on its edit page
    Variant(303, 2, 1, _fixed(f"{FORUM}/forums")),  # a sort order, from the forum list
    Variant(306, 2, 4, _post_page, count=4),  # comment, on the post page
    Variant(307, 2, 3, lambda look, inst: f"{FORUM}/submit/{inst.values['forum']}", count=4),  # new post
    Variant(311, 2, 2, _forum_page, count=4),  # most commented author, from the forum page
    Variant(310, 2, 2, _own_post_page, count=4),  # (unseen) rename my post, on its page
    # ---- tier 3: 5 steps or more
    Variant(101, 3, 0, _fixed(SHOP)),  # cheapest in a category, from the home page
    Variant(104, 3, 0, _fixed(SHOP)),  # category sorted by price, from the home page
    Variant(106, 3, 0, _fixed(SHOP)),  # add a quantity to the cart, from the home page
    Variant(108, 3, 2, _product_page),  # buy, from the product page
    Variant(111, 3, 2, _product_page),  # (unseen) write a review, on the product page
    Variant(201, 3, 0, _fixed(ADMIN)),  # best seller of a month, from the dashboard
    Variant(209, 3, 0, _fixed(ADMIN)),  # change a price, from the dashboard
    Variant(210, 3, 0, _fixed(ADMIN)),  # disable a product, from the dashboard
    Variant(205, 3, 0, _fixed(ADMIN)),  # (unseen) sales total, from the dashboard
    Variant(211, 3, 0, _fixed(ADMIN), count=4),  # (unseen) approve a review, from the dashboard
    Variant(308, 3, 0, _fixed(FORUM)),  # upvote a post, from the front page
    Variant(306, 3, 0, _fixed(FORUM), count=4),  # comment on a post, from the front page
    Variant(307, 3, 0, _fixed(FORUM), count=4),  # submit a post, from the front page
    Variant(311, 3, 0, _fixed(FORUM), count=3),  # most commented author, from the front page
    Variant(310, 3, 0, _fixed(FORUM)),  # (unseen) rename my post, from the front page
)
"""The ladder. ``skip=-1`` keeps only the final ``stop``."""


def _tail(variant: Variant, solution: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    steps = list(solution[-1:] if variant.skip < 0 else solution[variant.skip:])
    if not steps or steps[-1].get("action") != "stop":
        raise ValueError(f"variant {variant.template_id}: the remaining solution does not end with stop")
    return steps


def split_of_variant(unseen: bool, index: int, count: int) -> str:
    """The (untiered) split of the ``index``-th of ``count`` sampled instances of a variant: every one to
    ``test_unseen`` for a held-out template, else the last ``round(count / 3)`` (at least 1) to ``test``."""
    if unseen:
        return "test_unseen"
    return "test" if index >= count - max(1, round(count / 3)) else "train"


def generate_tiers(
    seed: int = DEFAULT_TASK_SEED, *, world_seed: int | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every tier task entry, by tier split (:data:`TIER_SPLITS`, then :data:`FRESH_SPLITS`), WebArena format
    plus ``split``, ``tier``, ``base_template_id`` and ``reference_solution``; reproducible byte for byte for
    one ``seed``."""
    from webarena_gym.sites.data import SiteData
    from webarena_gym.sites.seed import DEFAULT_SEED

    templates = {t.template_id: t for t in all_templates()}
    entries: list[dict[str, Any]] = []
    with SiteData(seed=DEFAULT_SEED if world_seed is None else world_seed) as data:
        look = Lookup(data)
        candidates: dict[int, list[Instance]] = {}
        used: dict[int, set[int]] = {}
        bundled_intents: set[str] = set()
        for variant in sorted(VARIANTS, key=lambda v: (v.tier, v.base_id)):
            base = templates.get(variant.base_id)
            if base is None:
                raise ValueError(f"variant {variant.template_id}: no bundled template {variant.base_id}")
            if variant.template_id in templates:
                raise ValueError(f"variant id {variant.template_id} is a bundled template id")
            if variant.base_id not in candidates:
                candidates[variant.base_id] = base.instances(data)
                positions = bundled_positions(base, len(candidates[variant.base_id]), seed)
                used[variant.base_id] = set(positions)
                bundled_intents |= {base.intent(candidates[variant.base_id][p].values) for p in positions}
            pool = candidates[variant.base_id]
            free = [i for i in range(len(pool)) if i not in used[variant.base_id]]
            wanted = variant.count or (TASKS_PER_UNSEEN_VARIANT if base.unseen else TASKS_PER_VARIANT)
            count = min(wanted, len(free))
            if count < MIN_TASKS_PER_VARIANT:
                raise ValueError(f"variant {variant.template_id}: only {len(free)} unused instance(s) of "
                                 f"template {base.slug} left, fewer than {MIN_TASKS_PER_VARIANT}")
            chosen = random.Random(f"{seed}/tier/{variant.template_id}").sample(free, count)
            used[variant.base_id].update(chosen)
            for index, position in enumerate(chosen):
                split = tier_split(variant.tier, split_of_variant(base.unseen, index, count))
                task_id = variant.tier * TASK_ID_BASE + sum(1 for e in entries if e["tier"] == variant.tier)
                entries.append(_entry(variant, base, pool[position], look, task_id, split))
        # The fresh held-out instances: drawn from what every tier left, so the splits above stay as they are.
        for variant in sorted(VARIANTS, key=lambda v: (v.tier, v.base_id)):
            if variant.tier not in FRESH_TIERS:
                continue
            base = templates[variant.base_id]
            pool = candidates[variant.base_id]
            free = [i for i in range(len(pool)) if i not in used[variant.base_id]]
            count = min(FRESH_TASKS_PER_VARIANT, len(free))
            chosen = random.Random(f"{seed}/fresh/{variant.template_id}").sample(free, count)
            used[variant.base_id].update(chosen)
            split = fresh_split(variant.tier, "test_unseen" if base.unseen else "test")
            first = variant.tier * TASK_ID_BASE + FRESH_ID_OFFSET
            for position in chosen:
                task_id = first + sum(e["tier"] == variant.tier and e["task_id"] >= first for e in entries)
                entries.append(_entry(variant, base, pool[position], look, task_id, split))
    _validate(entries, bundled_intents)
    return {split: [e for e in entries if e["split"] == split] for split in (*TIER_SPLITS, *FRESH_SPLITS)}


def _entry(
    variant: Variant, base: Template, instance: Instance, look: Lookup, task_id: int, split: str
) -> dict[str, Any]:
    steps = _tail(variant, instance.solution)
    if not in_tier(variant.tier, len(steps)):
        raise ValueError(f"variant {variant.template_id} ({base.slug}): a {len(steps)}-step solution is not "
                         f"tier {variant.tier} ({TIER_STEPS[variant.tier]})")
    return {
        "sites": list(base.sites),
        "task_id": task_id,
        "require_login": True,
        "storage_state": storage_state_name(base.sites),
        "start_url": variant.start(look, instance),
        "geolocation": None,
        "intent_template": base.intent_template,
        "instantiation_dict": dict(instance.values),
        "intent": base.intent(instance.values),
        "require_reset": base.state_changing,
        "eval": instance.eval,
        "intent_template_id": variant.template_id,
        "split": split,
        "tier": variant.tier,
        "base_template_id": base.template_id,
        "reference_solution": steps,
    }


def _validate(entries: list[dict[str, Any]], bundled_intents: set[str]) -> None:
    """Every entry loads and gets an evaluator; intents are unique, also against the bundled files."""
    from webarena_gym.evaluators import build_evaluator
    from webarena_gym.tasks import load_tasks

    intents = [e["intent"] for e in entries]
    repeated = sorted({i for i in intents if intents.count(i) > 1} | (set(intents) & bundled_intents))
    if repeated:
        raise ValueError(f"intents repeat: {repeated[:3]}")
    for task in load_tasks(entries):
        build_evaluator(task)


def tier_file_name(split: str) -> str:
    """The bundled file of a tier split: ``embedded_tier1_train.json``."""
    return f"embedded_{split}.json"


def describe(entries: list[dict[str, Any]]) -> str:
    """A compact table: tier x site family x split counts and the reference-length range."""
    from collections import Counter

    counts: Counter[tuple[int, str, str]] = Counter()
    lengths: dict[int, list[int]] = {}
    for e in entries:
        site = "+".join(e["sites"])
        counts[(e["tier"], site, e["split"].split("_", 1)[1])] += 1
        lengths.setdefault(e["tier"], []).append(len(e["reference_solution"]))
    lines = ["tier  site            train  test  test_unseen  steps"]
    for tier in TIERS:
        for site in sorted({s for t, s, _ in counts if t == tier}):
            row = [counts[(tier, site, s)] for s in SPLITS]
            lines.append(f"{tier:<5} {site:<15} {row[0]:>5} {row[1]:>5} {row[2]:>12}")
        steps = lengths.get(tier, [0])
        total = [sum(counts[(tier, s, sp)] for s in {x for t, x, _ in counts if t == tier}) for sp in SPLITS]
        lines.append(f"{tier:<5} {'all':<15} {total[0]:>5} {total[1]:>5} {total[2]:>12}  "
                     f"{min(steps)}-{max(steps)}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m webarena_gym.taskgen.tiers``: the :func:`describe` table of the committed tier files."""
    import argparse

    from webarena_gym.embedded import load_entries

    parser = argparse.ArgumentParser(prog="python -m webarena_gym.taskgen.tiers", description=main.__doc__)
    parser.parse_args(argv)
    print(describe(load_entries("tiers")), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
