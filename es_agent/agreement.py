"""Step agreement: a dense diagnostic of the policy's action choice against reference trajectories.

A reference trajectory is replayed teacher-forced: at every step the policy sees the observation the
reference solution saw, with the reference actions before it as its history, and we record whether the
action it would choose is the reference action or an equivalent one. Observations do not depend on the
policy, so a trajectory is recorded once (through any env; the bundled tasks' recorder lives in
``benchmarks/bench_agreement.py``) and every model, genome and scoring is scored offline on it; one forward
per step (:meth:`es_agent.policy.LLMPolicy.score_step`) gives every :data:`~es_agent.decoding.Scoring`.

Equivalence (:func:`equivalent`), on the canonical forms of :func:`es_agent.actions_space.normalize_action`:

* ``click [i]`` / ``hover [i]``: the same verb and the same element id;
* ``type [i] [text] ...``: the same element id and the same text (case and runs of whitespace ignored); the
  Enter flag is ignored (the candidates carry none: the env presses Enter, as the prompt says);
* ``stop [answer]``: a ``stop`` whose answer the task accepts (``answer_ok``: for the bundled tasks, the
  task's own string evaluator scores it 1; any answer when the task is not scored by its answer);
* anything else (``tab_focus``, ``scroll``, ``goto``, ``press``, ...): the same canonical action.

A step is *reachable* when some candidate is equivalent to the reference (the candidate set bounds what
any scoring can reach). This module knows nothing of a particular env: only observation dicts and action
strings (CONTRACTS.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from es_agent.actions_space import normalize_action
from es_agent.errors import AgreementError
from es_agent.grounding import STOP_ANSWER

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.policy import LLMPolicy, StepScores

KINDS = ("click", "type", "stop", "other")
"""The action kinds agreement is reported by."""
OBS_KEYS = ("axtree", "url", "goal", "tabs", "last_action_error")
"""The observation fields a recorded step keeps (what the policy reads)."""

_TYPE = re.compile(r"^type \[([^\]]+)\] \[(.*?)\](?: \[[01]\])?$", re.S)
_ID_ACTION = re.compile(r"^(click|hover) \[([^\]]+)\]$")

AnswerCheck = Callable[["ReferenceStep", str], bool]
"""Whether a ``stop`` answer is accepted at a reference step."""


@dataclass(frozen=True)
class ReferenceStep:
    """One step of a reference trajectory: what the policy sees and the reference action taken there."""

    task_id: int
    """The task."""
    split: str
    """The task's split (or tier)."""
    index: int
    """0-based step number in the trajectory."""
    obs: dict[str, str]
    """The observation (:data:`OBS_KEYS`)."""
    action: str
    """The reference action taken on it."""
    history: tuple[str, ...] = ()
    """The reference actions before it."""
    steps: int = 0
    """Length of the trajectory."""

    @property
    def kind(self) -> str:
        """``click``, ``type``, ``stop`` or ``other``."""
        return report_kind(self.action)


def reference_steps(task_id: int, split: str, observations: Sequence[Mapping[str, Any]],
                    actions: Sequence[str]) -> list[ReferenceStep]:
    """The steps of one recorded reference trajectory: ``observations[i]`` is the page ``actions[i]`` was
    taken on (only the :data:`OBS_KEYS` fields are kept, as strings)."""
    if len(observations) != len(actions):
        raise AgreementError(f"task {task_id}: {len(observations)} observation(s) for {len(actions)} "
                             f"reference action(s)")
    return [ReferenceStep(task_id, split, index, {k: str(obs.get(k) or "") for k in OBS_KEYS}, action,
                          tuple(actions[:index]), len(actions))
            for index, (obs, action) in enumerate(zip(observations, actions, strict=True))]


def report_kind(action: str) -> str:
    """The reporting kind of an action: ``click``, ``type``, ``stop`` or ``other``."""
    verb = (normalize_action(action) or action).split(" ", 1)[0].split("[", 1)[0]
    return verb if verb in KINDS[:3] else "other"


def _text(value: str) -> str:
    return " ".join(value.split()).casefold()


def equivalent(candidate: str, step: ReferenceStep, answer_ok: AnswerCheck) -> bool:
    """Whether ``candidate`` counts as the reference action of ``step`` (rules: the module docstring)."""
    cand, ref = normalize_action(candidate), normalize_action(step.action)
    if cand is None or ref is None:
        return False
    ref_id, cand_id = _ID_ACTION.match(ref), _ID_ACTION.match(cand)
    if ref_id is not None:
        return cand_id is not None and cand_id.groups() == ref_id.groups()
    ref_type, cand_type = _TYPE.match(ref), _TYPE.match(cand)
    if ref_type is not None:
        return (cand_type is not None and cand_type[1] == ref_type[1]
                and _text(cand_type[2]) == _text(ref_type[2]))
    if STOP_ANSWER.match(ref) is not None:
        stop = STOP_ANSWER.match(cand)
        return stop is not None and bool(answer_ok(step, stop[1].strip()))
    return cand == ref


@dataclass
class StepRecord:
    """The policy's choices at one reference step, under every scoring scored."""

    task_id: int
    split: str
    index: int
    steps: int
    kind: str
    reference: str
    candidates: int
    """Number of candidate actions offered."""
    reachable: bool
    """Whether some candidate is equivalent to the reference."""
    picks: dict[str, str] = field(default_factory=dict)
    """Scoring -> the candidate it picks."""
    agree: dict[str, bool] = field(default_factory=dict)
    """Scoring -> whether that pick is equivalent to the reference."""
    picked_kind: dict[str, str] = field(default_factory=dict)
    """Scoring -> the reporting kind of the pick."""


def variant_name(scoring: str, prior_weight: float = 1.0) -> str:
    """The label of a scoring with its prior weight (``calibrated@0.5``; the weight 1 is left out)."""
    return scoring if prior_weight == 1.0 else f"{scoring}@{prior_weight:g}"


def evaluate_step(step: ReferenceStep, scores: StepScores, answer_ok: AnswerCheck,
                  variants: Sequence[tuple[str, float]]) -> StepRecord:
    """The record of one step: what each ``(scoring, prior_weight)`` variant picks and whether it agrees."""
    ok = [equivalent(c, step, answer_ok) for c in scores.candidates]
    record = StepRecord(step.task_id, step.split, step.index, step.steps, step.kind, step.action,
                        len(scores.candidates), any(ok))
    index = {c: i for i, c in enumerate(scores.candidates)}
    for scoring, weight in variants:
        pick = scores.choice(scoring, weight)
        name = variant_name(scoring, weight)
        record.picks[name] = pick
        record.agree[name] = ok[index[pick]]
        record.picked_kind[name] = report_kind(pick)
    return record


def score_steps(policy: LLMPolicy, steps: Iterable[ReferenceStep], *, with_prior: bool = True,
                progress: Callable[[int], None] | None = None) -> list[tuple[ReferenceStep, StepScores]]:
    """Run ``policy`` teacher-forced over the steps (history forced to each step's reference history, one
    forward per step plus the content-free priors): the candidates and log-probabilities of each step."""
    out = []
    policy.reset()
    for n, step in enumerate(steps):
        if step.index == 0:
            policy.reset()
        policy.set_history(0, step.history)
        out.append((step, policy.score_step(step.obs, 0, with_prior=with_prior)))
        if progress is not None:
            progress(n + 1)
    return out


def summarize(records: Sequence[StepRecord], group: Callable[[StepRecord], str] = lambda r: r.kind
              ) -> dict[str, dict[str, Any]]:
    """Agreement per group (default: per kind, plus ``all``): steps, reachable steps, and per variant the
    steps that agree, their share, and the share of picks per kind."""
    groups: dict[str, list[StepRecord]] = {"all": list(records)}
    for r in records:
        groups.setdefault(group(r), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for name, rows in groups.items():
        variants = list(rows[0].agree) if rows else []
        out[name] = {
            "steps": len(rows),
            "reachable": sum(r.reachable for r in rows),
            "agree": {v: sum(r.agree[v] for r in rows) for v in variants},
            "rate": {v: (sum(r.agree[v] for r in rows) / len(rows)) if rows else 0.0 for v in variants},
            "picked_kinds": {v: {k: sum(r.picked_kind[v] == k for r in rows) for k in KINDS}
                             for v in variants},
        }
    return out


# ---------------------------------------------------------------------------------------- recorded files

def save_trajectories(path: str | Path, steps: Sequence[ReferenceStep], meta: Mapping[str, Any]) -> None:
    """Write recorded steps and their metadata (task file digest, site URLs, ...) as JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": "es_agent.agreement/1", "meta": dict(meta), "steps": [asdict(s) for s in steps]}
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)


def load_trajectories(path: str | Path) -> tuple[list[ReferenceStep], dict[str, Any]]:
    """Read what :func:`save_trajectories` wrote; :class:`AgreementError` naming the file when it is not
    such a file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("format") != "es_agent.agreement/1":
            raise ValueError(f"format {data.get('format')!r}, expected 'es_agent.agreement/1'")
        steps = [ReferenceStep(**{**s, "history": tuple(s["history"]), "obs": dict(s["obs"])})
                 for s in data["steps"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AgreementError(f"cannot read recorded reference trajectories {str(path)!r}: {exc}") from exc
    return steps, dict(data["meta"])
