"""Run configuration: TOML + overrides, errors naming the key path and the expected type, JSON round trip."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cotrain.config import (
    OMIT_WHEN_DEFAULT,
    EnvConfig,
    ESConfig,
    ResolvedSettings,
    TrainConfig,
    apply_overrides,
    config_from_dict,
    load_config,
    parse_override_value,
    resolve_settings,
    saved_config_from_dict,
    with_resolved,
)
from cotrain.distribution_config import CoEvolutionConfig
from cotrain.errors import ConfigError
from es_agent.specs import DEFAULT_INFRA_ERRORS, AgentSpec, EnvSpec

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("name", ["smoke.toml", "demo.toml"])
def test_shipped_configs_parse_and_round_trip_through_json(name: str) -> None:
    cfg = load_config(CONFIGS / name)
    again = config_from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    assert cfg.to_dict()["format"] == "esopt-config/1"


def test_smoke_config_is_the_tiny_in_process_run() -> None:
    cfg = load_config(CONFIGS / "smoke.toml")
    got = (cfg.agent.model, cfg.es.population, cfg.es.generations, cfg.workers.num_actors)
    assert got == ("tiny:0", 4, 2, None)
    assert cfg.env.train_templates is not None and len(cfg.env.train_templates) == 2
    assert cfg.env.tasks_per_generation == 2 and cfg.env.spec.max_steps == 2


def test_defaults_and_derived_specs() -> None:
    cfg = TrainConfig()
    assert cfg.es.distribution.total_generations == cfg.es.generations
    assert isinstance(cfg.agent, AgentSpec) and cfg.agent.model == "embedded"
    assert cfg.env.spec_for().kwargs == {"split": "all"}
    assert cfg.env.spec_for("test").kwargs == {"split": "test"}
    assert cfg.env.spec.kwargs == {} and cfg.env.spec.env_id == "WebArenaLite-v0"
    assert cfg.env.spec.module == "webarena_gym" and cfg.env.spec.max_steps == 10
    assert cfg.workers.num_actors is None


def test_components_are_the_specs_of_their_packages_nested_not_restated() -> None:
    cfg = load_config(CONFIGS / "smoke.toml", ["es.schedule_generations=5", "env.module=webarena_gym"])
    assert type(cfg.agent) is AgentSpec and type(cfg.env.spec) is EnvSpec
    assert type(cfg.es.distribution) is CoEvolutionConfig
    # flat [es] keys land in es.distribution; total_generations is es.schedule_generations
    assert cfg.es.distribution == CoEvolutionConfig(sigma_0=0.05, sigma_min=0.01, total_generations=5)
    assert cfg.env.spec == EnvSpec(env_id="WebArenaLite-v0", module="webarena_gym", max_steps=2)
    assert cfg.agent == AgentSpec(model="tiny:0", dtype="float32", policy={"max_prompt_tokens": 512})
    # ... or es.generations when it is left out, also after a change of es.generations
    assert load_config(CONFIGS / "smoke.toml", ["es.generations=7"]).es.distribution.total_generations == 7
    longer = dataclasses.replace(cfg.es, generations=9, schedule_generations=None)
    assert longer.distribution.total_generations == 9 and longer.distribution.sigma_0 == 0.05
    # no field is written twice: the run config's tables are the specs' fields plus run-level ones
    data = cfg.to_dict()
    spec_keys = {f.name for f in dataclasses.fields(AgentSpec)} - {"snapshot", "prompt_pools"}
    assert set(data["agent"]) == spec_keys
    assert set(data["env"]) == {f.name for f in dataclasses.fields(EnvSpec)} | {
        f.name for f in dataclasses.fields(EnvConfig) if f.name != "spec"}
    # ... but for the fields added after runs were logged, left out while they hold their default
    omitted = {f.name for f in dataclasses.fields(CoEvolutionConfig) if f.metadata.get(OMIT_WHEN_DEFAULT)}
    assert omitted == {"anchor_pairs"} and cfg.es.distribution.anchor_pairs == 0
    distribution_keys = {f.name for f in dataclasses.fields(CoEvolutionConfig)} - {"total_generations"}
    assert set(data["es"]) == distribution_keys - omitted | {
        f.name for f in dataclasses.fields(ESConfig) if f.name != "distribution"}
    assert data["es"]["schedule_generations"] == 5 and config_from_dict(data) == cfg


def test_a_table_starts_from_its_fields_run_defaults() -> None:
    # [agent] keeps cotrain's dtype "auto" (AgentSpec's own default is float32), [env] its WebArena defaults
    cfg = config_from_dict({"agent": {"model": "tiny:1"}, "env": {"max_steps": 3}})
    assert cfg.agent.dtype == "auto" and AgentSpec().dtype == "float32"
    assert (cfg.env.spec.env_id, cfg.env.spec.module, cfg.env.spec.max_steps) == (
        "WebArenaLite-v0", "webarena_gym", 3)
    assert cfg.env.spec.infra_errors == DEFAULT_INFRA_ERRORS  # the one default list, es_agent's


@pytest.mark.parametrize(("data", "message"), [
    ({"agent": {"snapshot": "w.safetensors"}}, r"^agent\.snapshot: is run state"),
    ({"agent": {"prompt_pools": "p.json"}}, r"^agent\.prompt_pools: .*set prompts\.pools instead"),
    ({"es": {"total_generations": 5}}, r"^es\.total_generations: set es\.schedule_generations"),
    ({"es": {"distribution": {"sigma_0": 0.1}}},
     r"unknown key es\.distribution .*written in \[es\] itself, e\.g\. es\.anchor_pairs"),
    ({"env": {"spec": {"max_steps": 2}}}, r"unknown key env\.spec .*written in \[env\] itself"),
    ({"env": {"max_steps": 0}}, r"^env: env\.max_steps must be a positive integer"),
    ({"env": {"env_id": ""}}, r"^env: env\.env_id must be a non-empty string"),
    ({"env": {"max_steps": "2"}}, r"^env\.max_steps: expected int, got '2'"),
    ({"agent": {"mode": "lowrank"}}, r"^agent: agent\.rank must be an integer >= 1"),
    ({"es": {"learning_rate": -1.0}}, r"^es: learning_rate must be >= 0"),
    ({"es": {"schedule_generations": -1}}, r"^es\.schedule_generations: must be >= 0"),
])
def test_nested_components_name_the_key_path(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)


def test_run_state_is_not_part_of_a_run_config() -> None:
    with pytest.raises(ConfigError, match=r"agent\.snapshot"):
        TrainConfig(agent=AgentSpec(snapshot="w.safetensors"))
    with pytest.raises(ConfigError, match=r"env\.kwargs\.split"):
        EnvConfig(spec=EnvSpec(env_id="X-v0", kwargs={"split": "train"}))


def test_saved_config_json_of_the_previous_layout_loads(tmp_path: Path) -> None:
    # a config.json as runs before the nesting wrote it (the same flat tables, its own key order)
    old = {"format": "esopt-config/1", "name": "old",
           "agent": {"model": "tiny:0", "dtype": "auto", "device": "cpu", "mode": "full", "rank": None,
                     "params": None, "params_exclude": [], "policy": {"max_prompt_tokens": 512},
                     "torch_threads": 1},
           "env": {"env_id": "WebArenaLite-v0", "module": "webarena_gym", "kwargs": {}, "split": "train",
                   "worker_split": "all", "train_tasks": None, "train_templates": [501, 503],
                   "tasks_per_generation": 2, "max_steps": 2, "infra_errors": list(DEFAULT_INFRA_ERRORS)},
           "es": {"population": 4, "generations": 2, "seed": 0, "sigma_0": 0.05, "sigma_min": 0.01,
                  "schedule_generations": None, "learning_rate": 0.5, "prompt_learning_rate": 0.2,
                  "prob_floor": 0.01, "antithetic": True, "evolve_weights": True, "evolve_prompts": True,
                  "weight_normalisation": "total_weight",
                  "shaping": {"method": "centered_ranks", "per_task_centering": True,
                              "per_task_scaling": False}}}
    cfg = saved_config_from_dict(old)
    # a run older than the prompt prior started uniform: its saved config means baseline_prior 0, not 0.5
    assert cfg.es.distribution.baseline_prior == 0.0
    assert config_from_dict(old).es.distribution.baseline_prior == 0.5  # a TOML file takes today's default
    assert cfg.to_dict()["es"] == {**old["es"], "baseline_prior": 0.0}
    assert cfg.to_dict()["agent"] == old["agent"]
    assert cfg.to_dict()["env"] == old["env"]
    assert cfg.es.distribution.total_generations == 2 and cfg.env.spec.max_steps == 2


@pytest.mark.parametrize(("data", "message"), [
    ({"es": {"popsize": 4}}, r"unknown key es\.popsize"),
    ({"bogus": 1}, r"unknown key bogus"),
    ({"es": {"shaping": {"rank": True}}}, r"unknown key es\.shaping\.rank"),
    ({"es": {"population": "8"}}, r"es\.population: expected int, got '8' \(str\)"),
    ({"es": {"population": 4.0}}, r"es\.population: expected int"),
    ({"es": {"sigma_0": "big"}}, r"es\.sigma_0: expected float"),
    ({"es": {"antithetic": 1}}, r"es\.antithetic: expected bool"),
    ({"es": {"shaping": {"method": "ranks"}}}, r"es\.shaping\.method: expected one of"),
    ({"env": {"train_tasks": [1, 2.5]}}, r"env\.train_tasks\[1\]: expected int or str"),
    ({"env": {"kwargs": [1]}}, r"env\.kwargs: expected a table"),
    ({"ui": {"mode": "maybe"}}, r"ui\.mode: expected one of"),
    ({"workers": "many"}, r"workers: expected a table"),
    ({"agent": {"params": "model.*"}}, r"agent\.params: expected a list of str"),
])
def test_unknown_keys_and_wrong_types_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)


@pytest.mark.parametrize(("data", "message"), [
    ({"es": {"population": 3}}, r"es\.population: must be even"),
    ({"es": {"sigma_0": 1e-4, "sigma_min": 1e-3}}, r"^es: "),
    ({"env": {"tasks_per_generation": 0}}, r"env\.tasks_per_generation"),
    ({"env": {"train_tasks": [1], "tasks_per_generation": 2}}, r"env\.train_tasks"),
    ({"env": {"kwargs": {"split": "train"}}}, r"env\.kwargs\.split"),
    ({"agent": {"dtype": "float8"}}, r"agent\.dtype"),
    ({"agent": {"policy": {"top_p": 0.7}}}, r"agent: .*unknown PolicyConfig field"),
    ({"prompts": {"mutable_slots": ["action_format"]}}, r"prompts\.mutable_slots"),
    ({"prompts": {"mutation": True}, "es": {"evolve_prompts": False}}, r"prompts\.mutation"),
    ({"prompts": {"new_variant_mass": 1.5}}, r"prompts\.new_variant_mass"),
    ({"format": "other/9"}, r"format"),
    ({"workers": {"num_workers": -1}}, r"workers\.num_workers: must be an integer >= 0 or 'auto', got -1"),
    ({"workers": {"num_workers": "many"}},
     r"workers\.num_workers: expected int or one of 'auto', got 'many'"),
    ({"es": {"shaping": {"confidence_tiebreak": 0.3}}, "env": {"tasks_per_generation": 2}},
     r"es\.shaping\.confidence_tiebreak: 0\.3 must be below 1 / \(2 x env\.tasks_per_generation\) = 0\.25"),
    ({"es": {"shaping": {"confidence_scale": -1.0}}}, r"es.*confidence_scale must be > 0"),
])
def test_bad_values_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)


def test_fields_added_later_stay_out_of_the_json_form_at_their_default() -> None:
    """A run recorded before the confidence tie-break existed keeps its config.json and grid digest."""
    plain = TrainConfig().to_dict()
    assert set(plain["es"]["shaping"]) == {"method", "per_task_centering", "per_task_scaling"}
    tie = config_from_dict({"es": {"shaping": {"confidence_tiebreak": 0.1}}}).to_dict()
    shaping = tie["es"]["shaping"]
    assert shaping["confidence_tiebreak"] == 0.1 and "confidence_scale" not in shaping
    assert config_from_dict(tie).es.shaping.confidence_tiebreak == 0.1
    assert config_from_dict(plain).es.shaping.confidence_tiebreak == 0.0


def test_overrides_are_typed_toml_values_with_string_fallback(tmp_path: Path) -> None:
    file = tmp_path / "run.toml"
    file.write_text('name = "x"\n[es]\npopulation = 4\n', encoding="utf-8")
    cfg = load_config(file, ["es.population=8", "agent.model=tiny:3", "es.shaping.method=zscore",
                             "env.train_tasks=[1, 2, 3]", "env.tasks_per_generation=2",
                             "workers.address=none", "prompts.mutation=true",
                             "agent.policy={max_prompt_tokens = 256}"])
    assert cfg.es.population == 8 and cfg.agent.model == "tiny:3" and cfg.es.shaping.method == "zscore"
    assert cfg.env.train_tasks == (1, 2, 3) and cfg.workers.address is None and cfg.prompts.mutation
    assert cfg.agent.policy == {"max_prompt_tokens": 256}
    assert parse_override_value("0.5") == 0.5 and parse_override_value("null") is None
    with pytest.raises(ConfigError, match=r"unknown key es\.pop"):
        load_config(file, ["es.pop=8"])
    with pytest.raises(ConfigError, match="expected section.key=value"):
        apply_overrides({}, ["es.population"])
    with pytest.raises(ConfigError, match="name is not a table"):
        apply_overrides({"name": "x"}, ["name.first=1"])


def test_unreadable_or_missing_toml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[es\npopulation = 4", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read TOML"):
        load_config(bad)


def test_demo_config_uses_the_auto_dtype_and_every_core() -> None:
    cfg = load_config(CONFIGS / "demo.toml")
    assert cfg.agent.dtype == "auto" and cfg.workers.num_workers == "auto"
    assert TrainConfig().agent.dtype == "auto"  # the default of run configs


def test_auto_settings_resolve_to_concrete_values_with_reasons() -> None:
    cfg = config_from_dict({"agent": {"dtype": "auto"}, "workers": {"num_workers": "auto"}})
    settings = resolve_settings(cfg)
    assert settings.dtype in ("float32", "bfloat16") and settings.dtype_reason.startswith("auto: cpu flags")
    assert settings.num_workers >= 1 and settings.num_workers_reason.startswith("auto: cpu affinity")
    concrete = with_resolved(cfg, settings)
    assert concrete.agent.dtype == settings.dtype and concrete.workers.num_workers == settings.num_workers
    assert ResolvedSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings
    fixed = resolve_settings(config_from_dict({"agent": {"dtype": "float16"}, "workers": {"num_workers": 3}}))
    assert (fixed.dtype, fixed.dtype_reason, fixed.num_workers, fixed.num_workers_reason) == (
        "float16", "set: float16", 3, "set: 3")
    assert config_from_dict({"workers": {"num_workers": 1}}).workers.num_actors is None  # 1: in process
    assert config_from_dict({"workers": {"num_workers": 2}}).workers.num_actors == 2
    with pytest.raises(ConfigError, match="resolved dtype must be one of"):
        ResolvedSettings.from_dict({**settings.to_dict(), "dtype": "auto"})
    with pytest.raises(ConfigError, match="must have the keys"):
        ResolvedSettings.from_dict({"dtype": "float32"})
