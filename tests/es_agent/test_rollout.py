"""The rollout loop against a fake text web environment (pages are static axtree strings, a small state
machine moves between them): reward propagation, cut-offs, error accounting, exceptions."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import TimeLimit

from es_agent import EpisodeResult, LLMPolicy, PolicyConfig, run_episode

CHARSET = frozenset(string.printable) | frozenset("\u2019\u20ac\u00e9")
PAGES = {
    "home": ("http://127.0.0.1:7770/", "[1] RootWebArea 'Shop' focused: True\n\t[2] link 'Products'\n"
                                      "\t[3] searchbox 'Search'\n\t[4] StaticText 'Welcome'"),
    "products": ("http://127.0.0.1:7770/products", "[1] RootWebArea 'Products' focused: True\n"
                                                   "\t[5] StaticText 'Mouse: $5'\n\t[6] link 'Home'"),
}
LINKS = {("home", "2"): "products", ("products", "6"): "home"}


class FakeWebEnv(gym.Env[dict[str, str], str]):
    """A two-page shop. The task: tell the price of the mouse (``stop [$5]``). Reward 1 for the right answer
    at the end, 0 otherwise. ``fail_on`` makes ``step`` raise on that step (an infrastructure failure)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, fail_on: int | None = None, fail_reset: bool = False) -> None:
        text = spaces.Text(max_length=10_000, min_length=0, charset=CHARSET)
        self.observation_space = spaces.Dict(
            {key: text for key in ("axtree", "url", "goal", "tabs", "last_action_error")})
        self.action_space = spaces.Text(max_length=1_000, min_length=0, charset=CHARSET)
        self.fail_on, self.fail_reset = fail_on, fail_reset
        self.page, self.steps, self.task_id = "home", 0, 0

    def _obs(self, error: str = "") -> dict[str, str]:
        url, axtree = PAGES[self.page]
        return {"axtree": axtree, "url": url, "goal": "What is the price of the mouse?",
                "tabs": f"Tab 0 (current): {self.page}", "last_action_error": error}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        if self.fail_reset:
            raise ConnectionError("site unreachable")
        self.page, self.steps = "home", 0
        self.task_id = (options or {}).get("task_id", 7)
        return self._obs(), {"task_id": self.task_id}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        self.steps += 1
        if self.fail_on == self.steps:
            raise RuntimeError("browser crashed")
        info = {"task_id": self.task_id, "step": self.steps}
        if (m := re.fullmatch(r"stop \[(.*)\]", action)) is not None:
            return self._obs(), float(m.group(1) == "$5"), True, False, {**info, "answer": m.group(1)}
        if (m := re.fullmatch(r"click \[(\w+)\]", action)) is not None:
            target = LINKS.get((self.page, m.group(1)))
            if target is None:
                return self._obs(f"element [{m.group(1)}] is not clickable"), 0.0, False, False, info
            self.page = target
            return self._obs(), 0.0, False, False, info
        if action in ("scroll [down]", "go_back") or action.startswith("type ["):
            return self._obs(), 0.0, False, False, info
        return self._obs(f"invalid action: {action[:80]!r}"), 0.0, False, False, info


class ScriptedPolicy:
    """Plays a fixed list of actions; may report parse failures like ``LLMPolicy``."""

    def __init__(self, actions: Sequence[str], failed: Sequence[int] = ()) -> None:
        self.actions, self.failed = list(actions), set(failed)
        self.resets, self.i = 0, 0
        self.last_info: dict[int, dict[str, Any]] = {}
        self.seen: list[dict[str, str]] = []

    def reset(self) -> None:
        self.resets += 1
        self.i = 0

    def act(self, obs: dict[str, str]) -> str:
        self.seen.append(obs)
        self.last_info[0] = {"parse_failed": self.i in self.failed}
        action = self.actions[self.i % len(self.actions)]
        self.i += 1
        return action


def test_fake_env_follows_the_gymnasium_contract() -> None:
    check_env(FakeWebEnv(), skip_render_check=True)


def test_reward_reaches_the_result() -> None:
    policy = ScriptedPolicy(["click [2]", "stop [$5]"])
    result = run_episode(FakeWebEnv(), policy, seed=3, options={"task_id": 12})
    assert isinstance(result, EpisodeResult)
    assert (result.task_id, result.reward, result.steps) == (12, 1.0, 2)
    assert result.terminated and not result.truncated
    assert result.success and result.errors == [] and policy.resets == 1
    assert [r.action for r in result.trajectory] == ["click [2]", "stop [$5]"]
    assert [r.url for r in result.trajectory] == [PAGES["home"][0], PAGES["products"][0]]
    assert result.trajectory[0].obs_head.startswith("[1] RootWebArea 'Shop'")
    digests = [r.obs_digest for r in result.trajectory]
    assert digests[0] != digests[1] and len(digests[0]) == 12
    assert result.info["answer"] == "$5"
    assert result.wall_seconds >= result.policy_seconds + result.env_seconds >= 0
    assert policy.seen[1]["url"] == PAGES["products"][0]  # the policy sees the observation after its action


def test_wrong_answer_scores_zero() -> None:
    result = run_episode(FakeWebEnv(), ScriptedPolicy(["stop [$7]"]))
    assert (result.reward, result.steps, result.terminated, result.success) == (0.0, 1, True, False)
    assert result.task_id == 7


def test_max_steps_cuts_the_episode() -> None:
    result = run_episode(FakeWebEnv(), ScriptedPolicy(["scroll [down]"]), max_steps=4)
    assert (result.steps, result.terminated, result.truncated, result.reward) == (4, False, True, 0.0)
    assert result.info["step"] == 4
    empty = run_episode(FakeWebEnv(), ScriptedPolicy(["scroll [down]"]), max_steps=0)
    assert (empty.steps, empty.truncated, empty.info) == (0, True, {"task_id": 7})
    with pytest.raises(ValueError):
        run_episode(FakeWebEnv(), ScriptedPolicy(["go_back"]), max_steps=-1)


def test_env_time_limit_truncates() -> None:
    result = run_episode(TimeLimit(FakeWebEnv(), max_episode_steps=3), ScriptedPolicy(["go_back"]))
    assert (result.steps, result.terminated, result.truncated) == (3, False, True)


def test_errors_and_parse_failures_are_recorded() -> None:
    actions = ["click [4]", "I would like to buy a mouse", "click [2]", "stop [$5]"]
    policy = ScriptedPolicy(actions, failed=[1])
    result = run_episode(FakeWebEnv(), policy)
    assert result.reward == 1.0 and result.steps == 4
    assert result.errors == [
        "step 0: element [4] is not clickable",
        "step 1: policy parse failure: 'I would like to buy a mouse'",
        "step 1: invalid action: 'I would like to buy a mouse'",
    ]
    assert [r.error != "" for r in result.trajectory] == [True, True, False, False]
    assert [r.parse_failed for r in result.trajectory] == [False, True, False, False]


@pytest.mark.parametrize("env", [FakeWebEnv(fail_on=2), FakeWebEnv(fail_reset=True)])
def test_infrastructure_exceptions_propagate(env: FakeWebEnv) -> None:
    with pytest.raises((RuntimeError, ConnectionError)):
        run_episode(env, ScriptedPolicy(["click [2]", "stop [$5]"]))


def test_policy_exceptions_propagate() -> None:
    class Broken(ScriptedPolicy):
        def act(self, obs: dict[str, str]) -> str:
            raise MemoryError("out of memory")

    with pytest.raises(MemoryError):
        run_episode(FakeWebEnv(), Broken([]))


@pytest.mark.parametrize("decoding", ["constrained", "free"])
def test_llm_policy_runs_episodes(tiny: tuple[Any, Any], pools: Any, decoding: str) -> None:
    model, tok = tiny
    config = PolicyConfig(decoding=decoding, max_new_tokens=6)
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), config)
    results = [run_episode(FakeWebEnv(), policy, max_steps=5, options={"task_id": i}) for i in range(2)]
    for i, result in enumerate(results):
        assert result.task_id == i and 1 <= result.steps <= 5 and result.policy_seconds > 0
        assert result.terminated or result.truncated
    assert results[0].trajectory == results[1].trajectory  # greedy: same weights, same episode
    if decoding == "constrained":
        assert policy.stats["parse_failures"] == 0
        assert not any("parse failure" in e for r in results for e in r.errors)
        margins = [r.margin for r in results[0].trajectory]  # the chosen action's lead over the runner-up
        assert all(m is not None and m >= 0 for m in margins)
        assert results[0].confidence == pytest.approx(sum(margins) / len(margins))  # type: ignore[arg-type]
    else:
        assert all(r.margin is None for res in results for r in res.trajectory) and results[0].confidence == 0
        failures = sum(r.parse_failed for res in results for r in res.trajectory)
        assert failures == policy.stats["parse_failures"] > 0


SHOP_PAGE = """<!doctype html><html><head><title>Tiny Shop</title></head><body>
<h1>Tiny Shop</h1><a href="index.html">Home</a>
<form action="index.html"><input type="search" name="q" aria-label="Search"><button>Search</button></form>
<p>Wireless Mouse</p><p>Price: $19.99</p></body></html>"""


@pytest.mark.browser
@pytest.mark.slow
def test_run_episode_on_the_real_env(tmp_path: Any, chromium_path: str, tiny: tuple[Any, Any],
                                     pools: Any) -> None:
    pytest.importorskip("webarena_gym.env")
    import functools
    import http.server
    import json
    import threading

    import webarena_gym  # noqa: F401  (registers WebArenaLite-v0)

    (tmp_path / "index.html").write_text(SHOP_PAGE)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    task = {"task_id": 0, "sites": ["shopping"], "require_login": False, "storage_state": None,
            "start_url": "__SHOPPING__/index.html", "geolocation": None, "intent_template": "",
            "instantiation_dict": {}, "intent": "What does the wireless mouse cost?", "require_reset": False,
            "eval": {"eval_types": ["string_match"], "reference_answers": {"must_include": ["19.99"]},
                     "reference_url": "", "program_html": []}}
    task_file = tmp_path / "tasks.json"
    task_file.write_text(json.dumps([task]))
    site = f"http://127.0.0.1:{server.server_port}"
    env = gym.make("WebArenaLite-v0", task_file=str(task_file), sites={"shopping": site},
                   browser={"executable_path": chromium_path})
    try:
        scripted = run_episode(env, ScriptedPolicy(["scroll [down]", "stop [$19.99]"]),
                               options={"task_id": 0})
        assert (scripted.reward, scripted.steps, scripted.terminated, scripted.task_id) == (1.0, 2, True, 0)
        model, tok = tiny
        policy = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig())
        result = run_episode(env, policy, options={"task_id": 0}, max_steps=3)
        assert 1 <= result.steps <= 3 and result.env_seconds > 0
        assert "Tiny Shop" in result.trajectory[0].obs_head
        assert result.trajectory[0].url.endswith("/index.html")
        assert not any("parse failure" in e for e in result.errors)
    finally:
        env.close()
        server.shutdown()
        server.server_close()
