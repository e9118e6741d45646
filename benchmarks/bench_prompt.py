"""Prompt tokens per agent step, old prompt vs new, on the bundled tasks' reference trajectories.

Method.
- Trajectories: ``gym.make("WebArenaLite-v0", split="test")`` on the embedded sites (real Chromium) replays
  the reference solutions of the first tasks of the ``test`` split
  (:func:`webarena_gym.reference.run_reference`); every observation an agent acts on is recorded with the
  reference action taken there.
- Prompts: the embedded SmolLM2 tokenizer and the ``no_skill`` genome, 1,024-token budget, the history of
  each step being the reference actions before it.
  OLD = ``PolicyConfig(observation="full", prefix_cache="system")`` with the pools' ``webarena`` observation
  template (objective last): the behaviour before issue #10. NEW =
  the defaults (compact axtree, objective and history first, longest-common-prefix KV reuse per slot).
- Tokens prefilled per step: prompt tokens minus the tokens taken from the KV cache: OLD the system message;
  NEW the longest common prefix with the previous step's prompt (the first step of an episode prefills all,
  in both). Goal: NEW <= 0.5x OLD, mean over steps.
- Choices: the embedded SmolLM2-135M (dtype ``"auto"``: bf16 on AMX/AVX512-BF16 CPUs, else fp32; one
  torch thread) acts on every recorded step under OLD and
  NEW (histories forced to the reference actions, so both see the same episode): whether the candidate sets
  are equal, and how often both pick the same action (reported, no goal). The NEW policy's own
  ``stats["prefilled_tokens"]`` are checked against the token count above.
``python -m benchmarks.bench_prompt [--quick]`` (quick: 2 tasks, and 4 steps for the model).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from benchmarks.common import Figure, print_figures, rnd, run_as_script, torch_threads

PREFILL_GOAL = 0.5


def reference_steps(n_tasks: int) -> list[list[tuple[dict[str, str], str]]]:
    """``(observation, reference action)`` pairs of the first ``n_tasks`` test tasks, episode by episode."""
    import gymnasium as gym

    import webarena_gym
    from webarena_gym.reference import run_reference
    from webarena_gym.wrappers import RecordObservations


    env = RecordObservations(gym.make(webarena_gym.ENV_ID, split="test"))
    episodes = []
    try:
        for task in list(env.unwrapped.tasks)[:n_tasks]:
            result = run_reference(env, task)
            if result.reward < 1.0:
                raise RuntimeError(f"reference solution of task {task.task_id} scored {result.reward}")
            episodes.append(list(zip(env.observations, result.actions, strict=False)))
    finally:
        env.close()
    return episodes


def policies(model: Any, tok: Any) -> dict[str, Any]:
    """The OLD and NEW policies (module docstring)."""
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptPools

    pools = PromptPools.load()
    old = LLMPolicy(model, tok, pools.with_observation_template("webarena").baseline("no_skill"),
                    PolicyConfig(observation="full", prefix_cache="system"))
    new = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig())
    return {"old": old, "new": new}


def _force_history(policy: Any, actions: list[str]) -> None:
    from es_agent.prompts import HistoryEntry

    policy._histories[0] = [HistoryEntry(a) for a in actions]


def token_counts(episodes: list[list[tuple[dict[str, str], str]]],
                 tok: Any) -> dict[str, dict[str, list[int]]]:
    """Prompt and prefilled tokens per step for OLD and NEW (tokenizer only)."""
    from es_agent.prefix_cache import common_prefix

    out: dict[str, dict[str, list[int]]] = {}
    for name, policy in policies(None, tok).items():
        system = policy._encode(policy._system_prefix())
        prompt, prefilled = [], []
        for episode in episodes:
            previous: list[int] = []
            for step, (obs, _) in enumerate(episode):
                _force_history(policy, [a for _, a in episode[:step]])
                ids = policy._build_prompt(obs, 0).ids
                if name == "old":
                    cached = len(system) if step and ids[:len(system)] == system else 0
                else:
                    cached = min(common_prefix(previous, ids), len(ids) - 1)
                prompt.append(len(ids))
                prefilled.append(len(ids) - cached)
                previous = ids
        out[name] = {"prompt": prompt, "prefilled": prefilled}
    return out


def choices(episodes: list[list[tuple[dict[str, str], str]]], max_steps: int) -> dict[str, Any]:
    """OLD vs NEW with the embedded model on the recorded steps: same candidates, same action, seconds."""
    import torch

    from es_agent.hardware import choose_dtype
    from es_agent.models import load_model

    dtype = choose_dtype("auto").value
    model, tok = load_model("embedded", dtype=getattr(torch, dtype))
    pols = policies(model, tok)
    same_cands = same_action = steps = 0
    seconds = {"old": 0.0, "new": 0.0}
    with torch_threads(1):
        for episode in episodes:
            for policy in pols.values():
                policy.reset()
            for step, (obs, _) in enumerate(episode):
                if steps >= max_steps:
                    break
                acted = {}
                for name, policy in pols.items():
                    _force_history(policy, [a for _, a in episode[:step]])
                    started = time.process_time()
                    acted[name] = policy.act(obs)
                    seconds[name] += time.process_time() - started
                steps += 1
                same_action += acted["old"] == acted["new"]
                same_cands += pols["old"].candidates(obs) == pols["new"].candidates(obs)
    return {"steps": steps, "same_candidates": same_cands, "same_action": same_action, "seconds": seconds,
            "dtype": dtype,
            "new_prefilled": pols["new"].stats["prefilled_tokens"],
            "old_prefilled": pols["old"].stats["prefilled_tokens"]}


def main(quick: bool = False) -> list[dict[str, Any]]:
    from benchmarks.common import embedded_tokenizer

    n_tasks, max_steps = (2, 4) if quick else (8, 40)
    episodes = reference_steps(n_tasks)
    steps = sum(len(e) for e in episodes)
    counts = token_counts(episodes, embedded_tokenizer())
    mean = {k: {m: statistics.mean(v) for m, v in c.items()} for k, c in counts.items()}
    ratio = mean["new"]["prefilled"] / mean["old"]["prefilled"]
    where = f"{steps} steps of {len(episodes)} test-task reference solutions, SmolLM2 tokenizer, budget 1024"
    figures = [
        Figure("prompt tokens per step, old prompt (full axtree, objective last) [reference trajectories]",
               rnd(mean["old"]["prompt"]), "tokens", note=where,
               extra={"median": statistics.median(counts["old"]["prompt"])}),
        Figure("prompt tokens per step, new prompt (compact axtree, objective first) "
               "[reference trajectories]", rnd(mean["new"]["prompt"]), "tokens", note=where,
               extra={"median": statistics.median(counts["new"]["prompt"])}),
        Figure("prompt tokens prefilled per step, old (system-message KV cached) [reference trajectories]",
               rnd(mean["old"]["prefilled"]), "tokens", note=where),
        Figure("prompt tokens prefilled per step, new (longest common prefix KV reused) "
               "[reference trajectories]", rnd(mean["new"]["prefilled"]), "tokens", note=where),
        Figure("prompt tokens prefilled per step, new / old [reference trajectories]", rnd(ratio, 3), "x",
               f"<= {PREFILL_GOAL:g}", ratio <= PREFILL_GOAL, note=where),
    ]
    result = choices(episodes, max_steps)
    n = result["steps"]
    tag = f"SmolLM2-135M {result['dtype']}, 1 thread, {n} recorded steps"
    figures += [
        Figure(f"candidate sets equal, old vs new prompt [{tag}]",
               rnd(100 * result["same_candidates"] / n, 3), "%", note="candidates from each prompt axtree "
               "(truncated as the full text, then compact for new)"),
        Figure(f"same action chosen, old vs new prompt [{tag}]",
               rnd(100 * result["same_action"] / n, 3), "%", note="histories = the reference actions; "
               "no goal (the prompt changed: order and rendering)"),
        Figure(f"policy CPU seconds per step, new / old [{tag}]",
               rnd(result["seconds"]["new"] / result["seconds"]["old"], 3), "x",
               extra={"old_s_per_step": rnd(result["seconds"]["old"] / n),
                      "new_s_per_step": rnd(result["seconds"]["new"] / n),
                      "old_prefilled_per_step": rnd(result["old_prefilled"] / n),
                      "new_prefilled_per_step": rnd(result["new_prefilled"] / n)}),
    ]
    out = [f.to_dict() for f in figures]
    print_figures("bench_prompt", out)
    return out


if __name__ == "__main__":
    run_as_script(main, __doc__ or "", "2 tasks and 4 model steps")
