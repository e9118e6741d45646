"""Run the benchmark suite and write ``latest.md`` (tables) and ``latest.json`` (figures, machine, date).

``python -m benchmarks.run [--quick] [--only NAME ...] [--out DIR]``. Each benchmark runs in its own Python
process (a crash or an out-of-memory kill loses that benchmark only, and no state leaks between them: torch
threads, Ray, loaded models). ``--quick`` is the CI smoke run: fewer repetitions, smaller models; it checks
that everything runs and writes valid output, not the figures. The load average before and after each
benchmark goes into both files: this machine is shared, and absolute timings move with its load.

JSON: ``{"date", "mode", "command", "seconds", "machine", "benchmarks": {name: {"status", "seconds",
"load_average_before", "load_average_after", "method", "error"?}}, "figures": [...]}``; every figure has
``benchmark``, ``name``, ``value``, ``unit``, ``goal``, ``met`` and ``spread`` (``{"min", "max", "n"}`` or,
for the older benchmarks, ``{"width", "kind"}``), plus ``note``/``skipped``/``extra`` where given.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, load_average, machine_info

BENCHMARKS: dict[str, str] = {
    "noise": "benchmarks.bench_noise",
    "env": "benchmarks.bench_env",
    "memory": "benchmarks.bench_memory",
    "overhead": "benchmarks.bench_overhead",
    "comm": "benchmarks.bench_comm",
    "throughput": "benchmarks.bench_throughput",
    "prompt": "benchmarks.bench_prompt",
    "generation": "benchmarks.bench_generation",
    "agreement": "benchmarks.bench_agreement",  # issue #13 item 4: step agreement (engineer F)
    "gpu": "benchmarks.bench_gpu",
}
"""Benchmark name -> module with ``main(quick) -> list[dict]``, in running order."""
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results"
TIMEOUT_S = {False: 2400, True: 900}
"""Per-benchmark time limit, full and quick runs."""
_SPREAD_KIND = {"noise": "max - min over repetitions (wall seconds)",
                "env": "p90 - p10 of per-run latencies (ms)"}


def method_of(module: str) -> str:
    """A benchmark module's docstring (its statement of what is measured and how), read without importing
    the module."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    import ast

    return ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""


def normalise(bench: str, figure: dict[str, Any]) -> dict[str, Any]:
    """A figure in the suite's schema (the older benchmarks report ``spread`` as one number)."""
    out = {"benchmark": bench, "name": str(figure["name"]), "value": figure.get("value"),
           "unit": str(figure.get("unit", "")), "goal": figure.get("goal"), "met": figure.get("met"),
           "spread": figure.get("spread")}
    if isinstance(out["goal"], str) and out["goal"].startswith("reference"):  # older benchmarks' no-goal mark
        if out["goal"] != "reference":
            figure = {**figure, "note": figure.get("note") or out["goal"]}
        out["goal"] = None
    if isinstance(out["spread"], int | float):
        out["spread"] = {"width": out["spread"], "kind": _SPREAD_KIND.get(bench, "as reported")}
    for key, value in figure.items():
        if key not in out:
            out[key] = value
    return out


def run_one(name: str, quick: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run benchmark ``name`` in a child process; returns its record and its normalised figures."""
    module = BENCHMARKS[name]
    record: dict[str, Any] = {"module": module, "method": method_of(module),
                              "load_average_before": load_average()}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="esopt-bench-run-") as folder:
        out = Path(folder) / "figures.json"
        cmd = [sys.executable, "-m", "benchmarks.run", "--child", name, "--child-out", str(out)]
        if quick:
            cmd.append("--quick")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        try:
            proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT_S[quick], check=False)
            ok = proc.returncode == 0 and out.is_file()
            error = None if ok else (f"exit status {proc.returncode}: "
                                     + (proc.stdout[-800:] + "\n" + proc.stderr[-2500:]).strip())
        except subprocess.TimeoutExpired:
            ok, error = False, f"timed out after {TIMEOUT_S[quick]} s"
        figures = [normalise(name, f) for f in json.loads(out.read_text())] if ok else []
    record.update(status="ok" if ok else "failed", seconds=round(time.perf_counter() - started, 1),
                  load_average_after=load_average())
    if error:
        record["error"] = error
        figures = [{"benchmark": name, "name": f"{name}: benchmark failed", "value": None, "unit": "",
                    "goal": None, "met": None, "spread": None, "skipped": error.splitlines()[-1][:300]}]
    return record, figures


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _spread_cell(spread: Any) -> str:
    if not spread:
        return ""
    if "width" in spread:
        return f"±{_cell(spread['width'])}"
    text = f"{_cell(spread.get('min'))} - {_cell(spread.get('max'))} (n={spread.get('n')})"
    return text


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown report: header, goals summary, one table per benchmark with its method and notes."""
    machine = report["machine"]
    lines = [
        f"# Benchmark results ({report['mode']} run)", "",
        f"- Date: {report['date']}; command: `{report['command']}`; {report['seconds']:.0f} s in all",
        f"- Machine: {machine.get('cpu')}, {machine.get('cpu_count')} cores, "
        f"{machine.get('mem_total_gb')} GiB; accelerator: {machine.get('cuda') or 'none'}; "
        f"Python {machine.get('python')}, torch {machine.get('torch')}, transformers "
        f"{machine.get('transformers')}, ray {machine.get('ray')}",
        f"- Load average (1/5/15 min) at the start: {machine.get('load_average')}, at the end: "
        f"{report['load_average_end']} (the machine is shared: absolute timings move with its load; goals "
        "are ratios measured side by side wherever possible)", "",
        "## Goals", "",
        "| benchmark | figure | value | goal | met |", "| --- | --- | --- | --- | --- |",
    ]
    for f in report["figures"]:
        if f.get("goal") is not None:
            value = "skipped" if f.get("skipped") else f"{_cell(f['value'])} {f['unit']}".strip()
            lines.append(f"| {f['benchmark']} | {_cell(f['name'])} | {value} | {_cell(f['goal'])} | "
                         f"{_cell(f['met'])} |")
    for name, record in report["benchmarks"].items():
        lines += ["", f"## {name} ({record['status']}, {record['seconds']:.0f} s, load "
                  f"{record['load_average_before'][0]} -> {record['load_average_after'][0]}"
                  + (f", run {record['date']}" if "date" in record else "") + ")", ""]
        if record.get("method"):
            title, _, rest = record["method"].partition("\n\n")
            lines += [" ".join(title.split()), "", f"<details><summary>Method (`{record['module']}` "
                      "docstring)</summary>", "", rest.strip(), "", "</details>", ""]
        if record.get("error"):
            lines += ["```", record["error"][-1500:], "```", ""]
        lines += ["| figure | value | unit | goal | met | spread |", "| --- | --- | --- | --- | --- | --- |"]
        notes = []
        for f in report["figures"]:
            if f["benchmark"] != name:
                continue
            if f.get("skipped"):
                lines.append(f"| {_cell(f['name'])} | skipped | {_cell(f['unit'])} | {_cell(f['goal'])} "
                             "| | |")
                notes.append(f"- {f['name']}: skipped: {f['skipped']}")
                continue
            lines.append(f"| {_cell(f['name'])} | {_cell(f['value'])} | {_cell(f['unit'])} | "
                         f"{_cell(f['goal'])} | {_cell(f['met'])} | {_spread_cell(f.get('spread'))} |")
            if f.get("note"):
                notes.append(f"- {f['name']}: {f['note']}")
        if notes:
            lines += ["", *notes]
    return "\n".join(lines) + "\n"


def run_suite(names: Sequence[str], quick: bool, out_dir: Path, command: str,
              merge: bool = False) -> dict[str, Any]:
    """Run the benchmarks ``names`` and write ``latest.json`` and ``latest.md`` into ``out_dir``; with
    ``merge``, replace only those sections of the existing ``latest.json`` (each section keeps its date)."""
    started = time.perf_counter()
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    report: dict[str, Any] = {
        "date": now, "mode": "quick" if quick else "full", "command": command, "machine": machine_info(),
        "benchmarks": {}, "figures": [],
    }
    if merge:
        previous = json.loads((out_dir / "latest.json").read_text(encoding="utf-8"))
        if previous["mode"] != report["mode"]:
            raise SystemExit(f"--merge: {out_dir / 'latest.json'} is a {previous['mode']} run, "
                             f"not {report['mode']}")
        for record in previous["benchmarks"].values():
            record.setdefault("date", previous["date"])
        report.update(date=previous["date"], machine=previous["machine"], benchmarks=previous["benchmarks"],
                      figures=[f for f in previous["figures"] if f["benchmark"] not in names],
                      command=f"{previous['command']}; then {command} --merge at {now}")
    for name in names:
        print(f"== {name} ({BENCHMARKS[name]}), load average {load_average()}", flush=True)
        record, figures = run_one(name, quick)
        record["date"] = now
        report["benchmarks"][name] = record
        report["figures"] += figures
        print(f"   {record['status']} in {record['seconds']:.0f} s, {len(figures)} figures"
              + (f"\n   {record['error'][-600:]}" if record.get("error") else ""), flush=True)
    order = {name: i for i, name in enumerate(BENCHMARKS)}
    report["figures"].sort(key=lambda f: order.get(f["benchmark"], len(order)))
    report["seconds"] = round(time.perf_counter() - started, 1) + (
        sum(r["seconds"] for n, r in report["benchmarks"].items() if n not in names) if merge else 0)
    report["load_average_end"] = load_average()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "latest.json").write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    (out_dir / "latest.md").write_text(render_markdown(report), encoding="utf-8")
    print(f"wrote {out_dir / 'latest.md'} and {out_dir / 'latest.json'} ({report['seconds']:.0f} s)")
    return report


def _child(name: str, quick: bool, out: str) -> int:
    figures = importlib.import_module(BENCHMARKS[name]).main(quick)
    Path(out).write_text(json.dumps(figures, default=str), encoding="utf-8")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: fewer repetitions, small models")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), metavar="NAME",
                        help=f"run only these benchmarks (of {', '.join(BENCHMARKS)})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of latest.md and latest.json")
    parser.add_argument("--merge", action="store_true",
                        help="with --only: replace those sections of the existing latest.json, keep the rest")
    parser.add_argument("--child", choices=list(BENCHMARKS), help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.quick, args.child_out)
    names = [n for n in BENCHMARKS if args.only is None or n in args.only]
    command = "python -m benchmarks.run" + (" --quick" if args.quick else "") + (
        f" --only {' '.join(args.only)}" if args.only else "")
    if args.merge and not args.only:
        parser.error("--merge needs --only")
    report = run_suite(names, args.quick, args.out, command, merge=args.merge)
    return 0 if all(r["status"] == "ok" for r in report["benchmarks"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
