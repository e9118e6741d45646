"""Trajectory memory (es_agent.memory): exemplars from episodes and reference steps, retrieval by goal, the
per-candidate bonuses, serialisation; and the memory prior in a real policy (tiny Qwen forwards)."""

from __future__ import annotations

from typing import Any

import pytest

from es_agent.agreement import ReferenceStep
from es_agent.errors import TrajectoryMemoryError
from es_agent.memory import (
    Exemplar,
    ExemplarStep,
    TrajectoryMemory,
    exemplar_from_episode,
    exemplar_from_reference,
    exemplar_step,
)
from es_agent.policy import LLMPolicy, PolicyConfig

from .conftest import SHOP_AXTREE

WISH = Exemplar("What's in my wish list?", (ExemplarStep("click", "My Wish List"), ExemplarStep("stop")),
                task_id=7)
PAGE = Exemplar("Open the product page of Orbis XXL Mouse Pad", (ExemplarStep("click", "Orbis XXL Mouse Pad"),
                                                                  ExemplarStep("stop")), task_id=8)


def test_exemplar_step_names_the_target_and_drops_ids_and_answers() -> None:
    assert exemplar_step("click [33]", SHOP_AXTREE) == ExemplarStep("click", "Add to Cart")
    assert exemplar_step("type [17] [mouse] [1]", SHOP_AXTREE) == ExemplarStep("type", "Search")
    assert exemplar_step("stop [$12.00]", SHOP_AXTREE) == ExemplarStep("stop")
    assert exemplar_step("click [999]", SHOP_AXTREE) == ExemplarStep("click", "")  # not on the page
    episode = exemplar_from_episode("Buy the mouse", ["click [33]", "stop []"], [SHOP_AXTREE, ""], task_id=3)
    assert episode.steps == (ExemplarStep("click", "Add to Cart"), ExemplarStep("stop"))
    assert (episode.task_id, episode.source) == (3, "episode")
    with pytest.raises(ValueError, match="2 actions but 1 pages"):
        exemplar_from_episode("Buy the mouse", ["click [33]", "stop []"], [SHOP_AXTREE])


def test_exemplar_from_reference_orders_the_steps() -> None:
    obs = {"goal": "Add the mouse to the cart", "axtree": SHOP_AXTREE}
    steps = [ReferenceStep(5, "tier1_train", 1, obs, "stop []", ("click [33]",), 2),
             ReferenceStep(5, "tier1_train", 0, obs, "click [33]", (), 2)]
    exemplar = exemplar_from_reference(steps)
    assert exemplar == Exemplar("Add the mouse to the cart", (ExemplarStep("click", "Add to Cart"),
                                                              ExemplarStep("stop")), 5, "reference")


def test_retrieve_picks_the_nearest_goal_above_the_threshold() -> None:
    memory = TrajectoryMemory([WISH, PAGE], min_similarity=0.3)
    found = memory.retrieve("What is in my wish list?")
    assert found is not None and found[0] is WISH and found[1] == pytest.approx(1.0)
    found = memory.retrieve("Open the product page of Sony Headphones")
    assert found is not None and found[0] is PAGE and 0.3 <= found[1] < 1.0
    assert memory.retrieve("Upvote the newest post in books") is None  # no shared content word
    assert memory.retrieve("What's in my wish list?", exclude_task=7) is None  # its own task left out


def test_add_keeps_one_exemplar_per_goal_the_shorter_and_bounds_the_size() -> None:
    memory = TrajectoryMemory(max_size=2)
    longer = Exemplar(WISH.goal, (ExemplarStep("click", "Home"), *WISH.steps))
    assert memory.add(longer) and not memory.add(longer)
    assert memory.add(WISH) and memory.exemplars == [WISH]  # shorter replaces
    assert not memory.add(longer)  # a longer one does not
    memory.add(PAGE)
    memory.add(Exemplar("Show me the cart", (ExemplarStep("stop"),)))
    assert len(memory) == 2 and WISH not in memory.exemplars  # the oldest went
    with pytest.raises(ValueError, match="no steps"):
        memory.add(Exemplar("x", ()))


def test_bonuses_follow_the_exemplar_step() -> None:
    axtree = "\n".join(["[1] RootWebArea 'Shop'", "\t[5] link 'My Wish List'",
                        "\t[6] button 'Add to Wish List'", "\t[7] link 'My Orders'"])
    cands = ["click [5]", "click [6]", "click [7]", "hover [5]", "stop [N/A]", "stop [Shop]"]
    found = (WISH, 0.5)
    first = TrajectoryMemory().bonuses(found, 0, cands, axtree)
    assert first[0] == pytest.approx(0.5)  # the same name, the same kind
    assert 0 < first[1] < first[0]  # a partly matching name
    assert first[2:] == [0.0, 0.0, 0.0, 0.0]  # another name; another kind; stops
    assert TrajectoryMemory().bonuses(found, 1, cands, axtree) == [0, 0, 0, 0, 0.5, 0.5]  # every stop alike
    assert TrajectoryMemory().bonuses(found, 2, cands, axtree) == [0.0] * 6  # past the exemplar's end
    assert TrajectoryMemory().bonuses(None, 0, cands, axtree) == [0.0] * 6


def test_round_trip_and_a_malformed_memory_is_refused() -> None:
    memory = TrajectoryMemory([WISH, PAGE], min_similarity=0.25, max_size=9)
    again = TrajectoryMemory.from_dict(memory.to_dict())
    assert again.exemplars == memory.exemplars and again.digest() == memory.digest()
    assert (again.min_similarity, again.max_size) == (0.25, 9)
    with pytest.raises(TrajectoryMemoryError, match="format"):
        TrajectoryMemory.from_dict({"format": "other"})
    with pytest.raises(TrajectoryMemoryError, match="exemplars"):
        TrajectoryMemory.from_dict({"format": "es_agent.memory/1", "min_similarity": 0.3, "max_size": 4})


def test_memory_prior_makes_the_policy_repeat_the_exemplar(tiny: tuple[Any, Any], pools: Any,
                                                           make_obs: Any) -> None:
    """Real forwards: with a strong memory prior the pick is the exemplar's element at step 0 and a stop at
    step 1; without a memory, or at weight 0, the scores are the plain ones."""
    model, tok = tiny
    obs = make_obs(goal="Add the Wireless Mouse to my cart")
    memory = TrajectoryMemory([Exemplar("Add the Keyboard to my cart", (ExemplarStep("click", "Add to Cart"),
                                                                        ExemplarStep("stop")))])
    plain = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig())
    scored, base = plain.ranked_step(obs)
    off = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig(), memory=memory)
    assert off.ranked_step(obs)[1] == base  # memory_prior 0: off
    strong = PolicyConfig(memory_prior=1000.0)
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), strong, memory=memory)
    assert LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig(memory_prior=1000.0)
                     ).ranked_step(obs)[1] == base  # no memory given
    assert policy.act(obs) == "click [33]"
    assert policy.act(obs).startswith("stop [")
    with pytest.raises(ValueError, match="memory_prior"):
        PolicyConfig(memory_prior=-1.0)
    assert scored.candidates  # the step had candidates to choose from


def test_memory_file_reaches_the_policy_and_a_bad_file_is_named(tmp_path: Any, tiny: tuple[Any, Any],
                                                                pools: Any) -> None:
    from es_agent.memory import load_memory, save_memory
    from es_agent.specs import AgentSpec

    file = save_memory(TrajectoryMemory([WISH], leave_out_same_goal=True), tmp_path / "memory.json")
    spec = AgentSpec(model="tiny:0", policy={"memory_file": str(file), "memory_prior": 50.0})
    config = spec.policy_config()
    policy = LLMPolicy(*tiny, pools.baseline("no_skill"), config)
    assert policy.memory is not None and policy.memory.exemplars == [WISH]
    assert load_memory(file) is policy.memory  # read once, shared by the worker's policies
    assert policy.memory.retrieve(WISH.goal) is None  # leave_out_same_goal survives the file
    (tmp_path / "bad.json").write_text('{"format": "es_agent.memory/1"}')
    with pytest.raises(TrajectoryMemoryError, match="bad.json"):
        LLMPolicy(*tiny, pools.baseline("no_skill"), PolicyConfig(memory_file=str(tmp_path / "bad.json")))
    with pytest.raises(TrajectoryMemoryError, match="missing.json"):
        load_memory(tmp_path / "missing.json")


CANCEL_EXEMPLAR, CANCEL_TASK = 10063, 10064
"""Two instances of tier 1's cancel-an-order template ("Cancel order #000000495"): click the order's
``Cancel Order`` button, then stop."""


@pytest.mark.browser
def test_a_tiny_model_solves_a_task_from_the_memory_of_another_instance(chromium_path: str,
                                                                       tiny: tuple[Any, Any],
                                                                       pools: Any) -> None:
    """Real env, real Chromium, real tiny-model forwards: the reference solution of one instance, recorded
    as an episode exemplar, makes a random tiny model solve the other instance (and without the memory it
    does not)."""
    import gymnasium as gym

    import webarena_gym
    from es_agent.rollout import run_episode
    from webarena_gym.reference import solution_of, step_to_action

    env = gym.make(webarena_gym.ENV_ID, browser={"executable_path": chromium_path}, split="tier1_train",
                   tasks=[CANCEL_EXEMPLAR, CANCEL_TASK])
    try:
        task = next(t for t in env.unwrapped.tasks if t.task_id == CANCEL_EXEMPLAR)  # type: ignore[attr-defined]
        obs, _ = env.reset(options={"task_id": CANCEL_EXEMPLAR})
        goal, actions, pages = obs["goal"], [], []
        for step in solution_of(task):
            actions.append(step_to_action(step, obs["axtree"], env.unwrapped.sites.resolve))  # type: ignore[attr-defined]
            pages.append(obs["axtree"])
            obs, reward, *_ = env.step(actions[-1])
        assert reward == 1.0
        exemplar = exemplar_from_episode(goal, actions, pages, task_id=CANCEL_EXEMPLAR)
        assert [s.kind for s in exemplar.steps] == ["click", "stop"] and exemplar.steps[0].target
        memory = TrajectoryMemory([exemplar])
        with_memory = run_episode(env, LLMPolicy(*tiny, pools.baseline("no_skill"), PolicyConfig(
            memory_prior=1000.0), memory=memory), options={"task_id": CANCEL_TASK}, max_steps=3)
        without = run_episode(env, LLMPolicy(*tiny, pools.baseline("no_skill"), PolicyConfig()),
                              options={"task_id": CANCEL_TASK}, max_steps=3)
    finally:
        env.close()
    assert [s.action.split(" ")[0] for s in with_memory.trajectory] == ["click", "stop"]
    assert with_memory.success, with_memory.info.get("eval")
    assert not without.success


def test_abstract_instances_matches_the_new_tasks_entity_not_the_old_one() -> None:
    """A solved "phone number of Amelia Lewis" clicked Amelia's row: on Julian Walker's task the literal
    match repeats that click; with abstract_instances the instance words are one slot on both sides, so
    Julian's row matches and Amelia's does not, while words both goals share stay literal."""
    solved = Exemplar("What is the phone number of the customer Amelia Lewis?",
                      (ExemplarStep("click", "Edit Amelia Lewis"), ExemplarStep("stop")))
    axtree = "\n".join(["[1] RootWebArea 'Customers'", "\t[5] link 'Edit Amelia Lewis'",
                        "\t[6] link 'Edit Julian Walker'", "\t[7] link 'Customer phone numbers'"])
    goal = "What is the phone number of the customer Julian Walker?"
    cands = ["click [5]", "click [6]", "click [7]"]
    found = (solved, 1.0)
    literal = TrajectoryMemory([solved]).bonuses(found, 0, cands, axtree, goal)
    abstract = TrajectoryMemory([solved], abstract_instances=True).bonuses(found, 0, cands, axtree, goal)
    assert literal[0] == 1.0 and literal[1] < literal[0]
    assert abstract[1] == 1.0 and abstract[0] < abstract[1] and abstract[2] == 0.0
    again = TrajectoryMemory.from_dict(TrajectoryMemory([solved], abstract_instances=True).to_dict())
    assert again.abstract_instances
