"""AgentProblem: compact candidate rows evaluated by whole episodes, in process (a toy text env) and on Ray
workers with the real browser env (local fixture pages): update sync, fault tolerance, divergence checks.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import pickle
import string
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
from gymnasium import spaces

from es_agent.errors import CandidateRowError, EpisodeInfrastructureError, ReplicaDivergenceError, SpecError
from es_agent.perturb import apply_update, weights_checksum
from es_agent.problem import AgentProblem
from es_agent.rows import CandidateRow, check_rows, encode_rows
from es_agent.specs import AgentSpec, EnvSpec
from es_agent.tiny import tiny_qwen
from es_agent.updates import UpdateRecord, WeightUpdate
from es_agent.worker import episode_seed

# ------------------------------------------------------------------------------------------ a toy text env

TOY_ID = "EsAgentToyWebProblem-v0"
CHARSET = string.printable + "\u2019\u2018\u201c\u201d"
TARGETS = {0: "19.99", 1: "red", 2: "Wireless Mouse", 3: "42 reviews"}
GOALS = {0: "What is the price?", 1: "What colour is it?", 2: "Which product is shown?",
         3: "How many reviews?"}
CRASHES: dict[str, int] = {}
"""crash key -> how many more resets raise :class:`ToyCrash`."""
INTERRUPTS: dict[str, str] = {}
"""crash key -> when the env notes a Ctrl-C (``es_agent.interrupt.request``), standing for the SIGINT
handler: ``"crash"`` (as the browser dies of it) or ``"rebuild"`` (late: while the env is rebuilt)."""


class ToyCrash(RuntimeError):
    """Stands for a browser crash."""


class ToyWebEnv(gym.Env):
    """One shop page as a WebArena-style observation; ``stop [answer]`` is scored against the task's target.
    Element ids are shifted by a seed-drawn offset, so env seeds matter."""

    def __init__(self, crash_key: str | None = None) -> None:
        text = spaces.Text(max_length=4096, min_length=0, charset=CHARSET)
        keys = ("axtree", "url", "goal", "tabs", "last_action_error")
        self.observation_space = spaces.Dict({k: text for k in keys})
        self.action_space = spaces.Text(max_length=512, min_length=0, charset=CHARSET)
        self.crash_key = crash_key
        self.resets = 0
        if crash_key and INTERRUPTS.get(crash_key) == "rebuild" and CRASHES.get(crash_key, 0) == 0:
            from es_agent import interrupt

            interrupt.request()

    def _obs(self) -> dict[str, str]:
        b = self._base
        tree = "\n".join([f"[{b}] RootWebArea 'Toy Shop' focused: True", f"\t[{b + 1}] link 'Products'",
                          f"\t[{b + 2}] heading 'Wireless Mouse'", f"\t[{b + 3}] StaticText '19.99'",
                          f"\t[{b + 4}] StaticText 'red'", f"\t[{b + 5}] StaticText '42 reviews'",
                          f"\t[{b + 6}] button 'Add to Cart'"])
        return {"axtree": tree, "url": "http://toy.local/", "goal": GOALS[self._task],
                "tabs": "Tab 0 (current): Toy Shop", "last_action_error": ""}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        self.resets += 1
        if self.crash_key and CRASHES.get(self.crash_key, 0) > 0:
            CRASHES[self.crash_key] -= 1
            if INTERRUPTS.get(self.crash_key) == "crash":
                from es_agent import interrupt

                interrupt.request()
            raise ToyCrash("toy browser crashed")
        self._task = int((options or {})["task_id"])
        if self._task not in TARGETS:
            raise KeyError(f"unknown toy task {self._task}")
        self._base = 1 + int(self.np_random.integers(0, 50))
        self._steps = 0
        return self._obs(), {"task_id": self._task}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        self._steps += 1
        if action.startswith("stop ["):
            reward = float(TARGETS[self._task].lower() in action[len("stop ["):-1].lower())
            return self._obs(), reward, True, False, {"task_id": self._task}
        return self._obs(), 0.0, False, self._steps >= 3, {"task_id": self._task}


if TOY_ID not in gym.registry:
    gym.register(id=TOY_ID, entry_point=ToyWebEnv)

AGENT = AgentSpec(model="tiny:0", policy={"max_prompt_tokens": 512})
TOY_ENV = EnvSpec(env_id=TOY_ID, module=None, max_steps=3, infra_errors=("ToyCrash",))
PROMPT = (0, 1, 0)


def rows_tensor(*rows: tuple[int, float, int, tuple[int, ...]]) -> torch.Tensor:
    return encode_rows([CandidateRow(s, sg, e, p) for s, sg, e, p in rows])


def evaluate(problem: AgentProblem, values: torch.Tensor) -> Any:
    batch = problem.generate_batch(len(values), empty=True)
    batch.set_values(values)
    problem.evaluate(batch)
    return batch


@pytest.fixture
def make_problem() -> Iterator[Callable[..., AgentProblem]]:
    made: list[AgentProblem] = []

    def make(agent: AgentSpec = AGENT, env: EnvSpec = TOY_ENV, **kwargs: Any) -> AgentProblem:
        kwargs.setdefault("max_batch_tasks", 4)
        kwargs.setdefault("seed", 0)
        problem = AgentProblem(agent, env, **kwargs)
        made.append(problem)
        return problem

    yield make
    for problem in made:
        problem.close()


@pytest.fixture
def problem(make_problem: Callable[..., AgentProblem]) -> AgentProblem:
    p = make_problem()
    p.set_task_batch([0, 1, 2])
    return p


POP = rows_tensor((11, 0.5, 7, PROMPT), (11, -0.5, 7, PROMPT), (12, 0.5, 7, (1, 0, 2)),
                  (12, -0.5, 7, (1, 0, 2)))

# ------------------------------------------------------------------------------------------ specs


def test_specs_are_json_safe_round_trip_and_validate() -> None:
    spec = AgentSpec(model="tiny:3", mode="lowrank", rank=2, params=["model.layers.*"],
                     policy={"history_len": 3})
    assert AgentSpec.from_dict(spec.to_dict()) == spec
    assert EnvSpec.from_dict(TOY_ENV.to_dict()) == TOY_ENV
    rec = UpdateRecord(0, 1, weights=WeightUpdate((3, 4), (0.5, -0.5)))
    assert UpdateRecord.from_dict(rec.to_dict()) == rec
    with pytest.raises(SpecError, match="dtype"):
        AgentSpec(dtype="float8")
    with pytest.raises(SpecError, match="unknown PolicyConfig field"):
        AgentSpec(policy={"top_p": 0.7})
    with pytest.raises(SpecError, match="rank"):
        AgentSpec(mode="lowrank")
    with pytest.raises(SpecError, match="JSON"):
        EnvSpec(env_id=TOY_ID, kwargs={"judge": object()})
    with pytest.raises(SpecError, match="one coeff per seed"):
        WeightUpdate((1, 2), (0.1,))


def test_num_actors_one_and_task_batches_are_checked(make_problem: Callable[..., AgentProblem]) -> None:
    with pytest.raises(SpecError, match="num_actors=1"):
        AgentProblem(AGENT, TOY_ENV, num_actors=1)
    p = make_problem(task_ids=[0, 1, 2, 3])
    with pytest.raises(SpecError, match="set_task_batch"):
        evaluate(p, POP[:1])
    with pytest.raises(SpecError, match="at most max_batch_tasks=4"):
        p.set_task_batch([0, 1, 2, 3, 4])
    with pytest.raises(SpecError, match=r"unknown task id\(s\) \[9\]"):
        p.set_task_batch([0, 9])
    p.seed(5)  # EvoTorch's actors call it


# ------------------------------------------------------------------------------------------ in process


def test_pickled_problem_stays_in_kilobytes(problem: AgentProblem) -> None:
    before = len(pickle.dumps(problem))
    evaluate(problem, POP[:2])
    after = pickle.dumps(problem)
    assert before < 32_000 and len(after) < 32_000, (before, len(after))
    clone = pickle.loads(after)
    assert clone._replica is None and clone.on_progress is None
    assert clone.task_batch == (0, 1, 2)


def test_fitness_is_mean_of_per_task_rewards(problem: AgentProblem) -> None:
    events: list[dict[str, Any]] = []
    problem.on_progress = events.append
    batch = evaluate(problem, POP)
    per_task = problem.per_task_rewards(batch)
    assert per_task.shape == (4, 3)
    assert set(per_task.unique().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(batch.evals[:, 0], per_task.mean(dim=1))
    assert torch.isnan(batch.evals[:, 4]).all()  # eval data beyond the batch's 3 tasks
    confidences = problem.last_confidences  # one per episode, for the shaping's tie-break
    assert confidences is not None and confidences.shape == (4, 3) and torch.isfinite(confidences).all()
    assert batch.evals.dtype == torch.float32
    assert [e["event"] for e in events] == ["started", "done"] * 4
    assert [e["row"] for e in events[::2]] == [0, 1, 2, 3]
    status = problem.worker_status()
    assert status[0]["done"] == 4 and status[0]["checksum"] is not None
    assert problem.checksums_agree is True and problem.last_bytes_exchanged == 0
    assert problem.last_timings["seconds_rollout"] > 0
    # 4 rows x 3 tasks, each episode at least one action and at most the spec's max_steps
    assert 12 <= problem.last_env_steps <= 12 * problem.env_spec.max_steps


LOWRANK = AgentSpec(model="tiny:0", mode="lowrank", rank=2, policy={"max_prompt_tokens": 512})


@pytest.mark.parametrize("agent", [AGENT, LOWRANK], ids=["full", "lowrank"])
def test_weights_bit_identical_after_evaluation(make_problem: Callable[..., AgentProblem],
                                                agent: AgentSpec) -> None:
    p = make_problem(agent)
    p.set_task_batch([0, 1])
    model = p.local_replica.model
    before = weights_checksum(model)
    reference, _ = tiny_qwen(0)
    assert before == weights_checksum(reference)
    evaluate(p, POP)
    assert weights_checksum(model) == before


def test_sigma_zero_row_equals_evaluate_centre(problem: AgentProblem) -> None:
    batch = evaluate(problem, rows_tensor((99, 0.0, 7, PROMPT), (98, 0.0, 7, PROMPT)))
    centre = problem.evaluate_centre([0, 1, 2], PROMPT, env_seed=7)
    assert list(centre) == [0, 1, 2]
    rewards = problem.per_task_rewards(batch)
    assert rewards[0].tolist() == list(centre.values()) == rewards[1].tolist()
    assert batch.evals[0, 0].item() == pytest.approx(sum(centre.values()) / 3)


def test_same_row_twice_gives_same_fitness(problem: AgentProblem) -> None:
    first = evaluate(problem, POP).evals.clone()
    second = evaluate(problem, POP.flip(0)).evals.flip(0)
    torch.testing.assert_close(first, second, equal_nan=True)
    again = problem.evaluate_rows(POP[:1])
    assert again.tolist() == [first[0, 1:4].tolist()]


def test_push_update_reaches_the_replica_and_checksums_follow_a_replay(problem: AgentProblem) -> None:
    evaluate(problem, POP[:1])
    replay, _ = tiny_qwen(0)
    for gen, (seeds, coeffs) in enumerate([([11, 12], [0.05, -0.02]), ([13], [0.01])], start=1):
        apply_update(replay, seeds, coeffs)
        problem.push_update(gen, WeightUpdate(tuple(seeds), tuple(coeffs)),
                            expected_checksum=weights_checksum(replay))
        evaluate(problem, POP[:1])
        assert problem.checksums_agree is True
    assert problem.push_update(3, WeightUpdate()) is None and problem.log_end == 2
    assert weights_checksum(problem.local_replica.model) == weights_checksum(replay)
    # a stale expectation
    problem.push_update(3, WeightUpdate((14,), (0.01,)), expected_checksum=weights_checksum(replay))
    with pytest.raises(ReplicaDivergenceError, match="expected"):
        evaluate(problem, POP[:1])


def test_restarted_replica_rebuilds_the_centre_from_snapshot_and_log(problem: AgentProblem,
                                                                     tmp_path: Path) -> None:
    problem.push_update(1, WeightUpdate((21, 22), (0.05, 0.03)))
    evaluate(problem, POP[:1])
    centre = weights_checksum(problem.local_replica.model)
    problem.restart_worker(0)  # rebuilt from the base model + the whole log
    assert weights_checksum(problem.local_replica.model) == centre
    assert problem.save_centre(str(tmp_path / "centre.safetensors")) == centre
    problem.rebase(str(tmp_path / "centre.safetensors"))
    assert problem.update_log == () and problem.log_end == 1
    problem.push_update(2, WeightUpdate((23,), (0.02,)))
    problem.restart_worker(0)  # rebuilt from the snapshot + the log after it
    replay, _ = tiny_qwen(0)
    apply_update(replay, [21, 22], [0.05, 0.03])
    apply_update(replay, [23], [0.02])
    assert weights_checksum(problem.local_replica.model) == weights_checksum(replay)
    assert problem.local_replica.applied == 2


def test_prompt_pool_changes_travel_in_the_log(problem: AgentProblem) -> None:
    from es_agent.prompts import PromptVariant

    n_skills = problem.pools.sizes()["skills"]
    bigger = problem.pools.with_variant("skills", PromptVariant("new", "Read the page before answering."))
    problem.set_prompt_pools(bigger, generation=1)
    rewards = problem.evaluate_rows(rows_tensor((5, 0.1, 3, (0, n_skills, 0))))
    assert rewards.shape == (1, 3)
    assert problem.local_replica.pools.sizes()["skills"] == n_skills + 1
    with pytest.raises(SpecError, match="slots cannot change"):
        problem.set_prompt_pools({**bigger.to_dict(), "slots": {**bigger.to_dict()["slots"], "extra": ["x"]}})


def test_bad_rows_raise_errors_that_name_them(problem: AgentProblem) -> None:
    with pytest.raises(CandidateRowError, match=r"3 prompt slots.*\(2 prompt slot\(s\)\)"):
        problem.evaluate_rows(torch.tensor([[1.0, 0.1, 0.0, 0.0, 0.0]], dtype=torch.float64))
    size = problem.pools.sizes()["skills"]
    with pytest.raises(CandidateRowError, match=rf"row 1: prompt id {size} out of range for slot 'skills'"):
        problem.evaluate_rows(rows_tensor((1, 0.1, 0, PROMPT), (2, 0.1, 0, (0, size, 0))))
    with pytest.raises(CandidateRowError, match="not an integer"):
        problem.evaluate_rows(torch.tensor([[1.5, 0.1, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float64))
    with pytest.raises(CandidateRowError, match="slot 'system'"):
        problem.evaluate_centre([0], (99, 0, 0))


def test_fill_makes_valid_rows_with_one_env_seed(make_problem: Callable[..., AgentProblem]) -> None:
    p = make_problem(fill_sigma=0.01)
    values = p.generate_batch(6).values
    rows = check_rows(values, list(p.pools.sizes().values()), p.pools.slot_names)
    assert len({r.env_seed for r in rows}) == 1 and {abs(r.sigma) for r in rows} == {0.01}


def test_episode_seeds_are_common_random_numbers() -> None:
    assert episode_seed(7, 3) == episode_seed(7, 3) != episode_seed(8, 3)
    assert episode_seed(7, "a") != episode_seed(7, "b")
    assert 0 <= episode_seed(2**53 - 1, 10**12) < 2**31


def test_infrastructure_failures_are_retried_once_then_raised(
        make_problem: Callable[..., AgentProblem]) -> None:
    env = EnvSpec(env_id=TOY_ID, module=None, kwargs={"crash_key": "k"}, max_steps=3,
                  infra_errors=("ToyCrash",))
    p = make_problem(env=env)
    p.set_task_batch([0, 1])
    clean = p.evaluate_rows(POP[:1])
    CRASHES["k"] = 1
    assert p.evaluate_rows(POP[:1]).tolist() == clean.tolist()  # retried on a rebuilt env, same reward
    assert CRASHES["k"] == 0
    CRASHES["k"] = 2
    with pytest.raises(EpisodeInfrastructureError, match="task 0: the episode failed twice"):
        p.evaluate_rows(POP[:1])
    CRASHES["k"] = 0
    env_made = p.local_replica.env().unwrapped
    resets = env_made.resets
    with pytest.raises(KeyError, match="unknown toy task 7"):  # not infrastructure: raised at once, no retry
        p.evaluate_rows(POP[:1], task_ids=[7])
    assert p.local_replica.env().unwrapped is env_made and env_made.resets == resets + 1


@contextlib.contextmanager
def _crash_noting_ctrl_c(make_problem: Callable[..., AgentProblem], key: str, when: str
                         ) -> Iterator[AgentProblem]:
    """A problem on the toy env whose first reset crashes (an infrastructure error) and notes a Ctrl-C
    ``when`` (:data:`INTERRUPTS`); the interrupt and the crash counters are cleared afterwards."""
    from es_agent import interrupt

    env = EnvSpec(env_id=TOY_ID, module=None, kwargs={"crash_key": key}, max_steps=3,
                  infra_errors=("ToyCrash",))
    p = make_problem(env=env)
    p.set_task_batch([0])
    CRASHES[key], INTERRUPTS[key] = 1, when
    try:
        yield p
    finally:
        interrupt.clear()
        CRASHES[key] = 0
        INTERRUPTS.clear()


def test_an_infrastructure_failure_after_ctrl_c_is_the_interrupt_not_retried(
        make_problem: Callable[..., AgentProblem]) -> None:
    """Ctrl-C reaches the browser too: when it dies of the interrupt, the episode's failure stops the run
    (KeyboardInterrupt) instead of being retried on a rebuilt browser."""
    with _crash_noting_ctrl_c(make_problem, "ctrl-c", "crash") as p:
        with pytest.raises(KeyboardInterrupt, match="interrupted"):
            p.evaluate_rows(POP[:1])
        assert CRASHES["ctrl-c"] == 0, "the crash happened once and was not retried"
    assert p.evaluate_rows(POP[:1]).shape == (1, 1)  # cleared: the next episode runs


def test_a_ctrl_c_noted_only_during_the_rebuild_stops_before_the_retried_episode(
        make_problem: Callable[..., AgentProblem]) -> None:
    """The SIGINT handler can run late, inside the rebuild after the failure was already taken for an
    infrastructure error (its KeyboardInterrupt lost in the browser's event loop): the retried attempt
    starts with the check and stops there, and so would the next generation (cotrain.trainer)."""
    from es_agent import interrupt

    with _crash_noting_ctrl_c(make_problem, "late", "rebuild") as p:
        with pytest.raises(KeyboardInterrupt, match="interrupted"):
            p.evaluate_rows(POP[:1])
        assert CRASHES["late"] == 0 and interrupt.requested()
        assert p.local_replica.stats.episodes == 0  # the retry was not run


# ------------------------------------------------------------------------------------------ Ray + browser

PAGE = ("<html><head><title>Toy Shop</title></head><body><h1>Wireless Mouse</h1><p>Price: 19.99</p>"
        "<p>Colour: red</p><a href='reviews.html'>42 reviews</a><button>Add to Cart</button></body></html>")


def browser_task(task_id: int, intent: str, answer: str) -> dict[str, Any]:
    return {"task_id": task_id, "sites": ["shopping"], "require_login": False, "storage_state": None,
            "start_url": "__SHOPPING__/index.html", "geolocation": None, "intent_template": "",
            "instantiation_dict": {}, "intent": intent, "require_reset": False,
            "eval": {"eval_types": ["string_match"], "reference_answers": {"must_include": [answer]},
                     "reference_url": "", "program_html": []}}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def shop_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("shop")
    (root / "index.html").write_text(PAGE)
    (root / "reviews.html").write_text("<html><head><title>Reviews</title></head><body><p>Great</p></body>"
                                       "</html>")
    handler = functools.partial(_QuietHandler, directory=root)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def ray_problem(shop_url: str, chromium_path: str) -> Iterator[AgentProblem]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tasks = [browser_task(0, "What is the price of the mouse?", "19.99"),
             browser_task(1, "What colour is the mouse?", "red")]
    browser = {"executable_path": chromium_path, "action_timeout_ms": 2000, "navigation_timeout_ms": 10_000}
    # one action per episode, scored by the env at that step (the env's max_steps must match the TimeLimit)
    env = EnvSpec(env_id="WebArenaLite-v0", module="webarena_gym",
                  kwargs={"task_file": tasks, "sites": {"shopping": shop_url}, "max_steps": 1,
                          "max_episode_steps": 1, "browser": browser})
    problem = AgentProblem(AGENT, env, max_batch_tasks=2, num_actors=2, seed=0)
    problem.set_task_batch([0, 1])
    try:
        yield problem
    finally:
        problem.close()
        ray.shutdown()


RAY_POP = rows_tensor((31, 0.5, 5, PROMPT), (31, -0.5, 5, PROMPT), (32, 0.5, 5, (1, 0, 2)),
                      (32, -0.5, 5, (1, 0, 2)))


@pytest.mark.ray
@pytest.mark.browser
@pytest.mark.slow
def test_ray_workers_evaluate_and_follow_the_update_log(ray_problem: AgentProblem) -> None:
    assert len(pickle.dumps(ray_problem)) < 32_000
    batch = evaluate(ray_problem, RAY_POP)
    torch.testing.assert_close(batch.evals[:, 0], ray_problem.per_task_rewards(batch).mean(dim=1))
    assert not torch.isnan(batch.evals).any()
    replay, _ = tiny_qwen(0)
    updates = [([41, 42], [0.05, -0.05]), ([43], [0.02]), ([44, 41], [0.01, 0.01])]
    for gen, (seeds, coeffs) in enumerate(updates):
        ray_problem.push_update(gen + 1, WeightUpdate(tuple(seeds), tuple(coeffs)))
        apply_update(replay, seeds, coeffs)
    ray_problem.expected_checksum = weights_checksum(replay)
    evaluate(ray_problem, RAY_POP[:2])
    status = ray_problem.worker_status()
    assert [w["checksum"] for w in status] == [weights_checksum(replay)] * 2
    assert [w["applied"] for w in status] == [3, 3] and ray_problem.checksums_agree is True
    assert len({w["pid"] for w in status}) == 2
    assert 0 < ray_problem.last_bytes_exchanged < 64_000
    print(f"bytes exchanged, 2 rows x 2 tasks + 3 updates: {ray_problem.last_bytes_exchanged}")


@pytest.mark.ray
@pytest.mark.browser
@pytest.mark.slow
def test_ray_worker_killed_mid_generation_loses_no_evaluation(ray_problem: AgentProblem) -> None:
    import ray

    reference = evaluate(ray_problem, RAY_POP).evals.clone()
    events: list[dict[str, Any]] = []
    killed: list[int] = []

    def on_progress(event: dict[str, Any]) -> None:
        events.append(event)
        if event["event"] == "started" and event["worker"] == 1 and event["row"] >= 1 and not killed:
            ray.kill(ray_problem.actors[1])
            killed.append(event["row"])

    ray_problem.on_progress = on_progress
    try:
        restarts = ray_problem.worker_status()[1]["restarts"]
        batch = evaluate(ray_problem, RAY_POP)
    finally:
        ray_problem.on_progress = None
    assert killed
    torch.testing.assert_close(batch.evals, reference)
    assert any(e["event"] == "restarted" and e["worker"] == 1 for e in events)
    assert any(e["event"] == "died" and e["row"] == killed[0] for e in events)
    assert sorted(e["row"] for e in events if e["event"] == "done") == [0, 1, 2, 3]
    assert ray_problem.worker_status()[1]["restarts"] == restarts + 1
    assert ray_problem.checksums_agree in (True, None)


@pytest.mark.ray
@pytest.mark.browser
@pytest.mark.slow
def test_ray_diverging_replica_is_caught_and_restart_heals_it(ray_problem: AgentProblem) -> None:
    import ray

    evaluate(ray_problem, RAY_POP[:2])  # both replicas built and in step
    ray.get(ray_problem.actors[0].call.remote("_debug_diverge_replica", [77, 0.01], {}))
    with pytest.raises(ReplicaDivergenceError, match="worker 0"):
        evaluate(ray_problem, RAY_POP[:2])
    ray_problem.restart_worker(0)
    evaluate(ray_problem, RAY_POP[:2])
    assert ray_problem.checksums_agree is True
