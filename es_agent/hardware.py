"""What this machine offers a run: whether its CPU has fast bf16 (``dtype = "auto"``) and how many cores the
process may use (``num_workers = "auto"``).

Both are read from the operating system (``/proc/cpuinfo`` flags, the CPU affinity mask and the cgroup CPU
quota), never from a benchmark, so the answer is cheap and the same every time on one machine. Each choice
comes with its reason as text (``"auto: cpu flags avx512_bf16"``), which a run records next to the choice.
``ESOPT_AUTO_DTYPE`` (:data:`AUTO_DTYPE_ENV`) replaces the machine's answer for ``"auto"``: a grid whose start
was scored on a float32 machine continues matched on a bf16 one with ``ESOPT_AUTO_DTYPE=float32``.

bf16 on a CPU is only fast with native bf16 dot products: AMX (``amx_bf16``) or AVX512-BF16
(``avx512_bf16``). Without them bf16 is slower than fp32: on an AMD EPYC with AVX2 only (this project's VMs
of 2026-12), one thread, a SmolLM2-sized ``Linear`` (576 -> 1536) took 0.30 ms (fp32) vs 0.79 ms (bf16) for
one token and 27 ms vs 184 ms for 256 tokens. On CUDA, bf16 where the GPU supports it natively (compute
capability 8.0 and up).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from es_agent.errors import HardwareError

AUTO = "auto"
"""The value of ``dtype`` and ``num_workers`` that asks this module to choose."""
AUTO_DTYPE_ENV = "ESOPT_AUTO_DTYPE"
"""Environment variable that decides ``dtype = "auto"`` instead of the machine (a concrete dtype name)."""
FAST_BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
"""``/proc/cpuinfo`` flags of native bf16 arithmetic (Intel AMX, AVX512-BF16 on Intel and AMD Zen 4+)."""
CPUINFO = Path("/proc/cpuinfo")
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Choice:
    """A resolved ``"auto"`` setting and why it came out that way."""

    value: str | int
    """The concrete setting (a dtype name, or a number of workers)."""
    reason: str
    """One line saying what decided it (``"auto: cpu flags avx512_bf16"``), recorded by runs."""


def read_cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU feature flags in ``cpuinfo`` (the text of ``/proc/cpuinfo``; read from the machine when
    ``None``): the union of every ``flags`` line (x86) and ``Features`` line (ARM). Empty where the file does
    not exist (not Linux)."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return frozenset()
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return frozenset(flags)


def fast_bf16_flags(flags: Iterable[str]) -> tuple[str, ...]:
    """The flags among ``flags`` that make bf16 fast on a CPU (sorted; empty: bf16 would be slow)."""
    have = set(flags)
    return tuple(sorted(f for f in FAST_BF16_CPU_FLAGS if f in have))


def choose_dtype(dtype: str, device: str = "cpu", *, cpu_flags: Iterable[str] | None = None,
                 cuda_bf16: bool | None = None) -> Choice:
    """The weight dtype for ``dtype`` on ``device``: ``dtype`` itself unless it is ``"auto"``; then bf16 on a
    CPU with :data:`FAST_BF16_CPU_FLAGS` and on a CUDA device that supports bf16, float32 elsewhere, unless
    :data:`AUTO_DTYPE_ENV` names a dtype (then that one, on any device).
    ``cpu_flags`` and ``cuda_bf16`` replace what the machine says (tests, or deciding for another machine)."""
    if not isinstance(dtype, str) or not dtype:
        raise HardwareError(f"dtype must be 'auto' or a dtype name, got {dtype!r}")
    if dtype != AUTO:
        return Choice(dtype, f"set: {dtype}")
    pinned = os.environ.get(AUTO_DTYPE_ENV, "").strip()
    if pinned:
        from es_agent.specs import DTYPES

        if pinned not in DTYPES:
            raise HardwareError(f"{AUTO_DTYPE_ENV}={pinned!r} is not a dtype; use one of {', '.join(DTYPES)} "
                                "(or unset it to let the machine decide)")
        return Choice(pinned, f"auto: {AUTO_DTYPE_ENV}={pinned}")
    kind = str(device).split(":", 1)[0]
    if kind == "cuda":
        if cuda_bf16 is None:
            import torch

            cuda_bf16 = bool(torch.cuda.is_available()
                             and torch.cuda.is_bf16_supported(including_emulation=False))
        if cuda_bf16:
            return Choice("bfloat16", f"auto: {device} supports bf16")
        return Choice("float32", f"auto: {device} lacks bf16 support")
    if kind != "cpu":
        return Choice("float32", f"auto: device {device!r} (bf16 is chosen on cpu and cuda only)")
    fast = fast_bf16_flags(read_cpu_flags() if cpu_flags is None else cpu_flags)
    if fast:
        return Choice("bfloat16", f"auto: cpu flags {' '.join(fast)}")
    return Choice("float32", f"auto: cpu flags lack {' and '.join(FAST_BF16_CPU_FLAGS)}")


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> float | None:
    """CPUs the cgroup quota allows this process (``quota / period``), ``None`` when unlimited or unknown.
    Reads cgroup v2 ``cpu.max`` and v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of the process's own
    group (``proc_cgroup``: the text of ``/proc/self/cgroup``; read when ``None``), else of the root group."""
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text(encoding="utf-8")
        except OSError:
            proc_cgroup = ""
    v2, v1 = [""], [""]
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        rel = parts[2].strip().lstrip("/")
        if parts[0] == "0" and parts[1] == "":
            v2.insert(0, rel)
        elif "cpu" in parts[1].split(","):
            v1.insert(0, rel)
    limits = []
    for rel in v2:
        file = root / rel / "cpu.max"
        if file.is_file():
            quota, _, period = file.read_text(encoding="utf-8").partition(" ")
            if quota.strip() != "max" and period.strip():
                limits.append(int(quota) / int(period))
            break
    for rel in v1:
        for folder in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
            quota_file = root / folder / rel / "cpu.cfs_quota_us"
            period_file = root / folder / rel / "cpu.cfs_period_us"
            if quota_file.is_file() and period_file.is_file():
                quota_us = int(quota_file.read_text(encoding="utf-8"))
                if quota_us > 0:
                    limits.append(quota_us / int(period_file.read_text(encoding="utf-8")))
                break
        else:
            continue
        break
    return min(limits) if limits else None


def usable_cores(*, affinity: Iterable[int] | None = None, quota: float | None | str = "read") -> Choice:
    """Cores this process may keep busy: the CPUs of its affinity mask (``os.sched_getaffinity``), capped by
    the cgroup CPU quota (rounded down, at least 1). ``affinity`` and ``quota`` replace what the machine says
    (``quota="read"``: read it; ``None``: no quota)."""
    if affinity is None:
        try:
            cpus = len(os.sched_getaffinity(0))
            where = "cpu affinity"
        except AttributeError:  # not Linux
            cpus = os.cpu_count() or 1
            where = "cpu count"
    else:
        cpus = len(set(affinity))
        where = "cpu affinity"
    limit = cgroup_cpu_limit() if quota == "read" else quota
    if limit is not None and not isinstance(limit, int | float):
        raise HardwareError(f"quota must be a number of CPUs or None, got {limit!r}")
    if limit is not None and math.floor(limit) < cpus:
        n = max(1, math.floor(limit))
        return Choice(n, f"auto: {where} {cpus} cpu(s), cgroup quota {limit:g} cpu(s)")
    return Choice(max(1, cpus), f"auto: {where} {cpus} cpu(s)" + ("" if limit is None else
                                                                   f", cgroup quota {limit:g} cpu(s)"))
