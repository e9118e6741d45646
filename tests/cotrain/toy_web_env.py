"""A toy text web env for the cotrain tests and examples: one shop page per task, WebArena-style
observations, ``stop [answer]`` scored against the task's target, train/test splits. Importing it registers
``CotrainToyWeb-v0``; put this folder on ``PYTHONPATH`` (or ``sys.path``) and use
``module = "toy_web_env"``. :func:`toy_config_dict` is a small run on it with the tiny Qwen."""

from __future__ import annotations

import string
from typing import Any

import gymnasium as gym
from gymnasium import spaces

ENV_ID = "CotrainToyWeb-v0"
CHARSET = string.printable + "\u2019\u2018\u201c\u201d"
TASKS: dict[int, tuple[str, str, str]] = {
    0: ("What is the price of the mouse?", "19.99", "train"),
    1: ("What colour is the mouse?", "red", "train"),
    2: ("Which product is shown?", "Wireless Mouse", "train"),
    3: ("How many reviews does it have?", "42 reviews", "train"),
    4: ("What is the shipping time?", "2 days", "test"),
    5: ("Which brand makes it?", "Acme", "test"),
    6: ("What is the rating?", "4.5 stars", "test"),
}
"""task id -> (goal, answer, split)."""
SPLITS = ("train", "test")


class ToyWebEnv(gym.Env):
    """One shop page as a WebArena-style observation; ``stop [answer]`` ends the episode with reward 1 when
    the answer holds the task's target. Element ids shift with the reset seed, so env seeds matter."""

    def __init__(self, split: str | None = None, tasks: list[int] | None = None) -> None:
        if split is not None and split not in (*SPLITS, "all"):
            raise ValueError(f"unknown split {split!r}; expected one of {[*SPLITS, 'all']}")
        ids = [t for t, (_, _, s) in TASKS.items() if split in (None, "all") or s == split]
        self.task_ids = tuple(t for t in ids if tasks is None or t in tasks)
        text = spaces.Text(max_length=4096, min_length=0, charset=CHARSET)
        keys = ("axtree", "url", "goal", "tabs", "last_action_error")
        self.observation_space = spaces.Dict({k: text for k in keys})
        self.action_space = spaces.Text(max_length=512, min_length=0, charset=CHARSET)
        self._task = self.task_ids[0]
        self._base = 1
        self._steps = 0

    def _obs(self, error: str = "") -> dict[str, str]:
        b = self._base
        lines = [f"[{b}] RootWebArea 'Toy Shop' focused: True", f"\t[{b + 1}] link 'Products'",
                 f"\t[{b + 2}] heading 'Wireless Mouse'", f"\t[{b + 3}] StaticText '19.99'",
                 f"\t[{b + 4}] StaticText 'red'", f"\t[{b + 5}] StaticText '42 reviews'",
                 f"\t[{b + 6}] StaticText '2 days'", f"\t[{b + 7}] StaticText 'Acme'",
                 f"\t[{b + 8}] StaticText '4.5 stars'", f"\t[{b + 9}] button 'Add to Cart'"]
        return {"axtree": "\n".join(lines), "url": "http://toy.local/", "goal": TASKS[self._task][0],
                "tabs": "Tab 0 (current): Toy Shop", "last_action_error": error}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        task = (options or {}).get("task_id")
        if task is None:
            task = self.task_ids[int(self.np_random.integers(len(self.task_ids)))]
        if task not in TASKS:
            raise KeyError(f"unknown toy task {task!r}")
        self._task = int(task)
        self._base = 1 + int(self.np_random.integers(0, 50))
        self._steps = 0
        return self._obs(), {"task_id": self._task, "intent": TASKS[self._task][0]}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        self._steps += 1
        info = {"task_id": self._task}
        if action.startswith("stop ["):
            answer = action[len("stop ["):-1].lower()
            return self._obs(), float(TASKS[self._task][1].lower() in answer), True, False, info
        error = "" if action.startswith(("click", "scroll", "go_back")) else f"cannot run {action!r}"
        return self._obs(error), 0.0, False, False, info


    def reference_trajectory(self, task_id: int, seed: int | None = None
                             ) -> tuple[list[str], list[dict[str, str]]]:
        """The reference of a task: answer it (one step), replayed in a new episode reset with ``seed``."""
        obs, _ = self.reset(seed=seed, options={"task_id": task_id})
        action = f"stop [{TASKS[task_id][1]}]"
        self.step(action)
        return [action], [obs]

    def answer_accepted(self, task_id: int, answer: str) -> bool:
        """Whether ``stop [answer]`` answers the task (its target is in the answer)."""
        return TASKS[task_id][1].lower() in answer.lower()


def toy_config_dict(**sections: dict[str, Any]) -> dict[str, Any]:
    """A small run on the toy env with the tiny Qwen (sections update the defaults key by key)."""
    data: dict[str, Any] = {
        "name": "toy",
        "agent": {"model": "tiny:0", "policy": {"max_prompt_tokens": 512}},
        "env": {"env_id": ENV_ID, "module": "toy_web_env", "split": "train",
                "tasks_per_generation": 2, "max_steps": 2, "infra_errors": []},
        "es": {"population": 4, "generations": 2, "seed": 0, "sigma_0": 0.05, "sigma_min": 0.01},
        "prompts": {"mutation": False},
        "checkpoint": {"snapshot_every": 1},
        "eval": {"every": 0, "split": "test", "n_tasks": 2},
        "ui": {"mode": "off", "plot": False},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return data


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=ToyWebEnv)
