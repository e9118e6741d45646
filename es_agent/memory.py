"""Trajectory memory: solved episodes kept as exemplars, and the prior they put on the next action.

A small agent that once solved "What's in my wish list?" by clicking ``My Wish List`` and answering does not
do it again on the next instance of the template: teacher-forced, SmolLM2-135M ranks that click 13th-28th on
every wish-list task, and a weight perturbation that makes it the pick is averaged away by the next ES
update (``benchmarks/results/exploration_reach.md``). Web agents keep such solved trajectories and retrieve
the nearest one as an exemplar for a new task (Synapse's trajectory-as-exemplar memory, Agent Workflow
Memory's induced workflows). :class:`TrajectoryMemory` is the cheapest form of it:

* an :class:`Exemplar` is a goal and, per step, the action kind and the name of the element acted on
  (:func:`exemplar_step`; no element ids, which change from page to page, and no answers, which change from
  instance to instance);
* :meth:`TrajectoryMemory.retrieve` returns the exemplar whose goal shares the most content words with the
  new goal (Jaccard of :func:`es_agent.grounding.content_words`, at least ``min_similarity``);
* :meth:`TrajectoryMemory.bonuses` gives, at step ``t`` of the new episode, ``similarity x match`` to each
  candidate: for an exemplar step that acts on an element, the word overlap of the candidate's target name
  with the exemplar's (same kind only); for an exemplar ``stop``, 1 to every ``stop``; 0 past the exemplar's
  end. With ``abstract_instances``, the words of the exemplar's goal that the new goal does not share (the
  instance: "Amelia Lewis" of "What is the phone number of the customer Amelia Lewis?") stand for one slot in
  the exemplar's target, and so do the new goal's own instance words in a candidate's name: the solution's
  click on "Edit Amelia Lewis" then matches "Edit Julian Walker" on the new task, not Amelia's row again (the
  variables of Agent Workflow Memory's induced workflows). :attr:`es_agent.policy.PolicyConfig.memory_prior`
  scales it into the policy's scores, like the goal prior, and the model still chooses between the answers
  and among equally matched targets.

Where exemplars come from is the caller's choice: the agent's own solved training episodes
(:func:`exemplar_from_episode`, a memory learned from trajectory-level rewards alone) or a task set's
reference solutions (:func:`exemplar_from_reference`, demonstrations).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from es_agent.actions_space import normalize_action
from es_agent.axtree import element_names
from es_agent.errors import TrajectoryMemoryError
from es_agent.grounding import TARGETED, content_words, jaccard

FORMAT = "es_agent.memory/1"
"""The ``format`` tag of a serialised memory."""



@dataclass(frozen=True)
class ExemplarStep:
    """One step of an exemplar: the action kind and the name of the element it acted on."""

    kind: str
    """``click``, ``hover``, ``type``, ``stop`` or another verb."""
    target: str = ""
    """The accessible name of the element acted on (empty for ``stop`` and untargeted actions)."""


@dataclass(frozen=True)
class Exemplar:
    """A solved episode: its goal and its steps."""

    goal: str
    steps: tuple[ExemplarStep, ...]
    task_id: Any = None
    """The task it solved (to leave it out when scoring that task itself)."""
    source: str = "episode"
    """``episode`` (a solved rollout) or ``reference`` (a reference solution)."""


def exemplar_step(action: str, axtree: str) -> ExemplarStep:
    """The :class:`ExemplarStep` of ``action`` taken on a page with this accessibility tree (the target's name
    is looked up by its element id; empty when the id is not on the page)."""
    canonical = normalize_action(action) or action.strip()
    match = TARGETED.match(canonical)
    if match is None:
        return ExemplarStep(_verb(canonical))
    return ExemplarStep(_verb(canonical), element_names(axtree).get(match[2], ""))


def _verb(canonical: str) -> str:
    return canonical.split(" ", 1)[0].split("[", 1)[0]


def exemplar_from_episode(goal: str, actions: Sequence[str], axtrees: Sequence[str], task_id: Any = None
                          ) -> Exemplar:
    """The exemplar of an episode: ``actions[i]`` was taken on the page of ``axtrees[i]``."""
    if len(actions) != len(axtrees):
        raise ValueError(f"{len(actions)} actions but {len(axtrees)} pages")
    return Exemplar(goal, tuple(exemplar_step(a, t) for a, t in zip(actions, axtrees, strict=True)),
                    task_id, "episode")


def exemplar_from_reference(steps: Sequence[Any]) -> Exemplar:
    """The exemplar of one recorded reference trajectory (:class:`es_agent.agreement.ReferenceStep` objects
    of one task, in order)."""
    if not steps:
        raise ValueError("a reference trajectory with no steps")
    ordered = sorted(steps, key=lambda s: s.index)
    goal = str(ordered[0].obs.get("goal", ""))
    return Exemplar(goal, tuple(exemplar_step(s.action, str(s.obs.get("axtree", ""))) for s in ordered),
                    ordered[0].task_id, "reference")


SLOT = "<instance>"
"""What the instance words of a goal become in an abstracted target
(:attr:`TrajectoryMemory.abstract_instances`)."""


def _abstract(words: frozenset[str], instance: frozenset[str]) -> frozenset[str]:
    return frozenset(SLOT if w in instance else w for w in words) if instance else words


class TrajectoryMemory:
    """Exemplars by goal, the nearest one retrieved for a new goal (module docstring)."""

    def __init__(self, exemplars: Iterable[Exemplar] = (), *, min_similarity: float = 0.3,
                 max_size: int = 256, leave_out_same_goal: bool = False,
                 abstract_instances: bool = False) -> None:
        if not 0.0 <= min_similarity <= 1.0:
            raise ValueError(f"min_similarity must be in [0, 1], got {min_similarity}")
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        self.min_similarity = min_similarity
        self.max_size = max_size
        self.leave_out_same_goal = bool(leave_out_same_goal)
        """Never retrieve an exemplar for its own goal: a memory of the training tasks' solutions then scores
        each training task as a held-out one (leave one out)."""
        self.abstract_instances = bool(abstract_instances)
        """Match targets with the goals' instance words as one slot (module docstring)."""
        self._by_goal: dict[str, Exemplar] = {}
        self._goal_words: dict[str, frozenset[str]] = {}
        """The content words of each kept goal (retrieval reads them at every step)."""
        for exemplar in exemplars:
            self.add(exemplar)

    def __len__(self) -> int:
        return len(self._by_goal)

    @property
    def exemplars(self) -> list[Exemplar]:
        """The exemplars, oldest first."""
        return list(self._by_goal.values())

    def add(self, exemplar: Exemplar) -> bool:
        """Keep ``exemplar``; one per goal, the shorter solution wins (a tie keeps the one already there).
        The oldest is dropped beyond ``max_size``. Whether the memory changed."""
        if not exemplar.steps:
            raise ValueError(f"an exemplar with no steps (goal {exemplar.goal!r})")
        key = " ".join(exemplar.goal.split())
        old = self._by_goal.get(key)
        if old is not None and len(old.steps) <= len(exemplar.steps):
            return False
        self._by_goal.pop(key, None)
        self._by_goal[key] = exemplar
        self._goal_words[key] = content_words(exemplar.goal)
        while len(self._by_goal) > self.max_size:
            oldest = next(iter(self._by_goal))
            del self._by_goal[oldest], self._goal_words[oldest]
        return True

    def retrieve(self, goal: str, *, exclude_task: Any = None) -> tuple[Exemplar, float] | None:
        """The exemplar whose goal is nearest ``goal`` and its similarity (at least ``min_similarity``;
        ties: the shorter solution, then the older); ``None`` when none is near enough. ``exclude_task``
        leaves out the exemplars of that task, :attr:`leave_out_same_goal` those of the same goal."""
        words = content_words(goal)
        own = " ".join(goal.split()) if self.leave_out_same_goal else None
        best: tuple[float, int, int, Exemplar] | None = None
        for order, (kept, exemplar) in enumerate(self._by_goal.items()):
            if (exclude_task is not None and exemplar.task_id == exclude_task) or kept == own:
                continue
            similarity = jaccard(words, self._goal_words[kept])
            rank = (similarity, -len(exemplar.steps), -order)
            if similarity >= self.min_similarity and similarity > 0 and (best is None or rank > best[:3]):
                best = (*rank, exemplar)
        return None if best is None else (best[3], best[0])

    def bonuses(self, found: tuple[Exemplar, float] | None, step_index: int, candidates: Sequence[str],
                axtree: str, goal: str = "") -> list[float]:
        """Per candidate, the match with step ``step_index`` of the retrieved exemplar times its similarity
        (module docstring; ``goal``, the new task's, is read with :attr:`abstract_instances`); all 0 without
        an exemplar or past its end."""
        if found is None or step_index >= len(found[0].steps):
            return [0.0] * len(candidates)
        exemplar, similarity = found
        want = exemplar.steps[step_index]
        target_words = content_words(want.target)
        own_instance: frozenset[str] = frozenset()
        if self.abstract_instances:
            new_goal, old_goal = content_words(goal), content_words(exemplar.goal)
            target_words = _abstract(target_words, old_goal - new_goal)
            own_instance = new_goal - old_goal
        names: dict[str, str] | None = None
        out = []
        for cand in candidates:
            canonical = normalize_action(cand) or cand
            if _verb(canonical) != want.kind:
                out.append(0.0)
                continue
            if want.kind == "stop" or not want.target:
                out.append(similarity)
                continue
            match = TARGETED.match(canonical)
            if match is None:
                out.append(0.0)
                continue
            if names is None:
                names = element_names(axtree)
            name_words = _abstract(content_words(names.get(match[2], "")), own_instance)
            out.append(similarity * jaccard(target_words, name_words))
        return out

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (:meth:`from_dict` reads it back)."""
        return {"format": FORMAT, "min_similarity": self.min_similarity, "max_size": self.max_size,
                "leave_out_same_goal": self.leave_out_same_goal,
                "abstract_instances": self.abstract_instances,
                "exemplars": [{**asdict(e), "steps": [asdict(s) for s in e.steps]} for e in self.exemplars]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrajectoryMemory:
        """The memory :meth:`to_dict` wrote; :class:`TrajectoryMemoryError` naming the problem otherwise."""
        try:
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FORMAT!r}")
            exemplars = [Exemplar(str(e["goal"]), tuple(ExemplarStep(str(s["kind"]), str(s.get("target", "")))
                                                        for s in e["steps"]),
                                  e.get("task_id"), str(e.get("source", "episode")))
                         for e in data["exemplars"]]
            return cls(exemplars, min_similarity=float(data["min_similarity"]),
                       max_size=int(data["max_size"]),
                       leave_out_same_goal=bool(data.get("leave_out_same_goal", False)),
                       abstract_instances=bool(data.get("abstract_instances", False)))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise TrajectoryMemoryError(f"cannot read a trajectory memory: {exc}") from exc

    def digest(self) -> str:
        """A short hash of the contents (replicas with the same memory have the same digest; a memory without
        :attr:`abstract_instances` hashes as it did before the option existed)."""
        data = self.to_dict()
        if not self.abstract_instances:
            del data["abstract_instances"]
        text = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def save_memory(memory: TrajectoryMemory, path: str | Path) -> Path:
    """Write ``memory`` as JSON to ``path`` (atomically: a temporary file, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(memory.to_dict(), indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def load_memory(path: str | Path) -> TrajectoryMemory:
    """The memory :func:`save_memory` wrote (read once per file version and shared: every policy of a
    worker gets the same object, which is never changed after loading); :class:`TrajectoryMemoryError`
    naming the file when it is missing or malformed."""
    file = Path(path)
    try:
        stat = file.stat()
    except OSError as exc:
        raise TrajectoryMemoryError(f"trajectory memory file {str(path)!r}: {exc}") from exc
    return _load_memory(str(file.resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _load_memory(path: str, mtime_ns: int, size: int) -> TrajectoryMemory:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TrajectoryMemoryError(f"trajectory memory file {path!r}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise TrajectoryMemoryError(f"trajectory memory file {path!r}: not a JSON object")
    try:
        return TrajectoryMemory.from_dict(data)
    except TrajectoryMemoryError as exc:
        raise TrajectoryMemoryError(f"trajectory memory file {path!r}: {exc}") from exc
