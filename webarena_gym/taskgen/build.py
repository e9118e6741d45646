"""Instantiate every template over the seeded world, assign splits, and write the bundled task files.

Splits: a template marked ``unseen`` gives all its tasks to ``test_unseen`` (templates never trained on);
every other template gives its sampled instances to ``train`` except the last one, which goes to ``test`` (new
instantiations of training templates). Which instances are sampled depends only on ``seed`` and the template
id, so the files are reproduced byte for byte.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from webarena_gym.taskgen.spec import Template

SPLITS = ("train", "test", "test_unseen")
DEFAULT_TASK_SEED = 0
"""Seed of the instance sampling of the bundled task files."""
TASKS_PER_TEMPLATE = 4
"""Instances sampled per seen template (all but one train, one test)."""
TASKS_PER_UNSEEN_TEMPLATE = 3
"""Instances sampled per unseen template."""
TASKS_PER_NA_TEMPLATE = 3
"""Instances sampled per unachievable (N/A) template: few, so that answering N/A everywhere pays little."""


def all_templates() -> list[Template]:
    """The templates of every template module, by id."""
    from webarena_gym.taskgen import admin, cross, forum, shop

    templates = sorted(
        [
            *shop.TEMPLATES.templates,
            *admin.TEMPLATES.templates,
            *forum.TEMPLATES.templates,
            *cross.TEMPLATES.templates,
        ],
        key=lambda t: t.template_id,
    )
    ids = [t.template_id for t in templates]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate template ids {duplicates}")
    return templates


def storage_state_name(sites: Sequence[str]) -> str:
    """WebArena's storage-state path of a set of sites (``./.auth/shopping.shopping_admin_state.json``)."""
    return f"./.auth/{'.'.join(sorted(sites))}_state.json"


def sample_count(template: Template) -> int:
    """How many instances of ``template`` the task set holds."""
    if template.kind == "string_match (N/A)":
        return TASKS_PER_NA_TEMPLATE
    return TASKS_PER_UNSEEN_TEMPLATE if template.unseen else TASKS_PER_TEMPLATE


def split_of(template: Template, index: int, count: int) -> str:
    """The split of the ``index``-th of ``count`` sampled instances of ``template``."""
    if template.unseen:
        return "test_unseen"
    return "test" if index == count - 1 and count > 1 else "train"


def bundled_positions(template: Template, n_candidates: int, seed: int = DEFAULT_TASK_SEED) -> list[int]:
    """Positions, in the order sampled, of the instances of ``template`` (out of ``n_candidates``) that the
    bundled ``train`` / ``test`` / ``test_unseen`` files hold (the tier files never reuse them)."""
    count = min(sample_count(template), n_candidates)
    if count == 0:
        raise ValueError(f"template {template.slug}: the seeded world supports no instance")
    return random.Random(f"{seed}/{template.template_id}").sample(range(n_candidates), count)


def generate(
    seed: int = DEFAULT_TASK_SEED, *, world_seed: int | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every bundled task entry, by split (WebArena format plus ``split`` and ``reference_solution``).

    ``world_seed`` is the seed of the embedded sites the answers are computed from (default: the sites'
    default seed, which the env serves)."""
    from webarena_gym.sites.data import SiteData
    from webarena_gym.sites.seed import DEFAULT_SEED

    entries: list[dict[str, Any]] = []
    with SiteData(seed=DEFAULT_SEED if world_seed is None else world_seed) as data:
        for template in all_templates():
            candidates = template.instances(data)
            keys = [json.dumps(i.values, sort_keys=True) for i in candidates]
            if len(set(keys)) != len(keys):
                raise ValueError(f"template {template.slug}: two instances share their values")
            chosen = bundled_positions(template, len(candidates), seed)
            count = len(chosen)
            for index, position in enumerate(chosen):
                entries.append(
                    _entry(template, candidates[position], len(entries), split_of(template, index, count))
                )
    _validate(entries)
    return {split: [e for e in entries if e["split"] == split] for split in SPLITS}


def _entry(template: Template, instance: Any, task_id: int, split: str) -> dict[str, Any]:
    return {
        "sites": list(template.sites),
        "task_id": task_id,
        "require_login": True,
        "storage_state": storage_state_name(template.sites),
        "start_url": template.start_url,
        "geolocation": None,
        "intent_template": template.intent_template,
        "instantiation_dict": dict(instance.values),
        "intent": template.intent(instance.values),
        "require_reset": template.state_changing,
        "eval": instance.eval,
        "intent_template_id": template.template_id,
        "split": split,
        "reference_solution": list(instance.solution),
    }


def _validate(entries: list[dict[str, Any]]) -> None:
    """Every entry loads and gets an evaluator; intents are unique."""
    from webarena_gym.evaluators import build_evaluator
    from webarena_gym.tasks import load_tasks

    intents = [e["intent"] for e in entries]
    repeated = sorted({i for i in intents if intents.count(i) > 1})
    if repeated:
        raise ValueError(f"intents repeat: {repeated[:3]}")
    for task in load_tasks(entries):
        build_evaluator(task)


def render(entries: list[dict[str, Any]]) -> str:
    """The JSON text of a task file (stable formatting, so regeneration is byte-identical)."""
    return json.dumps(entries, indent=2, ensure_ascii=False) + "\n"


def write_task_files(out_dir: str | Path, seed: int = DEFAULT_TASK_SEED) -> dict[str, Path]:
    """Generate and write ``embedded_<split>.json`` for every split into ``out_dir``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, entries in generate(seed).items():
        path = out / f"embedded_{split}.json"
        path.write_text(render(entries), encoding="utf-8")
        paths[split] = path
    return paths
