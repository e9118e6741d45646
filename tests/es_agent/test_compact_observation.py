"""The compact accessibility-tree rendering of the policy's prompt: what it keeps and drops, that the
candidate actions stay those of the full text, that unparseable pages get a clear error, and (real Chromium,
embedded sites) that every element id the bundled reference solutions act on survives it."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

from es_agent.actions_space import build_candidates
from es_agent.axtree import AxTreeError, compact_axtree, parse_axtree, truncate_axtree
from es_agent.errors import EsAgentError
from es_agent.policy import LLMPolicy, PolicyConfig

from .conftest import FORUM_AXTREE, SHOP_AXTREE

PAGE = "\n".join([
    "[1] RootWebArea 'Shop' focused: True",
    "\t[2] navigation 'Account'",
    "\t\t[3] form ''",
    "\t\t\t[4] button 'Sign Out'",
    "\t[5] main ''",
    "\t\t[6] ListMarker '• '",
    "\t\t[7] link 'Beverages'",
    "\t\t[8] combobox 'Sort By' hasPopup: menu expanded: False",
    "\t\t\t[9] MenuListPopup ''",
    "\t\t\t\t[10] option 'Price' selected: False",
    "\t\t\t\t[11] option 'Name' selected: True",
    "\t\t[12] heading 'Snacks'",
    "\t\t\t[13] StaticText 'Snacks'",
    "\t\t[14] link \"Women's Shoes\"",
    "\t\t[15] StaticText \"It's $5\"",
    "\t\t[16] textbox 'Email' required: False",
    "\t\t\t[17] StaticText 'a@b.c'",
    "\t\t[18] checkbox 'Keep me' checked: false",
    "\t\t[19] button 'Downvote' pressed: true",
    "[... 12 lines omitted]",
])


def test_compact_keeps_actionable_ids_and_texts_and_drops_the_rest() -> None:
    compact = compact_axtree(PAGE)
    assert compact.splitlines() == [
        "RootWebArea 'Shop' focused: True",
        "\tnavigation 'Account'",
        "\t\t[4] button 'Sign Out'",
        "\t[7] link 'Beverages'",
        "\t[8] combobox 'Sort By'",
        "\t\t[10] option 'Price'",
        "\t\t[11] option 'Name' selected: True",
        "\theading 'Snacks'",
        "\t[14] link \"Women's Shoes\"",
        "\t\"It's $5\"",
        "\t[16] textbox 'Email'",
        "\t\t'a@b.c'",
        "\t[18] checkbox 'Keep me'",
        "\t[19] button 'Downvote' pressed: true",
        "[... 12 lines omitted]",
    ]
    nodes = {n.name: n for n in parse_axtree(compact)}
    assert nodes["It's $5"].role == "StaticText" and nodes["It's $5"].id == ""
    assert nodes["Women's Shoes"].clickable and nodes["Email"].typeable and nodes["Snacks"].role == "heading"
    assert compact_axtree(compact) == compact  # a fixed point


@pytest.mark.parametrize("tree", [SHOP_AXTREE, FORUM_AXTREE, PAGE])
@pytest.mark.parametrize("goal", ["Search for 'wireless mouse' and tell me its price",
                                  "Open the books forum"])
def test_compact_gives_the_candidates_of_the_full_text(tree: str, goal: str) -> None:
    assert build_candidates(compact_axtree(tree), goal) == build_candidates(tree, goal)
    short, omitted = truncate_axtree(tree, 40, lambda lines: [len(line) // 4 + 1 for line in lines])
    assert omitted and build_candidates(compact_axtree(short), goal) == build_candidates(short, goal)


def test_double_quoted_names_are_read() -> None:
    """``repr`` writes names holding a single quote in double quotes; they were read as empty names."""
    (node,) = parse_axtree("\t[14] link \"Women's Shoes\" focused: True")
    assert (node.id, node.role, node.name, node.props) == ("14", "link", "Women's Shoes", {"focused": "True"})


@pytest.mark.parametrize("text", ["", "  \n\t"])
def test_an_empty_tree_is_empty(text: str) -> None:
    assert compact_axtree(text) == ""


@pytest.mark.parametrize("text", ["Welcome to the page!", "<html><body>hi</body></html>",
                                  "[x y] nothing\nmore"])
def test_a_tree_without_node_lines_is_a_clear_error(text: str) -> None:
    with pytest.raises(AxTreeError, match="no node line") as info:
        compact_axtree(text)
    assert isinstance(info.value, EsAgentError) and isinstance(info.value, ValueError)
    assert text[:10] in str(info.value)


def test_malformed_lines_among_nodes_are_passed_through_visibly() -> None:
    text = "[1] RootWebArea 'Shop'\nthis is not a node line\n\t[2] link 'Home'"
    assert compact_axtree(text) == "RootWebArea 'Shop'\nthis is not a node line\n\t[2] link 'Home'"


def test_policy_observation_modes(tiny: tuple[Any, Any], pools: Any, make_obs: Any) -> None:
    model, tok = tiny
    genome = pools.baseline("no_skill")
    compact = LLMPolicy(model, tok, genome, PolicyConfig())
    full = LLMPolicy(model, tok, genome, PolicyConfig(observation="full"))
    obs = make_obs(PAGE)
    assert "[3] form ''" in full.render(obs) and "[3] form" not in compact.render(obs)
    assert compact.candidates(obs) == full.candidates(obs)
    assert len(compact._build_prompt(obs, 0).ids) < len(full._build_prompt(obs, 0).ids)
    assert compact.render(obs).index("OBJECTIVE:") < compact.render(obs).index("OBSERVATION:")
    plain = make_obs("Welcome to the page!")
    assert "Welcome to the page!" in full.render(plain)  # the full rendering passes any text on as is
    with pytest.raises(AxTreeError, match="observation='full'"):
        compact.act(plain)


# ------------------------------------------------------------------------- the real env, reference solutions

TASKS_PER_SITE = 2
"""Reference solutions replayed per site (different intent templates), plus a typing task."""


@pytest.fixture(scope="module")
def reference_env(chromium_path: str) -> Iterator[gym.Env]:
    import webarena_gym
    from webarena_gym.wrappers import RecordObservations

    env = RecordObservations(gym.make(webarena_gym.ENV_ID, split="all",
                                      browser={"executable_path": chromium_path}))
    yield env
    env.close()


def _sample_tasks(tasks: list[Any]) -> list[Any]:
    picked: dict[str, list[Any]] = {}
    templates: set[Any] = set()
    for task in tasks:
        site = task.sites[0]
        if len(picked.setdefault(site, [])) < TASKS_PER_SITE and task.intent_template_id not in templates:
            templates.add(task.intent_template_id)
            picked[site].append(task)
    typing = [t for t in tasks if any(s["action"] == "type" for s in t.extras["reference_solution"])]
    chosen = [t for group in picked.values() for t in group]
    return chosen + [t for t in typing[:1] if t not in chosen]


@pytest.mark.browser
def test_compact_keeps_every_element_id_the_reference_solutions_use(
        reference_env: gym.Env, capsys: pytest.CaptureFixture[str]) -> None:
    from webarena_gym.reference import run_reference

    tasks = _sample_tasks(list(reference_env.unwrapped.tasks))
    assert {t.sites[0] for t in tasks} >= {"shopping", "shopping_admin", "reddit"}
    started, steps, failures = time.perf_counter(), 0, []
    for task in tasks:
        result = run_reference(reference_env, task)
        assert result.reward == 1.0, task.task_id
        for obs, action in zip(reference_env.observations, result.actions, strict=False):
            steps += 1
            compact = compact_axtree(obs["axtree"])
            shown = {n.id for n in parse_axtree(compact) if n.clickable or n.typeable}
            target = re.match(r"^(?:click|type|hover) \[(\d+)\]", action)
            if target and target[1] not in shown:
                failures.append(f"task {task.task_id}: {action!r}: id {target[1]} not in the compact tree")
            if build_candidates(compact, obs["goal"]) != build_candidates(obs["axtree"], obs["goal"]):
                failures.append(f"task {task.task_id}: candidates differ on {obs['url']}")
    with capsys.disabled():
        print(f"\ncompact rendering: {steps} reference steps of {len(tasks)} tasks checked in "
              f"{time.perf_counter() - started:.0f}s")
    assert not failures, "\n".join(failures)
