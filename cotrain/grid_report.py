"""The learning grid's report, from the result files of one or more grid directories (partial grids too):
``<results>.json``, ``<results>.md``, one learning-curve PNG per setting (arms overlaid) and the
success-against-horizon plot.

Per setting and arm, for ``test``, ``test_unseen`` and both together: the held-out success (mean over seeds x
tasks, 95 % bootstrap CI, :mod:`cotrain.grid_stats`), paired against ``start`` (the same tasks with the same
env seed) and between arms (``both`` against ``prompts`` and ``weights``, on the seeds both have). The two
headline lines (a setting joins the co-evolution line once its three trained arms share at least 2 seeds, and
is compared on those: extending a grid by more seeds keeps its finished settings counted); the per-tier gain
of every arm over ``start`` (settings of a tier pooled, task columns side by side); where the gains are (per
held-out task, how many seeds of each arm solve it, and the (seed, task) cells each arm gained and lost
against ``start``); the budget table (planned and actual episodes and steps); the time the runs took
(:mod:`cotrain.grid_time`); the runs still pending.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.checkpoint import atomic_write_json, atomic_write_text
from cotrain.errors import GridError
from cotrain.grid import RESULT_FILE, read_result
from cotrain.grid_chance import headline_chance
from cotrain.grid_config import HELDOUT_SPLITS, START_ARM, GridConfig, Setting
from cotrain.grid_stats import Estimate, bootstrap_mean, paired_estimate
from cotrain.grid_time import grid_time, time_lines

REPORT_FORMAT = "esopt-grid-report/1"
"""Tag of ``<results>.json``."""
SPLITS = (*HELDOUT_SPLITS, "heldout")
"""The held-out sets reported: each split, and both together (``heldout``)."""
COMPARISONS = (("both", "prompts"), ("both", "weights"))
"""Between-arm comparisons (co-evolution against each matched single-space arm)."""
_N_BOOT = 4000


def collect_results(dirs: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """Every result file under the grid directories, by run key; the same run in two directories must carry
    the same overrides (else GridError naming both files), the first directory's copy is kept."""
    found: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    for folder in dirs:
        if not folder.is_dir():
            raise GridError(f"no grid directory at {folder}")
        paths = [*folder.glob(f"*/{START_ARM}/{RESULT_FILE}"), *folder.glob(f"*/*/seed*/{RESULT_FILE}")]
        for path in sorted(paths):
            result = read_result(path)
            assert result is not None
            key = result["key"]
            if key in found:
                if found[key]["overrides"] != result["overrides"]:
                    raise GridError(f"{path} and {origin[key]} hold run {key} with different overrides: "
                                    "they come from different grids and cannot merge")
                continue
            found[key], origin[key] = result, path
    return found


def report_settings(grid: GridConfig, results: Mapping[str, Mapping[str, Any]]) -> list[Setting]:
    """The grid's settings, then those of merged results from other grid files (e.g. the qwen grid), in the
    order first seen."""
    settings = list(grid.settings)
    for r in results.values():
        setting = Setting(str(r["model"]), str(r["family"]), int(r["tier"]))
        if setting not in settings:
            settings.append(setting)
    return settings


def expected_keys(grid: GridConfig, settings: Sequence[Setting] | None = None) -> list[str]:
    """Every run key of the grid's settings (or of ``settings``, with the grid's arms and seeds), whatever
    was filtered in an invocation."""
    keys = []
    for s in grid.settings if settings is None else settings:
        keys.append(f"{s.name}/{START_ARM}")
        keys += [f"{s.name}/{arm}/seed{seed}" for seed in grid.seeds for arm in grid.arms]
    return keys


def outcome_matrix(runs: Sequence[Mapping[str, Any]], split: str) -> np.ndarray:
    """``(seeds, tasks)`` successes (reward >= 1) of ``runs`` (one arm of one setting, seeds in order) on
    ``split`` (``heldout``: both splits, ``test`` first)."""
    rows = []
    for r in runs:
        tasks = _split_tasks(r, split)
        rows.append([float(_solved(r, t)) for t in tasks])
    return np.asarray(rows, dtype=np.float64)


def _solved(result: Mapping[str, Any], task: Any) -> bool:
    """Whether the run solved ``task`` (reward >= 1): success, everywhere in the report."""
    return bool(result["rewards"][str(task)] >= 1.0)


def _split_tasks(result: Mapping[str, Any], split: str) -> list[Any]:
    if split == "heldout":
        return [t for s in HELDOUT_SPLITS for t in result["tasks"][s]]
    return list(result["tasks"][split])


def _by_seed(runs: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    return {int(r["seed"]): r for r in runs}


TRIO = ("both", "prompts", "weights")
HEADLINE_MIN_SEEDS = 2
"""A setting joins the co-evolution headline once its three trained arms share this many seeds (the issue's
minimum), compared on exactly those seeds; a grid extended by more seeds keeps its finished settings
counted."""


def headline_seeds(seeded: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> list[int]:
    """The seeds every arm of :data:`TRIO` has finished (``seeded``: each arm's runs by seed), when there are
    at least :data:`HEADLINE_MIN_SEEDS` of them; else ``[]`` (the setting is left out of the co-evolution
    headline)."""
    common = sorted(set.intersection(*(set(seeded.get(arm, {})) for arm in TRIO)))
    return common if len(common) >= HEADLINE_MIN_SEEDS else []


def build_report(grid: GridConfig, results: Mapping[str, Mapping[str, Any]], *, command: str,
                 dirs: Sequence[Path]) -> dict[str, Any]:
    """The report as a JSON-safe dict (see the module docstring)."""
    settings: dict[str, Any] = {}
    per_tier: dict[int, dict[str, list[np.ndarray]]] = {}
    weights_gain: list[np.ndarray] = []
    wins: list[dict[str, Any]] = []
    trio_totals: list[np.ndarray] = []  # per counted setting: (seeds, 3) held-out successes, TRIO order
    every = report_settings(grid, results)
    for s in every:
        mine = {k: r for k, r in results.items() if r["setting"] == s.name}
        start = mine.get(f"{s.name}/{START_ARM}")
        start_heldout = outcome_matrix([start], "heldout") if start else None
        arms: dict[str, Any] = {}
        trained = {arm: sorted((r for r in mine.values() if r["arm"] == arm), key=lambda r: r["seed"])
                   for arm in grid.arms}
        for arm, runs in [(START_ARM, [start] if start else []), *trained.items()]:
            if not runs:
                continue
            entry: dict[str, Any] = {"seeds": [r["seed"] for r in runs], "splits": {},
                                     "dtypes": sorted({str(r.get("dtype", "not recorded")) for r in runs})}
            for split in SPLITS:
                m = outcome_matrix(runs, split)
                if m.shape[1] == 0:
                    continue
                row: dict[str, Any] = {"mean": _est(bootstrap_mean(m, n_boot=_N_BOOT))}
                if start is not None and arm != START_ARM:
                    row["vs_start"] = _est(paired_estimate(m, outcome_matrix([start], split), n_boot=_N_BOOT))
                entry["splits"][split] = row
            entry["budget_planned"] = runs[0].get("budget_planned")
            actual = [r["budget_actual"] for r in runs if r.get("budget_actual")]
            if actual:
                entry["budget_actual"] = {
                    "episodes": [a["episodes"] for a in actual], "steps": [a.get("steps") for a in actual],
                    "credit_steps": [int(a.get("credit_steps", 0)) for a in actual]}
            entry["curve_mean"] = _mean_curve([r.get("curve") or [] for r in runs])
            entry["updates"] = [r.get("updates") for r in runs]
            entry["seconds_train"] = [float(r.get("seconds_train") or 0.0) for r in runs]
            arms[arm] = entry
            heldout = outcome_matrix(runs, "heldout")
            if start_heldout is not None and arm != START_ARM and heldout.shape[1]:
                diff = heldout - start_heldout
                per_tier.setdefault(s.tier, {}).setdefault(arm, []).append(diff)
                if arm == "weights":
                    weights_gain.append(diff)
        seeded = {arm: _by_seed(runs) for arm, runs in trained.items()}
        comparisons: dict[str, Any] = {}
        for a, b in COMPARISONS:
            sa, sb = seeded.get(a, {}), seeded.get(b, {})
            common = sorted(set(sa) & set(sb))
            if not common:
                continue
            comparisons[f"{a}_vs_{b}"] = {"seeds": common, "splits": {
                split: _est(paired_estimate(outcome_matrix([sa[k] for k in common], split),
                                            outcome_matrix([sb[k] for k in common], split), n_boot=_N_BOOT))
                for split in SPLITS if outcome_matrix([sa[common[0]]], split).shape[1]}}
        matched = headline_seeds(seeded)
        if matched:
            solved = {arm: outcome_matrix([seeded[arm][k] for k in matched], "heldout") for arm in TRIO}
            means = {arm: float(m.mean()) for arm, m in solved.items()}
            trio_totals.append(np.stack([solved[arm].sum(axis=1) for arm in TRIO], axis=1))
            wins.append({"setting": s.name, "seeds": matched, "means": means,
                         "beats": means["both"] > max(means["prompts"], means["weights"]),
                         "at_least": means["both"] >= max(means["prompts"], means["weights"]),
                         # no arm and no start solves a held-out task: a tie that is not evidence
                         "zero_tie": max(means.values()) == 0.0
                         and not (start_heldout is not None and start_heldout.any())})
        settings[s.name] = {"model": s.model, "family": s.family, "tier": s.tier, "arms": arms,
                            "comparisons": comparisons,
                            "start_rewards": start["rewards"] if start else None,
                            "per_task": per_task_outcomes(start, trained) if start else None}
    tiers: dict[str, dict[str, Any]] = {}
    for tier, by_arm in sorted(per_tier.items()):
        tiers[str(tier)] = {}
        for arm, diffs in by_arm.items():
            pooled_tier = _pool(diffs)
            if pooled_tier is not None:
                tiers[str(tier)][arm] = _est(bootstrap_mean(pooled_tier, n_boot=_N_BOOT))
    pooled = _pool(weights_gain)
    keys = expected_keys(grid, every)
    k, k_at_least = sum(w["beats"] for w in wins), sum(w["at_least"] for w in wins)
    return {
        "format": REPORT_FORMAT, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": command,
        "machine": machine_info(), "grid": str(grid.path), "base": str(grid.base),
        "dirs": [str(d) for d in dirs],
        "seeds": list(grid.seeds), "arms": list(grid.arm_names), "settings": settings,
        "headlines": {
            "coevolution": {"k": k, "k_at_least": k_at_least,
                            "zero_ties": sum(w["zero_tie"] for w in wins), "m": len(wins), "settings": wins,
                            "chance": headline_chance(trio_totals, beats=k, at_least=k_at_least).to_dict()
                            if wins else None},
            "weights_vs_start": _est(bootstrap_mean(pooled, n_boot=_N_BOOT)) if pooled is not None else None},
        "tiers": tiers,
        "runs": {k: dict(r) for k, r in sorted(results.items())},
        "pending": [k for k in keys if k not in results],
        "expected_runs": len(keys),
        "time": grid_time(results).to_dict(),
    }


def per_task_outcomes(start: Mapping[str, Any],
                      trained: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Where a setting's gains are: per held-out task of ``start`` (``test`` first), whether the start solves
    it and how many of each arm's seeds solve it (``[solved, seeds]``); per arm, the (seed, task) cells it
    gained (solved where the start fails) and lost (the reverse) of all its cells."""
    tasks = [(split, t) for split in HELDOUT_SPLITS for t in start["tasks"][split]]
    rows = [{"task": t, "split": split, "start": _solved(start, t),
             "arms": {arm: [sum(_solved(r, t) for r in runs), len(runs)] for arm, runs in trained.items()
                      if runs}} for split, t in tasks]
    cells = {}
    for arm, runs in trained.items():
        if runs:
            outcomes = [(_solved(start, t), _solved(r, t)) for r in runs for _, t in tasks]
            cells[arm] = {"gained": sum(not a and b for a, b in outcomes),
                          "lost": sum(a and not b for a, b in outcomes), "cells": len(outcomes)}
    return {"tasks": rows, "cells": cells}




def _pool(diffs: Sequence[np.ndarray]) -> np.ndarray | None:
    """Paired differences of several settings side by side (task columns of each), on the seed rows they
    share (a one-row block, such as one seed, is cut to the fewest rows)."""
    if not diffs:
        return None
    rows = min(d.shape[0] for d in diffs)
    return np.hstack([d[:rows] for d in diffs])


def _est(e: Estimate) -> dict[str, float | int]:
    return e.to_dict()


def _mean_curve(curves: Sequence[Sequence[float]]) -> list[float]:
    length = max((len(c) for c in curves), default=0)
    out = []
    for g in range(length):
        values = [c[g] for c in curves if len(c) > g]
        out.append(float(sum(values) / len(values)))
    return out


def machine_info() -> dict[str, Any]:
    """Platform, CPU model, cores and load average of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"hostname": platform.node(), "platform": platform.platform(), "python": platform.python_version(),
            "cpu": cpu, "cpu_count": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}


# --------------------------------------------------------------------------------------------- rendering


def format_points(e: Mapping[str, Any] | None) -> str:
    """A difference estimate (:meth:`Estimate.to_dict`) as ``+x.x [+lo, +hi]`` points ("-" when missing)."""
    if not e:
        return "-"
    return f"{100 * e['mean']:+.1f} [{100 * e['low']:+.1f}, {100 * e['high']:+.1f}]"


def format_percent(e: Mapping[str, Any] | None) -> str:
    """A success estimate as ``x.x [lo, hi]`` percent ("-" when missing)."""
    if not e:
        return "-"
    return f"{100 * e['mean']:.1f} [{100 * e['low']:.1f}, {100 * e['high']:.1f}]"


def headline_lines(report: Mapping[str, Any]) -> list[str]:
    """The two headline lines of the grid."""
    co = report["headlines"]["coevolution"]
    w = report["headlines"]["weights_vs_start"]
    first = (f"co-evolution beats both matched single-space arms in {co['k']} of {co['m']} settings "
             f"(at least as good in {co['k_at_least']} of {co['m']}, {co['zero_ties']} of them "
             f"ties where no arm and not the start solves a held-out task; held-out test + test_unseen, "
             f"mean over seeds x tasks, on the seeds all three trained arms share, "
             f"at least {HEADLINE_MIN_SEEDS})")
    if w:
        second = (f"weights-only ES changes held-out success by {100 * w['mean']:+.1f} points (95 % CI "
                  f"{100 * w['low']:+.1f} to {100 * w['high']:+.1f}) over No-Skill ({w['n_seeds']} seed(s) x "
                  f"{w['n_tasks']} task(s), all settings pooled)")
    else:
        second = ("weights-only ES changes held-out success by n/a points over No-Skill (no weights run "
                  "scored yet)")
    return [first, second]


def chance_line(report: Mapping[str, Any]) -> str | None:
    """The co-evolution headline against its chance level (:mod:`cotrain.grid_chance`); ``None`` before a
    setting is counted (or in a report written before the chance level existed)."""
    chance = report["headlines"]["coevolution"].get("chance")
    if not chance:
        return None
    b, a = chance["beats"], chance["at_least"]
    return (f"by chance (each seed's three trained runs exchangeable, arm labels carrying nothing), "
            f"co-evolution would beat both in {b['expected']:.1f} of {b['settings']} settings on average "
            f"(P(at least {b['observed']}) = {b['p_value']:.2f}) and be at least as good in "
            f"{a['expected']:.1f} (P(at least {a['observed']}) = {a['p_value']:.2f})")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows)]


def render_markdown(report: Mapping[str, Any], pngs: Mapping[str, str]) -> str:
    """The Markdown report."""
    m = report["machine"]
    done = report["expected_runs"] - len(report["pending"])
    lines = ["# Learning grid", "",
             f"- Date: {report['date']}; command: `{report['command']}`",
             f"- Machine: {m['cpu']}, {m['cpu_count']} cores, load average {m['load_average']}",
             f"- Grid: `{report['grid']}` on base config `{report['base']}`; seeds {report['seeds']}; "
             f"{done} of {report['expected_runs']} runs have results",
             "- Success = reward 1 on a held-out task; mean over seeds x tasks with a 95 % bootstrap CI "
             "(seeds and tasks resampled), in percent; differences are paired on the same tasks with the "
             "same env seed, in points. `start` is the base model with the No-Skill genome (no training).",
             "",
             "## Headlines", "", *(f"- {line}" for line in headline_lines(report)),
             *([f"  - {chance}"] if (chance := chance_line(report)) else []), "",
             "## Held-out success per setting and arm", ""]
    rows = []
    for name, s in report["settings"].items():
        for arm, a in s["arms"].items():
            sp = a["splits"]
            rows.append([name, arm, str(len(a["seeds"])),
                         *(format_percent(sp.get(k, {}).get("mean")) for k in SPLITS),
                         *(format_points(sp.get(k, {}).get("vs_start"))
                           for k in ("heldout", "test", "test_unseen")),
                         ", ".join(a.get("dtypes") or ["not recorded"])])
    lines += _table(["setting", "arm", "seeds", "test", "test_unseen", "test + test_unseen",
                     "vs start (both)", "vs start (test)", "vs start (test_unseen)", "dtype"], rows)
    rows = [[name, comp.replace("_vs_", " - "), str(len(c["seeds"])),
             *(format_points(c["splits"].get(k)) for k in SPLITS)]
            for name, s in report["settings"].items() for comp, c in s["comparisons"].items()]
    lines += ["", "## Between arms (paired on common seeds)", "",
              *_table(["setting", "comparison", "seeds", "test", "test_unseen", "test + test_unseen"], rows)]
    arms = [a for a in report["arms"] if a != START_ARM]
    rows = [[tier, *(format_points(t.get(arm)) for arm in arms)] for tier, t in report["tiers"].items()]
    lines += ["", "## Success against horizon: held-out gain over start per tier (points, settings pooled)",
              "", *_table(["tier", *arms], rows)]
    if "tiers" in pngs:
        lines += ["", f"![gain per tier]({pngs['tiers']})"]
    lines += ["", "## Where the gains are: per held-out task, the seeds whose centre solves it (start: 1 = "
              "solved), and the (seed, task) cells each arm gained and lost against start"]
    for name, s in report["settings"].items():
        per_task = s.get("per_task")
        if not per_task:
            continue
        names = list(per_task["cells"])
        rows = [[str(r["task"]), r["split"], str(int(r["start"])),
                 *(f"{r['arms'][arm][0]}/{r['arms'][arm][1]}" if arm in r["arms"] else "-" for arm in names)]
                for r in per_task["tasks"]]
        cells = per_task["cells"]
        rows.append(["gained / lost cells", "", "",
                     *(f"+{cells[a]['gained']} / -{cells[a]['lost']} of {cells[a]['cells']}" for a in names)])
        lines += ["", f"{name}:", "", *_table(["task", "split", "start", *names], rows)]
    rows = []
    for name, s in report["settings"].items():
        for arm, a in s["arms"].items():
            if arm == START_ARM:
                continue
            p = a.get("budget_planned") or {}
            act = a.get("budget_actual") or {}
            steps = act.get("steps") or []
            counted = steps if any(v is not None for v in steps) else "not counted by the metrics"
            rows.append([name, arm, str(p.get("episodes", "-")), str(p.get("steps", "-")),
                         str(act.get("episodes", "-")), str(counted), str(act.get("credit_steps", "-")),
                         " ".join(f"{v:.0f}" for v in a["seconds_train"])])
    lines += ["", "## Budgets (training only; the held-out scoring is the same for every arm)", "",
              *_table(["setting", "arm", "planned episodes", "planned steps (at most)",
                       "actual episodes per seed", "actual steps per seed",
                       "teacher-forced credit steps per seed", "train s per seed"], rows)]
    rows = []
    for name, s in report["settings"].items():
        for arm, a in s["arms"].items():
            if arm == START_ARM:
                continue
            ups = [u for u in a.get("updates") or [] if u]
            curve = a.get("curve_mean") or []
            tiebreak = " ".join("?" if u.get("tiebreak_only") is None else str(u["tiebreak_only"])
                                for u in ups)
            rows.append([name, arm, " ".join(f"{u['empty']}/{u['generations']}" for u in ups) or "-",
                         "; ".join(sorted({r for u in ups for r in u.get("empty_reasons", {})})) or "-",
                         tiebreak or "-", f"{sum(curve) / len(curve):.3f}" if curve else "-"])
    lines += ["", "## Why a centre moves or not: empty weight updates per seed (all rewards tied, ...), the "
              "updates made by the confidence tie-break alone (every reward tied; ? where the run's metrics "
              "predate the record) and the population's training success", "",
              *_table(["setting", "arm", "empty updates / generations", "reasons", "tie-break-only updates",
                       "population training success, mean over generations"], rows)]
    if report.get("time"):
        lines += ["", "## Time (the finished runs; runs merged from other directories keep their machine's "
                  "times)", "", *time_lines(report["time"])]
    lines += ["", "## Learning curves (population training success per generation, mean over seeds)", ""]
    lines += [f"- {name}: ![{name}]({pngs[name]})" for name in report["settings"] if name in pngs]
    lines += ["", "## Pending runs", ""]
    lines += [f"- {k}" for k in report["pending"]] or ["- none"]
    return "\n".join(lines) + "\n"


def plot_setting_curves(setting: Mapping[str, Any], name: str, path: Path) -> Path | None:
    """One PNG of the setting's arms (training success per generation, mean over seeds); ``None`` when no
    arm has a curve."""
    curves = {arm: a["curve_mean"] for arm, a in setting["arms"].items() if a.get("curve_mean")}
    if not curves:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.0), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for arm, curve in curves.items():
        ax.plot(range(1, len(curve) + 1), curve, marker="o", ms=3, label=arm)
    start = setting["arms"].get(START_ARM, {}).get("splits", {}).get("heldout", {}).get("mean")
    if start:
        ax.axhline(start["mean"], color="grey", ls=":", label="start (held-out)")
    ax.set(xlabel="generation", ylabel="training success", title=name, ylim=(-0.02, 1.02))
    ax.legend(loc="best", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def plot_tiers(report: Mapping[str, Any], path: Path) -> Path | None:
    """Held-out gain over start per tier and arm, with 95 % CIs; ``None`` without any gain measured."""
    tiers = report["tiers"]
    arms = sorted({arm for t in tiers.values() for arm in t})
    if not arms:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 4.0), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for i, arm in enumerate(arms):
        xs, ys, lo, hi = [], [], [], []
        for tier, t in tiers.items():
            if arm in t:
                e = t[arm]
                xs.append(int(tier) + (i - (len(arms) - 1) / 2) * 0.08)
                ys.append(100 * e["mean"])
                lo.append(100 * (e["mean"] - e["low"]))
                hi.append(100 * (e["high"] - e["mean"]))
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=arm)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xlabel="tier (reference length: 1-2, 3-4, 5+ steps)", ylabel="held-out gain over start (points)",
           xticks=[int(t) for t in tiers])
    ax.legend(loc="best", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def write_report(grid: GridConfig, dirs: Sequence[Path], *, results: str | Path | None = None,
                 command: str = "esopt grid", seeds: Sequence[int] | None = None) -> list[Path]:
    """Collect the results of ``dirs`` and write ``<results>.json``, ``<results>.md`` and the PNGs
    (``<results>-<setting>.png``, ``<results>-tiers.png``); returns the paths written. ``seeds``: report
    only the trained runs of these seeds (a pre-registered subset), as if the grid had only them."""
    prefix = Path(results) if results is not None else grid.results
    found = collect_results(dirs)
    if seeds is not None:
        grid = replace(grid, seeds=tuple(seeds))
        found = {k: r for k, r in found.items() if r["seed"] is None or int(r["seed"]) in grid.seeds}
    report = build_report(grid, found, command=command, dirs=dirs)
    written: list[Path] = []
    pngs: dict[str, str] = {}
    for name, s in report["settings"].items():
        png = plot_setting_curves(s, name, prefix.with_name(f"{prefix.name}-{name}.png"))
        if png is not None:
            pngs[name] = png.name
            written.append(png)
    png = plot_tiers(report, prefix.with_name(f"{prefix.name}-tiers.png"))
    if png is not None:
        pngs["tiers"] = png.name
        written.append(png)
    report["plots"] = pngs
    prefix.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(prefix.with_suffix(".json"), report)
    atomic_write_text(prefix.with_suffix(".md"), render_markdown(report, pngs))
    return [prefix.with_suffix(".json"), prefix.with_suffix(".md"), *written]
