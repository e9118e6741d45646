"""The overlapped weight work of a worker (:mod:`es_agent.perturb_pipeline` in
:class:`es_agent.worker.Replica`): the same rewards and the same bits as the plain order, the work really on a
background thread during env resets, and exact or clearly failed states after an exception in an episode or in
the overlapped work.
"""

from __future__ import annotations

import functools
import http.server
import string
import threading
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
import torch
from gymnasium import spaces

import es_agent.perturb as perturb_module
from es_agent.perturb import apply_update, weights_checksum
from es_agent.perturb_pipeline import PerturbationPipeline, WeightsStateError
from es_agent.rows import CandidateRow
from es_agent.specs import AgentSpec, EnvSpec
from es_agent.tiny import tiny_qwen
from es_agent.updates import UpdateRecord, WeightUpdate
from es_agent.worker import EpisodeInfrastructureError, Replica

TOY_ID = "EsAgentToyPipeline-v0"
CHARSET = string.printable
ANSWERS = {0: "19.99", 1: "red"}
RESETS: list[dict[str, Any]] = []
"""What each toy reset saw: the thread doing the weight move alive or not (set by the test's replica)."""
FAIL_AT_STEP: dict[str, int] = {}


class ToyShopEnv(gym.Env):
    """A one-page shop; ``stop [answer]`` is scored. ``fail_key`` names the step that raises (a KeyError,
    not infrastructure) in :data:`FAIL_AT_STEP`."""

    def __init__(self, fail_key: str | None = None) -> None:
        text = spaces.Text(max_length=4096, min_length=0, charset=CHARSET)
        self.observation_space = spaces.Dict({k: text for k in ("axtree", "url", "goal", "tabs",
                                                                "last_action_error")})
        self.action_space = spaces.Text(max_length=512, min_length=0, charset=CHARSET)
        self.fail_key = fail_key
        self.on_reset: Any = None

    def _obs(self) -> dict[str, str]:
        tree = "\n".join(["[1] RootWebArea 'Toy Shop' focused: True", "\t[2] heading 'Wireless Mouse'",
                          "\t[3] StaticText '19.99'", "\t[4] StaticText 'red'", "\t[5] button 'Add to Cart'"])
        return {"axtree": tree, "url": "http://toy.local/", "goal": f"Tell me about item {self._task}",
                "tabs": "Tab 0 (current): Toy Shop", "last_action_error": ""}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        self._task = int((options or {})["task_id"])
        self._steps = 0
        if self.on_reset is not None:
            self.on_reset()
        return self._obs(), {"task_id": self._task}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        self._steps += 1
        if self.fail_key is not None and FAIL_AT_STEP.get(self.fail_key) == self._steps:
            raise KeyError(f"toy page broke at step {self._steps}")
        if action.startswith("stop ["):
            return self._obs(), float(ANSWERS[self._task] in action), True, False, {"task_id": self._task}
        return self._obs(), 0.0, False, self._steps >= 3, {"task_id": self._task}


if TOY_ID not in gym.registry:
    gym.register(id=TOY_ID, entry_point=ToyShopEnv)

AGENT = AgentSpec(model="tiny:0", policy={"max_prompt_tokens": 512})
LOWRANK = AgentSpec(model="tiny:0", mode="lowrank", rank=2, policy={"max_prompt_tokens": 512})
ENV = EnvSpec(env_id=TOY_ID, module=None, max_steps=3, infra_errors=("ToyCrash",))
ROWS = [CandidateRow(11, 0.5, 7, (0, 1, 0)), CandidateRow(11, -0.5, 7, (0, 1, 0)),
        CandidateRow(12, 0.5, 7, (1, 0, 2)), CandidateRow(12, -0.5, 7, (1, 0, 2))]
UPDATE = UpdateRecord(index=0, generation=1, weights=WeightUpdate((11, 12), (0.05, -0.02)))


@pytest.fixture
def make_replica(pools: Any) -> Iterator[Any]:
    made: list[Replica] = []

    def make(agent: AgentSpec = AGENT, env: EnvSpec = ENV, overlap: bool = True) -> Replica:
        rep = Replica(agent, env, pools, applied=0, overlap=overlap)
        made.append(rep)
        return rep

    yield make
    for rep in made:
        rep.close()


def centre_checksum(*updates: UpdateRecord, agent: AgentSpec = AGENT) -> str:
    model, _ = tiny_qwen(0)
    for u in updates:
        apply_update(model, u.weights.seeds, u.weights.coeffs, **agent.perturb_kwargs())
    return weights_checksum(model)


def raw_checksum(rep: Replica) -> str:
    """The weights as they are now (not through ``Replica.model``, which would settle them first)."""
    return weights_checksum(rep._model)


@pytest.mark.parametrize("agent", [AGENT, LOWRANK], ids=["full", "lowrank"])
def test_overlap_gives_the_same_rewards_and_bits_as_the_plain_order(make_replica: Any,
                                                                    agent: AgentSpec) -> None:
    plain, overlapped = make_replica(agent, overlap=False), make_replica(agent, overlap=True)
    rewards = {}
    for rep in (plain, overlapped):
        first = [rep.run_rows([row], [0, 1]) for row in ROWS[:3]]  # one row per call: rows_per_piece=1
        rep.apply(UPDATE)
        second = rep.run_rows(ROWS[1:3], [0])
        rewards[rep.weights.overlap] = (torch.cat(first).tolist(), second.tolist())
        assert weights_checksum(rep.model) == centre_checksum(UPDATE, agent=agent)
    assert rewards[True] == rewards[False]
    assert plain.stats.seconds_overlapped == 0.0 < overlapped.stats.seconds_overlapped
    assert not plain.weights.pending


def test_the_weight_move_runs_during_the_first_env_reset_of_a_row(make_replica: Any) -> None:
    rep = make_replica()
    threads: list[str] = []
    enter = perturb_module.perturbed

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return enter(*args, **kwargs)

    gate = threading.Event()
    original_run = rep.weights._run

    def held_run(move: Any, threads_arg: Any) -> None:  # the move waits until the reset has looked
        gate.wait(timeout=30)
        original_run(move, threads_arg)

    env = rep.env().unwrapped
    env.on_reset = lambda: (RESETS.append({"busy": rep.weights.busy}), gate.set())
    RESETS.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(perturb_module, "perturbed", recording)
        mp.setattr(rep.weights, "_run", held_run)
        rep.run_rows(ROWS[:1], [0, 1])
    assert RESETS[0]["busy"] is True  # the first reset ran while the move was in flight
    assert threads == ["perturbation-move"]
    assert raw_checksum(rep) != centre_checksum()  # the restore is deferred to the next move ...
    assert weights_checksum(rep.model) == centre_checksum()  # ... or to the first use of the centre


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "plain"])
def test_an_exception_mid_episode_leaves_the_centre_bit_for_bit(make_replica: Any, overlap: bool) -> None:
    env = EnvSpec(env_id=TOY_ID, module=None, kwargs={"fail_key": f"mid-{overlap}"}, max_steps=3)
    rep = make_replica(env=env, overlap=overlap)
    rep.apply(UPDATE)
    clean = rep.run_rows(ROWS[:2], [0, 1])
    FAIL_AT_STEP[f"mid-{overlap}"] = 1
    with pytest.raises(KeyError, match="toy page broke at step 1"):
        rep.run_rows(ROWS[2:3], [0, 1])
    assert raw_checksum(rep) == centre_checksum(UPDATE)
    assert not rep.weights.pending
    FAIL_AT_STEP.clear()
    assert rep.run_rows(ROWS[:2], [0, 1]).tolist() == clean.tolist()


def test_a_failed_overlapped_perturbation_raises_and_leaves_the_centre(make_replica: Any) -> None:
    rep = make_replica(env=EnvSpec(env_id=TOY_ID, module=None, max_steps=3, infra_errors=("RuntimeError",)))
    clean = rep.run_rows(ROWS[:1], [0, 1])
    calls = {"n": 0}

    def failing(real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 5:  # part way through the model: perturbed() must undo the tensors done
                raise RuntimeError("out of memory in the move")
            return real(*args, **kwargs)
        return call

    with pytest.MonkeyPatch.context() as mp:
        for name in ("add_noise_", "add_noise_undoable_"):  # by undo record or by copy buffer
            mp.setattr(perturb_module, name, failing(getattr(perturb_module, name)))
        # RuntimeError counts as infrastructure here: the retry must fail too, never run at the centre
        with pytest.raises(EpisodeInfrastructureError, match="out of memory in the move"):
            rep.run_rows(ROWS[2:3], [0, 1])
    assert raw_checksum(rep) == centre_checksum()
    assert rep.stats.episodes == 2  # the failed row ran no episode
    assert rep.run_rows(ROWS[:1], [0, 1]).tolist() == clean.tolist()


class _DyingRestore:
    """A ``perturbed(...)`` block whose exit fails before restoring anything."""

    def __init__(self, block: Any) -> None:
        self.block = block

    def __enter__(self) -> Any:
        return self.block.__enter__()

    def __exit__(self, *exc: Any) -> None:
        raise RuntimeError("restore kernel died")


def test_a_failed_overlapped_restore_is_a_clear_error_from_then_on(make_replica: Any) -> None:
    rep = make_replica()
    real = perturb_module.perturbed
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(perturb_module, "perturbed", lambda *a, **k: _DyingRestore(real(*a, **k)))
        rep.run_rows(ROWS[:1], [0, 1])
    with pytest.raises(WeightsStateError, match="unknown state: RuntimeError: restore kernel died") as info:
        rep.run_rows(ROWS[2:3], [0, 1])  # its move first leaves the previous row's block
    assert isinstance(info.value.__cause__, RuntimeError)
    assert any("while restoring member weights" in note for note in info.value.__cause__.__notes__)
    for call in (lambda: rep.run_rows(ROWS[:1], [0, 1]), rep.checksum, lambda: rep.model):
        with pytest.raises(WeightsStateError, match="unknown state: RuntimeError: restore kernel died"):
            call()


def test_pipeline_without_overlap_is_at_the_centre_between_members(tiny: Any) -> None:
    model, _ = tiny_qwen(0)
    pipe = PerturbationPipeline(model, {"mode": "full", "rank": None, "params": None}, overlap=False)
    centre = weights_checksum(model)
    pipe.start(5, 0.1)
    assert pipe.wait() is not None and pipe.point == (5, 0.1)
    assert weights_checksum(model) != centre
    times = pipe.settle()
    assert times is not None and times.restore > 0 and weights_checksum(model) == centre
    pipe.queue_update([5], [0.01])  # applied at once without overlap
    assert not pipe.pending and weights_checksum(model) == centre_checksum(
        UpdateRecord(index=0, generation=1, weights=WeightUpdate((5,), (0.01,))))


# ------------------------------------------------------------------------------------------ real browser

PAGE = ("<html><head><title>Toy Shop</title></head><body><h1>Wireless Mouse</h1><p>Price: 19.99</p>"
        "<p>Colour: red</p><button>Add to Cart</button></body></html>")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def shop_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("pipeline_shop")
    (root / "index.html").write_text(PAGE)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _task(task_id: int, intent: str, answer: str) -> dict[str, Any]:
    return {"task_id": task_id, "sites": ["shopping"], "require_login": False, "storage_state": None,
            "start_url": "__SHOPPING__/index.html", "geolocation": None, "intent_template": "",
            "instantiation_dict": {}, "intent": intent, "require_reset": False,
            "eval": {"eval_types": ["string_match"], "reference_answers": {"must_include": [answer]},
                     "reference_url": "", "program_html": []}}


@pytest.mark.browser
@pytest.mark.slow
def test_overlap_with_real_browser_resets_matches_the_plain_order(make_replica: Any, shop_url: str,
                                                                  chromium_path: str) -> None:
    tasks = [_task(0, "What is the price of the mouse?", "19.99"), _task(1, "What colour is it?", "red")]
    browser = {"executable_path": chromium_path, "action_timeout_ms": 2000, "navigation_timeout_ms": 10_000}
    env = EnvSpec(env_id="WebArenaLite-v0", module="webarena_gym",
                  kwargs={"task_file": tasks, "sites": {"shopping": shop_url}, "max_steps": 1,
                          "max_episode_steps": 1, "browser": browser})
    out = {}
    for overlap in (False, True):
        rep = make_replica(env=env, overlap=overlap)
        rewards = [rep.run_rows([row], [0, 1]).tolist() for row in ROWS[:2]]
        rep.apply(UPDATE)
        rewards.append(rep.run_rows(ROWS[2:3], [0, 1]).tolist())
        out[overlap] = (rewards, weights_checksum(rep.model))
        rep.close()
    assert out[True] == out[False]
    assert out[True][1] == centre_checksum(UPDATE)
