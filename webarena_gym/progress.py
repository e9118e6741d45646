"""How far an episode has followed its task's reference solution: a dense training signal for ES.

A terminal reward is 0 for every episode that does not finish its task, so on tasks a small agent rarely
solves every candidate of a generation ties and the ES update is empty (benchmarks/results/grid*.md). The
bundled tasks carry a scripted ``reference_solution`` (:mod:`webarena_gym.reference`), and
:class:`ReferenceProgress` counts the steps of it an episode has followed so far: the agent's action at step
``t`` follows when it is the action the reference's next step resolves to on the page the agent saw (the same
element for ``click`` / ``hover``, the same element and text for ``type``, the same address for ``goto``).
The first action that does not follow ends the count for the episode (the reference no longer describes the
page), so the count is the length of the reference prefix the episode reproduced, and never decreases.

The env's ``progress_reward`` argument turns it into reward: each followed step that is not the final
``stop`` earns ``progress_reward / steps`` (``steps``: the reference's steps before its ``stop``), a
potential-based shaping (Ng, Harada and Russell, 1999) whose total over an episode is ``progress_reward``
times the followed fraction. With ``progress_reward < 1`` and the evaluators' scores of 0 or 1, an episode's
reward is at least 1 exactly when the evaluator scored it 1, so success (``reward >= 1``) is the same number
with and without it. Tasks without a reference solution (a real WebArena deployment) cannot be shaped; the env
refuses them at reset.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webarena_gym.actions import (
    Action,
    ActionParseError,
    ClickAction,
    GotoAction,
    HoverAction,
    StopAction,
    TypeAction,
    parse_action,
)
from webarena_gym.errors import ReferenceSolutionError
from webarena_gym.reference import step_to_action

__all__ = ["ReferenceProgress", "action_key"]


def action_key(action: Action | None, unshow: Callable[[str], str] = str) -> tuple[Any, ...]:
    """What two actions must share to count as the same step: the kind and element id (``click``, ``hover``),
    plus the text, stripped and lower-cased (``type``; the Enter flag shows in the next page), the address
    after ``unshow`` (``goto``), every field otherwise."""
    if action is None:
        return ("none",)
    if isinstance(action, TypeAction):
        return (action.name, action.element_id, action.text.strip().lower())
    if isinstance(action, GotoAction):
        return (action.name, unshow(action.url))
    if isinstance(action, (ClickAction, HoverAction)):
        return (action.name, action.element_id)
    return (action.name, *dataclasses.astuple(action))


class ReferenceProgress:
    """The reference prefix an episode has followed (see the module docstring).

    >>> progress = ReferenceProgress(solution, resolve=env.unwrapped.sites.resolve)
    >>> progress.advance(parsed_action, obs["axtree"])   # True when the action followed the next step
    >>> progress.fraction                                 # followed / steps, in [0, 1]
    """

    def __init__(self, solution: Sequence[Mapping[str, Any]], *, resolve: Callable[[str], str] = str,
                 unshow: Callable[[str], str] = str) -> None:
        if not solution:
            raise ReferenceSolutionError("a reference solution needs at least one step")
        steps = list(solution)
        if steps[-1].get("action") == "stop":
            steps = steps[:-1]
        self.steps: tuple[Mapping[str, Any], ...] = tuple(steps)
        """The reference steps before the final ``stop`` (the ones progress counts)."""
        self.followed: int = 0
        """Steps of :attr:`steps` the episode has followed, in order, from the first."""
        self.on_track: bool = True
        """Whether every action so far followed the reference (the count can still grow)."""
        self._resolve, self._unshow = resolve, unshow

    @property
    def total(self) -> int:
        """Length of :attr:`steps` (0 for a task whose reference only answers)."""
        return len(self.steps)

    @property
    def fraction(self) -> float:
        """``followed / total`` (1.0 when the reference has no step before its ``stop``)."""
        return self.followed / self.total if self.total else 1.0

    def advance(self, action: Action | None, axtree: str) -> bool:
        """Count ``action``, taken on the page whose tree text is ``axtree``: whether it followed the next
        reference step (a ``stop``, an unparsed action or any other action ends the count)."""
        if not self.on_track or self.followed >= self.total:
            return False
        if action is None or isinstance(action, StopAction):
            self.on_track = False
            return False
        try:
            expected = parse_action(step_to_action(self.steps[self.followed], axtree, self._resolve))
        except (ReferenceSolutionError, ActionParseError):
            # the next reference target is not on this page: the episode left the reference's path
            self.on_track = False
            return False
        if action_key(action, self._unshow) != action_key(expected, self._unshow):
            self.on_track = False
            return False
        self.followed += 1
        return True
