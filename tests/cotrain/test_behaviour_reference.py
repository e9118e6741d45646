"""Behaviour unchanged (issue #11): the shipped smoke config's update log (per generation: rows, rewards,
``(seed, coeff)`` update, task batch, env seed, sigma, prompt probabilities, pool changes) and its final
centre checksum are bit-identical to ``snapshots/smoke_reference.json``, recorded with
``scripts/compare_run_logs.py --record`` at bebb63d (before the refactor) and re-recorded at e3ecc2c for two
intended changes of issue #13: the prompt prior (``es.baseline_prior`` 0.5 changes the sampled prompt ids) and
the wider candidate set. Re-record only for an intended behaviour change, and say so in the commit."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import SmokeRun

REPO = Path(__file__).resolve().parents[2]
REFERENCE = Path(__file__).resolve().parent / "snapshots" / "smoke_reference.json"


def _compare_run_logs() -> ModuleType:
    path = REPO / "scripts" / "compare_run_logs.py"
    spec = importlib.util.spec_from_file_location("compare_run_logs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compare = _compare_run_logs()


@pytest.mark.browser
@pytest.mark.slow
def test_shipped_smoke_run_matches_the_recorded_reference(shipped_smoke_run: SmokeRun) -> None:
    assert shipped_smoke_run.returncode == 0, shipped_smoke_run.stderr[-3000:]
    difference = compare.first_difference(compare.load(REFERENCE), compare.extract(shipped_smoke_run.run_dir))
    assert difference is None, (
        f"the smoke run's behaviour changed: {difference}\n(reference {REFERENCE}, run "
        f"{shipped_smoke_run.run_dir}; compare in full: python scripts/compare_run_logs.py {REFERENCE} "
        f"{shipped_smoke_run.run_dir})")


def test_the_comparison_names_the_first_changed_bit() -> None:
    reference = compare.load(REFERENCE)
    assert compare.first_difference(reference, copy.deepcopy(reference)) is None
    cases = {
        "generation 1: rows[1][1]": lambda r: r["generations"][0]["rows"][1].__setitem__(1, -0.0500001),
        "generation 2: rewards[3][0]": lambda r: r["generations"][1]["rewards"][3].__setitem__(0, 0),
        "generation 1: update.seeds": lambda r: r["generations"][0]["update"]["seeds"].append(7),
        "final checksum": lambda r: r.__setitem__("checksum", "0" * 40),
        "generations: reference ran 2, run 1": lambda r: (r["generations"].pop(), r.update(generation=1)),
    }
    for expected, change in cases.items():
        run = copy.deepcopy(reference)
        change(run)
        difference = compare.first_difference(reference, run)
        assert difference is not None and difference.startswith(expected), (expected, difference)
    late = copy.deepcopy(reference)
    late["generations"][1]["rewards"][0][0] = 1.0
    late["checksum"] = "0" * 40
    assert compare.first_difference(compare.first(reference, 1), compare.first(late, 1)) is None
    assert compare.first_difference(compare.first(reference, 2), compare.first(late, 2)) is not None


def test_a_torn_or_short_log_is_an_error_naming_the_file(tmp_path: Path) -> None:
    run = {"generation": 2, "checksum": {"generation": 2, "value": "x"}}
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "update_log.jsonl").write_text('{"iter": 1}\n{"iter": 2, "rows"')
    with pytest.raises(compare.RunLogError, match=r"update_log.jsonl:1: missing"):
        compare.extract(tmp_path)
    assert compare.main([str(REFERENCE), str(tmp_path)]) == 2
