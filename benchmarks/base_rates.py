"""Base rates (issue #13 item 2): every model x baseline genome on the tasks of every bundled split.

The agent is what a new user runs: the model spec (``embedded``: SmolLM2-135M, ``embedded-qwen``:
Qwen2.5-Coder-0.5B; loaded as a worker loads it, so ``tiny:N`` too) in bfloat16 on the CPU, a baseline genome
of the default prompt pools (``no_skill``, ``default``, ``webarena_cot``), constrained decoding with the
``PolicyConfig`` defaults, one episode per task with env seed 0, at most ``--max-steps`` actions, one env
(real Chromium on the embedded sites) and one torch thread. Every finished episode is appended to a JSONL
cache as soon as it ends, keyed by model, genome, split, task, the settings and the version of the agent code
(the git tree of ``es_agent/``, plus a digest of its uncommitted changes), so an interrupted or budgeted run
resumes where it stopped and never re-runs an episode. ``--budget-s`` stops starting new episodes after that
many seconds; the report is written from everything the cache holds for the current code and settings.

Report (``<out-dir>/base_rates.{md,json}``): success, steps and seconds per task, per split, per template,
per site and per reference length (the tiers), and the step agreement with the reference solutions of
:mod:`es_agent.agreement` as far as ``benchmarks.bench_agreement`` has scored it (read from its per-step
cache, never re-scored here; run ``python -m benchmarks.bench_agreement`` to score more steps).

``python -m benchmarks.base_rates [--models embedded embedded-qwen] [--genomes no_skill default
webarena_cot] [--splits tier1_test ...] [--max-steps 12] [--limit N] [--budget-s S] [--out-dir DIR]
[--import-json FILE ...]`` (``--import-json``: episodes written by the former ``scripts/tier_base_rates.py
--out``, imported into the cache under the code version of the commit they name).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, BenchmarkError, code_version, load_average, torch_threads

MODELS = ("embedded", "embedded-qwen")
"""The models measured by default."""
GENOMES = ("no_skill", "default", "webarena_cot")
"""The baseline genomes measured by default."""
CACHE = Path.home() / ".cache" / "agentic-esopt" / "base_rates" / "episodes.jsonl"
"""The default episode cache."""
FORMAT = "benchmarks.base_rates/1"


def default_splits() -> list[str]:
    """Every bundled split, held-out splits first (bundled, then tier 1, 2, 3), then the train splits."""
    from webarena_gym.embedded import SPLITS, TIER_SPLITS

    every = [*SPLITS, *TIER_SPLITS]
    return [s for s in every if not s.endswith("train")] + [s for s in every if s.endswith("train")]


@dataclass(frozen=True)
class Settings:
    """What an episode depends on besides model, genome and task (part of the cache key)."""

    dtype: str = "bfloat16"
    """Model dtype."""
    max_steps: int = 12
    """Actions per episode at most."""
    seed: int = 0
    """Env seed of every episode."""
    decoding: str = "constrained"
    """``PolicyConfig.decoding``."""
    scoring: str = "mean"
    """``PolicyConfig.scoring``."""
    code: str = ""
    """Version of the agent code (:func:`code_version`)."""


def episode_key(model: str, genome: str, split: str, task_id: int, settings: Settings) -> str:
    """The cache key of one episode."""
    return json.dumps([model, genome, split, task_id, asdict(settings)], sort_keys=True)


class EpisodeCache:
    """The JSONL episode cache: one line per finished episode, appended and flushed as soon as it ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        if path.exists():
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    self.entries[entry["key"]] = entry
                except (ValueError, KeyError, TypeError) as exc:
                    raise BenchmarkError(f"episode cache {str(path)!r} line {n} is not an episode: {exc}"
                                         ) from exc

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def add(self, entry: dict[str, Any]) -> None:
        """Append one finished episode (``entry["key"]`` from :func:`episode_key`)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")
        self.entries[entry["key"]] = entry


def _episode_entry(key: str, model: str, genome: str, split: str, settings: Settings, task: Any,
                   reward: float, steps: int, seconds: float, actions: Sequence[str], source: str
                   ) -> dict[str, Any]:
    return {"key": key, "model": model, "genome": genome, "split": split, "task_id": task.task_id,
            "site": "+".join(task.sites), "template": task.intent_template_id,
            "reference_steps": len(task.extras["reference_solution"]), "reward": reward,
            "success": reward >= 1.0, "steps": steps, "seconds": round(seconds, 2),
            "actions": list(actions), "settings": asdict(settings), "source": source,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def measure(models: Sequence[str], genomes: Sequence[str], splits: Sequence[str], settings: Settings,
            cache: EpisodeCache, *, limit: int = 0, budget_s: float | None = None,
            log: Callable[[str], None] = print) -> dict[str, int]:
    """Run every episode of ``models x genomes x splits`` (the first ``limit`` tasks of each split when
    ``limit`` > 0) that the cache does not hold, appending each to it; stops starting episodes once
    ``budget_s`` seconds have passed. Returns ``{"run", "cached", "left"}`` episode counts."""
    import gymnasium as gym

    import webarena_gym
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptPools
    from es_agent.rollout import run_episode
    from es_agent.specs import AgentSpec
    from es_agent.worker import load_agent_model
    from webarena_gym.embedded import default_tasks

    started = time.perf_counter()
    counts = {"run": 0, "cached": 0, "left": 0}
    tasks = {split: default_tasks(split)[: limit or None] for split in splits}
    pools = PromptPools.load()
    config = PolicyConfig()
    if (config.decoding, config.scoring) != (settings.decoding, settings.scoring):
        raise BenchmarkError(f"settings {asdict(settings)} differ from the PolicyConfig defaults "
                             f"(decoding {config.decoding!r}, scoring {config.scoring!r})")
    browser = {"executable_path": shutil.which("chromium")} if shutil.which("chromium") else {}

    def out_of_time() -> bool:
        return budget_s is not None and time.perf_counter() - started > budget_s

    for model_name in models:
        todo = {(g, s): [t for t in tasks[s]
                         if episode_key(model_name, g, s, t.task_id, settings) not in cache]
                for g in genomes for s in splits}
        counts["cached"] += sum(len(tasks[s]) for s in splits) * len(genomes) - sum(map(len, todo.values()))
        if not any(todo.values()) or out_of_time():
            counts["left"] += sum(map(len, todo.values()))
            continue
        model, tok = load_agent_model(AgentSpec(model=model_name, dtype=settings.dtype, device="cpu"))
        with torch_threads(1):
            for genome in genomes:
                policy = LLMPolicy(model, tok, pools.baseline(genome), config)
                for split in splits:
                    if not todo[(genome, split)]:
                        continue
                    if out_of_time():
                        counts["left"] += len(todo[(genome, split)])
                        continue
                    env = gym.make(webarena_gym.ENV_ID, split=split, browser=browser)
                    try:
                        for n, task in enumerate(todo[(genome, split)]):
                            if out_of_time():
                                counts["left"] += len(todo[(genome, split)]) - n
                                log(f"budget of {budget_s:.0f} s spent")
                                break
                            t0 = time.perf_counter()
                            result = run_episode(env, policy, seed=settings.seed,
                                                 options={"task_id": task.task_id},
                                                 max_steps=settings.max_steps)
                            key = episode_key(model_name, genome, split, task.task_id, settings)
                            cache.add(_episode_entry(
                                key, model_name, genome, split, settings, task, result.reward, result.steps,
                                time.perf_counter() - t0, [r.action for r in result.trajectory], "run"))
                            counts["run"] += 1
                            log(f"{model_name} {genome} {split} task {task.task_id}: reward "
                                f"{result.reward} in {result.steps} steps, {time.perf_counter() - t0:.0f} s")
                    finally:
                        env.close()
        del model
    return counts


def import_json(path: Path, cache: EpisodeCache, settings: Settings, log: Callable[[str], None] = print
                ) -> int:
    """Import the episodes of a ``scripts/tier_base_rates.py --out`` file into the cache (under the code
    version of the commit it names; a file made with uncommitted es_agent changes, or whose settings differ
    from ``settings``, is refused with :class:`BenchmarkError`). Returns the episodes added."""
    from webarena_gym.embedded import default_tasks

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        commit, episodes = str(data["commit"]), list(data["episodes"])
        scoring = str(data.get("scoring", "mean")).split()[0]
        theirs = Settings(str(data["dtype"]), int(data["max_steps"]), 0, "constrained", scoring, "")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BenchmarkError(f"cannot read base-rate episodes {str(path)!r}: {exc}") from exc
    if "modified" in commit or commit == "unknown":
        raise BenchmarkError(f"{str(path)!r} was made at commit {commit!r}: no exact code version to import "
                             "it under")
    version = Settings(**{**asdict(theirs), "code": code_version(commit)})
    mine = Settings(**{**asdict(settings), "code": version.code})
    if version != mine:
        raise BenchmarkError(f"{str(path)!r} has settings {asdict(version)}, expected {asdict(mine)}")
    added = 0
    for e in episodes:
        task = {t.task_id: t for t in default_tasks(e["split"])}[e["task_id"]]
        key = episode_key(str(data["model"]), str(data["genome"]), e["split"], e["task_id"], version)
        if key not in cache:
            cache.add(_episode_entry(key, str(data["model"]), str(data["genome"]), e["split"], version, task,
                                     float(e["reward"]), int(e["steps"]), float(e["seconds"]), e["actions"],
                                     f"imported from {path.name} (scripts/tier_base_rates.py, commit "
                                     f"{commit[:12]})"))
            added += 1
    log(f"imported {added} episodes from {path} (code version {version.code})")
    return added


# ---------------------------------------------------------------------------------------------- reporting

def length_bucket(steps: int) -> str:
    """The tier band of a reference-solution length: ``1-2``, ``3-4`` or ``5+``."""
    return "1-2" if steps <= 2 else "3-4" if steps <= 4 else "5+"


def _cell(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    wins = sum(bool(r["success"]) for r in rows)
    return {"tasks": n, "success": wins, "rate": wins / n if n else None,
            "mean_steps": sum(r["steps"] for r in rows) / n if n else None,
            "mean_seconds": sum(r["seconds"] for r in rows) / n if n else None}


def tables(episodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Success, mean steps and mean seconds per agent (``model/genome``) and split, template, site and
    reference length (held-out splits only for the last three, and per split group)."""
    by: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = defaultdict(lambda: defaultdict(
        lambda: defaultdict(list)))
    for e in episodes:
        agent = f"{e['model']}/{e['genome']}"
        held = "held-out" if not e["split"].endswith("train") else "train"
        group = (e["split"].split("_", 1)[0] if e["split"].startswith("tier") else "bundled") + " " + held
        by["split"][e["split"]][agent].append(e)
        by["template"][f"{group}: {e['template']}"][agent].append(e)
        by["site"][f"{group}: {e['site']}"][agent].append(e)
        by["reference_length"][f"{group}: {length_bucket(e['reference_steps'])}"][agent].append(e)
    return {table: {row: {agent: _cell(rows) for agent, rows in agents.items()}
                    for row, agents in sorted(rows_.items())} for table, rows_ in by.items()}


def agreement(models: Sequence[str], genomes: Sequence[str], splits: Sequence[str],
              cache_dir: Path | None = None) -> list[dict[str, Any]]:
    """Step agreement per model x genome x split from ``benchmarks.bench_agreement``'s caches (in
    ``cache_dir``, default its own): steps scored of steps recorded, reachable, and per scoring the agreeing
    steps per kind."""
    from benchmarks.bench_agreement import CACHE_DIR, cached_records
    from es_agent.agreement import summarize

    out = []
    for model in models:
        for genome in genomes:
            for split in splits:
                found = cached_records(model, genome, split, cache_dir=cache_dir or CACHE_DIR)
                if found is None:
                    continue
                records, recorded = found
                if records:
                    out.append({"model": model, "genome": genome, "split": split, "scored": len(records),
                                "recorded": recorded, "summary": summarize(records)})
    return out


def _pct(cell: dict[str, Any] | None) -> str:
    if not cell or not cell["tasks"]:
        return "-"
    return f"{100 * cell['rate']:.0f} % ({cell['success']}/{cell['tasks']})"


def report_md(result: dict[str, Any]) -> str:
    """The markdown report of a :func:`report` result."""
    agents = result["agents"]
    s = result["settings"]
    lines = [
        "# Base rates of the starting agents",
        "",
        f"Made by `{result['command']}` on {result['date']} ({result['machine']}, load average "
        f"{result['load_average']}; seconds are wall time on a shared 2-core machine, noisy).",
        "",
        f"Agent: {s['dtype']}, {s['decoding']} decoding, scoring `{s['scoring']}`, `PolicyConfig` defaults, "
        f"at most {s['max_steps']} actions, env seed {s['seed']}, one episode per task, one torch thread; "
        f"agent code version `{s['code']}`. Success: reward 1.",
        "",
    ]
    if result.get("notes"):
        lines += ["## Reading", "", result["notes"].strip(), ""]
    lines += ["## Coverage", "", "| agent | " + " | ".join(result["splits"]) + " |",
              "|---" * (len(result["splits"]) + 1) + "|"]
    for agent in result["requested_agents"]:
        cells = [result["tables"].get("split", {}).get(sp, {}).get(agent) for sp in result["splits"]]
        lines.append(f"| {agent} | " + " | ".join(
            f"{c['tasks']}/{result['split_sizes'][sp]}" if c else f"0/{result['split_sizes'][sp]}"
            for c, sp in zip(cells, result["splits"], strict=True)) + " |")
    lines += ["", "Cells: tasks measured of the split's tasks. Unmeasured cells are `-` below.", ""]
    if not agents:
        return "\n".join(lines + ["Nothing measured yet."]) + "\n"
    titles = {"split": "Per split (success, mean steps, mean seconds per task)", "template": "Per template",
              "site": "Per site", "reference_length": "Per reference-solution length"}
    for table, title in titles.items():
        rows = result["tables"].get(table, {})
        lines += [f"## {title}", "", f"| {table.replace('_', ' ')} | " + " | ".join(agents) + " |",
                  "|---" * (len(agents) + 1) + "|"]
        for row, cells in rows.items():
            if table == "split":
                text = [(f"{_pct(cells.get(a))}, {cells[a]['mean_steps']:.1f} steps, "
                         f"{cells[a]['mean_seconds']:.0f} s") if a in cells else "-" for a in agents]
            else:
                text = [_pct(cells.get(a)) for a in agents]
            lines.append(f"| {row} | " + " | ".join(text) + " |")
        lines.append("")
    lines += ["## Step agreement (from benchmarks.bench_agreement's cache)", ""]
    if not result["agreement"]:
        lines += ["No step of these splits has been scored by `python -m benchmarks.bench_agreement` yet.",
                  ""]
    else:
        lines += ["| model / genome | split | steps scored | reachable | `mean` all | click | type | stop | "
                  "other |", "|---|---|---|---|---|---|---|---|---|"]
        for a in result["agreement"]:
            summ = a["summary"]
            cells = []
            for kind in ("all", "click", "type", "stop", "other"):
                k = summ.get(kind)
                cells.append(f"{k['agree']['mean']}/{k['steps']}" if k and "mean" in k["agree"] else "-")
            lines.append(f"| {a['model']} / {a['genome']} | {a['split']} | {a['scored']}/{a['recorded']} | "
                         f"{summ['all']['reachable']}/{summ['all']['steps']} | " + " | ".join(cells) + " |")
        lines += ["", "Scored by bench_agreement in its own dtype (float32 on this CPU) from its per-step "
                  "cache; other scorings: benchmarks/results/agreement.md.", ""]
    return "\n".join(lines) + "\n"


def report(cache: EpisodeCache, models: Sequence[str], genomes: Sequence[str], splits: Sequence[str],
           settings: Settings, limit: int = 0, agreement_dir: Path | None = None) -> dict[str, Any]:
    """Everything the cache holds for these agents, splits and settings, as tables (:func:`tables`)."""
    from webarena_gym.embedded import default_tasks

    sizes = {s: len(default_tasks(s)[: limit or None]) for s in splits}
    wanted = {(m, g) for m in models for g in genomes}
    episodes = [e for e in cache.entries.values()
                if (e["model"], e["genome"]) in wanted and e["split"] in sizes
                and e["settings"] == asdict(settings)]
    agents = [f"{m}/{g}" for m in models for g in genomes
              if any(e["model"] == m and e["genome"] == g for e in episodes)]
    return {"format": FORMAT, "settings": asdict(settings), "splits": list(splits), "split_sizes": sizes,
            "requested_agents": [f"{m}/{g}" for m in models for g in genomes], "agents": agents,
            "tables": tables(episodes), "agreement": agreement(models, genomes, splits, agreement_dir),
            "episodes": sorted(episodes, key=lambda e: (e["model"], e["genome"], e["split"], e["task_id"]))}


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module docstring); exit status 0."""
    from es_agent.policy import PolicyConfig
    from es_agent.specs import AgentSpec

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--genomes", nargs="+", default=list(GENOMES))
    parser.add_argument("--splits", nargs="+", default=None, help="default: every bundled split")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks of each split (0: all)")
    parser.add_argument("--budget-s", type=float, default=None, help="start no episode after S seconds")
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "benchmarks" / "results")
    parser.add_argument("--cache", type=Path, default=CACHE, help="the JSONL episode cache")
    parser.add_argument("--dtype", default="auto",
                        help="model dtype; auto: bf16 with AMX / AVX512-BF16, float32 elsewhere (bf16 is "
                        "2.7-7x slower on an AVX2-only CPU), resolved before it keys the cache")
    parser.add_argument("--agreement-cache", type=Path, default=None,
                        help="bench_agreement's cache directory (default: its own)")
    parser.add_argument("--notes", type=Path, default=None, help="a markdown reading to put in the report")
    parser.add_argument("--code", default=None,
                        help="report the episodes of this agent code version (base_rates.json 'settings'), "
                        "e.g. of a run made before a change; runs no episode unless it is the current one")
    parser.add_argument("--import-json", type=Path, nargs="*", default=[],
                        help="episodes of scripts/tier_base_rates.py --out to import into the cache")
    args = parser.parse_args(argv)
    if args.max_steps < 1 or args.limit < 0:
        parser.error(f"--max-steps must be >= 1 and --limit >= 0, got {args.max_steps} and {args.limit}")
    splits = args.splits or default_splits()
    from webarena_gym.embedded import SPLITS, TIER_SPLITS

    unknown = [s for s in splits if s not in (*SPLITS, *TIER_SPLITS)]
    if unknown:
        parser.error(f"unknown splits {unknown}; expected some of {[*SPLITS, *TIER_SPLITS]}")
    config = PolicyConfig()
    current = code_version()
    dtype = AgentSpec(model="embedded", dtype=args.dtype, device="cpu").resolved().dtype
    settings = Settings(dtype, args.max_steps, 0, config.decoding, config.scoring, args.code or current)
    cache = EpisodeCache(args.cache)
    for path in args.import_json:
        import_json(path, cache, settings)
    budget = args.budget_s if settings.code == current else 0.0
    if settings.code != current:
        print(f"--code {settings.code} is not the current agent code ({current}): no episode is run")
    counts = measure(args.models, args.genomes, splits, settings, cache, limit=args.limit, budget_s=budget)
    print(f"episodes: {counts['run']} run, {counts['cached']} cached, {counts['left']} left (budget)")
    result = report(cache, args.models, args.genomes, splits, settings, args.limit, args.agreement_cache)
    result.update({
        "command": "python -m benchmarks.base_rates " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.processor() or platform.machine()}, {platform.system()}",
        "load_average": load_average(), "counts": counts,
        "notes": args.notes.read_text(encoding="utf-8") if args.notes else ""})
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "base_rates.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (args.out_dir / "base_rates.md").write_text(report_md(result), encoding="utf-8")
    print(f"wrote {args.out_dir / 'base_rates.md'} and base_rates.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
