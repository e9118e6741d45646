"""``esopt``: train, resume, evaluate and export co-evolution runs.

    esopt train  --config FILE --run-dir DIR [--set section.key=value ...] [--ui auto|on|off]
    esopt resume --run-dir DIR [--ui auto|on|off]
    esopt eval   --run-dir DIR [--split S] [--n-tasks N] [--export DIR] [--no-baseline]
    esopt export --run-dir DIR --out DIR

Errors of configuration, run directories and checkpoints print one line and exit with status 2; an interrupt
exits with 130 and leaves the run directory at its last completed generation (``esopt resume`` continues).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from cotrain.errors import CotrainError

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


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
    p.add_argument("--no-baseline", action="store_true", help="skip the baseline genome")
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    p = sub.add_parser("export", help="write the centre as a Hugging Face model directory + best prompt")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--out", required=True, help="output directory (absent or empty)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``esopt`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    os.environ.setdefault("EVOTORCH_VERBOSE_LEVEL", "0")  # EvoTorch's INFO lines would break the dashboard
    try:
        return _dispatch(args)
    except CotrainError as exc:
        print(f"esopt {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"esopt {args.command}: interrupted; the run directory keeps its last completed generation",
              file=sys.stderr)
        return EXIT_INTERRUPTED


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "train":
        from cotrain.config import load_config
        from cotrain.trainer import train

        overrides = list(args.overrides) + ([f"ui.mode={args.ui}"] if args.ui else [])
        cfg = load_config(args.config, overrides)
        _print_result(train(cfg, args.run_dir))
    elif args.command == "resume":
        from cotrain.checkpoint import RunDir
        from cotrain.trainer import resume, run_generations

        if args.ui:
            import dataclasses

            run = RunDir.open(args.run_dir)
            run.config = dataclasses.replace(run.config, ui=dataclasses.replace(run.config.ui, mode=args.ui))
            run.reopen_for_resume()
            _print_result(run_generations(run))
        else:
            _print_result(resume(args.run_dir))
    elif args.command == "eval":
        from cotrain.evaluate import evaluate_run, format_report

        report = evaluate_run(args.run_dir, split=args.split, n_tasks=args.n_tasks, export_dir=args.export,
                              baseline=not args.no_baseline)
        print(json.dumps(report, indent=2) if args.json else format_report(report))
    elif args.command == "export":
        from cotrain.export import export_run

        out = export_run(args.run_dir, args.out)
        print(f"exported to {out} (load with transformers.AutoModelForCausalLM.from_pretrained)")
    return 0


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


if __name__ == "__main__":
    raise SystemExit(main())
