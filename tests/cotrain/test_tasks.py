"""Task selection: templates (WebArena ``intent_template_id``) or explicit ids, resolved once at the start of
a run against the bundled embedded task set, recorded in ``run.json`` and read back on resume; the shipped
configs resolve to non-empty, disjoint train and held-out task sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from toy_web_env import toy_config_dict

from cotrain.checkpoint import RunDir
from cotrain.config import EnvConfig, EvalConfig, config_from_dict, load_config
from cotrain.errors import ConfigError, RunDirError
from cotrain.tasks import RunTasks, eval_task_ids, resolve_tasks, template_task_ids, train_task_ids
from cotrain.trainer import resume, train

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture(scope="module")
def bundled() -> dict[int, Any]:
    """Every bundled embedded task by id, tiers included (the demo runs on tier 1) (``TaskConfig``:
    ``intent_template_id``, ``extras["split"]``)."""
    from webarena_gym.embedded import TIER_SPLITS
    from webarena_gym.tasks import load_tasks

    splits = ("train", "test", "test_unseen", *TIER_SPLITS)
    return {t.task_id: t for split in splits for t in load_tasks(f"embedded:{split}")}


def _of(bundled: dict[int, Any], split: str, templates: list[int]) -> set[int]:
    return {i for i, t in bundled.items() if t.extras["split"] == split and t.intent_template_id in templates}


# ------------------------------------------------------------------------------------------ config parsing


@pytest.mark.parametrize(("data", "message"), [
    ({"env": {"train_tasks": [1, 2], "train_templates": [501], "tasks_per_generation": 1}},
     r"env\.train_tasks / env\.train_templates: set one of env\.train_tasks and env\.train_templates, "
     "not both"),
    ({"eval": {"tasks": [1], "templates": [501]}}, r"eval\.tasks / eval\.templates: .*mutually exclusive"),
    ({"env": {"train_templates": []}}, r"env\.train_templates: must not be empty"),
    ({"eval": {"templates": []}}, r"eval\.templates: must not be empty"),
    ({"env": {"train_templates": [501, 503, 501]}},
     r"env\.train_templates: template\(s\) \[501\] listed more"),
    ({"env": {"train_templates": ["na-product-price"]}}, r"env\.train_templates\[0\]: expected int, got"),
    ({"eval": {"templates": 501}}, r"eval\.templates: expected a list of int"),
])
def test_template_keys_are_checked_when_parsed(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)


def test_template_keys_round_trip_and_override() -> None:
    cfg = load_config(CONFIGS / "smoke.toml", ["eval.templates=[501]", "env.train_templates=[503, 501]"])
    assert cfg.env.train_templates == (503, 501) and cfg.env.train_tasks is None
    assert cfg.eval.templates == (501,)
    assert config_from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    # switching a shipped config back to ids needs the templates cleared (they exclude each other)
    with pytest.raises(ConfigError, match="not both"):
        load_config(CONFIGS / "smoke.toml", ["env.train_tasks=[148, 154]"])
    ids = load_config(CONFIGS / "smoke.toml", ["env.train_tasks=[148, 154]", "env.train_templates=none"])
    assert train_task_ids(ids.env) == (148, 154)


# ------------------------------------------------------------------------------------------ resolution


def test_templates_resolve_against_the_bundled_tasks(bundled: dict[int, Any]) -> None:
    env = EnvConfig(split="train", tasks_per_generation=2)
    got = template_task_ids(env, "train", [503, 501], "env.train_templates")
    assert set(got) == _of(bundled, "train", [501, 503]) and len(got) == len(set(got)) >= 2
    # templates in the order listed, ids ascending within a template
    assert [bundled[t].intent_template_id for t in got] == sorted(
        (bundled[t].intent_template_id for t in got), key=[503, 501].index)
    assert all(list(g) == sorted(g) for g in (
        [t for t in got if bundled[t].intent_template_id == k] for k in (501, 503)))
    test = template_task_ids(env, "test", [501], "eval.templates")
    assert set(test) == _of(bundled, "test", [501]) and not set(test) & set(got)


@pytest.mark.parametrize(("templates", "message"), [
    ([999], r"env\.train_templates: unknown template 999 \(templates of split 'train': 101, "),
    ([501, 105], r"env\.train_templates: template 105 has no task in split 'train' "
                 r"\(its tasks are in split\(s\) \['test_unseen'\]\)"),
])
def test_unknown_or_absent_template_is_an_error_naming_it(templates: list[int], message: str) -> None:
    cfg = config_from_dict({"env": {"train_templates": templates, "tasks_per_generation": 1}})
    with pytest.raises(ConfigError, match=message):
        train_task_ids(cfg.env)


def test_too_few_template_tasks_and_templateless_envs_are_errors() -> None:
    cfg = config_from_dict({"env": {"train_templates": [501], "tasks_per_generation": 4}})
    with pytest.raises(ConfigError, match=r"env\.train_templates: 2 task\(s\) in split 'train', fewer than "
                                          r"env\.tasks_per_generation=4"):
        train_task_ids(cfg.env)
    toy = config_from_dict(toy_config_dict(env={"train_templates": [1]}, eval={"every": 1, "templates": [1]}))
    with pytest.raises(ConfigError, match=r"env\.train_templates: the tasks of 'CotrainToyWeb-v0' carry no "
                                          "intent_template_id"):
        train_task_ids(toy.env)
    with pytest.raises(ConfigError, match=r"eval\.templates: the tasks"):
        eval_task_ids(toy.env, toy.eval)


def test_eval_templates_apply_to_their_split_only_and_n_tasks_caps_them(bundled: dict[int, Any]) -> None:
    env, ev = EnvConfig(), EvalConfig(split="test", templates=(103, 501), n_tasks=0)
    got = eval_task_ids(env, ev)
    assert set(got) == _of(bundled, "test", [103, 501])
    assert bundled[got[0]].intent_template_id == 103  # the order listed
    assert eval_task_ids(env, EvalConfig(split="test", templates=(103, 501), n_tasks=1)) == got[:1]
    # another split (``esopt eval --split``) means every task of that split, as with eval.tasks
    unseen = eval_task_ids(env, ev, split="test_unseen", n_tasks=0)
    assert set(unseen) == {i for i, t in bundled.items() if t.extras["split"] == "test_unseen"}


@pytest.mark.parametrize("name", ["smoke.toml", "demo.toml"])
def test_shipped_configs_resolve_to_disjoint_train_and_held_out_tasks(name: str,
                                                                      bundled: dict[int, Any]) -> None:
    cfg = load_config(CONFIGS / name)
    assert cfg.env.train_templates and cfg.env.train_tasks is None  # no hard-coded task ids
    train_ids = train_task_ids(cfg.env)
    held_out = eval_task_ids(cfg.env, cfg.eval)  # what eval.every and `esopt eval` use
    assert train_ids and held_out and not set(train_ids) & set(held_out)
    assert len(train_ids) >= cfg.env.tasks_per_generation
    assert set(train_ids) == _of(bundled, cfg.env.split, list(cfg.env.train_templates))
    assert all(bundled[t].extras["split"] == cfg.eval.split for t in held_out)
    if cfg.eval.templates is not None:
        assert set(held_out) == _of(bundled, cfg.eval.split, list(cfg.eval.templates))
        # held-out instances of training templates (generalisation within a template)
        assert set(cfg.eval.templates) <= set(cfg.env.train_templates)
    assert resolve_tasks(cfg).train == train_ids


# ------------------------------------------------------------------------------------------ run directory


def test_resolved_ids_are_recorded_and_resume_reads_them_back(tmp_path: Path) -> None:
    cfg = config_from_dict(toy_config_dict(es={"generations": 2}, ui={"mode": "off", "plot": False}))
    stopped = train(cfg, tmp_path / "run", stop_after=1)
    assert stopped.generation == 1
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["tasks"] == {"train": [0, 1, 2, 3], "eval": []}
    written = json.loads((tmp_path / "run" / "config.json").read_text())["env"]  # what the user wrote
    assert written["train_tasks"] is None and written["train_templates"] is None
    # Resume draws from the recorded ids, not from a fresh resolution: narrow the record, and generation 2's
    # batch can only come from it.
    manifest["tasks"]["train"] = [2, 3]
    (tmp_path / "run" / "run.json").write_text(json.dumps(manifest))
    done = resume(tmp_path / "run")
    assert done.finished
    run = RunDir.open(tmp_path / "run")
    assert sorted(run.metrics()[-1]["task_batch"]) == [2, 3]
    assert run.manifest["tasks"]["train"] == [2, 3]


def test_corrupt_task_record_is_a_run_dir_error() -> None:
    assert RunTasks.from_dict({"train": [1, "a"], "eval": []}) == RunTasks((1, "a"), ())
    for bad in ({"train": []}, {"train": [1]}, {"train": [True], "eval": []}, [1, 2]):
        with pytest.raises(RunDirError, match="'tasks' must be"):
            RunTasks.from_dict(bad)


def test_a_bad_template_fails_before_the_run_directory_is_made(tmp_path: Path) -> None:
    cfg = load_config(CONFIGS / "smoke.toml", ["env.train_templates=[501, 999]", "ui.mode=off"])
    with pytest.raises(ConfigError, match="unknown template 999"):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()
