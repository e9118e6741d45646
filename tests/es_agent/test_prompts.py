"""Prompt pools, genomes, rendering and axtree truncation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from es_agent import PromptPoolError
from es_agent.axtree import parse_axtree, truncate_axtree
from es_agent.prompts import (
    REQUIRED_SLOTS,
    HistoryEntry,
    PromptPools,
    PromptVariant,
    format_history,
    observation_values,
    render_messages,
    render_observation,
)


def test_default_pools_have_rich_slots(pools: PromptPools) -> None:
    assert pools.slot_names[:3] == REQUIRED_SLOTS
    assert all(size >= 3 for size in pools.sizes().values())
    styles = {v.style for v in pools.slots["action_format"]}
    assert {"direct", "reasoning"} <= styles
    cot = pools.slots["action_format"][pools.index("action_format", "webarena_cot")]
    assert "In summary, the next action I will perform is" in cot.text
    assert cot.action_prefix.endswith("```") and cot.action_suffix == "```"
    skills = " ".join(v.text for v in pools.slots["skills"])
    assert "search box" in skills and "stop [answer]" in skills


def test_no_skill_baseline(pools: PromptPools) -> None:
    genome = pools.baseline("no_skill")
    assert genome.variant("skills").text == ""
    assert "skills" not in genome.system_text().lower()
    assert genome.ids["skills"] == "no_skill"
    with_skills = genome.replace(skills="general")
    assert "search box" in with_skills.system_text()
    with pytest.raises(PromptPoolError, match="no baseline 'nope'"):
        pools.baseline("nope")


def test_genome_indices_round_trip(pools: PromptPools) -> None:
    genome = pools.genome(system=1, skills="shop_admin", action_format=0)
    assert genome.choice == {"system": 1, "skills": pools.index("skills", "shop_admin"), "action_format": 0}
    assert pools.from_indices(genome.indices) == genome
    assert pools.from_indices(genome.choice) == genome
    assert pools.genome() == pools.from_indices((0, 0, 0))
    with pytest.raises(PromptPoolError, match="slot 'system' has no variant 99"):
        pools.genome(system=99)
    with pytest.raises(PromptPoolError, match="unknown slot"):
        pools.genome(colour=1)
    with pytest.raises(PromptPoolError, match="has no variant 'missing'"):
        pools.genome(skills="missing")


def test_pools_round_trip_through_json(pools: PromptPools, tmp_path: Path) -> None:
    path = tmp_path / "pools.json"
    pools.save(path)
    again = PromptPools.load(path)
    assert again.to_dict() == pools.to_dict()
    assert again.baseline("no_skill").system_text() == pools.baseline("no_skill").system_text()


def test_pools_grow_and_shrink_immutably(pools: PromptPools) -> None:
    grown = pools.with_variant("skills", PromptVariant(id="mutant", text="- Always read the page first."))
    assert grown.sizes()["skills"] == pools.sizes()["skills"] + 1
    assert "mutant" not in [v.id for v in pools.slots["skills"]]
    assert grown.genome(skills="mutant").variant("skills").text.startswith("- Always")
    with pytest.raises(PromptPoolError, match="already has"):
        grown.with_variant("skills", PromptVariant(id="mutant", text="x"))
    shrunk = grown.without_variant("skills", "no_skill")
    assert "no_skill" not in shrunk.baselines
    single = pools.to_dict()
    single["slots"]["system"], single["baselines"] = [{"id": "only", "text": "x"}], {}
    with pytest.raises(PromptPoolError, match="at least one"):
        PromptPools.from_dict(single).without_variant("system", 0)


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.mark.parametrize("slot", REQUIRED_SLOTS)
def test_missing_slot_names_slot_and_file(pools: PromptPools, tmp_path: Path, slot: str) -> None:
    data = pools.to_dict()
    del data["slots"][slot]
    path = _write(tmp_path, data)
    with pytest.raises(PromptPoolError, match=rf"{path}.*missing slot '{slot}'"):
        PromptPools.load(path)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["slots"]["skills"].append(d["slots"]["skills"][0]), "duplicate variant id"),
    (lambda d: d["slots"]["system"][0].pop("text"), "needs a 'text'"),
    (lambda d: d["slots"]["system"].clear(), "non-empty list"),
    (lambda d: d["slots"]["action_format"][0].update(style="poetry"), "style 'poetry'"),
    (lambda d: d["slots"]["action_format"][0].update(colour="red"), "unknown field"),
    (lambda d: d.update(observation_template="{axtree} {cookies}"), "unknown: \\['cookies'\\]"),
    (lambda d: d["baselines"].update(bad={"skills": "nope"}), "no variant 'nope'"),
    (lambda d: d["slots"]["system"][0].update(text=42), "string or a list of strings"),
])
def test_invalid_pool_files(pools: PromptPools, tmp_path: Path, change: Any, message: str) -> None:
    data = pools.to_dict()
    change(data)
    with pytest.raises(PromptPoolError, match=message):
        PromptPools.load(_write(tmp_path, data))


def test_unreadable_pool_files(tmp_path: Path) -> None:
    with pytest.raises(PromptPoolError, match="not valid JSON"):
        PromptPools.load(_write(tmp_path, "{nope"))
    with pytest.raises(PromptPoolError, match="not found"):
        PromptPools.load(tmp_path / "missing.json")
    with pytest.raises(PromptPoolError, match="'slots'"):
        PromptPools.load(_write(tmp_path, {"system": []}))


def test_extra_slots_render_after_required(pools: PromptPools) -> None:
    data = pools.to_dict()
    data["slots"] = {"persona": ["You are polite."], **data["slots"]}
    extended = PromptPools.from_dict(data)
    assert extended.slot_names == (*REQUIRED_SLOTS, "persona")
    assert extended.genome().system_text().endswith("You are polite.")


def test_render_through_chat_template(pools: PromptPools, tiny: tuple[Any, Any], make_obs: Any) -> None:
    _, tok = tiny
    obs = make_obs(error="element [99] not found")
    entries = [HistoryEntry("click [10]"), HistoryEntry("click [99]", "element [99] not found")]
    history = format_history(entries, 5)
    user = render_observation(pools.observation_template, observation_values(obs, obs["axtree"], history))
    genome = pools.baseline("default")
    text = tok.apply_chat_template(render_messages(genome, user), tokenize=False, add_generation_prompt=True)
    for needle in (obs["goal"], obs["url"], "[17] combobox 'Search'", "Tab 0 (current)", "1. click [10]",
                   "2. click [99] (failed: element [99] not found)",
                   "LAST ACTION ERROR: element [99] not found",
                   genome.variant("skills").text.splitlines()[1], "<|im_start|>assistant\n"):
        assert needle in text
    # what is constant in an episode first (the KV cache of the last step covers it), the page last
    assert text.index("OBJECTIVE") < text.index("PREVIOUS ACTIONS") < text.index("OBSERVATION")
    webarena = pools.with_observation_template("webarena")
    values = observation_values(obs, obs["axtree"], history)
    legacy = render_observation(webarena.observation_template, values)
    assert legacy.index("OBSERVATION") < legacy.index("OBJECTIVE")
    assert sorted(legacy.splitlines()) == sorted(user.splitlines())  # the same lines, in WebArena's order


def test_named_observation_templates_round_trip_and_are_validated(pools: PromptPools) -> None:
    assert PromptPools.from_dict(pools.to_dict()).templates == pools.templates
    assert "webarena" in pools.templates
    with pytest.raises(PromptPoolError, match="no observation template 'nope'"):
        pools.with_observation_template("nope")
    data = pools.to_dict()
    data["observation_templates"] = {"bad": "{axtree} {cookies}"}
    with pytest.raises(PromptPoolError, match="unknown: \\['cookies'\\]"):
        PromptPools.from_dict(data)
    variant = pools.slots["skills"][1].__class__("x", "y")
    assert pools.with_variant("skills", variant).templates == pools.templates


def test_render_is_plain_substitution() -> None:
    values = {"axtree": "[1] StaticText '{goal} {0.__class__}'", "goal": "G"}
    assert render_observation("{axtree}|{goal}|{url}", values) == "[1] StaticText '{goal} {0.__class__}'|G|"


def test_format_history_keeps_last_k() -> None:
    history = [HistoryEntry(f"click [{i}]") for i in range(8)]
    text = format_history(history, 3)
    assert text.splitlines() == ["6. click [5]", "7. click [6]", "8. click [7]"]
    assert format_history([], 3) == "None"
    long = format_history([HistoryEntry("type [1] [" + "x" * 500 + "]")], 3)
    assert len(long) < 200


def test_parse_axtree() -> None:
    nodes = parse_axtree("[1] RootWebArea 'Shop' focused: True\n\t[5] textbox 'It''s' required: True\n"
                         "\t\t[6] link ''\nnot a node\n\t[7] StaticText 'Price: $5'")
    assert [(n.id, n.role, n.depth) for n in nodes] == [("1", "RootWebArea", 0), ("5", "textbox", 1),
                                                        ("6", "link", 2), ("7", "StaticText", 1)]
    assert nodes[0].focused and nodes[1].typeable and nodes[1].props == {"required": "True"}
    assert nodes[1].name == "It''s" and nodes[2].clickable and not nodes[3].clickable


def test_truncate_axtree_keeps_head_focus_and_interactive_lines() -> None:
    lines = ["[1] RootWebArea 'Big page'"]
    lines += [f"\t[{i}] StaticText 'filler text number {i} with several words'" for i in range(2, 300)]
    lines[149] = "\t[150] textbox 'Email' focused: True"
    lines[249] = "\t[250] button 'Checkout'"
    lines[199] = "\t[200] StaticText 'Total due: $42'"
    text = "\n".join(lines)

    def count(items: Any) -> list[int]:
        return [len(item.split()) for item in items]

    kept, omitted = truncate_axtree(text, 120, count, goal="What is the total due?", head_lines=3)
    assert omitted > 0
    assert sum(count(kept.splitlines())) + len(kept.splitlines()) <= 120
    for needle in ("[1] RootWebArea", "[2] StaticText", "[150] textbox 'Email' focused", "[250] button",
                   "[200] StaticText 'Total due", "[149] StaticText", "lines omitted]"):
        assert needle in kept
    assert kept.index("[150]") < kept.index("[200]") < kept.index("[250]")  # page order kept
    assert truncate_axtree("[1] link 'a'", 100, count) == ("[1] link 'a'", 0)
