"""Typed run configuration: one frozen dataclass per component, nested, a docstring per field.

Each component's knobs are written once, in the dataclass of the package that uses them:

- ``TrainConfig.agent`` *is* an :class:`es_agent.specs.AgentSpec` (model, dtype, device, perturbation,
  policy), with cotrain's run-level defaults (``dtype = "auto"``);
- ``TrainConfig.env`` (:class:`EnvConfig`) holds the workers' :class:`es_agent.specs.EnvSpec` (``spec``: env
  id, module, ``gym.make`` kwargs, step cap, infrastructure errors; cotrain's defaults are the embedded
  WebArena-Lite env and 10 steps) beside the run-level task selection (splits, task ids or templates, tasks
  per generation);
- ``TrainConfig.es`` (:class:`ESConfig`) holds the search distribution's
  :class:`~cotrain.distribution_config.CoEvolutionConfig` (``distribution``) beside the run length, the
  population, the seed and the fitness shaping.

Run state (the snapshot the replicas load, the current prompt pools, the split of one env) goes into those
specs with :func:`dataclasses.replace` where it is used, never into the config.

The TOML layout users write is flat per table: the keys of a *flat* component (``EnvConfig.spec``,
``ESConfig.distribution``) are written in the table of its parent (``[env] max_steps = 2``, ``[es] sigma_0 =
0.05``, ``--set es.sigma_0=0.05``); ``[es.distribution]`` is not a table. The distribution's
``total_generations`` is not written either: it is ``es.schedule_generations``, or ``es.generations`` when
that is left out. ``config.json`` has the same layout (:meth:`TrainConfig.to_dict`).

Parsed only at entry points (the ``esopt`` CLI, the examples) from a TOML file plus
``--set section.key=value`` overrides, and written back as ``config.json`` into the run directory. Unknown
keys and wrong types raise :class:`~cotrain.errors.ConfigError` naming the key path (``es.population``) and
the expected type; a table starts from the defaults of its field (a ``[agent]`` table that sets only
``model`` keeps ``dtype = "auto"``).

>>> cfg = load_config("configs/smoke.toml", ["es.population=8", "agent.model=tiny:1"])
>>> cfg.es.population
8

TOML has no null: leave a key out to keep its default; in ``--set`` overrides, ``none`` or ``null`` set an
optional key to ``None``. Override values are read as TOML values (``8``, ``0.5``, ``true``, ``["a", "b"]``)
and fall back to plain strings (``tiny:0``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cotrain.distribution_config import CoEvolutionConfig, draws_per_generation
from cotrain.errors import ConfigError
from cotrain.shaping import ShapingConfig
from es_agent.specs import AgentSpec, EnvSpec

CONFIG_FORMAT = "esopt-config/1"
"""Tag written into ``config.json``."""
OMIT_WHEN_DEFAULT = "omit_when_default"
"""Field metadata key: a field added after runs were recorded sets it, so that its JSON form (and with it
``config.json`` and the grid's config digests of earlier runs) stays the same while it holds its default."""
DEFAULT_ENV_ID = "WebArenaLite-v0"
"""``env.env_id`` of a run that sets none: the embedded WebArena-Lite sites and bundled tasks."""
DEFAULT_ENV_MODULE = "webarena_gym"
"""``env.module`` of a run that sets none (it registers :data:`DEFAULT_ENV_ID`)."""
DEFAULT_MAX_STEPS = 10
"""``env.max_steps`` of a run that sets none."""


def _fail(path: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: {message}" if path else message)


@dataclass(frozen=True)
class _Section:
    """How the parser and :meth:`TrainConfig.to_dict` read a nested component (a field's ``metadata``)."""

    flat: bool = False
    """Its keys are written in the parent's table (``[es] sigma_0``), not in a table of their own."""
    hidden: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Its fields that a config does not set (run state, derived values), with what to do instead."""


def _section(default_factory: typing.Callable[[], Any], *, flat: bool = False,
             hidden: Mapping[str, str] | None = None) -> Any:
    """A component field: its default, and how it is written (see :class:`_Section`)."""
    return field(default_factory=default_factory,
                 metadata={"section": _Section(flat=flat, hidden=dict(hidden or {}))})


def _meta(f: dataclasses.Field[Any]) -> _Section:
    meta = f.metadata.get("section")
    return meta if isinstance(meta, _Section) else _Section()


def _default_agent() -> AgentSpec:
    return AgentSpec(dtype="auto")


def _default_env_spec() -> EnvSpec:
    return EnvSpec(env_id=DEFAULT_ENV_ID, module=DEFAULT_ENV_MODULE, max_steps=DEFAULT_MAX_STEPS)


_AGENT_RUN_STATE = {
    "snapshot": "is run state (the run's last weight snapshot), set by the run, not by the config",
    "prompt_pools": "is run state (the run's current pools), set by the run; set prompts.pools instead",
}


@dataclass(frozen=True)
class EnvConfig:
    """``[env]``: the Gymnasium environment of the workers and the training tasks."""

    spec: EnvSpec = _section(_default_env_spec, flat=True)
    """The workers' env, an ``es_agent.EnvSpec`` whose fields are written flat in ``[env]``: ``env_id``
    (default :data:`DEFAULT_ENV_ID`), ``module`` (imported in every worker to register the id; default
    :data:`DEFAULT_ENV_MODULE`), ``kwargs`` (of ``gym.make``, e.g. ``task_file``, ``sites``; ``split`` is
    added per use, see :meth:`spec_for`), ``max_steps`` (actions per episode before the rollout loop cuts it
    off; default :data:`DEFAULT_MAX_STEPS`) and ``infra_errors`` (exception classes that mean infrastructure
    failure: retried once, then raised, never scored 0)."""
    split: str | None = "train"
    """Split whose tasks the generations' task batches are drawn from (the env's ``split=`` argument)."""
    worker_split: str | None = "all"
    """``split=`` of the workers' env, which must hold the training and the held-out tasks (``"all"`` for the
    embedded task set; ``none`` for an env that holds every task by default, e.g. a real task file)."""
    train_tasks: tuple[int | str, ...] | None = None
    """Explicit training task ids (instead of every task of ``split``; not with ``train_templates``)."""
    train_templates: tuple[int, ...] | None = None
    """WebArena ``intent_template_id``s: train on every task of ``split`` made from these templates (instead
    of ``train_tasks``, whose ids change meaning when a task set is regenerated). Resolved to task ids once,
    at the start of the run (templates in the order listed, ids ascending within one), and recorded in
    ``run.json``; an unknown template, or one with no task in ``split``, is an error."""
    tasks_per_generation: int = 4
    """Tasks in each generation's batch, shared by all candidates."""

    def __post_init__(self) -> None:
        if self.tasks_per_generation < 1:
            raise _fail("env.tasks_per_generation", f"must be >= 1, got {self.tasks_per_generation}")
        _check_task_selection("env.train_tasks", self.train_tasks,
                              "env.train_templates", self.train_templates)
        if self.train_tasks is not None and len(self.train_tasks) < self.tasks_per_generation:
            raise _fail("env.train_tasks", f"has {len(self.train_tasks)} task(s), fewer than "
                        f"env.tasks_per_generation={self.tasks_per_generation}")
        if "split" in self.spec.kwargs:
            raise _fail("env.kwargs.split", "set env.split (training) and eval.split (held out) instead")

    def spec_for(self, split: str | None = None) -> EnvSpec:
        """:attr:`spec` with ``split=`` in its kwargs (default: :attr:`worker_split`, the workers' env; no
        ``split`` when that is ``None``)."""
        split = split if split is not None else self.worker_split
        if split is None:
            return self.spec
        return dataclasses.replace(self.spec, kwargs={**self.spec.kwargs, "split": split})


@dataclass(frozen=True)
class ESConfig:
    """``[es]``: the co-evolution distribution, the population and the run length."""

    population: int = 8
    """Candidates per generation (even with antithetic sampling)."""
    generations: int = 10
    """Generations of the run."""
    seed: int = 0
    """Root seed of everything random in the run (noise seeds, env seeds, task batches, prompt mutation)."""
    schedule_generations: int | None = None
    """Length of the cosine sigma schedule (default: ``generations``); the distribution's
    ``total_generations``."""
    distribution: CoEvolutionConfig = _section(CoEvolutionConfig, flat=True, hidden={
        "total_generations": "set es.schedule_generations (default: es.generations) instead"})
    """The search distribution's hyperparameters (``cotrain.distribution_config.CoEvolutionConfig``), written
    flat in ``[es]``: ``sigma_0``, ``sigma_min``, ``learning_rate``, ``prompt_learning_rate``,
    ``prob_floor``, ``antithetic``, ``evolve_weights``, ``evolve_prompts``, ``weight_normalisation``,
    ``baseline_prior``, ``anchor_pairs``. Its ``total_generations`` is always ``schedule_generations`` or
    ``generations`` (set here)."""
    shaping: ShapingConfig = field(default_factory=ShapingConfig)
    """``[es.shaping]``: how per-task rewards become candidate weights (``method``, ``per_task_centering``,
    ``per_task_scaling``)."""

    def __post_init__(self) -> None:
        if self.population < 1:
            raise _fail("es.population", f"must be >= 1, got {self.population}")
        if self.generations < 1:
            raise _fail("es.generations", f"must be >= 1, got {self.generations}")
        if self.seed < 0:
            raise _fail("es.seed", f"must be >= 0, got {self.seed}")
        if self.schedule_generations is not None and self.schedule_generations < 0:
            raise _fail("es.schedule_generations",
                        f"must be >= 0 (0 or left out: es.generations), got {self.schedule_generations}")
        dist = self.distribution
        if dist.antithetic and dist.evolve_weights and self.population % 2:
            raise _fail("es.population", f"must be even with antithetic pairs, got {self.population}")
        if dist.anchor_pairs and dist.evolve_prompts:
            draws = draws_per_generation(self.population, antithetic=dist.antithetic,
                                         evolve_weights=dist.evolve_weights)
            if dist.anchor_pairs >= draws:
                raise _fail("es.anchor_pairs", f"{dist.anchor_pairs} anchored draw(s) of the {draws} of a "
                            f"population of {self.population} leave no sampled genome: anchor fewer")
        total = self.schedule_generations or self.generations
        if dist.total_generations != total:
            object.__setattr__(self, "distribution", dataclasses.replace(dist, total_generations=total))


@dataclass(frozen=True)
class PromptsConfig:
    """``[prompts]``: the prompt pools and how they grow during the run."""

    pools: str | None = None
    """Prompt pool JSON file (default: the package's ``es_agent/prompts/pools/default.json``)."""
    mutation: bool = False
    """Grow the pools during the run (reflective mutation, recombination, deletion)."""
    mutate_every: int = 1
    """Generations between two rounds of pool changes."""
    reflect_rate: float = 0.5
    """Probability, per round, of a reflective mutation (a model rewrites a variant after failures)."""
    recombine_rate: float = 0.5
    """Probability, per round, of recombining the lines of two skill variants."""
    mutable_slots: tuple[str, ...] = ("system", "skills")
    """Slots reflective mutation may rewrite (``action_format`` steers decoding and is never rewritten)."""
    new_variant_mass: float = 0.05
    """Probability mass a new variant enters with."""
    max_pool_size: int = 8
    """Variants per slot; when full, the least probable unprotected variant is deleted first."""
    min_variant_chars: int = 20
    """Shortest accepted new variant text."""
    max_variant_chars: int = 1200
    """Longest accepted new variant text."""
    reflect_tasks: int = 1
    """Failed tasks whose trajectories the reflective mutation reads."""
    mutation_model: str | None = None
    """Model that writes reflective mutations (default: the policy model itself, at the current centre)."""
    max_new_tokens: int = 128
    """Bound on the tokens a reflective mutation writes."""

    def __post_init__(self) -> None:
        for name in ("reflect_rate", "recombine_rate"):
            if not 0 <= getattr(self, name) <= 1:
                raise _fail(f"prompts.{name}", f"must lie in [0, 1], got {getattr(self, name)}")
        if not 0 < self.new_variant_mass < 1:
            raise _fail("prompts.new_variant_mass", f"must lie in (0, 1), got {self.new_variant_mass}")
        for name in ("mutate_every", "max_pool_size", "reflect_tasks", "max_new_tokens", "min_variant_chars"):
            if getattr(self, name) < 1:
                raise _fail(f"prompts.{name}", f"must be >= 1, got {getattr(self, name)}")
        if self.max_variant_chars < self.min_variant_chars:
            raise _fail("prompts.max_variant_chars", "must be >= prompts.min_variant_chars")
        if "action_format" in self.mutable_slots:
            raise _fail("prompts.mutable_slots", "'action_format' steers decoding and cannot be mutated")


@dataclass(frozen=True)
class WorkersConfig:
    """``[workers]``: where rollouts run."""

    num_workers: int | Literal["auto"] = 0
    """Worker processes. 0 or 1: evaluate in this process (one model, one browser, one set of sites; 1 means
    "one worker", and the driver is that worker); 2 or more: that many Ray actors, each with its own model
    replica, one torch thread (``agent.torch_threads``), its own browser and its own embedded sites.
    ``"auto"``: one worker per usable core (the CPU affinity mask, capped by the cgroup CPU quota); resolved
    when the run starts and recorded in ``run.json`` (``"resolved"``)."""
    address: str | None = None
    """Ray cluster address (``"auto"``, ``"ray://host:10001"``); leave out for a local Ray."""
    num_cpus: int | None = None
    """CPUs of a local Ray (default: ``num_workers``)."""
    rows_per_piece: int = 1
    """Candidates sent to a worker at a time."""

    def __post_init__(self) -> None:
        n = self.num_workers
        if n != "auto" and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
            raise _fail("workers.num_workers", f"must be an integer >= 0 or 'auto', got {n!r}")
        if self.rows_per_piece < 1:
            raise _fail("workers.rows_per_piece", f"must be >= 1, got {self.rows_per_piece}")

    def choose_workers(self) -> tuple[int, str]:
        """``(number of workers, reason)``: ``num_workers`` itself, or for ``"auto"`` the usable cores of this
        machine (:func:`es_agent.hardware.usable_cores`)."""
        if self.num_workers != "auto":
            return int(self.num_workers), f"set: {self.num_workers}"
        from es_agent.hardware import usable_cores

        choice = usable_cores()
        return int(choice.value), choice.reason

    @property
    def worker_count(self) -> int:
        """The number of workers (``"auto"`` resolved on this machine)."""
        return self.choose_workers()[0]

    @property
    def num_actors(self) -> int | None:
        """``AgentProblem``'s ``num_actors``: ``None`` (in process) for 0 or 1 worker."""
        n = self.worker_count
        return n if n >= 2 else None


@dataclass(frozen=True)
class CheckpointConfig:
    """``[checkpoint]``: weight snapshots (the logs are written every generation)."""

    snapshot_every: int = 10
    """Save the centre's weights every k generations (0: only at the end of the run)."""

    def __post_init__(self) -> None:
        if self.snapshot_every < 0:
            raise _fail("checkpoint.snapshot_every", f"must be >= 0, got {self.snapshot_every}")


@dataclass(frozen=True)
class EvalConfig:
    """``[eval]``: evaluation of the centre (sigma 0, most probable prompts) on held-out tasks."""

    every: int = 0
    """Evaluate the centre every k generations during training (0: never)."""
    split: str = "test"
    """Held-out split."""
    n_tasks: int = 4
    """Tasks of the split evaluated (the first ones by id; 0: all of them)."""
    tasks: tuple[int | str, ...] | None = None
    """Explicit held-out task ids (instead of every task of ``split``; not with ``templates``)."""
    templates: tuple[int, ...] | None = None
    """WebArena ``intent_template_id``s: the held-out tasks are the tasks of ``split`` made from these
    templates (instead of ``tasks``; in the order listed, ids ascending within one, then the first
    ``n_tasks``). Resolved once at the start of the run like ``env.train_templates``."""
    baseline: str = "no_skill"
    """Baseline genome (a name in the pools' ``baselines``) that ``esopt eval`` compares against."""
    env_seed: int = 0
    """Env seed of centre evaluations (the same every time, so evaluations compare)."""
    # issue #13 item 6 (engineer C): the start beside the trained centre
    at_start: bool = True
    """When the run evaluates its centre (``every > 0``), also evaluate the start once, before generation 1:
    the base weights with the generation-0 most probable genome (the baseline genome under
    ``es.baseline_prior``), on the same tasks with the same ``env_seed``; recorded as ``start_eval`` in
    generation 1's metrics and never redone on resume."""

    def __post_init__(self) -> None:
        if self.every < 0 or self.n_tasks < 0:
            raise _fail("eval", f"every and n_tasks must be >= 0, got {self.every} and {self.n_tasks}")
        _check_task_selection("eval.tasks", self.tasks, "eval.templates", self.templates)


@dataclass(frozen=True)
class UIConfig:
    """``[ui]``: the progress display."""

    mode: Literal["auto", "on", "off"] = "auto"
    """``auto``: a live dashboard on a terminal, plain lines otherwise; ``on``: force the dashboard;
    ``off``: plain lines."""
    plot: bool = True
    """Write ``learning_curve.png`` into the run directory at the end."""


@dataclass(frozen=True)
class TrainConfig:
    """A whole run: one field per TOML table."""

    name: str = "run"
    """Name shown by the UI."""
    agent: AgentSpec = _section(_default_agent, hidden=_AGENT_RUN_STATE)
    """``[agent]``: the ``es_agent.AgentSpec`` every worker builds (``model``, ``dtype`` (default ``"auto"``:
    bf16 on a CPU with native bf16 and on CUDA, float32 elsewhere; chosen once when the run starts and
    recorded in ``run.json``), ``device``, ``mode``, ``rank``, ``params``, ``params_exclude``, ``policy``,
    ``torch_threads``). Its ``snapshot`` and ``prompt_pools`` are run state, set where the spec is used."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """``[env]``."""
    es: ESConfig = field(default_factory=ESConfig)
    """``[es]``."""
    prompts: PromptsConfig = field(default_factory=PromptsConfig)
    """``[prompts]``."""
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    """``[workers]``."""
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    """``[checkpoint]``."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """``[eval]``."""
    ui: UIConfig = field(default_factory=UIConfig)
    """``[ui]``."""

    def __post_init__(self) -> None:
        for name, why in _AGENT_RUN_STATE.items():
            if getattr(self.agent, name) is not None:
                raise _fail(f"agent.{name}", why)
        if self.prompts.mutation and not self.es.distribution.evolve_prompts:
            raise _fail("prompts.mutation", "needs es.evolve_prompts = true (new variants would never run)")
        tiebreak, tasks = self.es.shaping.confidence_tiebreak, self.env.tasks_per_generation
        if tiebreak and 2 * tiebreak * tasks >= 1:
            raise _fail("es.shaping.confidence_tiebreak",
                        f"{tiebreak} must be below 1 / (2 x env.tasks_per_generation) = "
                        f"{1 / (2 * tasks):.4g}, "
                        f"so that it only breaks ties between equal rewards")

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``config.json``, the layout of the TOML tables), read by :func:`config_from_dict`."""
        return {"format": CONFIG_FORMAT, **_section_dict(self)}


@dataclass(frozen=True)
class ResolvedSettings:
    """The ``"auto"`` settings of a run as chosen when it started, with the reasons (``run.json``'s
    ``"resolved"``); a resumed run, ``esopt eval`` and ``esopt export`` use these, never a new detection."""

    dtype: str
    """The weight dtype every replica uses (``agent.dtype`` resolved)."""
    dtype_reason: str
    """Why (``"auto: cpu flags avx512_bf16"``, ``"set: float32"``)."""
    num_workers: int
    """Worker processes of the run (``workers.num_workers`` resolved)."""
    num_workers_reason: str
    """Why (``"auto: cpu affinity 2 cpu(s)"``, ``"set: 2"``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``run.json``'s ``"resolved"``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> ResolvedSettings:
        """From :meth:`to_dict`'s form; anything else is a ConfigError naming the bad field."""
        if not isinstance(data, Mapping) or set(data) != {f.name for f in dataclasses.fields(cls)}:
            raise ConfigError(f"resolved settings must have the keys dtype, dtype_reason, num_workers, "
                              f"num_workers_reason; got {data!r}")
        from es_agent.specs import DTYPES

        if data["dtype"] not in DTYPES:
            raise ConfigError(f"resolved dtype must be one of {DTYPES}, got {data['dtype']!r}")
        n = data["num_workers"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ConfigError(f"resolved num_workers must be an integer >= 0, got {n!r}")
        if not isinstance(data["dtype_reason"], str) or not isinstance(data["num_workers_reason"], str):
            raise ConfigError(f"resolved reasons must be strings, got {data!r}")
        return cls(**dict(data))


def resolve_settings(cfg: TrainConfig) -> ResolvedSettings:
    """Choose the run's ``"auto"`` settings on this machine: ``agent.dtype`` for ``agent.device``
    (:func:`es_agent.hardware.choose_dtype`) and ``workers.num_workers`` (its usable cores). With a remote
    Ray cluster (``workers.address``) the driver decides for the workers: set ``agent.dtype`` explicitly there
    when their CPUs differ from the driver's."""
    from es_agent.hardware import choose_dtype

    dtype = choose_dtype(cfg.agent.dtype, cfg.agent.device)
    n, reason = cfg.workers.choose_workers()
    return ResolvedSettings(str(dtype.value), dtype.reason, n, reason)


def with_resolved(cfg: TrainConfig, settings: ResolvedSettings) -> TrainConfig:
    """``cfg`` with the concrete dtype and worker count of ``settings`` (what the run's code reads)."""
    return dataclasses.replace(
        cfg, agent=dataclasses.replace(cfg.agent, dtype=settings.dtype),
        workers=dataclasses.replace(cfg.workers, num_workers=settings.num_workers))


def _check_task_selection(tasks_key: str, tasks: tuple[Any, ...] | None, templates_key: str,
                          templates: tuple[int, ...] | None) -> None:
    """Task ids and templates are two ways of naming the same tasks: at most one of them; no empty or repeated
    template list."""
    if tasks is not None and templates is not None:
        raise _fail(f"{tasks_key} / {templates_key}",
                    f"set one of {tasks_key} and {templates_key}, not both (they are mutually exclusive)")
    if templates is not None:
        if not templates:
            raise _fail(templates_key, "must not be empty (leave the key out to use every task of the split)")
        repeated = sorted({t for t in templates if templates.count(t) > 1})
        if repeated:
            raise _fail(templates_key, f"template(s) {repeated} listed more than once")


# --------------------------------------------------------------------------------------------- parsing


def config_from_dict(data: Mapping[str, Any]) -> TrainConfig:
    """A :class:`TrainConfig` from its dict form (TOML tables or ``config.json``); raises ConfigError."""
    data = dict(data)
    fmt = data.pop("format", CONFIG_FORMAT)
    if fmt != CONFIG_FORMAT:
        raise ConfigError(f"format: expected {CONFIG_FORMAT!r}, got {fmt!r}")
    built: TrainConfig = _build(TrainConfig, data, "")
    return built


PRE_PRIOR_BASELINE_PRIOR = 0.0
"""``es.baseline_prior`` of a saved ``config.json`` that has none: runs made before the prior existed started
their prompt categoricals uniform, so replaying or resuming them must rebuild that uniform start."""


def saved_config_from_dict(data: Mapping[str, Any]) -> TrainConfig:
    """The :class:`TrainConfig` of a run directory's ``config.json``. Unlike a TOML file, whose missing keys
    take today's defaults, a saved config is what its run was made with: a missing ``es.baseline_prior``
    (a run older than the prior) means :data:`PRE_PRIOR_BASELINE_PRIOR`. Raises ConfigError."""
    data = dict(data)
    es = data.get("es")
    if isinstance(es, Mapping) and "baseline_prior" not in es:
        data["es"] = {**es, "baseline_prior": PRE_PRIOR_BASELINE_PRIOR}
    return config_from_dict(data)


def read_toml(file: Path, error: type[ConfigError] = ConfigError,
              what: str = "config file") -> dict[str, Any]:
    """The tables of a TOML file; a missing or unreadable file is ``error`` naming it."""
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{what} not found: {file}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise error(f"{file}: cannot read TOML ({exc})") from None


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a TOML file and apply ``section.key=value`` overrides; raises ConfigError."""
    return config_from_dict(apply_overrides(read_toml(Path(path)), overrides))


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of ``data`` with each ``a.b.c=value`` set (value read as TOML, else as a plain string)."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"override {item!r}: expected section.key=value")
        *parents, leaf = key.split(".")
        node = out
        for i, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {'.'.join(parents[:i + 1])} is not a table")
        node[leaf] = parse_override_value(raw)
    return out


def parse_override_value(raw: str) -> Any:
    """``8`` -> 8, ``true`` -> True, ``[1, 2]`` -> [1, 2], ``none``/``null`` -> None, else the string."""
    text = raw.strip()
    if text.lower() in ("none", "null"):
        return None
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _init_fields(cls: Any) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.init]


def _field_base(base: Any, f: dataclasses.Field[Any]) -> Any:
    """The value a nested table starts from: the parent's value, else the field's default."""
    if base is not None:
        return getattr(base, f.name)
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _table_keys(cls: Any, hints: Mapping[str, Any], hidden: Mapping[str, str],
                ) -> tuple[dict[str, str | None], dict[str, str]]:
    """``(key -> the flat field that owns it, or None for cls's own fields; key -> why it is not set)``."""
    keys: dict[str, str | None] = {}
    refused = dict(hidden)
    for f in _init_fields(cls):
        meta = _meta(f)
        if meta.flat:
            refused.update(meta.hidden)
            keys.update({sub.name: f.name for sub in _init_fields(hints[f.name])
                         if sub.name not in meta.hidden})
        elif f.name not in hidden:
            keys[f.name] = None
    return keys, refused


def _build(cls: Any, data: Any, path: str, base: Any = None, hidden: Mapping[str, str] | None = None) -> Any:
    """``cls`` from the table ``data`` at ``path``: each key coerced to its field's type, nested tables and
    flat components built the same way, starting from ``base`` (the value the parent holds, else the field
    defaults); errors name the key path."""
    if dataclasses.is_dataclass(data) and isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise _fail(path or "config", f"expected a table, got {_describe(data)}")
    hints = typing.get_type_hints(cls)
    keys, refused = _table_keys(cls, hints, hidden or {})
    for key in data:
        if key in refused:
            raise _fail(_join(path, key), refused[key])
        if key not in keys:
            raise _unknown_key(cls, path, key, keys)
    by_name = {f.name: f for f in _init_fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        owner = keys[key]
        if owner is not None:
            continue
        f = by_name[key]
        if dataclasses.is_dataclass(hints[key]):
            kwargs[key] = _build(hints[key], value, _join(path, key), _field_base(base, f), _meta(f).hidden)
        else:
            kwargs[key] = _coerce(value, hints[key], _join(path, key))
    for name, f in by_name.items():
        flat = {k: v for k, v in data.items() if keys[k] == name}
        if flat:  # the component's keys live in this table, so do its error paths
            kwargs[name] = _build(hints[name], flat, path, _field_base(base, f), _meta(f).hidden)
    try:
        return dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:  # a spec's own check (SpecError, DistributionError): name the path
        message = str(exc).replace(f"{cls.__name__}.", f"{path}." if path else "")
        raise _fail(path or "config", message) from None


def _unknown_key(cls: Any, path: str, key: str, keys: Mapping[str, str | None]) -> ConfigError:
    where = f"{path}." if path else ""
    table = f" of [{path}]" if path else ""
    own = sorted(k for k, owner in keys.items() if owner == key)
    note = ""
    if own:  # a flat component written as a table of its own
        note = f"; the keys of {where}{key} are written in [{path}] itself, e.g. {where}{own[0]}"
    return ConfigError(f"unknown key {where}{key} (known keys{table}: {', '.join(sorted(keys))}){note}")


def _coerce(value: Any, tp: Any, path: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None:
            if type(None) in args:
                return None
            raise _fail(path, f"expected {_type_name(tp)}, got None")
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:  # X | None: X's own error says more
            return _coerce(value, options[0], path)
        for arg in options:
            try:
                return _coerce(value, arg, path)
            except ConfigError:
                continue
        raise _fail(path, f"expected {_type_name(tp)}, got {_describe(value)}")
    if origin is Literal:
        if value in args and not isinstance(value, bool):
            return value
        raise _fail(path, f"expected one of {list(args)}, got {_describe(value)}")
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, path)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif origin is tuple:
        if isinstance(value, list | tuple):
            item = args[0] if args else Any
            return tuple(_coerce(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    elif origin in (dict, Mapping):
        if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
            return json.loads(json.dumps(dict(value)))
    else:  # pragma: no cover - a field type this parser does not know is a programming error
        raise TypeError(f"{path}: unsupported config type {tp!r}")
    raise _fail(path, f"expected {_type_name(tp)}, got {_describe(value)}")


def _type_name(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is tuple:
        return f"a list of {_type_name(args[0]) if args else 'values'}"
    if origin in (dict, Mapping):
        return "a table"
    if tp is type(None):
        return "None"
    if dataclasses.is_dataclass(tp):
        return "a table"
    return getattr(tp, "__name__", str(tp))


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _section_dict(obj: Any, hidden: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The table form of a component (the inverse of :func:`_build`): flat components merged into their
    parent's table, hidden fields (run state, derived values) left out, and so are fields marked
    :data:`OMIT_WHEN_DEFAULT` while they hold their default."""
    out: dict[str, Any] = {}
    for f in _init_fields(obj):
        if hidden and f.name in hidden:
            continue
        meta, value = _meta(f), getattr(obj, f.name)
        if f.metadata.get(OMIT_WHEN_DEFAULT) and value == f.default:
            continue
        if meta.flat:
            out.update(_section_dict(value, meta.hidden))
        elif dataclasses.is_dataclass(value):
            out[f.name] = _section_dict(value, meta.hidden)
        else:
            out[f.name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """Tuples as lists, mappings as dicts, recursively (the JSON form)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
