"""``es_agent.hardware``: the ``"auto"`` dtype from CPU flags (saved ``/proc/cpuinfo`` texts of a CPU without
native bf16, this project's AMD EPYC VMs, and of one with AMX and AVX512-BF16, a Xeon Sapphire Rapids), and
the usable cores from the affinity mask and cgroup quotas (v1 and v2 trees written under ``tmp_path``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from es_agent import hardware
from es_agent.hardware import (
    HardwareError,
    cgroup_cpu_limit,
    choose_dtype,
    fast_bf16_flags,
    read_cpu_flags,
    usable_cores,
)
from es_agent.specs import AgentSpec, SpecError

DATA = Path(__file__).resolve().parent / "data"
EPYC = DATA / "cpuinfo_amd_epyc_avx2.txt"
"""avx2, no avx512 at all: bf16 would be emulated."""
XEON = DATA / "cpuinfo_xeon_sapphire_rapids.txt"
"""amx_bf16 and avx512_bf16."""


def test_flags_are_read_from_cpuinfo_text() -> None:
    epyc, xeon = read_cpu_flags(EPYC.read_text()), read_cpu_flags(XEON.read_text())
    assert {"avx2", "fma", "sse4_2"} <= epyc and not fast_bf16_flags(epyc)
    assert fast_bf16_flags(xeon) == ("amx_bf16", "avx512_bf16")
    assert read_cpu_flags("processor : 0\nFeatures : fp asimd bf16\n") == {"fp", "asimd", "bf16"}  # ARM
    assert read_cpu_flags("") == frozenset()


@pytest.mark.parametrize(("cpuinfo", "dtype", "reason"), [
    (XEON, "bfloat16", "auto: cpu flags amx_bf16 avx512_bf16"),
    (EPYC, "float32", "auto: cpu flags lack amx_bf16 and avx512_bf16"),
])
def test_auto_dtype_follows_the_cpu_flags(cpuinfo: Path, dtype: str, reason: str) -> None:
    choice = choose_dtype("auto", "cpu", cpu_flags=read_cpu_flags(cpuinfo.read_text()))
    assert (choice.value, choice.reason) == (dtype, reason)


@pytest.mark.parametrize(("cpuinfo", "dtype"), [(XEON, "bfloat16"), (EPYC, "float32")])
def test_auto_dtype_reads_the_machines_cpuinfo(cpuinfo: Path, dtype: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The same choice when the flags come from the file the module reads (here a saved copy), through
    ``AgentSpec.resolved`` and ``torch_dtype``."""
    import torch

    monkeypatch.setattr(hardware, "CPUINFO", cpuinfo)
    assert choose_dtype("auto").value == dtype
    spec = AgentSpec(model="tiny:0", dtype="auto")
    assert spec.resolved().dtype == dtype and spec.torch_dtype() == getattr(torch, dtype)
    assert spec.resolved().resolved() == spec.resolved()
    assert AgentSpec(model="tiny:0", dtype="float16").resolved().dtype == "float16"  # explicit: kept


def test_explicit_cuda_and_other_devices() -> None:
    assert choose_dtype("float16", "cpu").reason == "set: float16"
    assert choose_dtype("auto", "cuda:0", cuda_bf16=True).value == "bfloat16"
    assert choose_dtype("auto", "cuda", cuda_bf16=False).value == "float32"
    assert choose_dtype("auto", "mps").value == "float32"
    with pytest.raises(HardwareError, match="got None"):
        choose_dtype(None)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="'fp8'"):
        AgentSpec(model="tiny:0", dtype="fp8")
    assert choose_dtype("auto", cpu_flags=[]).value == "float32"  # no cpuinfo at all (not Linux)


def test_the_environment_decides_auto_instead_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ESOPT_AUTO_DTYPE`` replaces the CPU's answer for ``"auto"`` (on every device), says so in the reason,
    leaves an explicit dtype alone and names a bad value."""
    monkeypatch.setenv(hardware.AUTO_DTYPE_ENV, "float32")
    xeon = read_cpu_flags(XEON.read_text())
    choice = choose_dtype("auto", "cpu", cpu_flags=xeon)
    assert (choice.value, choice.reason) == ("float32", "auto: ESOPT_AUTO_DTYPE=float32")
    assert choose_dtype("auto", "cuda", cuda_bf16=True).value == "float32"
    assert choose_dtype("bfloat16", "cpu").reason == "set: bfloat16"
    assert AgentSpec(model="tiny:0", dtype="auto").resolved().dtype == "float32"
    monkeypatch.setenv(hardware.AUTO_DTYPE_ENV, "fp8")
    with pytest.raises(HardwareError, match="ESOPT_AUTO_DTYPE='fp8' is not a dtype"):
        choose_dtype("auto", "cpu", cpu_flags=xeon)
    monkeypatch.setenv(hardware.AUTO_DTYPE_ENV, "")
    assert choose_dtype("auto", "cpu", cpu_flags=xeon).value == "bfloat16"  # empty: the machine decides


def test_missing_cpuinfo_means_no_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware, "CPUINFO", tmp_path / "absent")
    assert read_cpu_flags() == frozenset() and choose_dtype("auto").value == "float32"


def test_usable_cores_from_affinity_and_quota() -> None:
    assert usable_cores(affinity=[0, 1], quota=None).value == 2
    capped = usable_cores(affinity=range(8), quota=2.5)
    assert capped.value == 2 and capped.reason == "auto: cpu affinity 8 cpu(s), cgroup quota 2.5 cpu(s)"
    assert usable_cores(affinity=[3], quota=0.5).value == 1  # never 0
    assert usable_cores(affinity=[0, 1], quota=4).value == 2
    with pytest.raises(HardwareError, match="'two'"):
        usable_cores(affinity=[0], quota="two")
    assert usable_cores().value >= 1  # this machine


def test_cgroup_quotas_v1_and_v2(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    (v2 / "job").mkdir(parents=True)
    (v2 / "job" / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_limit(v2, "0::/job\n") == 1.5
    (v2 / "job" / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_limit(v2, "0::/job\n") is None
    v1 = tmp_path / "v1" / "cpu,cpuacct" / "box"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_limit(tmp_path / "v1", "4:memory:/box\n2:cpu,cpuacct:/box\n") == 3.0
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_limit(tmp_path / "v1", "2:cpu,cpuacct:/box\n") is None
    assert cgroup_cpu_limit(tmp_path / "nothing", "") is None
