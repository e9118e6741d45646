"""benchmarks.self_memory: the report's counts on a hand-built result, and the recorder keeps what an
exemplar needs (each step's goal and page) without changing the policy's actions."""

from __future__ import annotations

from typing import Any

from benchmarks.self_memory import _Recorder, report_md
from es_agent.memory import exemplar_from_episode


def test_report_counts_gains_and_losses_per_setting() -> None:
    result = {"setting": "embedded_shopping_admin_t1", "collect": [{"round": 0, "solved": [1, 2], "of": 4,
                                                                    "memory": 2}],
              "rewards": {"start": {"5": 1.0, "6": 0.0, "7": 0.0}, "memory": {"5": 0.0, "6": 1.0, "7": 1.0}},
              "solved": {"start": {"test": 1, "test_unseen": 0}, "memory": {"test": 1, "test_unseen": 1}}}
    row = report_md([result], "python -m benchmarks.self_memory").splitlines()[-1]
    assert row == "| `embedded_shopping_admin_t1` | 2 / 4 (2) | 1 / 0 | 1 / 1 | 6, 7 | 5 |"


class _Scripted:
    def __init__(self, actions: list[str]) -> None:
        self.actions, self.last_info = list(actions), {0: {}}

    def reset(self) -> None:
        pass

    def act(self, obs: Any) -> str:
        return self.actions.pop(0)


def test_recorder_keeps_goal_and_pages_for_the_exemplar() -> None:
    recorder = _Recorder(_Scripted(["click [3]", "stop []"]))
    pages = ["[3] button 'Cancel Order'", "[1] RootWebArea 'Done'"]
    recorder.reset()
    actions = [recorder.act({"goal": "Cancel order #000000495", "axtree": page}) for page in pages]
    assert actions == ["click [3]", "stop []"] and recorder.pages == pages
    exemplar = exemplar_from_episode(recorder.goal, actions, recorder.pages)
    assert [(s.kind, s.target) for s in exemplar.steps] == [("click", "Cancel Order"), ("stop", "")]
    assert recorder.last_info == {0: {}}
