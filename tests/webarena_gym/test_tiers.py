"""The horizon ladder of the bundled task set (``webarena_gym.taskgen.tiers``): tier files and split names,
reference lengths as declared, split sizes and held-out semantics, byte-identical regeneration, trivial
answers offline; and through the real env (one shared env on every tier split): every reference solution
scores 1.0 and trivial policies score 0."""

from __future__ import annotations

import hashlib
import statistics
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, cast

import gymnasium as gym
import pytest

import webarena_gym
from webarena_gym import load_tasks
from webarena_gym.embedded import (
    DATA_DIR,
    FRESH_SPLITS,
    SPLIT_GROUPS,
    SPLITS,
    TIER_SPLITS,
    TIERS,
    default_tasks,
)
from webarena_gym.env import WebArenaLiteEnv
from webarena_gym.errors import TaskConfigError
from webarena_gym.evaluators import EvalContext, OfflineJudge, build_evaluator
from webarena_gym.reference import ReferenceSolutionError, parse_axtree, run_reference
from webarena_gym.taskgen import all_templates, render
from webarena_gym.taskgen import tiers as taskgen_tiers
from webarena_gym.tasks import SiteURLs, TaskConfig

BUNDLED_FILE_DIGESTS = {
    "train": "76fed3883bce65883881426b5f620adc9b79b3ac896c1d1dc1b8a278c5e77ab7",
    "test": "b59c0ce5ec204b9e64b7f240140294cfa9dafb9f5e6a7b3aca8c4ccb892425a4",
    "test_unseen": "18655ff6a7f6d027bee544e1d59195bb0869131681d6a43289036ff6cf54b117",
}
"""SHA-256 of the bundled files as committed before the tiers (bebb63d): the tiers leave them unchanged."""
SITE_FAMILIES = ("shopping", "shopping_admin", "reddit")
MIN_HELD_OUT = 30
MIN_TRAIN = 30
SITES = SiteURLs(
    shopping="http://127.0.0.1:7770",
    shopping_admin="http://127.0.0.1:7780/admin",
    reddit="http://127.0.0.1:9999",
)
TRIVIAL_ANSWERS = ("", "N/A", "hello", "0", "1", "yes", "no", "none")


@pytest.fixture(scope="module")
def tier_tasks() -> dict[str, list[TaskConfig]]:
    return {split: load_tasks(f"embedded:{split}") for split in (*TIER_SPLITS, *FRESH_SPLITS)}


def _tier_of(split: str) -> int:
    return int(split.split("_", 1)[0].removeprefix("tier"))


# ------------------------------------------------------------------------------------------ offline checks


def test_split_names_and_groups() -> None:
    assert taskgen_tiers.TIER_SPLITS == TIER_SPLITS and taskgen_tiers.TIERS == TIERS
    assert taskgen_tiers.FRESH_SPLITS == FRESH_SPLITS == ("tier1_fresh_test", "tier1_fresh_test_unseen")
    assert SPLIT_GROUPS["tier1"][3:] == FRESH_SPLITS and SPLIT_GROUPS["tier2"] == TIER_SPLITS[3:6]
    assert len(default_tasks("all")) == 157, "'all' is the three bundled splits, as before the tiers"
    for tier in TIERS:
        group = [t.task_id for t in default_tasks(f"tier{tier}")]
        parts = [t.task_id for s in SPLIT_GROUPS[f"tier{tier}"] for t in default_tasks(s)]
        assert group == sorted(parts) and len(set(group)) == len(group)
    assert len(default_tasks("tiers")) == sum(len(default_tasks(s)) for s in (*TIER_SPLITS, *FRESH_SPLITS))
    with pytest.raises(ValueError, match="no fresh split for tier 2"):
        taskgen_tiers.fresh_split(2, "test")
    with pytest.raises(TaskConfigError, match="tier4_train"):
        default_tasks("tier4_train")
    with pytest.raises(TaskConfigError, match="unknown embedded split"):
        load_tasks("embedded:tier1_validation")


def test_tier_lengths_sizes_and_sites(tier_tasks: dict[str, list[TaskConfig]]) -> None:
    for split, tasks in tier_tasks.items():
        tier = _tier_of(split)
        low, high = taskgen_tiers.TIER_STEPS[tier]
        for task in tasks:
            steps = len(task.extras["reference_solution"])
            assert task.extras["split"] == split and task.extras["tier"] == tier
            assert low <= steps and (high is None or steps <= high), (task.task_id, steps)
            assert task.intent_template_id == tier * 1000 + task.extras["base_template_id"]
            assert tier * 10000 <= task.task_id < (tier + 1) * 10000
    for tier in TIERS:
        train, test, unseen = (tier_tasks[f"tier{tier}_{s}"] for s in SPLITS)
        assert len(train) >= MIN_TRAIN and len(test) + len(unseen) >= MIN_HELD_OUT, tier
        for family in SITE_FAMILIES:
            assert any(t.sites == (family,) for t in train), (tier, family)
            assert any(t.sites == (family,) for t in test + unseen), (tier, family)
        assert {len(t.sites) for t in train + test + unseen} == {1}, "one site family per tier task"


def test_held_out_semantics_and_ids(tier_tasks: dict[str, list[TaskConfig]]) -> None:
    bundled = load_tasks("embedded")
    every = bundled + [t for tasks in tier_tasks.values() for t in tasks]
    ids = [t.task_id for t in every]
    assert len(set(ids)) == len(ids), "task ids collide"
    intents = Counter(t.intent for t in every)
    assert not [i for i, n in intents.items() if n > 1], "an intent repeats across the task files"
    unseen = {t.template_id for t in all_templates() if t.unseen}
    trained_bases: set[int] = {t.intent_template_id for t in bundled if t.extras["split"] == "train"}  # type: ignore[misc]
    for split, tasks in tier_tasks.items():
        bases = {t.extras["base_template_id"] for t in tasks}
        if split.endswith("_train"):
            trained_bases |= bases
        if split.endswith("_test_unseen"):
            assert bases <= unseen, split
        if split.endswith("_test"):
            templates = {t.intent_template_id for t in tasks}
            train = {t.intent_template_id for t in tier_tasks[f"tier{_tier_of(split)}_train"]}
            assert templates <= train, f"{split} holds new instances of its tier's training templates"
    assert not trained_bases & unseen, "a template some test_unseen split holds is trained on"


def test_fresh_splits_hold_more_held_out_instances_of_the_tier1_variants(
    tier_tasks: dict[str, list[TaskConfig]],
) -> None:
    first = 1 * taskgen_tiers.TASK_ID_BASE + taskgen_tiers.FRESH_ID_OFFSET
    fresh = [t for s in FRESH_SPLITS for t in tier_tasks[s]]
    core = [t for s in TIER_SPLITS for t in tier_tasks[s]]
    assert all(t.task_id >= first for t in fresh)
    assert all(not first <= t.task_id < 2 * taskgen_tiers.TASK_ID_BASE for t in core)
    assert sorted(t.task_id for t in fresh) == list(range(first, first + len(fresh)))
    per_variant = Counter(t.intent_template_id for t in fresh)
    tier1 = {v.template_id for v in taskgen_tiers.VARIANTS if v.tier == 1}
    assert set(per_variant) <= tier1 and len(per_variant) >= 16, "the variants with instances left"
    assert max(per_variant.values()) == taskgen_tiers.FRESH_TASKS_PER_VARIANT and len(fresh) >= 100
    assert {t.sites for t in tier_tasks["tier1_fresh_test_unseen"]} == {("shopping",), ("shopping_admin",)}


def test_bundled_files_unchanged() -> None:
    digests = {s: hashlib.sha256((DATA_DIR / f"embedded_{s}.json").read_bytes()).hexdigest() for s in SPLITS}
    assert digests == BUNDLED_FILE_DIGESTS


def test_generation_is_reproducible() -> None:
    generated = taskgen_tiers.generate_tiers()
    assert list(generated) == [*TIER_SPLITS, *FRESH_SPLITS]
    for split, entries in generated.items():
        path = DATA_DIR / taskgen_tiers.tier_file_name(split)
        assert render(entries) == path.read_text(encoding="utf-8"), f"{path.name} is stale"


def _score(task: TaskConfig, answer: str) -> float:
    ctx = EvalContext(answer=answer, page=None, context=None, sites=SITES, judge=OfflineJudge(),  # type: ignore[arg-type]
                      rules="webarena_lite")
    return build_evaluator(task)(ctx).score


def test_string_tasks_reject_trivial_answers(tier_tasks: dict[str, list[TaskConfig]]) -> None:
    string_tasks = [t for ts in tier_tasks.values() for t in ts if t.eval.eval_types == ("string_match",)]
    assert len(string_tasks) >= 50
    for task in string_tasks:
        assert _score(task, task.extras["reference_solution"][-1]["answer"]) == 1.0, task.task_id
        for answer in TRIVIAL_ANSWERS:
            assert _score(task, answer) == 0.0, (task.task_id, answer)


def test_url_tasks_do_not_start_on_their_target(tier_tasks: dict[str, list[TaskConfig]]) -> None:
    for tasks in tier_tasks.values():
        for task in tasks:
            if task.eval.eval_types == ("url_match",):
                start = SITES.resolve(task.start_urls[0])
                assert not any(SITES.resolve(u) in start for u in task.eval.reference_urls), task.task_id


def test_cotrain_config_reads_tier_splits() -> None:
    from cotrain.config import EnvConfig, EvalConfig
    from cotrain.tasks import eval_task_ids, train_task_ids

    env = EnvConfig(split="tier1_train", worker_split="tier1")
    train = train_task_ids(env)
    held_out = eval_task_ids(env, EvalConfig(split="tier1_test"), n_tasks=0)
    assert set(train) == {t.task_id for t in default_tasks("tier1_train")}
    assert set(held_out) == {t.task_id for t in default_tasks("tier1_test")}
    worker = {t.task_id for t in default_tasks(env.worker_split)}
    assert set(train) | set(held_out) <= worker


# ------------------------------------------------------------------------------------- through the real env


@pytest.fixture(scope="module")
def tiers_env(chromium_path: str) -> Iterator[gym.Env]:
    """One default-world env over every tier split, shared by the module's browser tests."""
    env = gym.make(webarena_gym.ENV_ID, browser={"executable_path": chromium_path}, split="tiers")
    yield env
    env.close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("split", (*TIER_SPLITS, *FRESH_SPLITS))
def test_every_tier_reference_solution_scores_one(
    tiers_env: gym.Env, split: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One test per tier split (each well inside the per-test timeout), all on the shared env."""
    tasks = [t for t in _env_tasks(tiers_env) if t.extras["split"] == split]
    assert tasks
    failures: list[str] = []
    seconds: list[float] = []
    for task in tasks:
        try:
            result = run_reference(tiers_env, task)
        except ReferenceSolutionError as exc:
            failures.append(str(exc))
            continue
        seconds.append(result.seconds)
        if result.reward != 1.0:
            failures.append(f"task {task.task_id}: reward {result.reward}: {result.info.get('eval')}")
    with capsys.disabled():
        print(f"\n{split}: replayed {len(seconds)} reference solutions in {sum(seconds):.0f}s "
              f"(per task median {statistics.median(seconds or [0]):.1f}s)")
    assert not failures, "\n".join(failures)


def _env_tasks(env: gym.Env) -> list[TaskConfig]:
    return cast(WebArenaLiteEnv, env.unwrapped).tasks


def _first_link(obs: dict[str, Any]) -> str:
    return f"click [{next(x for x in parse_axtree(obs['axtree']) if x.role == 'link').element_id}]"


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("tier", TIERS, ids=lambda tier: f"tier{tier}")
def test_trivial_policies_score_zero(
    tiers_env: gym.Env, tier: int, trivial_sweep: Callable[..., Any]
) -> None:
    """Scroll then stop with an empty answer (the page and the sites as the start left them) on every task
    of the tier whose score depends on the page or the sites; stop [N/A] at once, and a fixed click (the
    first link) then stop, on one task of every template of its ``train`` and ``test_unseen`` splits (the
    ``test`` split's templates are its ``train`` split's). String answers are checked exhaustively offline
    above. Each policy runs once per distinct start and every task of that start is scored on its end state
    (``trivial_sweep``, tests/webarena_gym/conftest.py); one test per tier (its three splits share starts)
    keeps each inside the per-test timeout."""
    core = [t for t in _env_tasks(tiers_env) if t.extras["split"] in TIER_SPLITS]  # fresh: same templates
    tasks = [t for t in core if t.extras["tier"] == tier]
    per_template: dict[int | None, TaskConfig] = {}
    for task in tasks:
        if not task.extras["split"].endswith("_test"):
            per_template.setdefault(task.intent_template_id, task)
    splits = {t.extras["split"] for t in per_template.values()}
    assert splits == {f"tier{tier}_train", f"tier{tier}_test_unseen"}
    policies: dict[str, tuple[list[Callable[[dict[str, str]], str]], list[tuple[TaskConfig, str]]]] = {
        "scroll": ([lambda _: "scroll [down]"],
                   [(t, "") for t in tasks if t.eval.eval_types != ("string_match",)]),
        "stop N/A": ([], [(t, "N/A") for t in per_template.values()]),
        "click": ([_first_link], [(t, "") for t in per_template.values()]),
    }
    scored: dict[str, float] = {}
    for name, (moves, items) in policies.items():
        sweep = trivial_sweep(tiers_env, items, moves)
        assert len(sweep.scores) == len(items) and sweep.episodes <= len(items)
        scored.update((f"{task_id} {name}", score) for (task_id, _), score in sweep.scores.items())
    assert len(scored) > len(tasks) / 2
    assert not {k: v for k, v in scored.items() if v != 0.0}
