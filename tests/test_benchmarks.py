"""The benchmark suite's quick run completes and writes valid output for every benchmark (no timing
assertions: CI machines and shared development VMs are too noisy for them; the figures themselves live in
benchmarks/results)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIGURE_KEYS = {"benchmark", "name", "value", "unit", "goal", "met", "spread"}


def _check_figure(figure: dict) -> None:
    assert set(figure) >= FIGURE_KEYS, f"figure lacks {FIGURE_KEYS - set(figure)}: {figure}"
    assert isinstance(figure["name"], str) and figure["name"]
    assert isinstance(figure["unit"], str)
    assert figure["goal"] is None or isinstance(figure["goal"], str)
    assert figure["met"] in (None, True, False)
    if figure.get("skipped"):
        assert figure["value"] is None and figure["met"] is None
        return
    assert isinstance(figure["value"], int | float) and not isinstance(figure["value"], bool), figure
    if figure["goal"] is not None:
        assert figure["met"] is not None, f"a figure with a goal says whether it is met: {figure}"
    spread = figure["spread"]
    assert spread is None or isinstance(spread, dict), figure
    if spread and "n" in spread:
        assert spread["n"] >= 1
        if "min" in spread:
            assert spread["min"] <= spread["max"]


RUNS: dict[str, tuple[str, ...]] = {
    "ray": ("comm", "throughput", "generation"),
    "noise": ("noise",), "env": ("env",), "memory": ("memory",), "overhead": ("overhead",),
    "prompt": ("prompt",), "agreement": ("agreement",), "gpu": ("gpu",),
}
"""The quick run in parts (``benchmarks.run --quick --only ...``), one test each: pytest-xdist hands them to
both workers (tests/conftest.py groups this file by part), and each stays inside the per-test timeout. The
benchmarks that start Ray run in one part, one after the other."""


def _benchmarks(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.syspath_prepend(str(REPO_ROOT))  # benchmarks/ is not an installed package
    from benchmarks.run import BENCHMARKS

    return BENCHMARKS


def test_the_parts_cover_every_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    BENCHMARKS = _benchmarks(monkeypatch)
    names = [name for part in RUNS.values() for name in part]
    assert sorted(names) == sorted(BENCHMARKS) and len(set(names)) == len(names)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the Ray part: three benchmarks in quick mode (the subprocess has the same limit)
@pytest.mark.parametrize("part", RUNS)
def test_quick_run_writes_valid_json_and_markdown(
    part: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    BENCHMARKS = _benchmarks(monkeypatch)
    names = RUNS[part]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", "--only", *names,
                           "--out", str(tmp_path)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    report = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    assert report["mode"] == "quick"
    assert report["command"] == f"python -m benchmarks.run --quick --only {' '.join(names)}"
    assert report["date"] and report["machine"]["cpu_count"] >= 1
    assert len(report["machine"]["load_average"]) == 3
    assert list(report["benchmarks"]) == [name for name in BENCHMARKS if name in names]
    for name, record in report["benchmarks"].items():
        assert record["status"] == "ok", (name, record.get("error"))
        assert record["method"], f"{name} states its method in its docstring"
    figures = report["figures"]
    assert {f["benchmark"] for f in figures} == set(names)
    for figure in figures:
        _check_figure(figure)
    if "gpu" in names:
        import torch

        gpu = [f for f in figures if f["benchmark"] == "gpu"]
        if not torch.cuda.is_available():
            assert gpu and all(f.get("skipped") for f in gpu)

    markdown = (tmp_path / "latest.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Benchmark results (quick run)")
    assert "## Goals" in markdown and "| --- |" in markdown
    for name in names:
        assert f"## {name} (ok" in markdown
    table_rows = [line for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    widths = {line.count(" | ") for line in table_rows if not line.startswith("| figure")
              and not line.startswith("| benchmark")}
    assert widths, "the Markdown has table rows"


def test_gpu_budget_comes_from_the_env_and_refuses_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    from benchmarks import bench_gpu

    monkeypatch.delenv(bench_gpu.BUDGET_ENV, raising=False)
    assert bench_gpu.budget_seconds() == bench_gpu.BUDGET_S
    monkeypatch.setenv(bench_gpu.BUDGET_ENV, "330")
    assert bench_gpu.budget_seconds() == 330.0
    for bad in ("abc", "0", "-5", "nan"):
        monkeypatch.setenv(bench_gpu.BUDGET_ENV, bad)
        with pytest.raises(ValueError, match=bench_gpu.BUDGET_ENV):
            bench_gpu.budget_seconds()


def test_the_committed_gpu_record_is_well_formed() -> None:
    """benchmarks/results/gpu_h200.json (measured on a lent H200): every figure has the suite's shape."""
    record = json.loads((REPO_ROOT / "benchmarks" / "results" / "gpu_h200.json").read_text(encoding="utf-8"))
    assert "H200" in record["machine"]["gpu"]
    for figure in record["figures"]:
        _check_figure({"benchmark": "gpu", **figure})
        assert figure["extra"]["device"] == "NVIDIA H200"
