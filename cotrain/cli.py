"""``esopt``: train, resume, evaluate and export co-evolution runs.

    esopt train  --config FILE --run-dir DIR [--set section.key=value ...] [--ui auto|on|off]
    esopt resume --run-dir DIR [--ui auto|on|off]
    esopt eval   --run-dir DIR [--split S] [--n-tasks N] [--export DIR | --generation G] [--no-baseline]
    esopt export --run-dir DIR --out DIR
    esopt grid   --config FILE --out DIR [--jobs N] [--settings S ...] [--arms A ...] [--seeds K ...]
                 [--max-runs N] [--budget-minutes M] [--report-only | --plan] [--merge DIR ...]
                 [--results PREFIX]

Errors of configuration, run directories, checkpoints, models and devices (``CotrainError`` and
``EsAgentError``) print one line and exit with status 2; an interrupt exits with 130 and leaves the run
directory at its last completed generation (``esopt resume`` continues).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import threading
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cotrain.errors import CotrainError
from es_agent import interrupt
from es_agent.errors import EsAgentError

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from cotrain.config import TrainConfig
    from cotrain.searcher import CoEvolutionES
    from cotrain.ui import RichDashboardLogger

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
_DRIVER_CLOSED = "Connection closed while reading from the driver"


_CLOSED_LOOP_CHILD = re.compile(r"^Loop .* that handles pid \d+ is closed$")


class _InterruptedDriverFilter(logging.Filter):
    """Drops asyncio's and Playwright's reports of a Playwright driver that went away with an interrupt:
    Ctrl-C reaches the whole process group, so the browser driver dies with the run, and the future that
    recorded its end is collected unread ("Future exception was never retrieved"); a driver whose start the
    interrupt cut short outlives its event loop ("Loop ... that handles pid N is closed"); the reply to a
    command the interrupt abandoned finds no caller ("Error occurred in event listener": "Cannot find command
    to respond"). Only after an interrupt; every other record passes."""

    interrupted = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.interrupted:
            return True
        message = record.getMessage()
        error = record.exc_info[1] if record.exc_info else None
        return not ((message.startswith("Future exception was never retrieved") and _DRIVER_CLOSED in message)
                    or _CLOSED_LOOP_CHILD.match(message)
                    or (message == "Error occurred in event listener"
                        and str(error).startswith("Cannot find command to respond")))


_DRIVER_FILTER = _InterruptedDriverFilter()


def _unraisable_after_interrupt(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """``sys.unraisablehook`` that drops one report after an interrupt: the pipe transport of a Playwright
    driver whose start the interrupt cut short, collected after its event loop closed ("Event loop is
    closed" in ``BaseSubprocessTransport.__del__``). Everything else goes to ``hook``."""

    def unraisable(info: Any) -> object:
        where = getattr(getattr(info, "object", None), "__qualname__", "")
        if (_DRIVER_FILTER.interrupted and isinstance(info.exc_value, RuntimeError)
                and str(info.exc_value) == "Event loop is closed" and where.endswith("Transport.__del__")):
            return None
        return hook(info)

    unraisable.esopt_filter = True  # type: ignore[attr-defined]
    return unraisable


INTERRUPT_GRACE_S = 60.0
"""After Ctrl-C, how long ``esopt`` waits for the command to stop cleanly before it exits anyway (130, the
same line): a run directory is consistent at every moment (a SIGKILL leaves it resumable), while a
``KeyboardInterrupt`` can be lost inside Playwright's event loop and a relaunch of the killed browser can
wait on its dead driver."""


@dataclass
class _Grace:
    """The grace period of the current ``esopt`` call: its timer (started by the first Ctrl-C), the
    command, and whether the interrupted line was printed already."""

    timer: threading.Timer | None = None
    command: str = ""
    reported: bool = False


_GRACE = _Grace()


def _on_sigint(signum: int, frame: types.FrameType | None) -> None:
    """Python's own SIGINT handler (raise KeyboardInterrupt), after noting the interrupt for the filter and
    starting the grace period (:data:`INTERRUPT_GRACE_S`)."""
    _DRIVER_FILTER.interrupted = True
    interrupt.request()
    if _GRACE.timer is None:
        _GRACE.timer = threading.Timer(INTERRUPT_GRACE_S, _exit_after_grace)
        _GRACE.timer.daemon = True
        _GRACE.timer.start()
    signal.default_int_handler(signum, frame)


def _exit_after_grace() -> None:
    """The grace period after Ctrl-C ran out: the interrupted line (unless printed), then exit 130 at once."""
    if not _GRACE.reported:
        print(_interrupted_line(_GRACE.command), file=sys.stderr, flush=True)
    os._exit(EXIT_INTERRUPTED)


def _cancel_grace() -> None:
    if _GRACE.timer is not None:
        _GRACE.timer.cancel()
    _GRACE.timer, _GRACE.command, _GRACE.reported = None, "", False


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``esopt``."""
    parser = argparse.ArgumentParser(prog="esopt", description="Evolution strategies for LLM web agents: "
                                     "weights and prompts co-evolved from terminal task rewards.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="start a run from a TOML config")
    p.add_argument("--config", required=True, help="TOML config file (see configs/)")
    p.add_argument("--run-dir", required=True, help="new (absent or empty) run directory")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value (repeatable), e.g. --set es.population=8")
    p.add_argument("--ui", choices=("auto", "on", "off"), help="progress display (default: ui.mode)")

    p = sub.add_parser("resume", help="continue a run from its last completed generation")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--ui", choices=("auto", "on", "off"))

    p = sub.add_parser("eval", help="success rate of a run's centre vs the baseline genome on a split")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--split", help="split to evaluate on (default: eval.split of the run)")
    p.add_argument("--n-tasks", type=int, help="first N tasks of the split (0: all; default: eval.n_tasks)")
    p.add_argument("--export", help="evaluate this export directory instead of the run's centre")
    p.add_argument("--generation", type=int,
                   help="the centre after this completed generation (default: the last; 0: the start)")
    p.add_argument("--no-baseline", action="store_true", help="skip the baseline genome")
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    p = sub.add_parser("export", help="write the centre as a Hugging Face model directory + best prompt")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--out", required=True, help="output directory (absent or empty)")
    p = sub.add_parser("prune", help="free disk: keep only the latest weight snapshot of finished runs")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="run directories, or folders searched for them (a grid's --out)")
    _add_grid_parser(sub)
    return parser


# --- esopt grid (issue #13 item 5; cotrain.grid) ------------------------------------------------------------


def _add_grid_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("grid", help="the learning grid: settings x arms x seeds, resumable, with its report")
    p.add_argument("--config", required=True, help="grid file (see configs/grid.toml)")
    p.add_argument("--out", required=True, help="grid directory (runs and result files; reused to resume)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once, in child processes (one torch thread "
                   "each)")
    p.add_argument("--settings", nargs="+", help="only these settings (e.g. embedded_shopping_t1)")
    p.add_argument("--arms", nargs="+", help="only these arms (start, prompts, weights, both)")
    p.add_argument("--seeds", nargs="+", type=int, help="only these seeds (with --report-only: a report of "
                   "only these seeds' runs, e.g. a pre-registered subset; pair it with --results)")
    p.add_argument("--max-runs", type=int, help="start at most N runs in this invocation")
    p.add_argument("--budget-minutes", type=float, help="start no run after M minutes (runs in progress "
                   "finish; continue later with the same command)")
    p.add_argument("--report-only", action="store_true", help="run nothing; write the report of the "
                   "results there are")
    p.add_argument("--merge", nargs="+", default=[], metavar="DIR", help="other grid directories whose "
                   "results join the report")
    p.add_argument("--results", help="report prefix (default: grid.results of the grid file)")
    p.add_argument("--plan", action="store_true", help="run nothing, write nothing: print the (filtered) "
                   "runs finished, running and to run, and the compute and wall time left on --jobs, priced "
                   "by the finished runs of --out and --merge")


def _grid(args: argparse.Namespace) -> int:
    from cotrain.grid import run_grid
    from cotrain.grid_config import load_grid_config
    from cotrain.grid_report import write_report

    grid = load_grid_config(args.config)
    if args.plan:
        from cotrain.grid import plan_grid
        from cotrain.grid_plan import format_plan, price_runs

        plan = plan_grid(grid, settings=args.settings, arms=args.arms, seeds=args.seeds)
        print(f"grid plan: {args.config} in {args.out}, {len(plan)} run(s)")
        print(format_plan(price_runs(plan, Path(args.out), [Path(d) for d in args.merge]), args.jobs))
        return 0
    status = 0
    if not args.report_only:
        outcome = run_grid(grid, args.out, jobs=args.jobs, settings=args.settings, arms=args.arms,
                           seeds=args.seeds, max_runs=args.max_runs, budget_minutes=args.budget_minutes,
                           log=lambda line: print(line, flush=True))
        print(f"grid: {len(outcome.finished)} run(s) finished now, {outcome.already} before, "
              f"{len(outcome.pending)} pending")
        if outcome.held_elsewhere:
            print(f"grid: {len(outcome.held_elsewhere)} pending run(s) are held by another process (another "
                  f"esopt grid on {args.out}, or the jobs of a killed one): "
                  f"{', '.join(outcome.held_elsewhere)}")
        for key, line in outcome.failed.items():
            print(f"esopt grid: error: run {key} failed: {line} (see {Path(args.out) / key / 'error.txt'})",
                  file=sys.stderr)
        status = EXIT_ERROR if outcome.failed else 0
    command = _grid_command(args)
    paths = write_report(grid, [Path(args.out), *map(Path, args.merge)], results=args.results,
                         command=command, seeds=args.seeds if args.report_only else None)
    print(f"grid report: {', '.join(str(p) for p in paths)}")
    return status


def _grid_command(args: argparse.Namespace) -> str:
    """The ``esopt grid`` command line of ``args`` (for the report)."""
    import shlex

    parts = ["esopt", "grid", "--config", args.config, "--out", args.out, "--jobs", str(args.jobs)]
    for flag in ("settings", "arms", "seeds", "merge"):
        if getattr(args, flag):
            parts += [f"--{flag}", *map(str, getattr(args, flag))]
    for flag in ("max_runs", "budget_minutes", "results"):
        if getattr(args, flag) is not None:
            parts += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if args.report_only:
        parts.append("--report-only")
    return shlex.join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``esopt`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    os.environ.setdefault("EVOTORCH_VERBOSE_LEVEL", "0")  # EvoTorch's INFO lines would break the dashboard
    logging.getLogger("asyncio").addFilter(_DRIVER_FILTER)
    logging.getLogger("playwright").addFilter(_DRIVER_FILTER)
    if not getattr(sys.unraisablehook, "esopt_filter", False):  # kept after return: the collection is late
        sys.unraisablehook = _unraisable_after_interrupt(sys.unraisablehook)
    own_handler = (threading.current_thread() is threading.main_thread()
                   and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    if own_handler:
        interrupt.clear()
        _cancel_grace()
        _GRACE.command = args.command
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        return _interrupted(args.command)
    except Exception as exc:
        if _DRIVER_FILTER.interrupted:
            # Ctrl-C reaches the whole process group: the browser may die of it before Python raises
            # KeyboardInterrupt, and the episode then fails on the closed browser. That is the interrupt.
            return _interrupted(args.command)
        if isinstance(exc, CotrainError | EsAgentError):
            print(f"esopt {args.command}: error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_ERROR
        raise
    finally:
        if own_handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            interrupt.clear()  # a library call made later in this process starts uninterrupted
            _cancel_grace()


def _interrupted_line(command: str) -> str:
    return f"esopt {command}: interrupted; the run directory keeps its last completed generation"


def _interrupted(command: str) -> int:
    _DRIVER_FILTER.interrupted = True
    _GRACE.reported = True
    print(_interrupted_line(command), file=sys.stderr)
    return EXIT_INTERRUPTED


def make_logger(cfg: TrainConfig, searcher: CoEvolutionES | None, console: Console | None = None,
                ) -> RichDashboardLogger:
    """The dashboard (``ui.mode``: auto, on, off) attached to ``searcher``'s ``log_hook``: the progress of a
    training session (a :data:`cotrain.trainer.ProgressFactory` with ``console`` left out)."""
    from cotrain.ui import RichDashboardLogger

    force = {"auto": None, "on": True, "off": False}[cfg.ui.mode]
    return RichDashboardLogger(searcher, run_name=cfg.name, total_generations=cfg.es.generations,
                               console=console, force_terminal=None if console is not None else force)


class Dashboard:
    """The progress of ``esopt train`` and ``esopt resume``: :func:`make_logger`'s dashboard for the session
    (pass the instance as ``progress=``), then :meth:`plot` writes ``learning_curve.png`` (``ui.plot``)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console
        self.config: TrainConfig | None = None
        """The config of the session, once it started its generations."""

    def __call__(self, cfg: TrainConfig, searcher: CoEvolutionES) -> RichDashboardLogger:
        """The session's dashboard (built by :func:`make_logger`, looked up when called)."""
        self.config = cfg
        return make_logger(cfg, searcher, self.console)

    def plot(self, run_dir: str | Path) -> Path | None:
        """``learning_curve.png`` of the run's ``metrics.jsonl``, when a session ran generations here with
        ``ui.plot`` on and the run has metrics; the path written, else ``None``."""
        cfg, run = self.config, Path(run_dir)
        metrics = run / "metrics.jsonl"
        if cfg is None or not cfg.ui.plot or not metrics.is_file() or not metrics.read_text().strip():
            return None
        from cotrain.ui import plot_learning_curve

        return plot_learning_curve(metrics, run / "learning_curve.png", title=cfg.name)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "train":
        from cotrain.config import load_config
        from cotrain.trainer import train

        overrides = list(args.overrides) + ([f"ui.mode={args.ui}"] if args.ui else [])
        cfg = load_config(args.config, overrides)
        dashboard = Dashboard()
        try:
            result = train(cfg, args.run_dir, progress=dashboard)
        finally:
            dashboard.plot(args.run_dir)
        _print_result(result)
    elif args.command == "resume":
        from cotrain.trainer import resume

        dashboard = Dashboard()
        try:
            result = resume(args.run_dir, progress=dashboard, ui=args.ui)
        finally:
            dashboard.plot(args.run_dir)
        _print_result(result)
    elif args.command == "eval":
        from cotrain.evaluate import evaluate_run, format_report

        report = evaluate_run(args.run_dir, split=args.split, n_tasks=args.n_tasks, export_dir=args.export,
                              baseline=not args.no_baseline, generation=args.generation)
        print(json.dumps(report, indent=2) if args.json else format_report(report))
    elif args.command == "grid":
        return _grid(args)
    elif args.command == "prune":
        return _prune(args.paths)
    elif args.command == "export":
        from cotrain.export import export_run

        out = export_run(args.run_dir, args.out)
        print(f"exported to {out} (load with transformers.AutoModelForCausalLM.from_pretrained)")
    return 0


def _prune(paths: Sequence[str]) -> int:
    """``esopt prune``: every finished run under ``paths`` keeps only its latest snapshot; a run another
    process writes, or an unfinished one, is left whole and named (exit status 1)."""
    from cotrain.checkpoint import RunDir, prune_run
    from cotrain.errors import RunDirError

    runs: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise RunDirError(f"no run directory or folder at {path}")
        runs += [path] if (path / "run.json").exists() else sorted(p.parent for p in path.rglob("run.json"))
    if not runs:
        raise RunDirError(f"no run directory (run.json) under {', '.join(paths)}")
    total, left = 0, 0
    for run in runs:
        if not RunDir.open(run).finished:
            print(f"{run}: unfinished, left whole (resume it, then prune)")
            left += 1
            continue
        try:
            pruned, freed = prune_run(run)
        except RunDirError as exc:
            print(f"{run}: left whole: {_one_line(exc)}")
            left += 1
            continue
        total += freed
        print(f"{run}: pruned generation(s) {pruned or 'none'} ({freed / 2**20:.0f} MiB)")
    print(f"freed {total / 2**30:.2f} GiB in {len(runs) - left} run(s); {left} left whole")
    return 1 if left else 0


def _one_line(exc: BaseException) -> str:
    """The error's message on one line (a message never spreads over the terminal)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _print_result(result: object) -> None:
    from cotrain.trainer import TrainResult

    assert isinstance(result, TrainResult)
    state = "finished" if result.finished else "stopped"
    line = f"run {state} after {result.generation} generation(s) in {result.seconds:.1f}s: {result.run_dir}"
    if result.checksum:
        line += f" (centre checksum {result.checksum[:12]})"
    print(line)
    curve = result.run_dir / "learning_curve.png"
    if curve.exists():
        print(f"learning curve: {curve}")
    # issue #13 item 6 (engineer C): the last line shows the start beside the trained centre
    from cotrain.ui.state import EvalSummary, format_held_out

    held_out = format_held_out(EvalSummary.from_status(result.start_eval),
                               EvalSummary.from_status(result.centre_eval))
    if held_out is not None:
        print(held_out)


if __name__ == "__main__":
    raise SystemExit(main())
