"""The learning grid's configuration: settings (model x site family x tier) x arms x seeds, each run an
ordinary ``esopt train`` run of ONE base train config plus ``--set`` overrides, and the rollout budget of
every arm, checked equal before anything runs.

The grid file (TOML)::

    [grid]
    base = "grid_train.toml"          # the base TrainConfig (path relative to this file)
    seeds = [0, 1]                    # es.seed of the trained arms
    families = ["shopping", "shopping_admin", "reddit"]
    tiers = [1, 2, 3]
    set = []                          # overrides of every run
    results = "benchmarks/results/grid"   # the report: <results>.md, .json, -*.png
    tier_set = { 3 = ["env.max_steps=10"] }   # overrides of the runs of one tier
    heldout_limit = 0                 # held-out tasks per split and setting (0: all; tests use 1-2)

    [grid.tier_arm_set.3]             # overrides of one trained arm's runs at one tier (after the arm's):
    prompts = ["env.tasks_per_generation=1"]      # here 40 episodes per arm at tier 3 instead of 72
    weights = ["env.tasks_per_generation=1", "es.generations=10"]
    both = ["env.tasks_per_generation=1"]

    [models]                          # model spec -> its overrides (agent.model is set to the spec)
    embedded = ["agent.dtype=bfloat16"]

    [arms]                            # trained arm -> its overrides; "start" (no training) is implicit
    prompts = ["es.evolve_weights=false", "prompts.mutation=true"]
    weights = ["es.evolve_prompts=false", "es.generations=9"]
    both = ["prompts.mutation=true"]

A setting's own overrides select its tasks (:func:`setting_overrides`): the tier's training split restricted
to the site family (``env.train_tasks``), the workers' env holding the tier's three splits, and its held-out
tasks (the family's ``tier{t}_test`` and ``tier{t}_test_unseen`` tasks, scored separately). A run's overrides
are, in order: ``grid.set``, the model's, the tier's (``grid.tier_set``), the setting's, the arm's, the
arm's at that tier (``grid.tier_arm_set``: a budget sized per tier, e.g. fewer episodes where runs are slow,
still equal across arms), ``es.seed``.

The planned budget of a run (:func:`planned_budget`) counts the episodes its config lets it run: population x
tasks per generation x generations, plus the centre episodes of reflective mutation (one per reflected task,
``min(prompts.reflect_tasks, env.tasks_per_generation)``, in every generation where the evolver's seeded draw
chooses to reflect; an upper bound, the evolver reflects only on tasks some candidate failed), plus centre
evaluations during training (``eval.every``); steps are at most ``env.max_steps`` per episode. The held-out
scoring afterwards costs every arm the same and is reported separately.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cotrain.config import TrainConfig, load_config
from cotrain.errors import ConfigError, GridConfigError

START_ARM = "start"
"""The arm without training: the base model with the baseline genome (``eval.baseline``), only scored."""
SITE_FAMILIES = ("shopping", "shopping_admin", "reddit")
"""Site families of the embedded task set (a task's ``sites``)."""
HELDOUT_SPLITS = ("test", "test_unseen")
"""The held-out splits of a tier, scored separately (``tier{t}_test``, ``tier{t}_test_unseen``)."""
_GRID_KEYS = {"base", "seeds", "families", "tiers", "set", "tier_set", "tier_arm_set", "results",
              "heldout_limit"}


@dataclass(frozen=True)
class Setting:
    """One model x site family x tier."""

    model: str
    """Model spec (``embedded``, ``embedded-qwen``, ``tiny:0``)."""
    family: str
    """Site family (a task's ``sites``: ``shopping``, ``shopping_admin``, ``reddit``)."""
    tier: int
    """Tier of the horizon ladder (1-3)."""

    @property
    def name(self) -> str:
        """Directory and report name: ``embedded_shopping_t1`` (the spec without characters other than
        letters, digits, ``-`` and ``.``)."""
        return f"{re.sub(r'[^A-Za-z0-9.-]', '', self.model)}_{self.family}_t{self.tier}"

    def split(self, which: str) -> str:
        """The tier's split ``which`` (``train``, ``test``, ``test_unseen``)."""
        return f"tier{self.tier}_{which}"


@dataclass(frozen=True)
class GridConfig:
    """A parsed grid file (see the module docstring)."""

    path: Path
    """The grid file."""
    base: Path
    """The base train config (TOML, the ``cotrain.config`` layout)."""
    seeds: tuple[int, ...]
    """``es.seed`` of every trained arm's runs."""
    models: Mapping[str, tuple[str, ...]]
    """Model spec -> overrides of its runs (``agent.model`` is set to the spec first)."""
    families: tuple[str, ...]
    """Site families."""
    tiers: tuple[int, ...]
    """Tiers."""
    arms: Mapping[str, tuple[str, ...]]
    """Trained arm -> overrides (``start`` is implicit and not listed)."""
    overrides: tuple[str, ...] = ()
    """Overrides of every run (``grid.set``)."""
    tier_overrides: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    """Tier -> overrides of its runs (``grid.tier_set``; e.g. a longer ``env.max_steps`` for longer
    reference solutions)."""
    results: Path = Path("benchmarks/results/grid")
    """Report prefix: ``<results>.md``, ``<results>.json`` and ``<results>-<setting>.png``."""
    heldout_limit: int = 0
    """Held-out tasks per split and setting (the first ones by id; 0: all)."""
    tier_arm_overrides: Mapping[int, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    """Tier -> trained arm -> overrides of that arm's runs at that tier (``grid.tier_arm_set``), applied after
    the arm's own."""

    @property
    def settings(self) -> tuple[Setting, ...]:
        """Every model x family x tier, in that order."""
        return tuple(Setting(m, f, t) for m in self.models for f in self.families for t in self.tiers)

    @property
    def arm_names(self) -> tuple[str, ...]:
        """``start`` and the trained arms, in file order."""
        return (START_ARM, *self.arms)


def _fail(key: str, message: str) -> GridConfigError:
    return GridConfigError(f"{key}: {message}")


def _str_list(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(key, f"expected a list of strings, got {value!r}")
    for item in value:
        if "=" not in item or not item.partition("=")[0].strip():
            raise _fail(key, f"override {item!r}: expected section.key=value")
    return tuple(value)


def _int_list(value: Any, key: str, minimum: int) -> tuple[int, ...]:
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise _fail(key, f"expected a non-empty list of integers, got {value!r}")
    if len(set(value)) != len(value):
        raise _fail(key, f"values listed more than once: {value!r}")
    if min(value) < minimum:
        raise _fail(key, f"values must be >= {minimum}, got {value!r}")
    return tuple(value)


def load_grid_config(path: str | Path) -> GridConfig:
    """Read and check a grid file; every problem is a GridConfigError naming the key (``grid.seeds``)."""
    from cotrain.config import read_toml

    file = Path(path)
    return grid_config_from_dict(read_toml(file, GridConfigError, "grid config file"), file)


def grid_config_from_dict(data: Mapping[str, Any], path: Path) -> GridConfig:
    """A :class:`GridConfig` from the tables of a grid file at ``path`` (relative paths are read from its
    folder, the report path from the working directory)."""
    unknown = sorted(set(data) - {"grid", "models", "arms"})
    if unknown:
        raise GridConfigError(f"unknown table(s) {unknown} (known: grid, models, arms)")
    grid = data.get("grid")
    if not isinstance(grid, Mapping):
        raise GridConfigError("grid: missing [grid] table")
    bad = sorted(set(grid) - _GRID_KEYS)
    if bad:
        raise _fail(f"grid.{bad[0]}", f"unknown key (known keys of [grid]: {', '.join(sorted(_GRID_KEYS))})")
    if not isinstance(grid.get("base"), str):
        raise _fail("grid.base", f"expected the path of the base train config, got {grid.get('base')!r}")
    base = (path.parent / grid["base"]).resolve()
    if not base.is_file():
        raise _fail("grid.base", f"no file {base}")
    seeds = _int_list(grid.get("seeds"), "grid.seeds", 0)
    tiers = _int_list(grid.get("tiers"), "grid.tiers", 1)
    families = grid.get("families")
    if (not isinstance(families, list) or not families or not all(isinstance(f, str) for f in families)
            or len(set(families)) != len(families)):
        raise _fail("grid.families", f"expected a non-empty list of distinct names, got {families!r}")
    wrong = [f for f in families if f not in SITE_FAMILIES]
    if wrong:
        raise _fail("grid.families", f"unknown site famil(y/ies) {wrong} (known: {', '.join(SITE_FAMILIES)})")
    overrides = _str_list(grid.get("set", []), "grid.set")
    tier_table = grid.get("tier_set", {})
    if not isinstance(tier_table, Mapping):
        raise _fail("grid.tier_set", f"expected a table of tier = [overrides], got {tier_table!r}")
    tier_overrides: dict[int, tuple[str, ...]] = {}
    for key, value in tier_table.items():
        if not str(key).isdigit() or int(key) not in tiers:
            raise _fail(f"grid.tier_set.{key}", f"not a tier of grid.tiers {list(tiers)}")
        tier_overrides[int(key)] = _str_list(value, f"grid.tier_set.{key}")
    results = grid.get("results", "benchmarks/results/grid")
    if not isinstance(results, str) or not results:
        raise _fail("grid.results", f"expected a path prefix, got {results!r}")
    limit = grid.get("heldout_limit", 0)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise _fail("grid.heldout_limit", f"expected an integer >= 0, got {limit!r}")
    models = _named_lists(data.get("models"), "models")
    arms = _named_lists(data.get("arms"), "arms")
    if START_ARM in arms:
        raise _fail(f"arms.{START_ARM}", "is the untrained arm, always present; it takes no overrides")
    for name in arms:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise _fail(f"arms.{name}", "arm names are letters, digits, '_' and '-'")
    tier_arms = _tier_arm_overrides(grid.get("tier_arm_set", {}), tiers, arms)
    return GridConfig(path=path, base=base, seeds=seeds, models=models, families=tuple(families),
                      tiers=tiers, arms=arms, overrides=overrides, tier_overrides=tier_overrides,
                      results=Path(results), heldout_limit=limit, tier_arm_overrides=tier_arms)


def _tier_arm_overrides(table: Any, tiers: Sequence[int],
                        arms: Mapping[str, tuple[str, ...]]) -> dict[int, dict[str, tuple[str, ...]]]:
    key = "grid.tier_arm_set"
    if not isinstance(table, Mapping):
        raise _fail(key, f"expected a table of tier = {{arm = [overrides]}}, got {table!r}")
    found: dict[int, dict[str, tuple[str, ...]]] = {}
    for tier, per_arm in table.items():
        if not str(tier).isdigit() or int(tier) not in tiers:
            raise _fail(f"{key}.{tier}", f"not a tier of grid.tiers {list(tiers)}")
        if not isinstance(per_arm, Mapping):
            raise _fail(f"{key}.{tier}", f"expected a table of arm = [overrides], got {per_arm!r}")
        for arm in per_arm:
            if arm == START_ARM:
                raise _fail(f"{key}.{tier}.{arm}", "the untrained arm takes no overrides")
            if arm not in arms:
                raise _fail(f"{key}.{tier}.{arm}", f"not an arm of [arms] ({', '.join(arms)})")
        found[int(tier)] = {str(arm): _str_list(value, f"{key}.{tier}.{arm}")
                            for arm, value in per_arm.items()}
    return found


def _named_lists(table: Any, key: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(table, Mapping) or not table:
        raise _fail(key, f"expected a non-empty [{key}] table of name = [overrides], got {table!r}")
    return {str(name): _str_list(value, f"{key}.{name}") for name, value in table.items()}


# --------------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class SettingTasks:
    """The task ids of a setting: its training tasks and its held-out tasks per split."""

    train: tuple[int | str, ...]
    """The family's tasks of the tier's training split."""
    heldout: Mapping[str, tuple[int | str, ...]]
    """``test`` and ``test_unseen`` -> the family's tasks of that tier split."""

    @property
    def all_heldout(self) -> tuple[int | str, ...]:
        """The held-out tasks of both splits, ``test`` first."""
        return tuple(t for split in HELDOUT_SPLITS for t in self.heldout[split])

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"train": list(self.train), "heldout": {k: list(v) for k, v in self.heldout.items()}}


def setting_tasks(grid: GridConfig, setting: Setting,
                  cache: dict[tuple[str, int], Any] | None = None) -> SettingTasks:
    """Resolve a setting's tasks through the env of the base config (its ``env`` table with the model's and
    the grid's overrides), by site family: one env build per model and tier (kept in ``cache``)."""
    from cotrain.tasks import split_site_tasks

    key = (setting.model, setting.tier)
    if cache is None or key not in cache:
        cfg = _load(grid, [*grid.overrides, f"agent.model={setting.model}", *grid.models[setting.model],
                           *grid.tier_overrides.get(setting.tier, ())], "grid.base")
        table = split_site_tasks(cfg.env, f"tier{setting.tier}")
        if cache is not None:
            cache[key] = table
    else:
        table = cache[key]

    def ids(which: str) -> tuple[int | str, ...]:
        found = table.get((setting.split(which), setting.family))
        if not found:
            raise GridConfigError(f"grid.families: split {setting.split(which)!r} has no task on site family "
                                  f"{setting.family!r}")
        return found

    heldout = {split: ids(split)[:grid.heldout_limit] if grid.heldout_limit else ids(split)
               for split in HELDOUT_SPLITS}
    return SettingTasks(ids("train"), heldout)


def setting_overrides(setting: Setting, tasks: SettingTasks) -> tuple[str, ...]:
    """The overrides that put a run on a setting: the model, the tier's splits, the family's tasks."""
    return (f"env.split={setting.split('train')}",
            f"env.worker_split=tier{setting.tier}", "env.train_templates=none",
            f"env.train_tasks={_toml_list(tasks.train)}", "eval.templates=none", "eval.n_tasks=0",
            f"eval.split={setting.split('test')}", f"eval.tasks={_toml_list(tasks.all_heldout)}")


def _toml_list(ids: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(t) if isinstance(t, int) else f'"{t}"' for t in ids) + "]"


def run_overrides(grid: GridConfig, setting: Setting, tasks: SettingTasks, arm: str,
                  seed: int | None) -> tuple[str, ...]:
    """Every override of one run, in order (``seed`` None: the ``start`` arm)."""
    arm_set = () if arm == START_ARM else (*grid.arms[arm],
                                           *grid.tier_arm_overrides.get(setting.tier, {}).get(arm, ()))
    seed_set = () if seed is None else (f"es.seed={seed}",)
    return (*grid.overrides, f"agent.model={setting.model}", *grid.models[setting.model],
            *grid.tier_overrides.get(setting.tier, ()), *setting_overrides(setting, tasks), *arm_set,
            *seed_set)


def run_config(grid: GridConfig, overrides: Sequence[str], what: str) -> TrainConfig:
    """The resolved TrainConfig of a run; a bad override is a GridConfigError naming ``what`` (the arm)."""
    return _load(grid, overrides, what)


def _load(grid: GridConfig, overrides: Sequence[str], what: str) -> TrainConfig:
    try:
        return load_config(grid.base, overrides)
    except ConfigError as exc:
        raise GridConfigError(f"{what}: {exc}") from None


# --------------------------------------------------------------------------------------------- budgets


@dataclass(frozen=True)
class Budget:
    """The rollout budget of one run, from its config (:func:`planned_budget`)."""

    train_episodes: int
    """Population x tasks per generation x generations."""
    reflection_episodes: int
    """Centre episodes of reflective mutation (an upper bound)."""
    eval_episodes: int
    """Centre evaluations during training (``eval.every``)."""
    max_steps: int
    """Env steps per episode at most (``env.max_steps``)."""

    @property
    def episodes(self) -> int:
        """Every training-time episode."""
        return self.train_episodes + self.reflection_episodes + self.eval_episodes

    @property
    def steps(self) -> int:
        """Env steps at most."""
        return self.episodes * self.max_steps

    def to_dict(self) -> dict[str, int]:
        """JSON form."""
        return {"episodes": self.episodes, "steps": self.steps, "train_episodes": self.train_episodes,
                "reflection_episodes": self.reflection_episodes, "eval_episodes": self.eval_episodes,
                "max_steps": self.max_steps}


def reflection_generations(cfg: TrainConfig) -> list[int]:
    """The generations (1-based) where the run's prompt evolver draws a reflective mutation (its seeded
    ``u_reflect < prompts.reflect_rate``, every ``prompts.mutate_every`` generations; none without
    ``prompts.mutation``). Whether it then runs centre episodes depends on the tasks the generation failed."""
    from cotrain.prompt_evolution import PromptEvolver

    p = cfg.prompts
    if not p.mutation or not p.mutable_slots:
        return []
    evolver = PromptEvolver(p, seed=cfg.es.seed)
    return [g for g in range(1, cfg.es.generations + 1)
            if g % p.mutate_every == 0 and float(evolver.rng(g).random()) < p.reflect_rate]


def planned_budget(cfg: TrainConfig, n_eval_tasks: int) -> Budget:
    """The episodes and steps a run's config lets it spend in training (see the module docstring);
    ``n_eval_tasks`` is its ``eval.tasks`` count (centre evaluations during training)."""
    es, env = cfg.es, cfg.env
    reflect = len(reflection_generations(cfg)) * min(cfg.prompts.reflect_tasks, env.tasks_per_generation)
    evals = (es.generations // cfg.eval.every) * n_eval_tasks if cfg.eval.every else 0
    if env.spec.max_steps is None:
        raise GridConfigError("env.max_steps: the grid needs a step cap to count the steps of a budget")
    return Budget(es.population * env.tasks_per_generation * es.generations, reflect, evals,
                  env.spec.max_steps)


def check_budgets(budgets: Mapping[tuple[str, int], Budget], setting: str) -> None:
    """Refuse unequal budgets: for every seed, every trained arm's episodes and steps must be the same
    (``budgets``: ``(arm, seed) -> Budget``). A GridConfigError names the arms and their numbers."""
    seeds = sorted({seed for _, seed in budgets})
    for seed in seeds:
        mine = {arm: b for (arm, s), b in budgets.items() if s == seed}
        if len({(b.episodes, b.steps) for b in mine.values()}) > 1:
            parts = ", ".join(f"{arm}: {b.episodes} episodes ({b.train_episodes} training + "
                              f"{b.reflection_episodes} reflection + {b.eval_episodes} eval), {b.steps} steps"
                              for arm, b in mine.items())
            raise GridConfigError(f"arms: unequal rollout budgets in setting {setting}, seed {seed}: "
                                  f"{parts}; balance them with per-arm overrides (e.g. es.generations)")
