"""The bundled embedded task set without a browser: loading, splits, determinism, validation, answers that
trivial policies cannot hit, the summary, and the reference-solution resolver."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from webarena_gym import load_tasks
from webarena_gym.actions import parse_action
from webarena_gym.embedded import DATA_DIR, SPLITS, load_entries
from webarena_gym.evaluators import EvalContext, OfflineJudge, build_evaluator
from webarena_gym.reference import (
    ReferenceSolutionError,
    find_element,
    parse_axtree,
    step_to_action,
)
from webarena_gym.taskgen import __main__ as taskgen_cli
from webarena_gym.taskgen import all_templates, generate, render
from webarena_gym.taskgen.summary import summarize
from webarena_gym.tasks import SiteURLs, TaskConfig

SITES = SiteURLs(
    shopping="http://127.0.0.1:7770",
    shopping_admin="http://127.0.0.1:7780/admin",
    reddit="http://127.0.0.1:9999",
)
WEBARENA_FIELDS = (
    "sites",
    "task_id",
    "require_login",
    "storage_state",
    "start_url",
    "geolocation",
    "intent_template",
    "instantiation_dict",
    "intent",
    "require_reset",
    "eval",
    "intent_template_id",
)
EVAL_FIELDS = (
    "eval_types",
    "reference_answers",
    "reference_url",
    "program_html",
    "string_note",
    "reference_answer_raw_annotation",
)
TRIVIAL_ANSWERS = ("", "hello", "0", "1", "yes", "no", "N/A", "none", "$0.00")


@pytest.fixture(scope="module")
def entries() -> list[dict[str, Any]]:
    return load_entries(None)


@pytest.fixture(scope="module")
def tasks() -> list[TaskConfig]:
    return load_tasks("embedded")


def test_load_tasks_counts_and_splits(tasks: list[TaskConfig]) -> None:
    per_split = {split: load_tasks(f"embedded:{split}") for split in SPLITS}
    assert len(tasks) == sum(len(v) for v in per_split.values()) >= 150
    assert len({t.intent_template_id for t in tasks}) >= 30
    for split, group in per_split.items():
        assert group and all(t.extras["split"] == split for t in group)
    assert len(per_split["train"]) > len(per_split["test"]) and len(per_split["train"]) > len(
        per_split["test_unseen"]
    )
    assert sorted(t.task_id for t in tasks) == list(range(len(tasks)))
    assert {frozenset(t.sites) for t in tasks} >= {
        frozenset({"shopping"}),
        frozenset({"shopping_admin"}),
        frozenset({"reddit"}),
    }
    assert any(len(t.sites) > 1 for t in tasks), "cross-site tasks"


def test_splits_are_disjoint_and_unseen_templates_never_trained(tasks: list[TaskConfig]) -> None:
    templates: dict[str, set[int]] = defaultdict(set)
    values: dict[str, set[str]] = defaultdict(set)
    for task in tasks:
        templates[task.extras["split"]].add(task.intent_template_id)  # type: ignore[arg-type]
        values[task.extras["split"]].add(f"{task.intent_template_id}:{json.dumps(task.instantiation_dict)}")
    assert not templates["test_unseen"] & (templates["train"] | templates["test"])
    assert templates["test"] <= templates["train"], "test holds new instances of training templates"
    assert not values["test"] & values["train"]
    unseen = {t.template_id for t in all_templates() if t.unseen}
    assert templates["test_unseen"] == unseen


def test_every_task_is_a_valid_webarena_entry(entries: list[dict[str, Any]], tasks: list[TaskConfig]) -> None:
    by_id = {t.template_id: t for t in all_templates()}
    for entry, task in zip(entries, tasks, strict=True):
        assert list(entry)[: len(WEBARENA_FIELDS)] == list(WEBARENA_FIELDS), entry["task_id"]
        assert all(field in entry["eval"] for field in EVAL_FIELDS)
        template = by_id[entry["intent_template_id"]]
        assert entry["intent_template"] == template.intent_template
        assert entry["intent"] == template.intent(entry["instantiation_dict"])
        assert entry["require_login"] and entry["storage_state"].startswith("./.auth/")
        for url in task.start_urls:
            SITES.resolve(url)
        build_evaluator(task)
        assert not task.eval.needs_judge or task.eval.reference_answers.fuzzy_na  # type: ignore[union-attr]


def test_reference_solutions_use_the_action_grammar(entries: list[dict[str, Any]]) -> None:
    axtree = "\n".join(
        f"[{i}] {role} {name!r}"
        for i, (role, name) in enumerate(
            {
                (s["target"]["role"], s["target"]["name"])
                for e in entries
                for s in e["reference_solution"]
                if "target" in s
            },
            start=1,
        )
    )
    for entry in entries:
        steps = entry["reference_solution"]
        assert steps[-1]["action"] == "stop" and all(s["action"] != "stop" for s in steps[:-1])
        assert all(s["action"] != "goto" for s in steps), "reference solutions click their way"
        for step in steps:
            parse_action(step_to_action(step, axtree, SITES.resolve))


def test_generation_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert taskgen_cli.main(["--out", str(tmp_path)]) == 0
    for split in SPLITS:
        name = f"embedded_{split}.json"
        assert (tmp_path / name).read_bytes() == (DATA_DIR / name).read_bytes(), f"{name} is stale"
    assert taskgen_cli.main(["--out", str(DATA_DIR), "--check"]) == 0
    assert render(generate()["train"]) == (DATA_DIR / "embedded_train.json").read_text(encoding="utf-8")
    capsys.readouterr()


def _score(task: TaskConfig, answer: str, rules: str) -> float:
    ctx = EvalContext(answer=answer, page=None, context=None, sites=SITES, judge=OfflineJudge(), rules=rules)  # type: ignore[arg-type]
    return build_evaluator(task)(ctx).score


@pytest.mark.parametrize("rules", ["webarena", "webarena_lite"])
def test_string_answers_accept_the_reference_and_reject_trivial_answers(
    tasks: list[TaskConfig], rules: str
) -> None:
    string_tasks = [t for t in tasks if t.eval.eval_types == ("string_match",)]
    assert len(string_tasks) >= 40
    for task in string_tasks:
        reference = task.extras["reference_solution"][-1]["answer"]
        assert _score(task, reference, rules) == 1.0, (task.task_id, reference)
        na = task.eval.reference_answers.fuzzy_na  # type: ignore[union-attr]
        for answer in TRIVIAL_ANSWERS:
            if na and answer == "N/A":
                continue
            assert _score(task, answer, rules) == 0.0, (task.task_id, answer)
        if not na:
            assert _score(task, "N/A", rules) == 0.0


def test_must_include_references_are_not_single_tokens(tasks: list[TaskConfig]) -> None:
    for task in tasks:
        answers = task.eval.reference_answers
        for item in (answers.must_include or ()) if answers else ():
            assert len(item) >= 4 and not re.fullmatch(r"\d{1,3}", item), (task.task_id, item)
        for check in task.eval.program_html:
            for item in check.required_contents.must_include or ():
                assert len(item) >= 4, (task.task_id, item)


def test_state_changing_tasks_are_program_html(tasks: list[TaskConfig]) -> None:
    for task in tasks:
        assert task.require_reset == ("program_html" in task.eval.eval_types), task.task_id


def test_summary_tables(entries: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    from webarena_gym.taskgen import summary

    text = summarize(entries)
    assert f"**{len(entries)} tasks from " in text
    for heading in ("Tasks per split", "Tasks per site", "Tasks per eval type", "Tasks per template"):
        assert heading in text
    assert "| **total** |" in text and "| 402 | order-total-to-forum |" in text
    assert summary.main([]) == 0
    assert capsys.readouterr().out == text


# ---------------------------------------------------------------------------------------- solution resolver

_TREE = "\n".join(
    [
        "[1] RootWebArea 'Shop' focused: True",
        "\t[2] link 'Electronics'",
        '\t[3] link "Women\'s Clothing"',
        "\t[4] searchbox 'Search'",
        "\t\t[9] link 'Electronics'",
        "\t[12] combobox 'Sort By' hasPopup: menu expanded: False",
        "\t[13] button 'Add \\'Quoted\\' to Cart'",
    ]
)


def test_parse_axtree_reads_ids_roles_and_quoted_names() -> None:
    lines = parse_axtree(_TREE + "\n[... accessibility tree truncated: 3 more lines]")
    assert [(line.element_id, line.role, line.name, line.depth) for line in lines][1:4] == [
        (2, "link", "Electronics", 1),
        (3, "link", "Women's Clothing", 1),
        (4, "searchbox", "Search", 1),
    ]
    assert lines[-1].name == "Add 'Quoted' to Cart"


def test_find_element_by_role_name_and_nth() -> None:
    lines = parse_axtree(_TREE)
    assert find_element(lines, {"role": "link", "name": "Electronics"}) == 2
    assert find_element(lines, {"role": "link", "name": "Electronics", "nth": 1}) == 9
    with pytest.raises(ReferenceSolutionError, match="Electronics"):
        find_element(lines, {"role": "button", "name": "Electronics"})
    with pytest.raises(ReferenceSolutionError, match="match #2"):
        find_element(lines, {"role": "link", "name": "Electronics", "nth": 2})


def test_step_to_action() -> None:
    steps = [
        ({"action": "click", "target": {"role": "link", "name": "Women's Clothing"}}, "click [3]"),
        (
            {
                "action": "type",
                "target": {"role": "searchbox", "name": "Search"},
                "text": "yoga",
                "enter": True,
            },
            "type [4] [yoga] [1]",
        ),
        (
            {
                "action": "type",
                "target": {"role": "combobox", "name": "Sort By"},
                "text": "Price",
                "enter": False,
            },
            "type [12] [Price] [0]",
        ),
        (
            {"action": "goto", "url": "__SHOPPING__/checkout/cart/"},
            "goto [http://127.0.0.1:7770/checkout/cart/]",
        ),
        ({"action": "tab_focus", "index": 1}, "tab_focus [1]"),
        ({"action": "stop", "answer": "$1.00"}, "stop [$1.00]"),
        ({"action": "go_back"}, "go_back"),
    ]
    for step, action in steps:
        assert step_to_action(step, _TREE, SITES.resolve) == action
        parse_action(action)
    with pytest.raises(ReferenceSolutionError, match="unknown step"):
        step_to_action({"action": "teleport"}, _TREE)


# ------------------------------------------------------------------------------------ task source and world


def test_default_tasks_and_unknown_splits() -> None:
    from webarena_gym.embedded import default_tasks
    from webarena_gym.errors import TaskConfigError

    assert [t.task_id for t in default_tasks()] == [t.task_id for t in load_tasks("embedded:train")]
    assert len(default_tasks("all")) == len(load_tasks("embedded"))
    with pytest.raises(TaskConfigError, match="unknown embedded split"):
        load_tasks("embedded:validation")
    with pytest.raises(TaskConfigError, match="'all'"):
        default_tasks("validation")


def test_default_world_env_needs_no_sites_and_refuses_them() -> None:
    from webarena_gym.env import WebArenaLiteEnv
    from webarena_gym.evaluators import OfflineJudge

    env = WebArenaLiteEnv(split="test")
    try:
        assert env.world is not None and not env.world.started, "nothing starts before the first reset"
        assert {t.extras["split"] for t in env.tasks} == {"test"}
        assert isinstance(env.judge, OfflineJudge)
    finally:
        env.close()
    with pytest.raises(ValueError, match="task_file"):
        WebArenaLiteEnv(sites={"shopping": "http://127.0.0.1:1"})


def test_world_prepare_writes_a_login_state_per_task(tasks: list[TaskConfig]) -> None:
    from webarena_gym.embedded import EmbeddedWorld

    cross = next(t for t in tasks if set(t.sites) == {"shopping", "shopping_admin"})
    with EmbeddedWorld() as world:
        world.prepare(cross)
        state = json.loads((world.auth_dir / Path(cross.storage_state or "").name).read_text())
        names = sorted(c["name"].rsplit("_", 1)[0] for c in state["cookies"])
        assert names == ["admin_session", "shop_session"]
        digest = world.state_digest()
        world.prepare(cross)
        assert world.state_digest() == digest, "logins do not count as state"
        auth_dir = world.auth_dir
    assert not auth_dir.exists() and not world.started
