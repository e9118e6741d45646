"""Run directories are verified before use: snapshots against their recorded digests, the update log as a hash
chain, the manifest's fields and the inputs written at creation; a torn last log line is recovered; a legacy
(format 1) run still opens; two writers cannot share a directory."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from toy_web_env import toy_config_dict

from cotrain.checkpoint import LEGACY_RUN_FORMAT, RunDir
from cotrain.config import config_from_dict
from cotrain.errors import CheckpointError, RunDirError, RunIntegrityError
from cotrain.evaluate import evaluate_run
from cotrain.export import export_run
from cotrain.trainer import resume, train

# 4 generations, snapshots every 2, stopped after 3: resume, eval and export all rebuild from gen_000002.
RUN = toy_config_dict(es={"generations": 4}, checkpoint={"snapshot_every": 2})
SNAP = Path("snapshots") / "gen_000002"
WEIGHTS = SNAP / "model.safetensors"


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run stopped after generation 3 of 4 (last snapshot: generation 2)."""
    path = tmp_path_factory.mktemp("integrity") / "stopped"
    train(config_from_dict(RUN), path, stop_after=3)
    return path


@pytest.fixture
def run_copy(stopped: Path, tmp_path: Path) -> Callable[[], Path]:
    """``run_copy()`` -> a fresh copy of the stopped run."""
    count = [0]

    def make() -> Path:
        count[0] += 1
        dest = tmp_path / f"run{count[0]}"
        shutil.copytree(stopped, dest, symlinks=True)
        return dest

    return make


def _resume(path: Path) -> object:
    return resume(path)


def _eval(path: Path) -> object:
    return evaluate_run(path, split="test", n_tasks=1, baseline=False, write=False)


def _export(path: Path) -> object:
    return export_run(path, path.parent / f"{path.name}-export")


USES = [pytest.param(_resume, id="resume"), pytest.param(_eval, id="eval"),
        pytest.param(_export, id="export")]


def _edit_json(file: Path, change: Callable[[Any], Any]) -> None:
    data = json.loads(file.read_text())
    file.write_text(json.dumps(change(data)))


def _edit_log(run: Path, line: int, change: Callable[[dict[str, Any]], None]) -> None:
    file = run / "update_log.jsonl"
    lines = file.read_text().splitlines()
    record = json.loads(lines[line - 1])
    change(record)
    lines[line - 1] = json.dumps(record, separators=(",", ":"))
    file.write_text("\n".join(lines) + "\n")


def _bump_seed(record: dict[str, Any]) -> None:
    """Change the logged weight update: bump its first noise seed, or add one to an empty update (a
    generation whose rewards all tie logs no pairs)."""
    update = record["update"]
    if update["seeds"]:
        update["seeds"][0] += 1
    else:
        update["seeds"], update["coeffs"] = [1], [1e-3]


# ------------------------------------------------------------------------------------------ tampering


@pytest.mark.parametrize("use", USES)
def test_a_flipped_snapshot_byte_is_refused(run_copy: Callable[[], Path],
                                            use: Callable[[Path], object]) -> None:
    run = run_copy()
    data = bytearray((run / WEIGHTS).read_bytes())
    data[len(data) // 2] ^= 0x01
    (run / WEIGHTS).write_bytes(bytes(data))
    with pytest.raises(RunIntegrityError,
                       match=r"gen_000002/model\.safetensors \(snapshot of generation 2\)"):
        use(run)


@pytest.mark.parametrize("use", USES)
def test_a_zeroed_checksum_in_run_json_is_refused(run_copy: Callable[[], Path],
                                                  use: Callable[[Path], object]) -> None:
    run = run_copy()

    def zero_final(m: dict[str, Any]) -> dict[str, Any]:
        m["checksum"]["value"] = "0" * 40
        return m

    _edit_json(run / "run.json", zero_final)
    with pytest.raises(RunIntegrityError, match=r"run\.json: 'checksum' of generation 2"):
        use(run)
    run = run_copy()

    def zero_entry(m: dict[str, Any]) -> dict[str, Any]:
        m["snapshots"][0]["checksum"] = "0" * 40
        return m

    _edit_json(run / "run.json", zero_entry)
    with pytest.raises(RunIntegrityError, match=r"gen_000002/snapshot\.json \(snapshot of generation 2\)"):
        use(run)


@pytest.mark.parametrize("use", USES)
def test_an_edited_log_line_is_refused(run_copy: Callable[[], Path], use: Callable[[Path], object]) -> None:
    run = run_copy()
    _edit_log(run, 2, _bump_seed)  # a middle line: the next line's 'prev' no longer matches
    with pytest.raises(RunIntegrityError, match=r"update_log\.jsonl, line 3 \(generation 3\)"):
        use(run)
    run = run_copy()
    _edit_log(run, 3, _bump_seed)  # the last committed line: run.json's log_head no longer matches
    with pytest.raises(RunIntegrityError, match=r"line 3 \(generation 3\) does not match the log_head"):
        use(run)


def test_removed_reordered_and_cut_log_lines_are_refused(run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    lines = (run / "update_log.jsonl").read_text().splitlines()
    (run / "update_log.jsonl").write_text("\n".join([lines[0], lines[2], lines[1]]) + "\n")
    with pytest.raises(CheckpointError, match=r"does not hold generations 1\.\.3 in order"):
        RunDir.open(run).load_state()
    # Cut the history back to generation 2 consistently (log and run.json's count): the chain's head says no.
    run = run_copy()
    (run / "update_log.jsonl").write_text("\n".join(lines[:2]) + "\n")
    _edit_json(run / "run.json", lambda m: {**m, "generation": 2})
    with pytest.raises(RunIntegrityError, match=r"line 2 \(generation 2\) does not match the log_head"):
        resume(run)
    # Remove line 2 and renumber line 3: the 'prev' of the moved line breaks.
    run = run_copy()
    _edit_log(run, 3, lambda r: r.update(iter=2))
    moved = (run / "update_log.jsonl").read_text().splitlines()
    (run / "update_log.jsonl").write_text("\n".join([moved[0], moved[2]]) + "\n")
    _edit_json(run / "run.json", lambda m: {**m, "generation": 2})
    with pytest.raises(RunIntegrityError, match=r"line 2 \(generation 2\): its 'prev' digest"):
        RunDir.open(run).load_state()


def test_an_edited_config_or_initial_pools_file_is_refused(run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    _edit_json(run / "config.json", lambda c: {**c, "es": {**c["es"], "seed": 7}})
    with pytest.raises(RunIntegrityError, match=r"config\.json \(the run's configuration\)"):
        resume(run)
    run = run_copy()
    (run / "initial_prompt_pools.json").write_text((run / "initial_prompt_pools.json").read_text() + " ")
    with pytest.raises(RunIntegrityError, match=r"initial_prompt_pools\.json"):
        resume(run)


def test_a_snapshot_symlinked_outside_the_run_is_refused(run_copy: Callable[[], Path],
                                                         tmp_path: Path) -> None:
    run = run_copy()
    outside = tmp_path / "elsewhere"
    shutil.move(run / SNAP, outside)
    (run / SNAP).symlink_to(outside, target_is_directory=True)
    with pytest.raises(RunIntegrityError, match="symbolic link"):
        resume(run)
    run = run_copy()
    _edit_json(run / "run.json", lambda m: {**m, "snapshots": [{**m["snapshots"][0], "path": "../x"}]})
    with pytest.raises(RunDirError, match=r"'snapshots'\[0\]: path '\.\./x'"):
        RunDir.open(run)


@pytest.mark.parametrize("use", USES)
@pytest.mark.parametrize("size", [0, 100], ids=["empty", "truncated"])
def test_a_truncated_or_empty_weights_file_is_a_typed_error(run_copy: Callable[[], Path], size: int,
                                                            use: Callable[[Path], object]) -> None:
    run = run_copy()
    data = (run / WEIGHTS).read_bytes()
    (run / WEIGHTS).write_bytes(data[:size])
    with pytest.raises(RunIntegrityError, match=rf"has {size} bytes, .*snapshot\.json records {len(data)}"):
        use(run)


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: {**m, "generation": -1}, r"'generation' must be an integer >= 0, got -1"),
    (lambda m: {**m, "generation": True}, r"'generation' must be an integer >= 0, got True"),
    (lambda m: {**m, "snapshots": ["two"]}, r"'snapshots'\[0\] must be .*got 'two'"),
    (lambda m: {**m, "snapshots": [2]}, r"'snapshots'\[0\] must be .*got 2"),
    (lambda m: {**m, "snapshots": {"2": {}}}, r"'snapshots' must be a list"),
    (lambda m: {**m, "checksum": "zero"}, r"'checksum' must be"),
    (lambda m: {**m, "log_head": ""}, r"'log_head' must be a SHA-256"),
    (lambda m: [m], r"is not an esopt run manifest \(format 'list'"),
])
def test_malformed_manifest_fields_name_the_field(run_copy: Callable[[], Path], change: Callable[[Any], Any],
                                                  message: str) -> None:
    run = run_copy()
    _edit_json(run / "run.json", change)
    with pytest.raises(RunDirError, match=r"run\.json.*" + message):
        RunDir.open(run)


def test_a_missing_config_is_named(run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    (run / "config.json").unlink()
    with pytest.raises(RunDirError, match=r"missing file .*config\.json"):
        resume(run)


# ------------------------------------------------------------------------------------------ crashes


def test_a_torn_line_past_the_last_generation_is_dropped_on_resume(run_copy: Callable[[], Path],
                                                                    stopped: Path) -> None:
    run = run_copy()
    with (run / "update_log.jsonl").open("a") as fh:
        fh.write('{"iter":4,"task_batch":[1,')  # generation 4 being written when the machine died
    assert [r["iter"] for r in RunDir.open(run).records()] == [1, 2, 3]
    done = resume(run)
    assert done.finished and [r["iter"] for r in RunDir.open(run).records()] == [1, 2, 3, 4]


def test_a_torn_committed_line_is_reported_with_its_generation(run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    lines = (run / "update_log.jsonl").read_text().splitlines()
    (run / "update_log.jsonl").write_text("\n".join([*lines[:2], lines[2][:40]]))
    with pytest.raises(CheckpointError, match=r"line 3: truncated .* generation 3 cannot be rebuilt"):
        resume(run)


# ------------------------------------------------------------------------------------------ legacy runs


def _to_legacy(run: Path) -> None:
    """Rewrite a run as an esopt-run/1 directory (no chain, no digests), as older versions wrote it."""
    lines = [json.loads(line) for line in (run / "update_log.jsonl").read_text().splitlines()]
    (run / "update_log.jsonl").write_text("".join(
        json.dumps({k: v for k, v in r.items() if k != "prev"}, separators=(",", ":")) + "\n" for r in lines))

    def strip(m: dict[str, Any]) -> dict[str, Any]:
        m = {k: v for k, v in m.items() if k not in ("log_head", "files")}
        m["snapshots"] = [{k: v for k, v in s.items() if k != "sha256"} for s in m["snapshots"]]
        return {**m, "format": LEGACY_RUN_FORMAT}

    _edit_json(run / "run.json", strip)


def test_a_legacy_run_resumes_and_its_corrupt_inputs_are_typed_errors(run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    _to_legacy(run)
    state = RunDir.open(run).load_state()
    assert (state.generation, state.snapshot_generation) == (3, 2)
    assert resume(run).finished
    run = run_copy()
    _to_legacy(run)
    _edit_log(run, 3, lambda r: r["update"].update(seeds=[1], coeffs=["x"]))  # holds a pair even if empty
    with pytest.raises(CheckpointError, match=r"update_log\.jsonl, generation 3: 'update' must hold"):
        RunDir.open(run).load_state()
    run = run_copy()
    _to_legacy(run)
    (run / WEIGHTS).write_bytes((run / WEIGHTS).read_bytes()[:100])
    with pytest.raises(CheckpointError, match=r"not a readable safetensors file"):
        RunDir.open(run).load_state()
    run = run_copy()
    _to_legacy(run)
    _edit_log(run, 2, lambda r: r.update(prev="0" * 64))  # half a chain is not a legacy log
    with pytest.raises(RunIntegrityError, match=r"line 2: a chain digest"):
        RunDir.open(run).load_state()


# ------------------------------------------------------------------------------------------ writers


def test_two_writers_cannot_share_a_run_directory(tmp_path: Path, run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    holder = RunDir.open(run)
    holder.lock()
    try:
        with pytest.raises(RunDirError, match=r"in use by another esopt process \(pid \d+"):
            resume(run)
        with pytest.raises(RunDirError, match="in use by another esopt process"):
            train(config_from_dict(RUN), run)
    finally:
        holder.release()
    assert resume(run).finished  # the lock is gone with its holder
