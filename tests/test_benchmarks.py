"""The benchmark suite's quick run completes and writes valid output (no timing assertions: CI machines and
shared development VMs are too noisy for them; the figures themselves live in benchmarks/results)."""

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


@pytest.mark.slow
@pytest.mark.timeout(1800)  # every benchmark in quick mode (the subprocess has the same limit)
def test_quick_run_writes_valid_json_and_markdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", "--out", str(tmp_path)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    report = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    assert report["mode"] == "quick"
    assert report["date"] and report["machine"]["cpu_count"] >= 1
    assert len(report["machine"]["load_average"]) == 3
    monkeypatch.syspath_prepend(str(REPO_ROOT))  # benchmarks/ is not an installed package
    from benchmarks.run import BENCHMARKS

    assert set(report["benchmarks"]) == set(BENCHMARKS)
    for name, record in report["benchmarks"].items():
        assert record["status"] == "ok", (name, record.get("error"))
        assert record["method"], f"{name} states its method in its docstring"
    figures = report["figures"]
    assert {f["benchmark"] for f in figures} == set(BENCHMARKS)
    for figure in figures:
        _check_figure(figure)
    gpu = [f for f in figures if f["benchmark"] == "gpu"]
    import torch

    if not torch.cuda.is_available():
        assert gpu and all(f.get("skipped") for f in gpu)

    markdown = (tmp_path / "latest.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Benchmark results (quick run)")
    assert "## Goals" in markdown and "| --- |" in markdown
    for name in BENCHMARKS:
        assert f"## {name} (ok" in markdown
    table_rows = [line for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    widths = {line.count(" | ") for line in table_rows if not line.startswith("| figure")
              and not line.startswith("| benchmark")}
    assert widths, "the Markdown has table rows"
