"""The default world: an env without a task file starts the embedded sites lazily, logs in, resets the sites
to pristine state at every reset, and two envs never see each other's changes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import webarena_gym
from webarena_gym import load_tasks
from webarena_gym.reference import play_solution, run_reference
from webarena_gym.tasks import TaskConfig

pytestmark = pytest.mark.browser

STATE_CHANGING_SLUGS = ("add-to-cart", "place-order", "cancel-order", "comment-on-post", "bestseller-to-cart")


def _tasks_by_template(env: gym.Env) -> dict[int, list[TaskConfig]]:
    by_template: dict[int, list[TaskConfig]] = {}
    for task in env.unwrapped.tasks:
        by_template.setdefault(task.intent_template_id, []).append(task)  # type: ignore[arg-type]
    return by_template


def _state_changing(env: gym.Env) -> list[TaskConfig]:
    """One task of each of a few state-changing templates (shop, admin, forum, cross-site)."""
    from webarena_gym.taskgen import all_templates

    ids = {t.template_id for t in all_templates() if t.slug in STATE_CHANGING_SLUGS}
    return [tasks[0] for template_id, tasks in _tasks_by_template(env).items() if template_id in ids]


def test_default_world_starts_lazily_and_closes(make_world_env: Callable[..., gym.Env]) -> None:
    env = make_world_env()
    world = env.unwrapped.world
    assert [t.task_id for t in env.unwrapped.tasks] == [t.task_id for t in load_tasks("embedded:train")]
    assert not world.started and env.unwrapped.sites.shopping is None
    shop_task = next(t for t in env.unwrapped.tasks if t.sites == ("shopping",))
    obs, info = env.reset(options={"task_id": shop_task.task_id})
    assert world.started and info["start_url"].startswith(env.unwrapped.sites.shopping)
    assert obs["url"].startswith("http://localhost:7770/"), "the agent sees the shop's fixed address"
    assert "Welcome, Emma Lopez!" in obs["axtree"], "tasks with require_login start logged in"
    admin_task = next(t for t in env.unwrapped.tasks if t.sites == ("shopping_admin",))
    obs, _ = env.reset(options={"task_id": admin_task.task_id})
    assert "Signed in as admin" in obs["axtree"]
    forum_task = next(t for t in env.unwrapped.tasks if t.sites == ("reddit",))
    obs, _ = env.reset(options={"task_id": forum_task.task_id})
    assert "link 'MarvelsGrantMan136'" in obs["axtree"] and "Log out" in obs["axtree"]
    pid = world.server_pid
    assert pid is not None
    env.close()
    env.close()
    assert not world.started
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_default_world_splits_and_check_env(make_world_env: Callable[..., gym.Env]) -> None:
    env = make_world_env(split="test_unseen")
    assert {t.extras["split"] for t in env.unwrapped.tasks} == {"test_unseen"}
    check_env(env.unwrapped, skip_render_check=True)


def test_state_changes_are_undone_at_every_reset(world_env: gym.Env) -> None:
    world = world_env.unwrapped.world
    for task in _state_changing(world_env):
        obs, _ = world_env.reset(options={"task_id": task.task_id})
        pristine = world.state_digest()
        _, before, *_ = world_env.step("stop []")
        assert before == 0.0, f"task {task.task_id}: the evaluator passes before the solution ran"
        assert run_reference(world_env, task).reward == 1.0
        assert world.state_digest() != pristine, f"task {task.task_id} changed nothing"
        world_env.reset(options={"task_id": task.task_id})
        assert world.state_digest() == pristine, "the next episode starts from pristine state"
        _, again, *_ = world_env.step("stop []")
        assert again == 0.0


def test_two_envs_do_not_see_each_other(make_world_env: Callable[..., gym.Env]) -> None:
    first, second = make_world_env(split="all"), make_world_env(split="all")
    tasks = _state_changing(first)
    task = tasks[0]
    obs_first, _ = first.reset(options={"task_id": task.task_id})
    second.reset(options={"task_id": task.task_id})
    assert first.unwrapped.sites.shopping != second.unwrapped.sites.shopping
    assert play_solution(first, task, obs_first).reward == 1.0
    _, reward, *_ = second.step("stop []")
    assert reward == 0.0, "the second env saw the first env's change"


def test_two_envs_in_parallel_threads(chromium_path: str) -> None:
    """Each thread owns its env (Playwright's sync API is bound to the thread that made it)."""
    tasks = [t for t in load_tasks("embedded") if t.require_reset]
    chosen = [tasks[0], tasks[len(tasks) // 2]]
    results: dict[int, tuple[float, dict[str, str]]] = {}
    errors: list[BaseException] = []

    def replay(task: TaskConfig) -> None:
        env = gym.make(webarena_gym.ENV_ID, split="all", browser={"executable_path": chromium_path})
        try:
            reward = run_reference(env, task).reward
            results[task.task_id] = (reward, env.unwrapped.world.state_digest())
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            env.close()

    threads = [threading.Thread(target=replay, args=(task,)) for task in chosen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    (reward_a, digest_a), (reward_b, digest_b) = results.values()
    assert reward_a == reward_b == 1.0
    assert digest_a != digest_b


def test_every_process_sees_the_same_addresses(make_world_env: Callable[..., gym.Env]) -> None:
    """Each env's sites listen on free ports of their own, but the agent reads fixed addresses: the same
    episode gives the same observations in every env (so on every Ray worker, and after a resume), and
    ``goto`` takes the shown addresses (and still refuses other origins)."""
    first, second = make_world_env(split="all"), make_world_env(split="all")
    trajectories = []
    for env in (first, second):
        steps = [env.reset(seed=0, options={"task_id": 8})[0]]
        for action in ("goto [http://localhost:9999/]", "goto [http://localhost:7770/]",
                       "goto [http://localhost:7771/]", "goto [http://127.0.0.1:1/]"):
            steps.append(env.step(action)[0])
        trajectories.append(steps)
    assert first.unwrapped.sites.shopping != second.unwrapped.sites.shopping  # different real ports
    assert trajectories[0] == trajectories[1]
    start, forum, shop, refused, refused_too = trajectories[0]
    assert start["url"].startswith("http://localhost:7770") and start["last_action_error"] == ""
    assert forum["url"].startswith("http://localhost:9999") and forum["last_action_error"] == ""
    assert shop["url"].startswith("http://localhost:7770") and shop["last_action_error"] == ""
    assert "localhost:7771" in refused["last_action_error"] and shop["url"] == refused["url"]
    assert refused_too["last_action_error"] and shop["url"] == refused_too["url"]
    for obs in (start, forum, shop, refused):
        for value in obs.values():
            assert "127.0.0.1:" + first.unwrapped.sites.shopping.rsplit(":", 1)[1] not in value
