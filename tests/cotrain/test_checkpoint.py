"""Run directories: layout and round trip, resume equivalence (snapshot + replay), atomic writes, clear
errors for corrupt or foreign directories and missing checkpoints, export (loads with transformers) and
evaluation."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from toy_web_env import toy_config_dict

from cotrain.checkpoint import RunDir, atomic_write_text, json_safe
from cotrain.config import config_from_dict, with_resolved
from cotrain.errors import CheckpointError, ConfigError, RunDirError
from cotrain.evaluate import evaluate_run
from cotrain.export import export_run
from cotrain.trainer import TrainResult, resume, train

# A run with prompt mutation (recombination + reflection by the tiny model itself) and snapshots every 2.
RUN = toy_config_dict(es={"generations": 4}, checkpoint={"snapshot_every": 2},
                      prompts={"mutation": True, "reflect_rate": 1.0, "recombine_rate": 1.0,
                               "max_pool_size": 5, "max_new_tokens": 24})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``full``: 4 generations straight; ``stopped``: a copy of a run stopped after 3 (as if killed);
    ``resumed``: that run resumed to 4."""
    root = tmp_path_factory.mktemp("runs")
    cfg = config_from_dict(RUN)
    full = train(cfg, root / "full")
    stop = train(cfg, root / "resumed", stop_after=3)
    shutil.copytree(root / "resumed", root / "stopped")
    resumed = resume(root / "resumed")
    return {"root": root, "full": full, "stop": stop, "resumed": resumed}


def test_run_directory_layout_and_round_trip(runs: dict[str, Any]) -> None:
    result: TrainResult = runs["full"]
    assert result.finished and result.generation == 4 and result.checksum
    run = RunDir.open(result.run_dir)
    names = {p.name for p in run.path.iterdir()}
    assert {"run.json", "config.json", "initial_prompt_pools.json", "update_log.jsonl", "metrics.jsonl",
            "prompt_pools.json", "distribution.json", "snapshots"} <= names
    assert sorted(p.name for p in (run.path / "snapshots").iterdir()) == ["gen_000002", "gen_000004"]
    snap = run.snapshot_dir(4)
    files = {p.name for p in snap.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "snapshot.json"} <= files
    # config.json keeps the config as written; run.config has the "auto" settings resolved at the start
    assert config_from_dict(json.loads((run.path / "config.json").read_text())) == config_from_dict(RUN)
    assert run.resolved is not None and run.config == with_resolved(config_from_dict(RUN), run.resolved)
    records = run.records()
    assert [r["iter"] for r in records] == [1, 2, 3, 4]
    for key in ("task_batch", "env_seed", "sigma", "rows", "rewards", "update", "prompt_probs",
                "pool_changes", "distribution"):
        assert key in records[0]
    assert any(r["pool_changes"] for r in records)
    assert [m["iter"] for m in run.metrics()] == [1, 2, 3, 4]
    state = run.load_state()
    assert state.generation == 4 and state.snapshot_generation == 4 and state.pending == []
    assert state.checksum == result.checksum
    assert state.distribution.to_dict() == {k: v for k, v in json.loads(
        (run.path / "distribution.json").read_text()).items() if k != "generation"}
    pools = json.loads((run.path / "prompt_pools.json").read_text())
    assert state.pools.to_dict() == {k: v for k, v in pools.items() if k != "generation"}


def test_no_pickle_anywhere_in_the_run_directory(runs: dict[str, Any]) -> None:
    for file in runs["full"].run_dir.rglob("*"):
        if file.is_file():
            assert file.suffix not in (".pkl", ".pickle", ".pt", ".bin"), file
            assert not file.read_bytes().startswith(b"\x80"), f"{file} looks like a pickle"


def test_resumed_run_ends_with_the_same_weights_and_prompt_state(runs: dict[str, Any]) -> None:
    full, stop, resumed = runs["full"], runs["stop"], runs["resumed"]
    assert not stop.finished and stop.generation == 3 and stop.checksum is None
    assert resumed.finished and resumed.checksum == full.checksum
    for name in ("prompt_pools.json", "distribution.json", "update_log.jsonl"):
        assert (resumed.run_dir / name).read_text() == (full.run_dir / name).read_text(), name
    # Timings, worker bookkeeping and EvoTorch's best/worst-so-far (per session) legitimately differ.
    session = ("workers", "bytes_exchanged", "best_eval", "worst_eval")

    def comparable(run_dir: Path) -> list[dict[str, Any]]:
        return [{k: v for k, v in m.items() if not k.startswith("seconds") and k not in session}
                for m in RunDir.open(run_dir).metrics()]

    assert comparable(full.run_dir) == comparable(resumed.run_dir)


def test_stopped_run_state_is_snapshot_plus_replay(runs: dict[str, Any]) -> None:
    run = RunDir.open(runs["root"] / "stopped")
    state = run.load_state()
    assert (state.generation, state.snapshot_generation) == (3, 2)
    assert [g for g, _ in state.pending] == [3]
    assert state.checksum is None


def test_export_replays_the_log_and_loads_with_transformers(runs: dict[str, Any], tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from es_agent.perturb import weights_checksum

    out = export_run(runs["root"] / "stopped", tmp_path / "export")
    manifest = json.loads((out / "esopt_export.json").read_text())
    assert manifest["generation"] == 3 and manifest["replayed_updates"] == 1
    # The uninterrupted run's workers reported the centre after generation 3 at the start of generation 4.
    full_metrics = RunDir.open(runs["full"].run_dir).metrics()
    assert manifest["checksum"] == full_metrics[3]["workers"][0]["checksum"]
    # in the dtype the run resolved "auto" to (bfloat16 on a CPU with avx512_bf16 or AMX): the checksum is
    # of the weights as the workers held them
    dtype = RunDir.open(runs["root"] / "stopped").config.agent.dtype
    model = AutoModelForCausalLM.from_pretrained(out, dtype=getattr(torch, dtype))
    assert weights_checksum(model) == manifest["checksum"]
    best = json.loads((out / "best_prompt.json").read_text())
    assert set(best["texts"]) == {"system", "skills", "action_format"} and best["system_prompt"]
    with pytest.raises(RunDirError, match="not empty"):
        export_run(runs["root"] / "stopped", out)


def test_evaluate_reports_centre_and_baseline_and_rejects_unknown_splits(runs: dict[str, Any]) -> None:
    report = evaluate_run(runs["full"].run_dir, split="test", n_tasks=2)
    assert report["tasks"] == [4, 5] and report["split"] == "test"
    for key in ("centre", "baseline"):
        assert 0.0 <= report[key]["success_rate"] <= 1.0 and set(report[key]["rewards"]) == {"4", "5"}
    assert report["baseline"]["name"] == "no_skill" and report["baseline"]["genome"]["skills"] == "no_skill"
    assert json.loads((runs["full"].run_dir / "eval_test.json").read_text()) == report
    with pytest.raises(ConfigError, match="nosuchsplit"):
        evaluate_run(runs["full"].run_dir, split="nosuchsplit")


def test_an_earlier_generation_is_rebuilt_as_the_run_held_it_then(runs: dict[str, Any]) -> None:
    """Generation 3 of the 4-generation run is the state of the run stopped after 3: snapshot 2 plus the
    logged update of generation 3, the distribution and pools logged with 3."""
    full, stopped = RunDir.open(runs["full"].run_dir), RunDir.open(runs["root"] / "stopped")
    then, there = full.load_state(3), stopped.load_state()
    assert (then.generation, then.snapshot_generation, then.checksum) == (3, 2, None)
    assert then.pending == there.pending and [g for g, _ in then.pending] == [3]
    assert then.distribution.to_dict() == there.distribution.to_dict()
    assert then.pools.to_dict() == there.pools.to_dict()
    at_snapshot = full.load_state(2)
    assert at_snapshot.pending == [] and at_snapshot.checksum == full.manifest["snapshots"][0]["checksum"]
    start = full.load_state(0)
    assert (start.snapshot, start.snapshot_generation, start.pending) == (None, 0, [])
    assert start.distribution.generation == 0 and start.pools.to_dict() == full.initial_pools().to_dict()
    assert full.load_state(4).checksum == runs["full"].checksum
    for bad in (5, -1, True, "3"):
        with pytest.raises(CheckpointError, match=r"completed 4 generation\(s\), so 0\.\.4 can be rebuilt"):
            full.load_state(bad)  # type: ignore[arg-type]


def test_evaluating_an_earlier_generation_scores_the_centre_it_had(runs: dict[str, Any]) -> None:
    then = evaluate_run(runs["full"].run_dir, split="test", n_tasks=2, baseline=False, generation=3)
    there = evaluate_run(runs["root"] / "stopped", split="test", n_tasks=2, baseline=False, write=False)
    assert then["centre"]["generation"] == there["centre"]["generation"] == 3
    assert then["centre"]["rewards"] == there["centre"]["rewards"]
    assert then["centre"]["genome"] == there["centre"]["genome"]
    assert json.loads((runs["full"].run_dir / "eval_test_gen3.json").read_text()) == then
    with pytest.raises(ConfigError, match="not both"):
        evaluate_run(runs["full"].run_dir, export_dir=runs["root"], generation=3)


def test_pruned_snapshots_are_rebuilt_from_the_update_log(runs: dict[str, Any], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Pruning keeps only the latest snapshot, and an earlier generation is still the centre the run had
    then: rebuilt from the base model plus the logged updates instead of from the pruned snapshot."""
    from cotrain.checkpoint import prune_run
    from cotrain.cli import main

    pruned = tmp_path / "pruned"
    shutil.copytree(runs["full"].run_dir, pruned)
    (pruned / "snapshots" / "gen_000003").mkdir()  # a folder a kill mid-prune left unlisted
    (pruned / "snapshots" / "gen_000003" / "model.safetensors").write_bytes(b"x" * 10)
    generations, freed = prune_run(pruned)
    assert generations == [2] and freed > 10
    assert sorted(p.name for p in (pruned / "snapshots").iterdir()) == ["gen_000004"]
    run = RunDir.open(pruned)
    assert [s["generation"] for s in run.manifest["snapshots"]] == [4]
    state = run.load_state(3)
    assert (state.snapshot, state.snapshot_generation) == (None, 0)
    assert [g for g, _ in state.pending] == [1, 2, 3]
    assert run.load_state(4).checksum == runs["full"].checksum
    then = evaluate_run(runs["full"].run_dir, split="test", n_tasks=2, baseline=False, generation=3,
                        write=False)
    now = evaluate_run(pruned, split="test", n_tasks=2, baseline=False, generation=3, write=False)
    assert now["centre"]["rewards"] == then["centre"]["rewards"]
    assert prune_run(pruned) == ([], 0)
    # the command: a finished run is pruned, an unfinished one is left whole and named (exit status 1)
    shutil.copytree(runs["root"] / "stopped", tmp_path / "stopped")
    assert main(["prune", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{tmp_path / 'stopped'}: unfinished, left whole" in out and "pruned generation(s) none" in out
    run = RunDir.open(pruned)
    run.lock()
    try:
        assert main(["prune", str(pruned)]) == 1
        assert "left whole" in capsys.readouterr().out
    finally:
        run.release()
    assert main(["prune", str(tmp_path / "absent")]) != 0


def test_foreign_and_corrupt_directories_name_the_file(tmp_path: Path, runs: dict[str, Any]) -> None:
    with pytest.raises(RunDirError, match="no run directory"):
        RunDir.open(tmp_path / "absent")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("hello")
    with pytest.raises(RunDirError, match=r"run\.json is missing"):
        RunDir.open(tmp_path / "foreign")
    with pytest.raises(RunDirError, match="not empty"):
        train(config_from_dict(RUN), tmp_path / "foreign")
    with pytest.raises(RunDirError, match="already holds a run"):
        train(config_from_dict(RUN), runs["full"].run_dir)

    bad = tmp_path / "bad"
    shutil.copytree(runs["full"].run_dir, bad)
    (bad / "run.json").write_text('{"format": "someone-else/2"}')
    with pytest.raises(RunDirError, match=r"run\.json is not an esopt run manifest"):
        RunDir.open(bad)
    (bad / "run.json").write_text("{not json")
    with pytest.raises(RunDirError, match=r"corrupt file .*run\.json"):
        RunDir.open(bad)
    shutil.copy(runs["full"].run_dir / "run.json", bad / "run.json")
    (bad / "config.json").write_text('{"es": {"population": "many"}}')
    with pytest.raises(RunDirError, match=r"config\.json.*es\.population"):
        RunDir.open(bad)
    shutil.copy(runs["full"].run_dir / "config.json", bad / "config.json")
    lines = (bad / "update_log.jsonl").read_text().splitlines()
    (bad / "update_log.jsonl").write_text("\n".join([lines[0], "{torn", *lines[2:]]) + "\n")
    with pytest.raises(RunDirError, match=r"update_log\.jsonl, line 2"):
        RunDir.open(bad).load_state()


def test_missing_checkpoint_is_a_checkpoint_error(tmp_path: Path, runs: dict[str, Any]) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(runs["root"] / "stopped", broken)
    (broken / "snapshots" / "gen_000002" / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"gen_000002/model\.safetensors"):
        RunDir.open(broken).load_state()
    shutil.rmtree(broken / "snapshots")
    with pytest.raises(CheckpointError, match=r"snapshot\.json"):
        RunDir.open(broken).load_state()


def test_entries_past_the_manifest_are_ignored(tmp_path: Path, runs: dict[str, Any]) -> None:
    """A kill after the log was written but before run.json: the manifest's generation wins."""
    run_dir = tmp_path / "torn"
    shutil.copytree(runs["root"] / "stopped", run_dir)
    full_lines = (runs["full"].run_dir / "update_log.jsonl").read_text().splitlines()
    with (run_dir / "update_log.jsonl").open("a") as fh:
        fh.write(full_lines[3] + "\n")
    (run_dir / "snapshots" / ".gen_000004.x1.tmp").mkdir()  # a snapshot being written when killed
    (run_dir / ".run.json.x2.tmp").write_text("{")
    run = RunDir.open(run_dir)
    assert [r["iter"] for r in run.records()] == [1, 2, 3]
    run.reopen_for_resume()
    assert not list(run_dir.rglob("*.tmp"))


def test_atomic_writes_keep_the_old_file_when_interrupted(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "state.json"
    atomic_write_text(target, "old")

    def crash(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_json_safe_drops_what_json_cannot_hold() -> None:
    import torch

    out = json_safe({"a": torch.tensor([1.0, 2.0]), "b": float("nan"), "c": object(), "d": (1, "x")})
    assert out == {"a": [1.0, 2.0], "b": None, "d": [1, "x"]}


@pytest.mark.ray
@pytest.mark.slow
def test_ray_workers_reach_the_same_run_as_in_process(tmp_path: Path) -> None:
    """Two Ray actors (and a driver replica for reflection) reproduce the in-process run exactly."""
    import ray

    here = str(Path(__file__).resolve().parent)
    data = toy_config_dict(prompts={"mutation": True, "reflect_rate": 1.0, "recombine_rate": 1.0,
                                    "max_new_tokens": 16})
    local = train(config_from_dict(data), tmp_path / "local")
    path = os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        remote = train(config_from_dict({**data, "workers": {"num_workers": 2}}), tmp_path / "ray")
    finally:
        ray.shutdown()
    assert remote.finished and remote.checksum == local.checksum
    for name in ("prompt_pools.json", "distribution.json", "update_log.jsonl"):
        assert (tmp_path / "ray" / name).read_text() == (tmp_path / "local" / name).read_text(), name
    workers = RunDir.open(tmp_path / "ray").metrics()[-1]["workers"]
    assert [w["id"] for w in workers] == [0, 1] and all(w["checksum"] for w in workers)
    assert remote.status is not None and remote.status["bytes_exchanged"] > 0
