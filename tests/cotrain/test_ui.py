"""Tests of the cotrain dashboard: state, pure render (snapshot), EvoTorch logger, tmux, learning curve."""

from __future__ import annotations

import copy
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from evotorch import Problem
from evotorch.algorithms import PGPE
from evotorch.logging import PandasLogger, StdOutLogger
from rich.console import Console

from cotrain.errors import MetricsError
from cotrain.ui import (
    DashboardState,
    EvalSummary,
    RichDashboardLogger,
    format_held_out,
    format_status_line,
    plot_learning_curve,
    render_dashboard,
)

SNAPSHOTS = Path(__file__).parent / "snapshots"
REPO_ROOT = Path(__file__).resolve().parents[2]
HEADINGS = (
    "Generation progress",
    "Reward per generation",
    "Time split",
    "Prompt probabilities",
    "Per-task success",
    "Workers",
    "Best prompt",
)


class FakeClock:
    """An injectable clock: the tests move time, nothing reads the wall clock."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def contract_status(gen: int, n_workers: int = 4) -> dict[str, Any]:
    """A status dict with every key of docs/CONTRACTS.md, deterministic in ``gen``."""
    mean = min(1.0, 0.05 + 0.04 * gen)
    status: dict[str, Any] = {
        "iter": gen,
        "sigma": 0.002 * (1.0 - gen / 40),
        "reward_mean": mean,
        "reward_max": min(1.0, mean + 0.3),
        "reward_min": 0.0,
        "success_rate": round(mean * 0.9, 4),
        "per_task_success": {f"shopping_{k}": ((k * 37 + gen) % 11) / 10 for k in range(10)},
        "prompt_probs": {
            "system": [0.1, 0.62, 0.18, 0.1],
            "skills": [0.25, 0.25, 0.3, 0.2],
            "action_format": [0.9, 0.1],
        },
        "best_prompt": {
            "system": "You are a careful web agent. Read the accessibility tree, decide which element "
            "moves you toward the goal, and issue exactly one action per step. " * 3,
            "skills": "- search before browsing\n- use the admin grid filters\n- check the order date",
            "action_format": "Answer with one action: click [id], type [id] [text] [1], stop [answer].",
        },
        "seconds_rollout": 12.1,
        "seconds_perturb": 0.3,
        "seconds_update": 0.1,
        "bytes_exchanged": 3200 + gen,
        "workers": [
            {
                "id": i,
                "alive": i != 3,
                "in_flight": 0,
                "done": 8,
                "restarts": int(i == 3),
                "checksum": "0badf00d11" if i == 2 else "9f3a1c7e2b",
            }
            for i in range(n_workers)
        ],
        "checksums_agree": False,
        "population_size": 32,
        "rollouts_done": 32,
        "rollouts_total": 32,
    }
    if gen % 4 == 0:
        status["centre_eval"] = {"split": "test", "success_rate": 0.3 + 0.02 * gen, "n_tasks": 40}
    if gen == 1:
        status["start_eval"] = {"split": "test", "success_rate": 0.25, "n_tasks": 40, "generation": 0}
    return status


def full_state() -> DashboardState:
    """Twelve finished generations and a thirteenth in progress, all at injected times."""
    state = DashboardState(run_name="webarena-lite-qwen", total_generations=20, started_at=1000.0, now=1000.0)
    for gen in range(1, 13):
        t0 = 1000.0 + 30 * (gen - 1)
        state.on_generation_start(gen, 32, now=t0)
        for i in range(32):
            state.on_rollout_started(i % 4, now=t0 + 1)
            state.on_rollout_done(i % 4, now=t0 + 2)
        state.on_status(contract_status(gen), now=t0 + 30)
    state.on_generation_start(13, 32, now=1360.0)
    for i in range(14):
        state.on_rollout_started(i % 3, now=1370.0)
    for i in range(9):
        state.on_rollout_done(i % 3, now=1375.0)
    state.tick(1381.0)
    return state


def render_text(state: DashboardState, width: int, explicit: bool = True) -> str:
    console = Console(record=True, width=width, force_terminal=False, color_system=None, file=io.StringIO())
    console.print(render_dashboard(state, width=width if explicit else None))
    return console.export_text()


# -- state ----------------------------------------------------------------------------------------------


def test_state_tolerates_missing_keys() -> None:
    state = DashboardState(total_generations=5)
    record = state.on_status({"iter": 1})
    assert record.gen == 1 and record.reward_mean is None and record.sigma is None
    state.on_status({})  # not even "iter": numbered after the last one
    assert [r.gen for r in state.history] == [1, 2]
    assert format_status_line(state.history[-1], 5) == "gen 2/5"
    render_text(state, 120)


def test_elapsed_and_eta_come_from_injected_times() -> None:
    state = full_state()
    assert state.elapsed == pytest.approx(381.0)
    # 12 generations in 360 s -> 30 s each; 8 left, 21 s into the current one.
    assert state.eta == pytest.approx(8 * 30 - 21)
    fresh = DashboardState(total_generations=4, started_at=0.0)
    assert fresh.eta is None
    fresh.on_generation_start(1, 10, now=0.0)
    for _ in range(5):
        fresh.on_rollout_started(0, now=1.0)
        fresh.on_rollout_done(0, now=10.0)
    assert fresh.eta == pytest.approx(4 * 20 - 10)


def test_checksum_verdicts_and_worker_health() -> None:
    state = full_state()
    ok = {wid: w.checksum_ok for wid, w in state.workers.items()}
    assert ok == {0: True, 1: True, 2: False, 3: None}
    assert state.workers[3].alive is False and state.workers[3].restarts == 1
    status = contract_status(13)
    status["checksums_agree"] = True
    state.on_status(status)
    assert state.workers[2].checksum_ok is True


def test_seconds_split_latest_and_cumulative() -> None:
    state = full_state()
    assert state.seconds_split() == pytest.approx({"rollout": 12.1, "perturb": 0.3, "update": 0.1})
    assert state.seconds_split(cumulative=True)["rollout"] == pytest.approx(12 * 12.1)


def test_stock_evotorch_keys_stand_in() -> None:
    state = DashboardState()
    record = state.on_status(
        {"iter": 1, "mean_eval": -3.5, "pop_best_eval": -1.0, "stdev": torch.tensor([0.1, 0.3])}
    )
    assert (record.reward_mean, record.reward_max) == (-3.5, -1.0)
    assert record.sigma == pytest.approx(0.2)


# -- render -----------------------------------------------------------------------------------------------


def test_render_snapshot_120() -> None:
    text = render_text(full_state(), 120)
    path = SNAPSHOTS / "dashboard_120.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if not path.is_file():
        pytest.fail(f"snapshot {path} is missing: run with UPDATE_SNAPSHOTS=1 to record it")
    assert text == path.read_text(encoding="utf-8"), "dashboard changed: UPDATE_SNAPSHOTS=1 to accept"


@pytest.mark.parametrize("width", [80, 120, 160])
@pytest.mark.parametrize("which", ["empty", "full"])
def test_render_fits_width(width: int, which: str) -> None:
    state = DashboardState() if which == "empty" else full_state()
    text = render_text(state, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    for heading in HEADINGS:
        assert heading in text
    if which == "full":
        assert "13/20" in text and "0.530" in text and "DISAGREE" in text and "shopping_5" in text
        assert "held-out success (test): start 10/40 -> centre 22/40" in " ".join(text.split())
    else:
        assert "waiting for the first generation" in text
    assert render_text(state, width, explicit=False) == text  # width=None follows the console


def test_render_is_pure() -> None:
    state = full_state()
    before = copy.deepcopy(state)
    first = render_text(state, 120)
    assert render_text(state, 120) == first
    assert state == before


def test_long_prompt_is_truncated() -> None:
    state = full_state()
    state.best_prompt["system"] = "word " * 2000
    text = render_text(state, 120)
    best = text[text.index("Best prompt") :]
    assert best.count("word") < 60 and "…" in best


# -- logger -----------------------------------------------------------------------------------------------


def test_non_tty_prints_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    clock = FakeClock()
    logger = RichDashboardLogger(run_name="plain", total_generations=20, clock=clock)
    logger.on_generation_start(3, 4)
    logger.on_rollout_started(0)
    logger.on_rollout_done(0)
    status = {
        "iter": 3,
        "reward_mean": 0.25,
        "reward_max": 1.0,
        "success_rate": 0.25,
        "sigma": 0.001,
        "seconds_rollout": 12.1,
        "seconds_perturb": 0.3,
        "seconds_update": 0.1,
    }
    logger._log(status)
    logger._log({"iter": 4, "reward_mean": 0.5, "centre_eval": {"split": "test", "success_rate": 0.4}})
    logger.close()
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "gen 3/20 reward_mean=0.250 max=1.000 success=0.25 sigma=0.0010"
        " rollout=12.1s perturb=0.3s update=0.1s",
        "gen 4/20 reward_mean=0.500 centre=0.40",
    ]


def test_forced_terminal_owns_one_live() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120, color_system=None)
    clock = FakeClock()
    with RichDashboardLogger(run_name="forced", total_generations=2, console=console, clock=clock) as logger:
        for gen in (1, 2):
            logger.on_generation_start(gen, 8)
            for i in range(8):
                logger.on_rollout_started(i % 2)
                logger.on_rollout_done(i % 2)
            clock.t += 30
            logger.log(contract_status(gen, n_workers=2))
        assert logger._live is not None and logger._live.is_started
    logger.close()  # a second close is harmless
    out = buffer.getvalue()
    assert "Reward per generation" in out and "generation 2/2" in out and "gen 1/" not in out


class SphereProblem(Problem):
    """A 5-dimensional sphere, minimised."""

    def __init__(self) -> None:
        super().__init__("min", solution_length=5, initial_bounds=(-1.0, 1.0), dtype=torch.float32)

    def _evaluate_batch(self, solutions: Any) -> None:
        solutions.set_evals(torch.sum(solutions.values**2, dim=-1))


class CotrainLikePGPE(PGPE):
    """PGPE that also pushes the cotrain status keys, the way CoEvolutionES does."""

    def _step_non_distributed(self) -> None:  # PGPE binds ``_step`` to this in its __init__
        super()._step_non_distributed()
        self.update_status(contract_status(self.step_count + 1, n_workers=2))


def make_pgpe(cls: type[PGPE] = PGPE) -> PGPE:
    torch.manual_seed(0)
    return cls(SphereProblem(), popsize=10, center_learning_rate=0.1, stdev_learning_rate=0.1, stdev_init=0.5)


def test_real_pgpe_status_beside_evotorch_loggers(capsys: pytest.CaptureFixture[str]) -> None:
    searcher = make_pgpe()
    stdout_logger = StdOutLogger(searcher)
    pandas_logger = PandasLogger(searcher)
    dashboard = RichDashboardLogger(searcher, run_name="sphere", total_generations=3)
    searcher.run(3)
    dashboard.close()
    assert len(pandas_logger.to_dataframe()) == 3 and stdout_logger is not None
    assert [r.gen for r in dashboard.state.history] == [1, 2, 3]
    assert all(r.reward_mean is not None and r.sigma is not None for r in dashboard.state.history)
    out = capsys.readouterr().out
    assert "mean_eval" in out  # StdOutLogger's own report
    assert "gen 3/3 reward_mean=" in out
    render_text(dashboard.state, 120)


def test_searcher_pushing_contract_keys() -> None:
    searcher = make_pgpe(CotrainLikePGPE)
    dashboard = RichDashboardLogger(
        searcher,
        run_name="cotrain-like",
        total_generations=2,
        console=Console(file=io.StringIO(), force_terminal=False),
    )
    searcher.run(2)
    assert dashboard.state.history[-1].reward_mean == pytest.approx(contract_status(2)["reward_mean"])
    assert set(dashboard.state.prompt_probs) == {"system", "skills", "action_format"}
    assert dashboard.state.checksums_agree is False and len(dashboard.state.workers) == 2


def test_progress_events_are_thread_safe() -> None:
    logger = RichDashboardLogger(
        run_name="threads", total_generations=1, console=Console(file=io.StringIO(), force_terminal=False)
    )
    n_threads, per_thread = 8, 300
    logger.on_generation_start(1, n_threads * per_thread)
    stop = threading.Event()

    def push(worker: int) -> None:
        for _ in range(per_thread):
            logger.on_rollout_started(worker)
            logger.on_rollout_done(worker)

    def draw() -> None:
        while not stop.is_set():
            Console(file=io.StringIO(), width=120).print(logger.renderable())

    drawer = threading.Thread(target=draw)
    drawer.start()
    threads = [threading.Thread(target=push, args=(w,)) for w in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    drawer.join()
    state = logger.state
    assert state.rollouts_done == n_threads * per_thread
    assert all(w.in_flight == 0 and w.done == per_thread for w in state.workers.values())


# -- real terminal ------------------------------------------------------------------------------------------

TMUX_SCRIPT = """
import sys, time
from cotrain.ui import RichDashboardLogger
sys.path.insert(0, {tests!r})
from test_ui import contract_status

with RichDashboardLogger(run_name="tmux-demo", total_generations=3, refresh_per_second=10) as logger:
    for gen in range(1, 4):
        logger.on_generation_start(gen, 8)
        for i in range(8):
            logger.on_rollout_started(i % 2)
            time.sleep(0.3 / 8)
            logger.on_rollout_done(i % 2)
        status = contract_status(gen, n_workers=2)
        status.update(population_size=8, rollouts_done=8, rollouts_total=8)
        logger.log(status)
        time.sleep(0.3)
open({marker!r}, "w").write("done")
time.sleep(120)
"""


@pytest.fixture
def tmux_session(tmp_path: Path) -> Iterator[tuple[list[str], str]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the real-terminal dashboard test needs it")
    base = ["tmux", "-L", f"esopt-ui-test-{os.getpid()}", "-f", "/dev/null"]
    yield base, "dash"
    subprocess.run([*base, "kill-server"], capture_output=True, check=False)


def test_dashboard_in_real_terminal(tmp_path: Path, tmux_session: tuple[list[str], str]) -> None:
    base, name = tmux_session
    marker = tmp_path / "done"
    script = tmp_path / "drive.py"
    script.write_text(TMUX_SCRIPT.format(tests=str(Path(__file__).parent), marker=str(marker)))
    command = (
        f"cd {REPO_ROOT} && env -u COLUMNS -u LINES -u NO_COLOR PYTHONPATH={REPO_ROOT} "
        f"{sys.executable} {script} 2>{tmp_path / 'stderr'}"
    )
    subprocess.run([*base, "new-session", "-d", "-x", "140", "-y", "45", "-s", name, command], check=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    stderr = (tmp_path / "stderr").read_text() if (tmp_path / "stderr").exists() else ""
    assert marker.exists(), f"driver script did not finish: {stderr}"
    pane = subprocess.run(
        [*base, "capture-pane", "-p", "-t", name], capture_output=True, text=True, check=True
    ).stdout
    (tmp_path / "pane.txt").write_text(pane)
    for heading in HEADINGS:
        assert heading in pane, pane
    assert "tmux-demo" in pane and "generation 3/3" in pane
    assert "0.170" in pane  # reward mean of generation 3
    assert "8/8 rollouts" in pane and "DISAGREE" in pane
    assert "gen 3/3 reward_mean" not in pane  # a terminal gets the dashboard, not plain lines


# -- learning curve ----------------------------------------------------------------------------------------


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_tied_rewards_and_empty_updates_are_shown(capsys: pytest.CaptureFixture[str]) -> None:
    """The dashboard and the plain lines say when the weights moved on the rewards, on the confidence
    tie-break alone (every reward tied) or not at all (with the searcher's reason)."""
    state = DashboardState(run_name="ties", total_generations=4, started_at=0.0, now=0.0)
    kinds = [{"update_empty": False, "rewards_tied": False},
             {"update_empty": False, "rewards_tied": True},
             {"update_empty": True, "rewards_tied": True,
              "update_empty_reason": "every candidate's fitness ties"}]
    for gen, keys in enumerate(kinds, start=1):
        state.on_status({"iter": gen, "reward_mean": 0.0, "success_rate": 0.0, **keys}, now=float(gen))
    assert [r.update_kind for r in state.history] == ["rewards", "tie-break only", "empty"]
    assert state.update_note == ("weight updates of 3 gens: 1 from rewards, 1 tie-break only, 1 empty "
                                 "(latest: every candidate's fitness ties)")
    for width in (80, 120):
        text = render_text(state, width)
        assert all(len(line) <= width for line in text.splitlines())
        words = " ".join(text.replace("│", " ").split())  # the note wraps inside its panel
        assert "1 from rewards, 1 tie-break" in words and "1 empty (latest: every" in words
    state.on_status({"iter": 4, "reward_mean": 0.0, "update_empty": False, "rewards_tied": True}, now=5.0)
    assert state.update_note is not None and state.update_note.endswith("(latest: every reward tied)")
    assert DashboardState().update_note is None  # no status said anything: no line
    logger = RichDashboardLogger(run_name="plain", total_generations=4, clock=FakeClock())
    logger._log({"iter": 2, "reward_mean": 0.0, "update_empty": False, "rewards_tied": True})
    logger.close()
    assert capsys.readouterr().out.splitlines() == ["gen 2/4 reward_mean=0.000 update=tie-break-only"]


def test_learning_curve_from_jsonl(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("\n".join(json.dumps(contract_status(g)) for g in range(1, 13)) + "\n")
    out = plot_learning_curve(metrics, tmp_path / "plots" / "curve.png")
    assert_png(out)


def test_learning_curve_from_dicts_without_optional_keys(tmp_path: Path) -> None:
    rows = [{"iter": g, "reward_mean": 0.1 * g, "success_rate": 0.05 * g} for g in range(1, 6)]
    assert_png(plot_learning_curve(rows, tmp_path / "curve.png"))
    with pytest.raises(MetricsError, match="no generations"):
        plot_learning_curve([], tmp_path / "empty.png")
    with pytest.raises(MetricsError, match="metrics row 2 is list"):
        plot_learning_curve([rows[0], [1]], tmp_path / "bad.png")


# -- start vs centre (issue #13 item 6) --------------------------------------------------------------------


def test_the_start_and_the_latest_centre_on_the_same_held_out_tasks() -> None:
    state = DashboardState()
    assert state.held_out is None
    state.on_status({"iter": 1, "start_eval": {"split": "test", "success_rate": 0.25, "n_tasks": 12}})
    assert state.start_eval == EvalSummary("test", 0.25, 12, 0) and state.held_out == (
        "held-out success (test): start 3/12")
    state.on_status({"iter": 5, "centre_eval": {"split": "test", "success_rate": 7 / 12, "n_tasks": 12}})
    state.on_status({"iter": 6})
    assert state.held_out == "held-out success (test): start 3/12 -> centre 7/12"
    assert format_held_out(state.start_eval, state.latest_centre_eval) == (
        "held-out success (test): start 3/12 -> centre 7/12 (gen 5)")
    assert format_held_out(None, EvalSummary("test_unseen", 0.5, 4, 10)) == (
        "held-out success (test_unseen): centre 2/4 (gen 10)")
    assert EvalSummary.from_status({"split": "test", "success_rate": 0.5}) is None  # no task count
    line = format_status_line(full_state().history[0], 20)
    assert "start=0.25" in line and "centre" not in line


def test_learning_curve_starts_at_the_start(tmp_path: Path) -> None:
    """With a ``start_eval`` the held-out series begins at generation 0 and the title reads start -> centre;
    the image differs from the same metrics without it."""
    rows = [contract_status(g) for g in range(1, 13)]
    with_start = plot_learning_curve(rows, tmp_path / "with.png", title="demo")
    without = [{k: v for k, v in row.items() if k != "start_eval"} for row in rows]
    plain = plot_learning_curve(without, tmp_path / "without.png", title="demo")
    assert_png(with_start) and assert_png(plain)
    assert with_start.read_bytes() != plain.read_bytes()
