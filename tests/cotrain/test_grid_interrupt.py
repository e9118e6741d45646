"""``esopt grid`` never leaves a job training on its own: a real invocation (tiny random Qwen, embedded sites)
is interrupted with SIGINT sent to its pid alone (not a terminal's Ctrl-C, which reaches the whole group), and
then killed outright (SIGKILL, as an out-of-memory kill or a scheduler would); its job process stops both
times, and the run directory it leaves is resumed by the next invocation. ``esopt grid --plan`` sees the run
training while its job holds the lock, and to run again from the generations it kept once stopped."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cotrain.grid import plan_grid
from cotrain.grid_config import load_grid_config
from cotrain.grid_plan import RUNNING, TO_RUN, price_runs

pytestmark = pytest.mark.slow

BASE = """
name = "grid-interrupt"
[agent]
model = "tiny:0"
dtype = "float32"
policy = { max_prompt_tokens = 256 }
[env]
split = "tier1_train"
worker_split = "tier1"
tasks_per_generation = 1
max_steps = 1
[es]
population = 2
generations = 400
sigma_0 = 0.05
sigma_min = 0.01
[workers]
num_workers = 0
[checkpoint]
snapshot_every = 0
[ui]
mode = "off"
plot = false
"""
GRID = """
[grid]
base = "base.toml"
seeds = [0]
families = ["shopping"]
tiers = [1]
heldout_limit = 1
[models]
"tiny:0" = []
[arms]
weights = ["es.evolve_prompts=false"]
"""
LOCK = Path("tiny0_shopping_t1/weights/seed0/grid.lock")
METRICS = Path("tiny0_shopping_t1/weights/seed0/run/metrics.jsonl")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped or not by this container's init, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _generations(out: Path) -> int:
    path = out / METRICS
    return len(path.read_text().splitlines()) if path.is_file() else 0


def _start_grid(tmp_path: Path, out: Path,
                preexec: Callable[[], None]) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``esopt grid`` in its own session, SIGINT at its default action (``preexec``); returns it and its
    job's pid once that job has completed a generation more than the run directory held before."""
    before = _generations(out)
    parent = subprocess.Popen(
        [sys.executable, "-m", "cotrain.cli", "grid", "--config", str(tmp_path / "grid.toml"), "--out",
         str(out), "--arms", "weights"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=preexec)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        owner = (out / LOCK).read_text() if (out / LOCK).is_file() else ""
        found = re.search(r" pid (\d+)$", owner.strip())
        if found and _generations(out) > before and int(found.group(1)) != parent.pid:
            return parent, int(found.group(1))
        assert parent.poll() is None, f"esopt grid exited early ({parent.returncode})"
        time.sleep(0.5)
    parent.kill()
    pytest.fail("the grid job did not complete a generation in 10 minutes")


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.25)
    return not _alive(pid)


def test_an_interrupted_or_killed_grid_stops_its_job_and_the_run_resumes(
        tmp_path: Path, foreground_sigint: Callable[[], None]) -> None:
    (tmp_path / "base.toml").write_text(BASE)
    # The report goes to the test's folder: the default (benchmarks/results/grid) is the repository's.
    report = tmp_path / "report"
    (tmp_path / "grid.toml").write_text(GRID.replace("[grid]\n", f'[grid]\nresults = "{report}"\n'))
    out = tmp_path / "out"

    plan = plan_grid(load_grid_config(tmp_path / "grid.toml"), arms=["weights"])

    started: list[subprocess.Popen[bytes]] = []
    try:
        parent, job = _start_grid(tmp_path, out, foreground_sigint)
        started.append(parent)
        (training,) = price_runs(plan, out)  # esopt grid --plan, while the job holds the run's lock
        assert training.status == RUNNING and 0 < training.done < 1
        os.kill(parent.pid, signal.SIGINT)  # the invocation alone: its job gets no signal from a terminal
        assert parent.wait(timeout=120) == 130
        assert not _alive(job), "the interrupted invocation left its job running"
        assert not (out / LOCK.parent / "error.txt").exists()  # an interrupt is not a failed run
        kept = _generations(out)
        assert kept >= 1
        (stopped,) = price_runs(plan, out)  # to run again, from the generations its directory kept
        assert stopped.status == TO_RUN and stopped.done == pytest.approx(kept / 400)

        # resumes the run directory (more generations than kept)
        parent, job = _start_grid(tmp_path, out, foreground_sigint)
        started.append(parent)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        assert _wait_gone(job, 60), "the job of a killed invocation went on training"
        assert not (out / LOCK.parent / "error.txt").exists()
        run = json.loads((out / LOCK.parent / "run" / "run.json").read_text())
        assert run  # the run directory is readable after both stops
        assert _generations(out) > kept
    finally:  # a failed assertion leaves nothing of either grid (its own session) training behind the suite
        for proc in started:
            with contextlib.suppress(ProcessLookupError):  # the session is gone: the usual end
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
