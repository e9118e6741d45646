"""``"auto"`` settings of a run (``agent.dtype``, ``workers.num_workers``): chosen once at the start from this
machine (CPU flags read from a saved ``/proc/cpuinfo``, the CPU affinity), recorded in ``run.json`` with the
reasons, and kept by a resumed run even where a new detection would choose otherwise (toy env, tiny model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors import safe_open
from toy_web_env import toy_config_dict

from cotrain.checkpoint import RunDir
from cotrain.config import config_from_dict
from cotrain.trainer import resume, train
from es_agent import hardware

CPUINFO = Path(__file__).resolve().parents[1] / "es_agent" / "data"
XEON = CPUINFO / "cpuinfo_xeon_sapphire_rapids.txt"
"""amx_bf16 and avx512_bf16: ``auto`` is bf16."""
EPYC = CPUINFO / "cpuinfo_amd_epyc_avx2.txt"
"""no native bf16: ``auto`` is fp32."""


def _snapshot_dtypes(run_dir: Path) -> set[str]:
    out = set()
    for file in (run_dir / "snapshots").rglob("model.safetensors"):
        with safe_open(str(file), "pt") as f:
            out |= {str(f.get_slice(name).get_dtype()) for name in f.keys()}  # noqa: SIM118
    return out


def test_auto_settings_are_recorded_and_a_resumed_run_keeps_them(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    data = toy_config_dict(agent={"dtype": "auto"}, workers={"num_workers": "auto"})
    monkeypatch.setattr(hardware, "CPUINFO", XEON)
    monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda pid: {0})  # one core: in process
    stopped = train(config_from_dict(data), tmp_path / "run", stop_after=1)
    assert stopped.generation == 1 and not stopped.finished
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["resolved"] == {
        "dtype": "bfloat16", "dtype_reason": "auto: cpu flags amx_bf16 avx512_bf16",
        "num_workers": 1, "num_workers_reason": "auto: cpu affinity 1 cpu(s)"}
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["agent"]["dtype"] == "auto" and config["workers"]["num_workers"] == "auto"  # as written

    monkeypatch.setattr(hardware, "CPUINFO", EPYC)  # a new detection would now say float32
    assert hardware.choose_dtype("auto").value == "float32"
    resumed = resume(tmp_path / "run")
    assert resumed.finished and resumed.generation == 2
    run = RunDir.open(tmp_path / "run")
    assert run.config.agent.dtype == "bfloat16" and run.config.workers.num_workers == 1
    assert _snapshot_dtypes(tmp_path / "run") == {"BF16"}
    # ... and ends on the weights of an uninterrupted run in bf16, which a fp32 replay could not reach
    straight = train(config_from_dict({**data, "agent": {**data["agent"], "dtype": "bfloat16"}}),
                     tmp_path / "straight")
    assert resumed.checksum == straight.checksum
    assert json.loads((tmp_path / "straight" / "run.json").read_text())["resolved"]["dtype_reason"] == \
        "set: bfloat16"
