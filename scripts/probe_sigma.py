"""Does a weight perturbation of scale sigma keep a model's right answers? A check for choosing es.sigma_0.

Teacher-forced on the recorded tier-1 reference steps of the given tasks (``bench_agreement`` records them),
the policy (genome ``no_skill``, calibrated scoring) picks an action under full-rank perturbations of 2 seeds
x both signs per sigma; the line per sigma counts the agreeing picks. Where sigma keeps none, every antithetic
pair ties at 0 and the ES update is empty; where it keeps all, the pair acts alike.

    .venv/bin/python scripts/probe_sigma.py embedded-qwen 10025,10026,10027 0.01,0.004,0.002
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_agreement import answer_checker, load, recorded_path
from es_agent.agreement import equivalent, load_trajectories
from es_agent.perturb import perturbed
from es_agent.policy import LLMPolicy, PolicyConfig
from es_agent.prompts import PromptPools


def main(name: str, task_ids: list[int], sigmas: list[float]) -> None:
    torch.set_num_threads(1)
    model, tok, dtype = load(name)
    policy = LLMPolicy(model, tok, PromptPools.load().baseline("no_skill"),
                       PolicyConfig(scoring="calibrated", history_len=3))
    rows = []
    for split in ("tier1_train", "tier1_test"):
        steps, meta = load_trajectories(recorded_path(split))
        check = answer_checker(split, meta)
        rows += [(step, check) for step in steps if step.task_id in task_ids]
    for sigma in [0.0, *sigmas]:
        right = total = 0
        members = [(1, 1.0)] if sigma == 0 else [(seed, sign) for seed in (1, 2) for sign in (1.0, -1.0)]
        for seed, sign in members:
            with perturbed(model, seed, sign * sigma, mode="full"):
                for step, check in rows:
                    policy.reset()
                    policy.set_history(0, step.history)
                    right += equivalent(policy.score_step(step.obs).choice("calibrated"), step, check)
                    total += 1
        print(f"{name} {dtype} sigma {sigma}: right {right} / {total}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], [int(x) for x in sys.argv[2].split(",")], [float(x) for x in sys.argv[3].split(",")])
