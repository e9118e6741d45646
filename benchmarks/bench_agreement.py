"""Step agreement with the reference solutions, per model x genome x scoring x action kind and per split.

Method (:mod:`es_agent.agreement` holds the definitions).
- Trajectories: each task of a split of the bundled set (any split name the embedded world knows, so the
  tiers too) has its reference solution replayed through the real env on the embedded sites
  (:func:`webarena_gym.reference.run_reference`, real Chromium); every observation the solution acts on is
  recorded with the reference action taken there and the actions before it. Recorded once per task file:
  ``~/.cache/agentic-esopt/agreement/reference-<split>-<sha256 of the task file>.json`` (with the site URLs
  of the recording, which resolve the answers' placeholders).
- Scoring: the policy (``PolicyConfig`` defaults but ``scoring``; one torch thread) sees each recorded
  observation with the reference history (teacher forcing); ONE forward per step gives every candidate's
  token log-probabilities, one more (cached per candidate) their log-probabilities after the content-free
  prompt, so every scoring variant is scored from the same numbers
  (``~/.cache/agentic-esopt/agreement/scores-<model>-<genome>-<split>-<code version>.jsonl``, one line per
  step, keyed by the step; the version is the git tree of ``es_agent/``, so a change of the candidates or the
  prompt scores afresh).
- Agreement: the pick is the reference action or an equivalent one (:func:`es_agent.agreement.equivalent`:
  same element id for click/hover, same id and text for type, an answer the task's own string evaluator
  scores 1 for stop (the offline judge for fuzzy answers; any answer where the task is not scored by its
  answer), the same action otherwise). ``reachable``: some candidate is equivalent (an upper bound).
Goal (issue #13): >= 50 % on the held-out splits (test + test_unseen) for the embedded SmolLM2.

``python -m benchmarks.bench_agreement [--models embedded embedded-qwen] [--genomes no_skill default
webarena_cot] [--splits test test_unseen train] [--max-steps N] [--write [--out PREFIX]]`` (``--write``:
the results to PREFIX.{md,json}, default benchmarks/results/agreement; ``--reachability``: only the
reachable steps, no forward);
``python -m benchmarks.run`` runs its quick mode (2 test tasks,
SmolLM2, no_skill).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from benchmarks.common import REPO_ROOT, BenchmarkError, Figure, print_figures, rnd, torch_threads

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.env import WebArenaLiteEnv

CACHE_DIR = Path.home() / ".cache" / "agentic-esopt" / "agreement"
"""Where recorded reference trajectories and per-step scores are cached."""
GOAL = 0.5
VARIANTS: tuple[tuple[str, float], ...] = (
    ("mean", 1.0), ("sum", 1.0), ("calibrated", 1.0), ("calibrated", 0.5), ("calibrated_mean", 1.0),
    ("calibrated_mean", 0.5), ("two_stage", 1.0), ("two_stage_calibrated", 1.0),
    ("two_stage_calibrated", 0.5))
"""The ``(scoring, prior_weight)`` variants scored (all from the same forwards)."""
HELD_OUT = ("test", "test_unseen")


def task_file_digest(split: str) -> str:
    """sha256 of the bundled task file of ``split``."""
    from webarena_gym.embedded import task_file

    return hashlib.sha256(task_file(split).read_bytes()).hexdigest()


def record(split: str, task_ids: Sequence[int] | None = None, cache_dir: Path = CACHE_DIR
           ) -> tuple[list[Any], dict[str, Any]]:
    """The recorded reference steps of ``split`` (optionally only ``task_ids``), from the cache when the task
    file is unchanged, else replayed through the real env and cached."""
    import gymnasium as gym

    import webarena_gym
    from es_agent.agreement import ReferenceStep, load_trajectories, reference_steps, save_trajectories
    from webarena_gym.reference import record_solution

    digest = task_file_digest(split)
    suffix = "" if task_ids is None else "-" + hashlib.sha256(repr(sorted(task_ids)).encode()).hexdigest()[:8]
    path = cache_dir / f"reference-{split}-{digest[:16]}{suffix}.json"
    if path.exists():
        return load_trajectories(path)

    env = gym.make(webarena_gym.ENV_ID, split=split, tasks=None if task_ids is None else list(task_ids))
    inner = cast("WebArenaLiteEnv", env.unwrapped)
    steps: list[ReferenceStep] = []
    try:
        for task in inner.tasks:
            result, observations = record_solution(env, task)
            steps += reference_steps(task.task_id, split, observations, result.actions)
        sites = inner.sites
        urls = {name: getattr(sites, name) for name in ("shopping", "shopping_admin", "reddit", "gitlab",
                                                        "map", "wikipedia", "homepage")}
    finally:
        env.close()
    meta = {"split": split, "task_file_sha256": digest, "sites": urls, "task_ids": task_ids,
            "recorded": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    save_trajectories(path, steps, meta)
    return steps, meta


def answer_checker(split: str, meta: dict[str, Any]) -> Callable[[Any, str], bool]:
    """``answer_ok(step, answer)``: the task's string evaluator scores the answer 1 (rules ``webarena``,
    the offline judge), or the task is not scored by its answer."""
    from webarena_gym.embedded import default_tasks
    from webarena_gym.evaluators import OfflineJudge, answer_accepted
    from webarena_gym.tasks import SiteURLs

    tasks = {t.task_id: t for t in default_tasks(split)}
    sites = SiteURLs(**{k: v for k, v in meta["sites"].items() if v})
    judge = OfflineJudge()
    memo: dict[tuple[int, str], bool] = {}

    def answer_ok(step: Any, answer: str) -> bool:
        key = (step.task_id, answer)
        if key not in memo:
            memo[key] = answer_accepted(tasks[step.task_id], answer, sites, judge)
        return memo[key]

    return answer_ok


POLICY_VARIANTS: dict[str, dict[str, Any]] = {"": {}, "named": {"name_targets": True}}
"""``--policy`` variants: ``PolicyConfig`` fields over its defaults (``named``: candidates scored with their
target's role and name, :attr:`es_agent.policy.PolicyConfig.name_targets`)."""


def _policy(model: Any, tok: Any, genome_name: str, variant: str = "") -> Any:
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptPools

    return LLMPolicy(model, tok, PromptPools.load().baseline(genome_name),
                     PolicyConfig(**POLICY_VARIANTS[variant]))


def _step_key(step: Any) -> str:
    return hashlib.sha256(json.dumps([step.task_id, step.index, step.action, list(step.history), step.obs],
                                     sort_keys=True).encode()).hexdigest()[:20]


def scores_path(model_name: str, genome: str, split: str, cache_dir: Path = CACHE_DIR,
                variant: str = "", version: str | None = None) -> Path:
    """The JSONL file of per-step scores of one model x genome x split, made by this version of the agent code
    (:func:`benchmarks.common.code_version`: the candidates, the prompt and the scoring all live in
    ``es_agent/``, so a score cached by other agent code is never read as this code's), or by the agent code
    of ``version`` (an ``es_agent/`` tree id, as the file names carry it)."""
    from benchmarks.common import code_version

    tag = f"-{variant}" if variant else ""
    return cache_dir / f"scores-{model_name}{tag}-{genome}-{split}-{version or code_version()}.jsonl"


def read_scores(path: Path) -> dict[str, Any]:
    """Step key -> :class:`~es_agent.policy.StepScores` of a per-step score file (empty when absent)."""
    from es_agent.policy import StepScores

    cached: dict[str, Any] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                key = entry.pop("key")
                cached[key] = StepScores(**entry)
    return cached


def recorded_path(split: str, cache_dir: Path = CACHE_DIR) -> Path:
    """Where :func:`record` keeps the recorded reference steps of a whole split."""
    return cache_dir / f"reference-{split}-{task_file_digest(split)[:16]}.json"


def _cached_split(model_name: str, genome: str, split: str, cache_dir: Path = CACHE_DIR,
                  version: str | None = None) -> tuple[list[Any], dict[str, Any], Any] | None:
    """A split's recorded reference steps, the cached scores of ``version`` (default: this agent code) by step
    key, and its answer checker; ``None`` when the split's steps were never recorded (:func:`record`)."""
    from es_agent.agreement import load_trajectories

    path = recorded_path(split, cache_dir)
    if not path.exists():
        return None
    steps, meta = load_trajectories(path)
    cached = read_scores(scores_path(model_name, genome, split, cache_dir, version=version))
    return steps, cached, answer_checker(split, meta)


def cached_records(model_name: str, genome: str, split: str, variants: Sequence[tuple[str, float]] = VARIANTS,
                   cache_dir: Path = CACHE_DIR) -> tuple[list[Any], int] | None:
    """The :class:`~es_agent.agreement.StepRecord` of every step of ``split`` whose scores are cached, and
    the number of recorded steps, with no model forward and no browser; ``None`` when the split's reference
    steps were never recorded (:func:`record`)."""
    from es_agent.agreement import evaluate_step

    found = _cached_split(model_name, genome, split, cache_dir)
    if found is None:
        return None
    steps, cached, check = found
    records = [evaluate_step(step, cached[_step_key(step)], check, variants)
               for step in steps if _step_key(step) in cached]
    return records, len(steps)


def step_scores(model_name: str, model: Any, tok: Any, genome: str, steps: Sequence[Any], split: str,
                cache_dir: Path = CACHE_DIR, log: Callable[[str], None] = print,
                budget_s: float | None = None, variant: str = "") -> list[Any]:
    """Every step's :class:`~es_agent.policy.StepScores` (``None`` for a step left unscored when
    ``budget_s`` seconds ran out), each appended to :func:`scores_path` in ``cache_dir`` as soon as it is
    computed and read back from there next time (keyed by the step's task, index, action, history and
    observation)."""
    path = scores_path(model_name, genome, split, cache_dir, variant)
    cached = read_scores(path)
    todo = [s for s in steps if _step_key(s) not in cached]
    if todo:
        path.parent.mkdir(parents=True, exist_ok=True)
        policy = _policy(model, tok, genome, variant)
        started = time.perf_counter()
        with torch_threads(1), path.open("a", encoding="utf-8") as out:
            for n, step in enumerate(todo, 1):
                if budget_s is not None and time.perf_counter() - started > budget_s:
                    log(f"  {model_name} {genome} {split}: budget of {budget_s:.0f} s spent, "
                        f"{len(todo) - n + 1} steps left unscored")
                    break
                if step.index == 0:
                    policy.reset()
                policy.set_history(0, step.history)
                scored = policy.score_step(step.obs, 0)
                cached[_step_key(step)] = scored
                out.write(json.dumps({"key": _step_key(step), "candidates": scored.candidates,
                                      "kinds": scored.kinds, "token_logps": scored.token_logps,
                                      "prior": scored.prior}) + "\n")
                out.flush()
                if n % 5 == 0 or n == len(todo):
                    elapsed = time.perf_counter() - started
                    log(f"  {model_name} {genome} {split}: {n}/{len(todo)} new steps, {elapsed:.0f} s")
    return [cached.get(_step_key(s)) for s in steps]


def load(model_name: str) -> tuple[Any, Any, str]:
    """The model, tokenizer and dtype name (dtype 'auto')."""
    import torch

    from es_agent.hardware import choose_dtype
    from es_agent.models import load_model

    dtype = str(choose_dtype("auto").value)
    model, tok = load_model(model_name, dtype=getattr(torch, dtype))
    return model, tok, dtype


def subset(steps: Sequence[Any], max_steps: int | None) -> list[Any]:
    """The first whole trajectories holding at most ``max_steps`` steps (all when ``None``)."""
    if max_steps is None:
        return list(steps)
    out: list[Any] = []
    episodes: dict[int, list[Any]] = {}
    for s in steps:
        episodes.setdefault(s.task_id, []).append(s)
    for episode in episodes.values():
        if len(out) + len(episode) > max_steps:
            break
        out.extend(episode)
    return out


def run(models: Sequence[str], genomes: Sequence[str], splits: Sequence[str],
        max_steps: dict[str, int | None], task_ids: Sequence[int] | None = None,
        variants: Sequence[tuple[str, float]] = VARIANTS, log: Callable[[str], None] = print,
        cache_dir: Path = CACHE_DIR, loader: Callable[[str], tuple[Any, Any, str]] | None = None,
        budget_s: float | None = None, variant: str = "") -> dict[str, Any]:
    """Agreement of every model x genome on every split: per-step records and summaries. ``loader(name)``
    gives ``(model, tokenizer, dtype name)`` (default :func:`load`); ``budget_s``: seconds of new scoring
    per model x genome x split (the steps scored by then, and those cached before, are reported)."""
    from es_agent.agreement import evaluate_step, summarize

    recorded = {split: record(split, task_ids, cache_dir) for split in splits}
    results: dict[str, Any] = {"variants": [list(v) for v in variants], "runs": []}
    for model_name in models:
        model, tok, dtype = (loader or load)(model_name)
        for genome in genomes:
            records = []
            seconds = 0.0
            for split in splits:
                steps, meta = recorded[split]
                steps = subset(steps, max_steps.get(model_name))
                t0 = time.perf_counter()
                scores = step_scores(model_name, model, tok, genome, steps, split, cache_dir, log=log,
                                     budget_s=budget_s, variant=variant)
                seconds += time.perf_counter() - t0
                check = answer_checker(split, meta)
                records += [evaluate_step(step, s, check, variants)
                            for step, s in zip(steps, scores, strict=True) if s is not None]
            held = [r for r in records if r.split in HELD_OUT]
            results["runs"].append({
                "model": model_name + (f" ({variant})" if variant else ""), "dtype": dtype, "genome": genome,
                "seconds": round(seconds, 1),
                "by_split": {split: summarize([r for r in records if r.split == split]) for split in splits},
                "held_out": summarize(held) if held else None,
                "records": [r.__dict__ for r in records],
            })
            log(f"{model_name} {genome}: {len(records)} steps in {seconds:.0f} s")
        del model
    return results


def reachability(splits: Sequence[str], model_name: str = "embedded", genome: str = "no_skill",
                 cache_dir: Path = CACHE_DIR, loader: Callable[[str], tuple[Any, Any, str]] | None = None
                 ) -> dict[str, Any]:
    """Whether some candidate of each recorded reference step is equivalent to the reference action (no
    model forward: the policy's prompt, truncated with ``model_name``'s tokenizer, and its candidates), per
    split and kind (``<split>|<kind>``, ``all|<kind>``): ``steps``, ``reachable`` and ``cut`` (unreachable
    click/type steps whose target element the prompt truncation left out), and candidates per step."""
    import re

    from es_agent.agreement import equivalent

    model, tok, _ = (loader or load)(model_name)
    policy = _policy(model, tok, genome)
    counts: dict[str, dict[str, int]] = {}
    sizes: list[int] = []
    for split in splits:
        steps, meta = record(split, None, cache_dir)
        check = answer_checker(split, meta)
        for step in steps:
            policy.set_history(0, step.history)
            prompt = policy._build_prompt(step.obs, 0)
            cands = policy._candidates_of(prompt, step.obs)
            sizes.append(len(cands))
            ok = any(equivalent(c, step, check) for c in cands)
            target = re.match(r"^(?:click|hover|type) \[([^\]]+)\]", step.action)
            cut = (not ok and target is not None and f"[{target[1]}]" in step.obs["axtree"]
                   and f"[{target[1]}]" not in prompt.axtree)
            for key in (f"{split}|{step.kind}", f"all|{step.kind}", f"{split}|all", "all|all"):
                row = counts.setdefault(key, {"steps": 0, "reachable": 0, "cut": 0})
                row["steps"] += 1
                row["reachable"] += ok
                row["cut"] += cut
    return {"model": model_name, "genome": genome, "counts": counts,
            "candidates": {"mean": sum(sizes) / max(1, len(sizes)), "max": max(sizes, default=0)}}


BIAS_GRID: tuple[float, ...] = tuple(x / 4 for x in range(-24, 25))
"""The kind-bias values :func:`fit_kind_bias` tries per kind."""
GOAL_PRIOR_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0,
                                      20.0, 30.0, 50.0, 75.0, 100.0, 150.0, 200.0, 300.0, 500.0)
"""The :attr:`~es_agent.policy.PolicyConfig.goal_prior` weights :func:`fit_goal_prior` tries: per-token
scorings (``mean``) move at a few units, sums and calibrated ones (whose page answers score tens of nats
above a click) at hundreds."""
ANSWER_PRIOR_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0, 200.0)
"""The :attr:`~es_agent.policy.PolicyConfig.answer_prior` weights ``--fit-answer-prior`` tries with every goal
prior weight (the same scales as :data:`GOAL_PRIOR_GRID`)."""


def _scored_rows(model_name: str, genome: str, splits: Sequence[str], version: str | None,
                 cache_dir: Path) -> list[tuple[Any, Any, Any]]:
    """``(step, cached StepScores, answer checker)`` of every recorded step of ``splits``; a split never
    recorded, or a step without scores, is an error naming what to run."""
    out = []
    for split in splits:
        found = _cached_split(model_name, genome, split, cache_dir, version)
        if found is None:
            raise BenchmarkError(f"the reference steps of {split!r} were never recorded "
                                 f"({recorded_path(split, cache_dir)}); run bench_agreement --splits "
                                 f"{split} first")
        steps, cached, check = found
        missing = [s for s in steps if _step_key(s) not in cached]
        if missing:
            file = scores_path(model_name, genome, split, cache_dir, version=version)
            raise BenchmarkError(f"{len(missing)} of the {len(steps)} steps of {split!r} have no scores "
                                 f"in {file}; score them first (bench_agreement --models {model_name} "
                                 f"--genomes {genome} --splits {split})")
        out += [(step, cached[_step_key(step)], check) for step in steps]
    return out


def _agreement_table(outcomes: Sequence[tuple[Any, bool]]) -> dict[str, list[int]]:
    """Agreeing / all steps, in all and per kind, and under ``tasks`` the tasks whose every step agrees
    (teacher-forced: an upper bound on the episodes the policy solves from the same start)."""
    table: dict[str, list[int]] = {}
    whole: dict[tuple[str, int], bool] = {}
    for step, ok in outcomes:
        whole[(step.split, step.task_id)] = whole.get((step.split, step.task_id), True) and ok
        for key in ("all", step.kind):
            table.setdefault(key, [0, 0])
            table[key][0] += ok
            table[key][1] += 1
    table["tasks"] = [sum(whole.values()), len(whole)]
    return table


def fit_kind_bias(model_name: str, genome: str, train_splits: Sequence[str], heldout_splits: Sequence[str],
                  kinds: Sequence[str] = ("stop", "click"), scoring: str = "mean", prior_weight: float = 1.0,
                  version: str | None = None, cache_dir: Path = CACHE_DIR,
                  grid: Sequence[float] = BIAS_GRID) -> dict[str, Any]:
    """The :attr:`~es_agent.policy.PolicyConfig.kind_bias` on ``kinds`` that maximises step agreement under
    ``scoring`` on ``train_splits`` (every combination of ``grid`` values; ties go to the smallest total
    bias), and the agreement it gives on ``heldout_splits`` beside no bias, per action kind. Reads the cached
    scores of ``version`` (default: this agent code) with no model forward; a step without scores is an
    error naming the score file (score it first: ``--budget-s``)."""
    import itertools

    from es_agent.agreement import equivalent

    if scoring.startswith("two_stage"):
        raise ValueError("fit_kind_bias fits the additive scorings (mean, sum, calibrated...), not two_stage")

    def per_kind(rows: list[tuple[Any, Any, Any]]) -> list[tuple[Any, dict[str, tuple[float, bool]]]]:
        """Per step: its kind, and for each candidate kind the best score in it (the first of equal ones)
        and whether that candidate agrees; an additive bias only decides between these."""
        out = []
        for step, scores, check in rows:
            best: dict[str, tuple[float, int]] = {}
            for i, (kind, score) in enumerate(zip(scores.kinds, scores.scores(scoring, prior_weight),
                                                  strict=True)):
                if kind not in best or score > best[kind][0]:
                    best[kind] = (score, i)
            out.append((step, {k: (v, equivalent(scores.candidates[i], step, check))
                               for k, (v, i) in best.items()}))
        return out

    def agreement(rows: list[tuple[Any, dict[str, tuple[float, bool]]]],
                  bias: dict[str, float]) -> dict[str, list[int]]:
        def agrees(best: dict[str, tuple[float, bool]]) -> bool:
            # dicts keep first-seen order, so ties go to the kind of the earliest candidate, as best_index
            return best[max(best, key=lambda k: best[k][0] + bias.get(k, 0.0))][1]

        return _agreement_table([(step, agrees(best)) for step, best in rows])

    train = per_kind(_scored_rows(model_name, genome, train_splits, version, cache_dir))
    held = per_kind(_scored_rows(model_name, genome, heldout_splits, version, cache_dir))
    best: tuple[int, float, dict[str, float]] | None = None
    for values in itertools.product(grid, repeat=len(kinds)):
        bias = dict(zip(kinds, values, strict=True))
        agree = agreement(train, bias)["all"][0]
        key = (agree, -sum(abs(v) for v in values))
        if best is None or key > best[:2]:
            best = (*key, bias)
    assert best is not None
    fitted = {k: v for k, v in best[2].items() if v}
    return {"model": model_name, "genome": genome, "scoring": scoring, "prior_weight": prior_weight,
            "version": version,
            "train_splits": list(train_splits), "heldout_splits": list(heldout_splits),
            "kind_bias": fitted, "train": {"none": agreement(train, {}), "fitted": agreement(train, fitted)},
            "heldout": {"none": agreement(held, {}), "fitted": agreement(held, fitted)}}


def fit_goal_prior(model_name: str, genome: str, train_splits: Sequence[str], heldout_splits: Sequence[str],
                   scoring: str = "mean", prior_weight: float = 1.0, version: str | None = None,
                   cache_dir: Path = CACHE_DIR, grid: Sequence[float] = GOAL_PRIOR_GRID,
                   answer_grid: Sequence[float] = (0.0,)) -> dict[str, Any]:
    """The :attr:`~es_agent.policy.PolicyConfig.goal_prior` weight of ``grid`` (with the
    :attr:`~es_agent.policy.PolicyConfig.answer_prior` weight of ``answer_grid``, jointly; default: the
    answer prior off) that maximises step agreement under ``scoring`` on ``train_splits`` (then the tasks
    whose every step agrees; ties go to the smallest weights), and every pair's agreement on the training and
    the ``heldout_splits``, per action kind. The target overlaps and answer-type matches come from each
    recorded observation's goal and tree (:mod:`es_agent.grounding`), the scores from the cache of
    ``version`` (no model forward)."""
    from es_agent.agreement import equivalent
    from es_agent.decoding import best_index
    from es_agent.grounding import add_goal_prior, answer_type_matches, target_overlaps

    Row = tuple[Any, list[float], list[float], list[float], list[bool]]

    def prepared(splits: Sequence[str]) -> list[Row]:
        out = []
        for step, scores, check in _scored_rows(model_name, genome, splits, version, cache_dir):
            goal = str(step.obs.get("goal", ""))
            overlaps = target_overlaps(scores.candidates, str(step.obs.get("axtree", "")), goal)
            ok = [equivalent(c, step, check) for c in scores.candidates]
            out.append((step, scores.scores(scoring, prior_weight), overlaps,
                        answer_type_matches(scores.candidates, goal), ok))
        return out

    def agreement(rows: list[Row], weight: float, answer_weight: float = 0.0) -> dict[str, list[int]]:
        def pick(scores: list[float], overlaps: list[float], types: list[float]) -> int:
            return best_index(add_goal_prior(add_goal_prior(scores, overlaps, weight), types, answer_weight))

        return _agreement_table([(step, ok[pick(scores, overlaps, types)])
                                 for step, scores, overlaps, types, ok in rows])

    train, held = prepared(train_splits), prepared(heldout_splits)
    pairs = [(w, a) for a in answer_grid for w in grid]
    per_pair = {(w, a): {"train": agreement(train, w, a), "heldout": agreement(held, w, a)} for w, a in pairs}
    fitted = max(pairs, key=lambda p: (per_pair[p]["train"]["all"][0], per_pair[p]["train"]["tasks"][0],
                                       -p[1], -p[0]))
    return {"model": model_name, "genome": genome, "scoring": scoring, "prior_weight": prior_weight,
            "version": version, "train_splits": list(train_splits), "heldout_splits": list(heldout_splits),
            "goal_prior": fitted[0], "answer_prior": fitted[1],
            "grid": [{"goal_prior": w, "answer_prior": a, **per_pair[(w, a)]} for w, a in pairs],
            "train": {"none": agreement(train, 0.0), "fitted": per_pair[fitted]["train"]},
            "heldout": {"none": agreement(held, 0.0), "fitted": per_pair[fitted]["heldout"]}}


MEMORY_PRIOR_GRID: tuple[float, ...] = (0.0, 10.0, 30.0, 50.0, 100.0, 150.0, 200.0, 300.0, 500.0, 1000.0)
"""The :attr:`~es_agent.policy.PolicyConfig.memory_prior` weights :func:`fit_memory_prior` tries (the goal
and answer priors it is added to are 150 and 100 in the grid)."""


def reference_memory(steps: Sequence[Any], min_similarity: float = 0.3, leave_out_same_goal: bool = True,
                     abstract_instances: bool = False) -> Any:
    """A :class:`~es_agent.memory.TrajectoryMemory` of the recorded reference solutions in ``steps`` (one
    exemplar per task; by default a goal never retrieves its own solution, so training rollouts on these
    tasks see what a held-out task sees)."""
    from es_agent.memory import TrajectoryMemory, exemplar_from_reference

    by_task: dict[tuple[str, int], list[Any]] = {}
    for step in steps:
        by_task.setdefault((step.split, step.task_id), []).append(step)
    return TrajectoryMemory((exemplar_from_reference(t) for t in by_task.values()),
                            min_similarity=min_similarity, leave_out_same_goal=leave_out_same_goal,
                            abstract_instances=abstract_instances)


def fit_memory_prior(model_name: str, genome: str, train_splits: Sequence[str], heldout_splits: Sequence[str],
                     scoring: str = "calibrated", prior_weight: float = 1.0, goal_prior: float = 150.0,
                     answer_prior: float = 100.0, version: str | None = None, cache_dir: Path = CACHE_DIR,
                     grid: Sequence[float] = MEMORY_PRIOR_GRID, abstract_instances: bool = False
                     ) -> dict[str, Any]:
    """Step agreement with a memory of the ``train_splits``' reference solutions as exemplars, per
    :attr:`~es_agent.policy.PolicyConfig.memory_prior` weight of ``grid``, added to ``scoring`` with the
    goal and answer priors: on the training steps leave-one-task-out (a task never retrieves its own
    solution) and on the ``heldout_splits`` with every training exemplar. The weight is fitted on the
    training steps (steps, then whole tasks; ties to the smallest). ``abstract_instances``: the memory's
    :attr:`~es_agent.memory.TrajectoryMemory.abstract_instances`. No model forward (cached scores)."""
    from es_agent.agreement import equivalent
    from es_agent.decoding import best_index
    from es_agent.grounding import add_goal_prior, answer_type_matches, target_overlaps
    train_rows = _scored_rows(model_name, genome, train_splits, version, cache_dir)
    memory = reference_memory([step for step, _, _ in train_rows], abstract_instances=abstract_instances)
    Row = tuple[Any, list[float], list[float], list[bool], dict[str, Any]]

    def prepared(rows: list[tuple[Any, Any, Any]], leave_out: bool) -> list[Row]:
        out = []
        for step, scores, check in rows:
            goal, axtree = str(step.obs.get("goal", "")), str(step.obs.get("axtree", ""))
            base = add_goal_prior(scores.scores(scoring, prior_weight),
                                  target_overlaps(scores.candidates, axtree, goal), goal_prior)
            base = add_goal_prior(base, answer_type_matches(scores.candidates, goal), answer_prior)
            found = memory.retrieve(goal, exclude_task=step.task_id if leave_out else None)
            bonus = memory.bonuses(found, step.index, scores.candidates, axtree, goal)
            ok = [equivalent(c, step, check) for c in scores.candidates]
            info = {"similarity": found[1] if found else 0.0,
                    "exemplar_task": found[0].task_id if found else None, "candidates": scores.candidates}
            out.append((step, base, bonus, ok, info))
        return out

    def agreement(rows: list[Row], weight: float) -> dict[str, list[int]]:
        return _agreement_table([(step, ok[best_index(add_goal_prior(base, bonus, weight))])
                                 for step, base, bonus, ok, _ in rows])

    train = prepared(train_rows, leave_out=True)
    held = prepared(_scored_rows(model_name, genome, heldout_splits, version, cache_dir), leave_out=False)
    per_weight = {w: {"train": agreement(train, w), "heldout": agreement(held, w)} for w in grid}
    fitted = max(grid, key=lambda w: (per_weight[w]["train"]["all"][0], per_weight[w]["train"]["tasks"][0],
                                      -w))
    retrieved = sum(info["similarity"] > 0 for *_, info in held)
    misses = [miss for step, base, bonus, ok, info in held
              if (miss := step_miss(step, info["candidates"], add_goal_prior(base, bonus, fitted), ok))
              is not None]
    return {"model": model_name, "genome": genome, "scoring": scoring, "prior_weight": prior_weight,
            "goal_prior": goal_prior, "answer_prior": answer_prior, "version": version,
            "abstract_instances": abstract_instances,
            "train_splits": list(train_splits), "heldout_splits": list(heldout_splits),
            "exemplars": len(memory), "heldout_steps_with_exemplar": [retrieved, len(held)],
            "memory_prior": fitted, "grid": [{"memory_prior": w, **per_weight[w]} for w in grid],
            "heldout_misses": misses, "heldout_miss_ranks": miss_ranks(misses)}


def step_miss(step: Any, candidates: Sequence[str], scores: Sequence[float], ok: Sequence[bool]
              ) -> dict[str, Any] | None:
    """Where a step the policy gets wrong went wrong (``None`` when it agrees): its pick, and the rank (1 =
    best) and score gap of the best candidate equivalent to the reference (rank ``None``: no candidate is)."""
    from es_agent.decoding import best_index

    pick = best_index(list(scores))
    if ok[pick]:
        return None
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    rank = next((r for r, i in enumerate(order, 1) if ok[i]), None)
    return {"split": step.split, "task_id": step.task_id, "index": step.index, "kind": step.kind,
            "reference": step.action, "pick": candidates[pick], "candidates": len(candidates),
            "reference_rank": rank,
            "gap": None if rank is None else rnd(scores[pick] - scores[order[rank - 1]])}


def miss_ranks(misses: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How far the reference was from the pick, over the missed steps: unreachable (no equivalent candidate),
    ranked 2nd, 3rd-5th, or lower."""
    out = {"unreachable": 0, "2nd": 0, "3rd-5th": 0, "lower": 0}
    for miss in misses:
        rank = miss["reference_rank"]
        key = "unreachable" if rank is None else "2nd" if rank == 2 else "3rd-5th" if rank <= 5 else "lower"
        out[key] += 1
    return out


# ---------------------------------------------------------------------------------------------- reporting

def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f} % ({n}/{d})" if d else "-"


def report_md(results: dict[str, Any], command: str, notes: str = "") -> str:
    """The markdown report of :func:`run`'s results (``notes``: a reading, put first)."""
    variants = [v for v in results["runs"][0]["by_split"][next(iter(results["runs"][0]["by_split"]))]["all"]
                ["agree"]] if results["runs"] else []
    lines = [
        "# Step agreement with the reference solutions",
        "",
        f"Made by `{command}` on {results.get('date', '')} ({results.get('machine', '')}; timings noisy: "
        "a 2-core machine shared with other jobs).",
        "",
        "Method" + (__doc__ or "").split("Method", 1)[1].split("``python -m")[0].rstrip(),
        "",
        "Scorings (`PolicyConfig.scoring`, `@w`: `prior_weight` w): "
        + ", ".join(f"`{v}`" for v in variants) + ".",
        "",
    ]
    if notes:
        lines[4:4] = ["## Reading", "", notes.strip(), ""]
    for run in results["runs"]:
        head = f"## {run['model']} ({run['dtype']}), genome `{run['genome']}`"
        lines += [head, "", f"{run['seconds']:.0f} s of scoring (cached steps count 0).", ""]
        blocks = ([("held out (test + test_unseen)", run["held_out"])] if run["held_out"] else []) + \
            [(f"split {s}", summ) for s, summ in run["by_split"].items()]
        for title, summ in blocks:
            kinds = [k for k in ("all", "click", "type", "stop", "other") if k in summ]
            lines += [f"### {title}", "",
                      "| scoring | " + " | ".join(kinds) + " |",
                      "|---" * (len(kinds) + 1) + "|"]
            lines.append("| reachable (some candidate equivalent) | "
                         + " | ".join(_pct(summ[k]["reachable"], summ[k]["steps"]) for k in kinds) + " |")
            for v in variants:
                lines.append(f"| `{v}` | " + " | ".join(_pct(summ[k]["agree"][v], summ[k]["steps"])
                                                       for k in kinds) + " |")
            picked = summ["all"]["picked_kinds"]
            lines += ["", "Picks per kind (all steps): " + "; ".join(
                f"`{v}` " + ", ".join(f"{k} {n}" for k, n in picked[v].items()) for v in variants), ""]
    return "\n".join(lines) + "\n"


def figures(results: dict[str, Any], default: str) -> list[dict[str, Any]]:
    """The benchmark-suite figures: held-out agreement of each model x genome, default scoring and mean."""
    out = []
    for run in results["runs"]:
        summ = run["held_out"] or next(iter(run["by_split"].values()))
        where = "held-out" if run["held_out"] else "split " + next(iter(run["by_split"]))
        n = summ["all"]["steps"]
        for v in dict.fromkeys(("mean", default)):
            goal = run["model"] == "embedded" and v == default
            value = 100 * summ["all"]["rate"][v]
            out.append(Figure(
                f"step agreement with reference solutions, {where} [{run['model']} {run['dtype']}, "
                f"{run['genome']}, scoring {v}]", rnd(value, 3), "%",
                f">= {100 * GOAL:g} %" if goal else None, (value >= 100 * GOAL) if goal else None,
                note=f"{n} teacher-forced steps; reachable {summ['all']['reachable']}",
                extra={k: summ[k]["rate"][v] for k in summ if k != "all"}).to_dict())
    return out


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Benchmark-suite entry: quick = 2 test tasks, SmolLM2, no_skill; full = SmolLM2 x the 3 genomes on
    the held-out splits (cached scores make reruns cheap)."""
    from es_agent.policy import PolicyConfig

    if quick:
        from webarena_gym.embedded import default_tasks

        ids = [t.task_id for t in default_tasks("test")[:2]]
        results = run(["embedded"], ["no_skill"], ["test"], {}, task_ids=ids)
    else:
        results = run(["embedded"], ["no_skill", "default", "webarena_cot"], list(HELD_OUT), {})
    out = figures(results, PolicyConfig().scoring)
    print_figures("bench_agreement", out)
    return out


def cli(argv: list[str] | None = None) -> int:
    """The command line (module docstring)."""
    import platform

    from es_agent.policy import PolicyConfig

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["embedded"])
    parser.add_argument("--genomes", nargs="+", default=["no_skill", "default", "webarena_cot"])
    parser.add_argument("--splits", nargs="+", default=list(HELD_OUT))
    parser.add_argument("--max-steps", nargs="*", default=[], metavar="MODEL=N",
                        help="per model, at most N steps per split (whole trajectories, in task order)")
    parser.add_argument("--task-ids", type=int, nargs="*", default=None, help="only these tasks")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="seconds of new scoring per model x genome x split (0: cached steps only)")
    parser.add_argument("--policy", choices=sorted(POLICY_VARIANTS), default="",
                        help="a PolicyConfig variant (named: candidates scored with their target's name)")
    parser.add_argument("--write", action="store_true", help="write the report to OUT.{md,json}")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "agreement",
                        help="where --write writes, no suffix (default benchmarks/results/agreement)")
    parser.add_argument("--notes", type=Path, default=None, help="a markdown reading to put in the report")
    parser.add_argument("--quick", action="store_true", help="the benchmark suite's quick mode")
    parser.add_argument("--reachability", action="store_true",
                        help="only print the reachable steps per split and kind (no model forward)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--fit-kind-bias", nargs="+", default=None, metavar="TRAIN_SPLIT",
                        help="fit PolicyConfig.kind_bias on these splits' cached scores and report it on "
                             "--splits (no model forward)")
    parser.add_argument("--fit-goal-prior", nargs="+", default=None, metavar="TRAIN_SPLIT",
                        help="fit PolicyConfig.goal_prior on these splits' cached scores and report every "
                             "weight on them and on --splits (no model forward)")
    parser.add_argument("--fit-memory-prior", nargs="+", default=None, metavar="TRAIN_SPLIT",
                        help="step agreement with the reference solutions of TRAIN_SPLIT as exemplars "
                             "(es_agent.memory), per memory_prior weight, on the training steps (leave one "
                             "task out) and on --splits; the scoring of --fit-scoring plus --goal-prior and "
                             "--answer-prior (no model forward: cached scores)")
    parser.add_argument("--misses", action="store_true",
                        help="with --fit-memory-prior: print every held-out step missed at the fitted weight "
                             "(its pick, and the reference's rank and score gap)")
    parser.add_argument("--memory-out", type=Path, default=None,
                        help="with --fit-memory-prior: write the memory of TRAIN_SPLIT's reference solutions "
                             "here (the file PolicyConfig.memory_file reads)")
    parser.add_argument("--abstract-instances", action="store_true",
                        help="with --fit-memory-prior: the memory matches targets with the goals' instance "
                             "words as one slot (TrajectoryMemory.abstract_instances)")
    parser.add_argument("--goal-prior", type=float, default=150.0, help="with --fit-memory-prior")
    parser.add_argument("--answer-prior", type=float, default=100.0, help="with --fit-memory-prior")
    parser.add_argument("--fit-answer-prior", action="store_true",
                        help="with --fit-goal-prior: fit PolicyConfig.answer_prior jointly with it")
    parser.add_argument("--fit-scoring", default="mean",
                        help="with --fit-kind-bias / --fit-goal-prior: the scoring to fit under (mean, "
                             "calibrated@0.5, ...)")
    parser.add_argument("--code-version", default=None,
                        help="with --fit-kind-bias / --fit-goal-prior: read the scores made by this "
                             "es_agent/ tree id")
    args = parser.parse_args(argv)
    fit_scoring, _, fit_weight = args.fit_scoring.partition("@")
    if args.fit_memory_prior:
        if args.memory_out is not None:
            from es_agent.agreement import load_trajectories
            from es_agent.memory import save_memory

            recorded = [step for split in args.fit_memory_prior
                        for step in load_trajectories(recorded_path(split))[0]]
            memory = reference_memory(recorded, abstract_instances=args.abstract_instances)
            print(f"{len(memory)} exemplars -> {save_memory(memory, args.memory_out)}")
        for model_name in args.models:
            for genome in args.genomes:
                fit = fit_memory_prior(model_name, genome, args.fit_memory_prior, args.splits,
                                       scoring=fit_scoring, prior_weight=float(fit_weight or 1.0),
                                       goal_prior=args.goal_prior, answer_prior=args.answer_prior,
                                       version=args.code_version, abstract_instances=args.abstract_instances)
                with_ex, steps = fit["heldout_steps_with_exemplar"]
                print(f"{model_name} {genome} {args.fit_scoring} goal {args.goal_prior:g} answer "
                      f"{args.answer_prior:g}: {fit['exemplars']} exemplars; {with_ex}/{steps} held-out "
                      "steps retrieve one")
                for row in fit["grid"]:
                    mark = "  <- fitted" if row["memory_prior"] == fit["memory_prior"] else ""
                    print(f"  memory_prior {row['memory_prior']:>6g}: " + "; ".join(
                        f"{part} " + ", ".join(f"{k} {a}/{n}" for k, (a, n) in sorted(row[part].items()))
                        for part in ("train", "heldout")) + mark)
                ranks = fit["heldout_miss_ranks"]
                print(f"  held-out steps missed at the fitted weight: {len(fit['heldout_misses'])}; the "
                      "reference " + ", ".join(f"{k} {n}" for k, n in ranks.items()))
                if args.misses:
                    for miss in fit["heldout_misses"]:
                        where = ("not a candidate" if miss["reference_rank"] is None else
                                 f"ranked {miss['reference_rank']} of {miss['candidates']}, {miss['gap']:g} "
                                 "below")
                        print(f"    {miss['split']} {miss['task_id']} step {miss['index'] + 1} "
                              f"{miss['kind']}: {miss['reference']!r} {where}; picked {miss['pick']!r}")
                if args.json:
                    print(json.dumps(fit, indent=1))
        return 0
    if args.fit_goal_prior:
        for model_name in args.models:
            for genome in args.genomes:
                prior_fit = fit_goal_prior(model_name, genome, args.fit_goal_prior, args.splits,
                                           scoring=fit_scoring, prior_weight=float(fit_weight or 1.0),
                                           version=args.code_version,
                                           answer_grid=ANSWER_PRIOR_GRID if args.fit_answer_prior else (0.0,))
                for row in prior_fit["grid"]:
                    fitted = (row["goal_prior"], row["answer_prior"]) == (prior_fit["goal_prior"],
                                                                           prior_fit["answer_prior"])
                    print(f"{model_name} {genome} {args.fit_scoring} goal_prior {row['goal_prior']:>5g}"
                          + (f" answer_prior {row['answer_prior']:>5g}" if args.fit_answer_prior else "")
                          + ": "
                          + "; ".join(f"{part} " + ", ".join(f"{k} {a}/{n}" for k, (a, n) in
                                                              sorted(row[part].items()))
                                      for part in ("train", "heldout")) + ("  <- fitted" if fitted else ""))
                if args.json:
                    print(json.dumps(prior_fit, indent=1))
        return 0
    if args.fit_kind_bias:
        for model_name in args.models:
            for genome in args.genomes:
                fit = fit_kind_bias(model_name, genome, args.fit_kind_bias, args.splits, scoring=fit_scoring,
                                    prior_weight=float(fit_weight or 1.0), version=args.code_version)
                for part in ("train", "heldout"):
                    for which in ("none", "fitted"):
                        row = fit[part][which]
                        print(f"{model_name} {genome} {args.fit_scoring} {part:<7} {which:<6} kind_bias "
                              f"{fit['kind_bias'] if which == 'fitted' else {}}: "
                              + ", ".join(f"{k} {a}/{n}" for k, (a, n) in sorted(row.items())))
                if args.json:
                    print(json.dumps(fit, indent=1))
        return 0
    if args.quick:
        result = main(True)
        if args.json:
            print(json.dumps(result, indent=1))
        return 0
    if args.reachability:
        found = reachability(args.splits, args.models[0], args.genomes[0])
        for key, row in sorted(found["counts"].items()):
            print(f"{key:<28} reachable {row['reachable']:>4}/{row['steps']:<4} "
                  f"cut by truncation {row['cut']}")
        sizes = found["candidates"]
        print(f"candidates per step: mean {sizes['mean']:.1f}, max {sizes['max']}")
        if args.json:
            print(json.dumps(found, indent=1))
        return 0
    limits: dict[str, int | None] = {}
    for item in args.max_steps:
        name, _, n = item.partition("=")
        if not n.isdigit():
            parser.error(f"--max-steps takes MODEL=N, got {item!r}")
        limits[name] = int(n)
    results = run(args.models, args.genomes, args.splits, limits, task_ids=args.task_ids,
                  budget_s=args.budget_s, variant=args.policy)
    results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results["machine"] = f"{platform.processor() or platform.machine()}, {platform.system()}"
    command = "python -m benchmarks.bench_agreement " + " ".join(argv if argv is not None else sys.argv[1:])
    results["command"] = command
    default = PolicyConfig().scoring
    results["default_scoring"] = default
    figs = figures(results, default)
    print_figures("bench_agreement", figs)
    if args.write:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps({**results, "figures": figs}, indent=1) + "\n",
                                                 encoding="utf-8")
        notes = args.notes.read_text(encoding="utf-8") if args.notes else ""
        args.out.with_suffix(".md").write_text(report_md(results, command, notes), encoding="utf-8")
    if args.json:
        print(json.dumps(figs, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
