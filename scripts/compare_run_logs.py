"""Compare a run's update log and final weight checksum with a recorded reference, bit for bit.

Issue #11's behaviour check: a refactor must leave each generation's candidate rows, rewards and ``(seed,
coeff)`` update, and the final centre checksum, exactly as they were. Reads only the run directory's
documented files (``update_log.jsonl``, ``run.json``; docs/CONTRACTS.md, "Run directories"), so it runs on any
tree with the standard library alone.

    python scripts/compare_run_logs.py REF RUN_DIR        # REF: a reference JSON or another run directory
    python scripts/compare_run_logs.py --record RUN_DIR OUT.json
    python scripts/compare_run_logs.py --first 3 REF RUN_DIR   # only generations 1..3 (no final checksum)

``compare`` prints ``identical`` and exits 0, or prints the first difference and exits 1; an unreadable run
or reference exits 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

FORMAT = "compare_run_logs/1"
RECORD_KEYS = ("iter", "task_batch", "env_seed", "sigma", "rows", "rewards", "update", "prompt_probs",
               "pool_changes")
"""The update-log fields a generation is compared on (``distribution`` and ``prev`` are derived from them)."""


class RunLogError(Exception):
    """A run directory or reference file that cannot be read as one (names the file and what is wrong)."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RunLogError(f"{path}: not found") from None
    except (OSError, ValueError) as exc:
        raise RunLogError(f"{path}: not readable JSON ({exc})") from None


def extract(run_dir: Path) -> dict[str, Any]:
    """The comparable part of a finished or partial run: its committed generations' update-log fields
    (:data:`RECORD_KEYS`) and ``run.json``'s generation and centre checksum."""
    run = _read_json(run_dir / "run.json")
    if not isinstance(run, dict) or not isinstance(run.get("generation"), int):
        raise RunLogError(f"{run_dir / 'run.json'}: no integer 'generation'")
    generation: int = run["generation"]
    checksum = run.get("checksum")
    if checksum is not None and not isinstance(checksum, dict):
        raise RunLogError(f"{run_dir / 'run.json'}: 'checksum' {checksum!r} is not an object")
    # a run stopped between snapshots has no checksum of its last generation: None (compared as absent)
    at_end = checksum is not None and checksum.get("generation") == generation
    value = checksum.get("value") if checksum is not None and at_end else None
    log = run_dir / "update_log.jsonl"
    try:
        lines = log.read_text().splitlines()
    except OSError as exc:
        raise RunLogError(f"{log}: not readable ({exc})") from None
    records = []
    for number, line in enumerate(lines[:generation], start=1):
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise RunLogError(f"{log}:{number}: not JSON ({exc})") from None
        missing = [key for key in RECORD_KEYS if key not in record]
        if missing:
            raise RunLogError(f"{log}:{number}: missing {missing}")
        records.append({key: record[key] for key in RECORD_KEYS})
    if len(records) != generation or [r["iter"] for r in records] != list(range(1, generation + 1)):
        raise RunLogError(f"{log}: generations {[r['iter'] for r in records]}, run.json says 1..{generation}")
    return {"format": FORMAT, "generation": generation, "checksum": value, "generations": records}


def load(path: Path) -> dict[str, Any]:
    """A reference: a JSON file written by :func:`extract` (``--record``), or a run directory."""
    if path.is_dir():
        return extract(path)
    data = _read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise RunLogError(f"{path}: not a {FORMAT} reference (format {found!r})")
    return data


def _same(a: Any, b: Any) -> bool:
    """Equal to the bit: same JSON types (1 is not 1.0), floats by their hex (NaN == NaN, -0.0 != 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _first_difference(ref: Any, run: Any, where: str) -> str | None:
    if isinstance(ref, list) and isinstance(run, list):
        for i, (x, y) in enumerate(zip(ref, run, strict=False)):
            found = _first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        if len(ref) != len(run):
            return f"{where}: reference has {len(ref)} entries, run {len(run)}"
        return None
    if isinstance(ref, dict) and isinstance(run, dict):
        if ref.keys() != run.keys():
            return f"{where}: reference keys {sorted(ref)}, run keys {sorted(run)}"
        for key in ref:
            found = _first_difference(ref[key], run[key], f"{where}.{key}" if where else key)
            if found:
                return found
        return None
    if not _same(ref, run):
        return f"{where}: reference {ref!r}, run {run!r}"
    return None


def first(data: dict[str, Any], n: int) -> dict[str, Any]:
    """``data`` cut to its first ``n`` generations (for a reference or run that stopped early); its checksum
    is dropped unless it is that of generation ``n``."""
    if n < 1 or n > data["generation"]:
        raise RunLogError(f"--first {n}: the log has generations 1..{data['generation']}")
    keep = data["checksum"] if n == data["generation"] else None
    return {**data, "generation": n, "checksum": keep, "generations": data["generations"][:n]}


def first_difference(ref: dict[str, Any], run: dict[str, Any]) -> str | None:
    """None when ``run`` matches ``ref`` bit for bit, else one line naming the generation and field of the
    first difference (in generation order, then the final checksum, when the reference has one)."""
    for i, (a, b) in enumerate(zip(ref["generations"], run["generations"], strict=False), start=1):
        found = _first_difference(a, b, "")
        if found:
            return f"generation {i}: {found}"
    if ref["generation"] != run["generation"]:
        return f"generations: reference ran {ref['generation']}, run {run['generation']}"
    if ref["checksum"] is not None and ref["checksum"] != run["checksum"]:
        return f"final checksum: reference {ref['checksum']}, run {run['checksum']}"
    return None


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="write RUN_DIR's reference to OUT")
    parser.add_argument("first", type=Path, help="REF (compare) or RUN_DIR (--record)")
    parser.add_argument("second", type=Path, help="RUN_DIR (compare) or OUT (--record)")
    parser.add_argument("--first", dest="first_n", type=int, default=None, metavar="N",
                        help="compare generations 1..N only (the final checksum only if both end at N)")
    args = parser.parse_args(argv)
    try:
        if args.record:
            args.second.write_text(json.dumps(extract(args.first), indent=1) + "\n")
            print(f"recorded {args.first} -> {args.second}")
            return 0
        ref, run = load(args.first), extract(args.second)
        if args.first_n is not None:
            ref, run = first(ref, args.first_n), first(run, args.first_n)
        difference = first_difference(ref, run)
    except RunLogError as exc:
        print(f"compare_run_logs: error: {exc}", file=sys.stderr)
        return 2
    print("identical" if difference is None else f"different: {difference}")
    return 0 if difference is None else 1


if __name__ == "__main__":
    sys.exit(main())
