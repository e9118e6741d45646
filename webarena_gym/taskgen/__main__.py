"""``python -m webarena_gym.taskgen --out DIR [--seed N] [--check]``: write or check the task files (the
bundled ``embedded_<split>.json`` and the tier files ``embedded_tier<t>_<split>.json``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webarena_gym.taskgen.build import DEFAULT_TASK_SEED, generate, render
from webarena_gym.taskgen.tiers import generate_tiers


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (1 when ``--check`` finds a file that differs)."""
    parser = argparse.ArgumentParser(prog="python -m webarena_gym.taskgen", description=__doc__)
    parser.add_argument(
        "--out", type=Path, required=True, help="directory of the embedded_<split>.json files"
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_TASK_SEED, help="seed of the instance sampling")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out, write nothing")
    args = parser.parse_args(argv)
    splits = {**generate(args.seed), **generate_tiers(args.seed)}
    stale = []
    if not args.check:
        args.out.mkdir(parents=True, exist_ok=True)
    for split, entries in splits.items():
        path = args.out / f"embedded_{split}.json"
        text = render(entries)
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
        else:
            path.write_text(text, encoding="utf-8")
        print(f"{split}: {len(entries)} tasks -> {path}")
    if stale:
        print(f"out of date: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
