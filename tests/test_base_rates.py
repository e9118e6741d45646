"""benchmarks.base_rates: the tables, the cache key and the resume (a real env, the tiny random Qwen)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import base_rates
from benchmarks.base_rates import EpisodeCache, Settings, episode_key, length_bucket, tables
from benchmarks.common import BenchmarkError


def _episode(model: str, split: str, task: int, success: bool, ref: int, steps: int = 2) -> dict[str, object]:
    return {"model": model, "genome": "no_skill", "split": split, "task_id": task, "site": "shopping",
            "template": 7, "reference_steps": ref, "success": success, "steps": steps, "seconds": 3.0}


def test_tables_count_success_per_split_template_site_and_length() -> None:
    rows = [_episode("m", "tier1_test", 1, True, 1), _episode("m", "tier1_test", 2, False, 3, steps=4),
            _episode("m", "tier1_test_unseen", 3, True, 6), _episode("q", "tier1_test", 1, False, 1)]
    out = tables(rows)
    assert out["split"]["tier1_test"]["m/no_skill"] == {"tasks": 2, "success": 1, "rate": 0.5,
                                                        "mean_steps": 3.0, "mean_seconds": 3.0}
    assert out["split"]["tier1_test"]["q/no_skill"]["success"] == 0
    assert out["template"]["tier1 held-out: 7"]["m/no_skill"]["tasks"] == 3
    assert out["site"]["tier1 held-out: shopping"]["m/no_skill"]["success"] == 2
    assert {k: v["m/no_skill"]["success"] for k, v in out["reference_length"].items()} == {
        "tier1 held-out: 1-2": 1, "tier1 held-out: 3-4": 0, "tier1 held-out: 5+": 1}
    assert [length_bucket(n) for n in (1, 2, 3, 4, 5, 9)] == ["1-2", "1-2", "3-4", "3-4", "5+", "5+"]


def test_cache_key_separates_settings_and_bad_lines_are_refused(tmp_path: Path) -> None:
    a, b = Settings(code="x"), Settings(code="y")
    assert episode_key("m", "g", "test", 1, a) != episode_key("m", "g", "test", 1, b)
    bad = tmp_path / "episodes.jsonl"
    bad.write_text('{"key": "k"}\nnot json\n', encoding="utf-8")
    with pytest.raises(BenchmarkError, match="line 2"):
        EpisodeCache(bad)


def test_import_refuses_other_settings_and_dirty_commits(tmp_path: Path) -> None:
    cache = EpisodeCache(tmp_path / "c.jsonl")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"model": "embedded", "genome": "no_skill", "scoring": "mean",
                               "dtype": "bfloat16", "max_steps": 4, "commit": "HEAD", "episodes": []}),
                   encoding="utf-8")
    with pytest.raises(BenchmarkError, match="'max_steps': 4"):
        base_rates.import_json(old, cache, Settings(max_steps=12, code="z"), log=lambda _: None)
    old.write_text(json.dumps({"model": "embedded", "genome": "no_skill", "dtype": "bfloat16", "max_steps": 4,
                               "commit": "abc (es_agent/ modified)", "episodes": []}), encoding="utf-8")
    with pytest.raises(BenchmarkError, match="modified"):
        base_rates.import_json(old, cache, Settings(max_steps=4), log=lambda _: None)


def test_tiny_model_through_the_real_env_writes_tables_and_resumes(
        tmp_path: Path, chromium_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--models", "tiny:0", "--genomes", "no_skill", "--splits", "test", "--limit", "2",
            "--max-steps", "1", "--dtype", "float32", "--out-dir", str(tmp_path / "out"),
            "--cache", str(tmp_path / "episodes.jsonl"), "--agreement-cache", str(tmp_path / "agreement")]
    assert base_rates.main(argv) == 0
    assert "2 run, 0 cached" in capsys.readouterr().out
    lines = (tmp_path / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    result = json.loads((tmp_path / "out" / "base_rates.json").read_text(encoding="utf-8"))
    assert [e["steps"] for e in result["episodes"]] == [1, 1]
    cell = result["tables"]["split"]["test"]["tiny:0/no_skill"]
    assert cell["tasks"] == 2 and cell["mean_steps"] == 1.0
    md = (tmp_path / "out" / "base_rates.md").read_text(encoding="utf-8")
    assert "| tiny:0/no_skill | 2/2 |" in md and "## Per template" in md and "## Per site" in md
    assert base_rates.main(argv) == 0  # resumed: nothing re-run, the same two episodes reported
    assert "0 run, 2 cached" in capsys.readouterr().out
    assert (tmp_path / "episodes.jsonl").read_text(encoding="utf-8").splitlines() == lines
